"""Train / validation / test splits for the corpus loaders, and what they read and left out.

A row goes to a split by a stable hash of its key (a patient, a paper, a story): BLAKE2b of
``"<seed>:<key>"`` (not Python's per-process randomised ``hash``) gives a number ``u`` in [0, 1)
(:func:`hash_unit`), and the row goes to ``train`` if ``u < f_train``, to ``validation`` if
``u < f_train + f_validation``, else to ``test`` (:func:`split_index`). A split's rows therefore
depend neither on the row order nor on what else the files hold. A split whose fraction is 0 is
empty; a split meant to hold rows that ends up empty raises :class:`EmptySplitError`.

:func:`assemble` cuts the splits and reports what was read and left out three ways: logged (INFO),
written into each split's ``info.description``, and returned as a dict by :func:`loader_counts`.
:func:`first_lines` cuts a corpus to its first rows (the benchmarks' quick runs).

``datasets`` and ``pyarrow`` are imported when a split is cut, not with this module, which the corpus
modules import.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import Dataset, DatasetDict

SPLITS = ("train", "validation", "test")
_COUNTS_MARK = "\ncounts: "


class EmptySplitError(ValueError):
    """A split that was meant to hold rows (fraction above 0, or a non-empty date range) holds none."""


def check_fractions(fractions: Sequence[float], name: str = "split_fractions") -> tuple[float, float, float]:
    """Validate ``(train, validation, test)`` fractions: three finite numbers >= 0 summing to 1."""
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be three numbers (train, validation, test), "
                         f"got {fractions!r}.") from None
    if len(values) != 3:
        raise ValueError(f"{name} must be three numbers (train, validation, test), "
                         f"got {len(values)}: {fractions!r}.")
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"{name} must be finite and non-negative, got {fractions!r}.")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(f"{name} must sum to 1, got {fractions!r} (sum {sum(values):g}).")
    return values  # type: ignore[return-value]


def hash_unit(key: str, seed: int = 0) -> float:
    """A stable number in [0, 1) for ``key``: the first 8 bytes of BLAKE2b of ``"<seed>:<key>"``."""
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_index(unit: float, fractions: Sequence[float]) -> int:
    """0, 1 or 2 (train, validation, test) for a number in [0, 1): the first split whose
    cumulative fraction exceeds it. The last split with a fraction above 0 takes everything
    past it, so rounding never sends a row to a split of fraction 0."""
    last = max(i for i, f in enumerate(fractions) if f > 0)
    total = 0.0
    for i, fraction in enumerate(fractions):
        total += fraction
        if i == last or (fraction > 0 and unit < total):
            return i
    return last


def column_numpy(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def assemble(
    loader: str,
    table: Dataset,
    assignment: np.ndarray,
    selected: np.ndarray,
    expected: Sequence[bool],
    counts: dict[str, Any],
    drop: Sequence[str],
    group: str | None,
    empty_hint: str,
    log: logging.Logger,
) -> DatasetDict:
    """Select each split's rows (``selected & assignment == i``), drop the internal columns,
    check for unexpectedly empty splits, and log (to ``log``) and attach the counts."""
    from datasets import DatasetDict

    result = {}
    split_counts: dict[str, dict[str, int]] = {}
    groups = column_numpy(table.data.table, group) if group else None
    for i, split in enumerate(SPLITS):
        rows = np.flatnonzero(selected & (assignment == i))
        split_counts[split] = {"rows": int(rows.size)}
        if groups is not None:
            split_counts[split]["patients"] = int(np.unique(groups[rows]).size)
        result[split] = table.select(rows).remove_columns(list(drop))
    counts = {**counts, "splits": split_counts}
    for i, split in enumerate(SPLITS):
        if expected[i] and not split_counts[split]["rows"]:
            raise EmptySplitError(
                f"{loader}: the {split} split is empty ({int(selected.sum())} rows kept in all, "
                f"{split_counts}). {empty_hint}"
            )
    summary = describe(loader, counts)
    log.info(summary)
    for split in SPLITS:
        attach_counts(result[split], summary, counts)
    return DatasetDict(result)


def describe(loader: str, counts: dict[str, Any]) -> str:
    left_out = ", ".join(f"{n} {why}" for why, n in counts["left_out"].items()) or "nothing"
    splits = "; ".join(
        f"{split} {c['rows']} rows" + (f" of {c['patients']} patients" if "patients" in c else "")
        for split, c in counts["splits"].items()
    )
    files = ", ".join(counts["files"])
    return f"{loader} from {files}: {counts['records']} records read; left out: {left_out}; {splits}."


def attach_counts(dataset: Dataset, summary: str, counts: dict[str, Any]) -> None:
    """Store what a loader read and left out (``summary``, ``counts``) where :func:`loader_counts` finds
    it."""
    dataset.info.description = summary + _COUNTS_MARK + json.dumps(counts)


def loader_counts(corpus: DatasetDict | Dataset) -> dict[str, Any]:
    """What a streaming loader of this package read, left out and kept, as a dict.

    Keys: ``files`` (paths read), ``records`` (records read), ``left_out`` (reason -> number
    of records: e.g. ``iserror``, ``empty``, ``other_category``), ``splits`` (split ->
    ``{"rows": ..., "patients": ...}``; ``patients`` for the clinical notes only), plus the
    loader's options. Works on the ``DatasetDict`` a loader returned or on one of its splits.
    """
    from datasets import DatasetDict

    split = corpus[next(iter(corpus))] if isinstance(corpus, DatasetDict) else corpus
    description = split.info.description or ""
    if _COUNTS_MARK not in description:
        raise ValueError("This dataset carries no loader counts (it was not made by a streaming loader).")
    return json.loads(description.rsplit(_COUNTS_MARK, 1)[1])


def hashed_assignment(keys: pa.ChunkedArray, fractions: Sequence[float], seed: int) -> np.ndarray:
    """Split index (int8) per row, from the stable hash of each row's key (hashed once per
    distinct key, 64k keys at a time so that no Python list of all keys is built)."""
    import pyarrow.compute as pc

    unique = pc.unique(keys)

    def units() -> Iterator[int]:
        for start in range(0, len(unique), 1 << 16):
            for key in unique.slice(start, 1 << 16).to_pylist():
                yield split_index(hash_unit(str(key), seed), fractions)

    per_key = np.fromiter(units(), dtype=np.int8, count=len(unique))
    where = pc.index_in(keys, value_set=unique).to_numpy(zero_copy_only=False)
    return per_key[where]


def first_lines(corpus: DatasetDict, train_lines: int, eval_lines: int) -> DatasetDict:
    """The first ``train_lines`` rows of ``train`` and ``eval_lines`` of every other split: the
    slice the benchmarks' ``--quick`` modes run on."""
    from datasets import DatasetDict

    return DatasetDict(
        {name: split.select(range(min(train_lines if name == "train" else eval_lines, len(split))))
         for name, split in corpus.items()}
    )
