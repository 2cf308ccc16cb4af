"""Corpora as ``datasets.DatasetDict`` and language-model batching."""

from .lm import (
    IGNORE_INDEX,
    LMBlockDataset,
    build_lm_dataset,
    collate_blocks,
    group_into_blocks,
    tokenize_corpus,
)

__all__ = [
    "IGNORE_INDEX",
    "LMBlockDataset",
    "build_lm_dataset",
    "collate_blocks",
    "group_into_blocks",
    "tokenize_corpus",
]
