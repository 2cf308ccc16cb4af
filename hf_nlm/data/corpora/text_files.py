"""Your own files: plain text (``--corpus text``, one row per line) and CSV (``--corpus csv``, one row per
record), each split given its files (``hf-nlm train --train-file ... --validation-file ... --test-file ...``).

Lines are kept exactly as they are apart from the line ending (:mod:`hf_nlm.data.reading`): blank lines
become empty rows, and leading or trailing spaces stay.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..corpus import CorpusCard, CorpusEntry
from ..reading import PathLike, read_csv, read_text_file, split_lines, text_dataset

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CSV", "TEXT", "load_csv_files", "load_text_files"]

SplitFiles = PathLike | Sequence[PathLike] | None


def _as_paths(files: SplitFiles) -> list[Path]:
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike)):
        return [Path(files)]
    return [Path(f) for f in files]


def _given_splits(loader: str, train: SplitFiles, validation: SplitFiles, test: SplitFiles):
    """Yield ``(split, paths)`` for each split given a file (or files); an empty list is an error."""
    for split, files in {"train": train, "validation": validation, "test": test}.items():
        if files is None:
            continue
        paths = _as_paths(files)
        if not paths:
            raise ValueError(f"{loader}: the {split} split was given an empty list of files.")
        yield split, paths


def load_text_files(
    train: SplitFiles = None,
    validation: SplitFiles = None,
    test: SplitFiles = None,
) -> DatasetDict:
    """Load plain UTF-8 text files, one row per line.

    Each split takes a path or a list of paths (read in the order given). Lines are kept
    exactly as they are apart from the line ending: blank lines become empty rows, and
    leading or trailing spaces stay. Only the splits given appear in the result.

    Raises:
        ValueError: no split given.
        FileNotFoundError / CorpusFormatError: see :func:`~hf_nlm.data.reading.read_text_file`.
    """
    from datasets import DatasetDict

    result = DatasetDict()
    for split, paths in _given_splits("load_text_files", train, validation, test):
        rows: list[str] = []
        for path in paths:
            rows.extend(split_lines(read_text_file(path)))
        result[split] = text_dataset(rows)
    if not result:
        raise ValueError("load_text_files: give at least one of train=, validation=, test=.")
    return result


def load_csv_files(
    train: SplitFiles = None,
    validation: SplitFiles = None,
    test: SplitFiles = None,
    text_column: str | None = "text",
    columns: Sequence[str] = (),
) -> DatasetDict:
    """Load UTF-8 CSV files (with a header line), one row per record.

    The values of ``text_column`` become the column ``text``; the columns named in
    ``columns`` are kept too, as strings, under their own names. ``text_column=None`` keeps
    ``columns`` alone: the (source, target) pairs of an encoder-decoder model. Each split takes a
    path or a list of paths; only the splits given appear in the result. Text is kept as written
    (newlines inside quoted fields stay).

    Raises:
        ValueError: no split given, or ``columns`` clashes with ``text``.
        CorpusFormatError: a file lacks one of the columns (the message names the file, the
            columns it has and the one expected), or a record has the wrong number of fields.
        FileNotFoundError / CorpusFormatError: see :func:`~hf_nlm.data.reading.read_text_file`.
    """
    from datasets import Dataset, DatasetDict, Features, Value

    if "text" in columns and text_column != "text":
        raise ValueError("columns= may not contain 'text': the text column is stored under that name.")
    result = DatasetDict()
    for split, paths in _given_splits("load_csv_files", train, validation, test):
        merged: dict[str, list[str]] = {**({"text": []} if text_column is not None else {}),
                                        **{name: [] for name in columns if name != text_column}}
        for path in paths:
            table = read_csv(path, text_column, columns)
            for name in merged:
                merged[name].extend(table[text_column if name == "text" else name])
        features = Features({name: Value("string") for name in merged})
        result[split] = Dataset.from_dict(merged, features=features)
    if not result:
        raise ValueError("load_csv_files: give at least one of train=, validation=, test=.")
    return result


def _local_card(kind: str) -> CorpusCard:
    return CorpusCard("local-files", f"local {kind} files", f"local {kind} files (not on the Hub).")


TEXT = CorpusEntry("text", load_text_files, "text files, one sentence or line per line", _local_card("text"),
                   split_files=True, order=90)
CSV = CorpusEntry("csv", load_csv_files, "CSV files with a header and a text column", _local_card("csv"),
                  split_files=True, options=("text_column",), order=91)
