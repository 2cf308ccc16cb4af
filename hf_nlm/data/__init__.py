"""Corpora as ``datasets.DatasetDict`` and language-model batching."""

from .corpora import (
    CorpusFormatError,
    first_lines,
    load_brown,
    load_csv_files,
    load_ptb,
    load_sotu,
    load_text_files,
    read_text_file,
)
from .download import data_home
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
    "CorpusFormatError",
    "LMBlockDataset",
    "build_lm_dataset",
    "collate_blocks",
    "data_home",
    "first_lines",
    "group_into_blocks",
    "load_brown",
    "load_csv_files",
    "load_ptb",
    "load_sotu",
    "load_text_files",
    "read_text_file",
    "tokenize_corpus",
]
