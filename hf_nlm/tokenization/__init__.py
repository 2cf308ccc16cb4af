"""Tokenizers for the LMs: word-level vocabularies (the papers' setting), BPE / WordPiece, and the
words-and-numerals vocabulary of the numeracy LM (Spithourakis & Riedel 2018)."""

from .features import TokenFeatures
from .files import TOKENIZER_FILES, check_tokenizer_files
from .fingerprint import check_tokenizer, tokenizer_fingerprint
from .numerals import (
    NUMERAL_FEATURES,
    NUMERAL_FILL,
    NUMERAL_PATTERN,
    UNK_NUM_TOKEN,
    UNK_WORD_TOKEN,
    NumeracyTokenizerFast,
    Numeral,
    parse_numeral,
    register_numeracy_tokenizer,
    train_numeracy_tokenizer,
)
from .subword import train_bpe_tokenizer, train_wordpiece_tokenizer
from .word_level import (
    EOS_TOKEN,
    SPECIAL_TOKENS,
    UNK_TOKEN,
    NLMTokenizerFast,
    train_word_level_tokenizer,
    word_counts,
    wrap_tokenizer,
)

__all__ = [
    "EOS_TOKEN",
    "NUMERAL_FEATURES",
    "NUMERAL_FILL",
    "NUMERAL_PATTERN",
    "SPECIAL_TOKENS",
    "TOKENIZER_FILES",
    "UNK_NUM_TOKEN",
    "UNK_TOKEN",
    "UNK_WORD_TOKEN",
    "Numeral",
    "TokenFeatures",
    "check_tokenizer",
    "check_tokenizer_files",
    "NLMTokenizerFast",
    "NumeracyTokenizerFast",
    "parse_numeral",
    "register_numeracy_tokenizer",
    "tokenizer_fingerprint",
    "train_bpe_tokenizer",
    "train_numeracy_tokenizer",
    "train_word_level_tokenizer",
    "train_wordpiece_tokenizer",
    "word_counts",
    "wrap_tokenizer",
]
