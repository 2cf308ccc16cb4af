"""Tokenizers for the LMs: word-level vocabularies (the papers' setting) and BPE / WordPiece."""

from .subword import train_bpe_tokenizer, train_wordpiece_tokenizer
from .word_level import (
    EOS_TOKEN,
    SPECIAL_TOKENS,
    UNK_TOKEN,
    train_word_level_tokenizer,
    word_counts,
    wrap_tokenizer,
)

__all__ = [
    "EOS_TOKEN",
    "SPECIAL_TOKENS",
    "UNK_TOKEN",
    "train_bpe_tokenizer",
    "train_word_level_tokenizer",
    "train_wordpiece_tokenizer",
    "word_counts",
    "wrap_tokenizer",
]
