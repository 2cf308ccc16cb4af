"""Storylines for story generation (Yao et al. 2019, "Plan-and-Write"): one keyword phrase per sentence,
extracted with RAKE, and the LM approach's text ``"title <sep> k1 # k2 # ... <sep> story"``.

The extraction and the text format are plain text processing that the ``rocstories`` corpus needs
too, so they live in the data layer (:mod:`hf_nlm.data.storylines`, where RAKE is described) and are
re-exported here with the ``rocstories`` loader. This module adds what story generation uses them for:
:func:`add_storylines` (a ``datasets.map`` function) and :func:`keyword_sentence_pairs` (keywords ->
sentence pairs from any corpus of sentences).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data.corpora.rocstories import load_rocstories_lm
from ..data.storylines import (
    KEYWORD_SEP,
    SEP,
    STOPWORDS,
    candidate_phrases,
    extract_keyphrases,
    extract_keywords,
    storyline,
    storyline_lm_dataset,
    storyline_text,
    word_scores,
)

__all__ = [
    "KEYWORD_SEP",
    "SEP",
    "STOPWORDS",
    "add_storylines",
    "candidate_phrases",
    "extract_keyphrases",
    "extract_keywords",
    "keyword_sentence_pairs",
    "load_rocstories_lm",
    "storyline",
    "storyline_lm_dataset",
    "storyline_text",
    "word_scores",
]


def add_storylines(example: Mapping[str, Any], max_words: int | None = 3,
                   column: str = "sentences") -> dict[str, list[str]]:
    """``datasets.map`` function adding a ``storyline`` column (one phrase per sentence of ``column``):
    ``ds.map(add_storylines)`` or ``ds.map(add_storylines, fn_kwargs={"max_words": 2})``."""
    if column not in example:
        raise KeyError(f"add_storylines: the example has no column {column!r} (it has {', '.join(example)})")
    return {"storyline": storyline(example[column], max_words)}


def keyword_sentence_pairs(
    dataset_split, text_column: str = "text", top_k: int = 1, max_words: int | None = 3,
    sep: str = KEYWORD_SEP
):
    """(keywords -> sentence) pairs: a ``datasets.Dataset`` with ``source`` (the sentence's ``top_k``
    RAKE phrases in sentence order, joined by ``" # "``) and ``target`` (the sentence).

    Made for :func:`hf_nlm.data.load_brown`, whose rows are one sentence each (words joined by single
    spaces, punctuation as separate tokens, lowercased by default): the storyline -> sentence step of
    story generation on real text. Rows whose text has no word yield no pair; how many were left out
    is logged and stored in ``info.description``.
    """
    from datasets import Dataset

    if text_column not in dataset_split.column_names:
        raise KeyError(f"keyword_sentence_pairs: no column {text_column!r} "
                       f"(columns: {dataset_split.column_names})")
    sources, targets = [], []
    for text in dataset_split[text_column]:
        phrases = extract_keyphrases(text, top_k=top_k, max_words=max_words)
        if phrases:
            sources.append(f" {sep} ".join(phrases))
            targets.append(text.strip())
    pairs = Dataset.from_dict({"source": sources, "target": targets})
    left_out = dataset_split.num_rows - len(sources)
    pairs.info.description = (
        f"keyword_sentence_pairs: {len(sources)} pairs from {dataset_split.num_rows} rows; "
        f"left out {left_out} rows without a word."
    )
    if left_out:
        import logging

        logging.getLogger(__name__).info(pairs.info.description)
    return pairs
