"""The word-level tokenizer's punctuation split: punctuation at a word's edges becomes a token of its own,
punctuation inside a word (or starting a clitic, or ending an abbreviation) stays, and tokenized text keeps
its tokens; ``attached_punctuation_share`` tells raw text from tokenized text."""

from __future__ import annotations

import pytest

from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.tokenization.word_level import (
    ATTACHED_PUNCTUATION_SHARE,
    attached_punctuation_share,
    word_counts,
    word_pre_tokenizer,
)

# Each raw text and its tokens, worked out by hand.
CASES = [
    ("Nation, the people.", ["Nation", ",", "the", "people", "."]),
    ('"Hello!" (she said)', ['"', "Hello", "!", '"', "(", "she", "said", ")"]),
    ("don't mid-1990s $22,000,000 it's", ["don't", "mid-1990s", "$22,000,000", "it's"]),
    ("the U.S., then", ["the", "U.S.", ",", "then"]),
    ("war--and peace...", ["war", "-", "-", "and", "peace", ".", ".", "."]),
    # Penn Treebank: already tokenized, nothing to cut
    ("the company 's <unk> did n't say", ["the", "company", "'s", "<unk>", "did", "n't", "say"]),
]


@pytest.mark.parametrize("text, tokens", CASES)
def test_edge_punctuation_is_cut_off(text, tokens):
    assert [piece for piece, _ in word_pre_tokenizer(True).pre_tokenize_str(text)] == tokens


def test_the_tokenizer_encodes_as_it_counted():
    texts = [text for text, _ in CASES]
    tokenizer = train_word_level_tokenizer(texts, split_punctuation=True)
    for text, tokens in CASES:
        assert tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) == tokens
    counts = word_counts(texts, split_punctuation=True)
    assert counts["."] == 4 and counts[","] == 2 and "Nation," not in counts
    # without the split: whitespace words
    plain = train_word_level_tokenizer(texts)
    assert plain.convert_ids_to_tokens(plain("Nation, the people.")["input_ids"]) == ["Nation,", "the",
                                                                                      "people."]


def test_attached_punctuation_tells_raw_from_tokenized_text():
    raw = ["We met, and we agreed: this works!", "The end."]
    # "met,", "agreed:" and "works!" of 9 words; a full stop does not count ("end." may be an abbreviation's)
    assert attached_punctuation_share(raw) == pytest.approx(3 / 9)
    tokenized = ["we met , and we agreed : this works !", "the end ."]
    assert attached_punctuation_share(tokenized) == 0.0
    assert attached_punctuation_share([]) == 0.0
    assert attached_punctuation_share(raw) >= ATTACHED_PUNCTUATION_SHARE
