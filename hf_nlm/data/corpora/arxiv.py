"""arXiv abstracts, streamed from the Kaggle ``arxiv-metadata-oai-snapshot.json``: ``--corpus arxiv``.
Not fetched: each user downloads the snapshot from Kaggle.

Streaming and caching (:mod:`hf_nlm.data.file_stream`), the stable hash split,
:class:`~hf_nlm.data.splits.EmptySplitError` and :func:`~hf_nlm.data.splits.loader_counts`
(:mod:`hf_nlm.data.splits`) work as for the clinical notes: see :mod:`hf_nlm.data.corpora.mimic`. The
summary of what was read is logged by the logger ``hf_nlm.data.corpora.arxiv``.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus import HASH_SPLIT_OPTIONS, CorpusCard, CorpusEntry
from ..file_stream import (
    GZIP_ERRORS,
    STATUS,
    PathLike,
    file_fingerprint,
    generate_table,
    gzip_error,
    kept_rows,
    open_text,
    status_counts,
    utf8_error,
)
from ..reading import CorpusFormatError, data_home
from ..splits import assemble, check_fractions, hashed_assignment

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import DatasetDict

__all__ = ["ARXIV_FILE", "CORPUS", "load_arxiv_abstracts"]

logger = logging.getLogger(__name__)

ARXIV_FILE = "arxiv-metadata-oai-snapshot.json"
ARXIV_HINT = (
    f"Download {ARXIV_FILE} from Kaggle, dataset \"Cornell-University/arxiv\" "
    "(https://www.kaggle.com/datasets/Cornell-University/arxiv, e.g. `kaggle datasets download "
    "Cornell-University/arxiv`; unzip it; gzipping it is optional), then pass path=..."
)
_REQUIRED = ("id", "abstract", "categories", "update_date")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FEATURES = {"text": "string", "id": "string", "categories": "string", "update_date": "string",
             STATUS: "string"}


def _arxiv_rows(file: str) -> Iterator[dict[str, Any]]:
    path = Path(file)
    number = 0
    try:
        with open_text(path) as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                where = f"{path}, line {number}"
                try:
                    paper = json.loads(line)
                except json.JSONDecodeError as err:
                    raise CorpusFormatError(
                        f"{where}: not valid JSON ({err.msg} at column {err.colno}). Each line must hold "
                        "one JSON object (the file may be truncated or not the arXiv snapshot)."
                    ) from None
                if not isinstance(paper, dict):
                    raise CorpusFormatError(f"{where}: expected a JSON object, got {type(paper).__name__}.")
                for field in _REQUIRED:
                    if field not in paper:
                        raise CorpusFormatError(
                            f"{where}: no field {field!r} (each paper needs {', '.join(_REQUIRED)}; "
                            f"this one has {', '.join(paper)})."
                        )
                    if not isinstance(paper[field], str):
                        raise CorpusFormatError(
                            f"{where}, field {field!r}: expected a string, got {type(paper[field]).__name__}."
                        )
                if not _DATE.fullmatch(paper["update_date"]):
                    raise CorpusFormatError(
                        f"{where}, field 'update_date': expected YYYY-MM-DD, got {paper['update_date']!r}."
                    )
                text = " ".join(paper["abstract"].split())
                yield {
                    "text": text,
                    "id": paper["id"],
                    "categories": " ".join(paper["categories"].split()),
                    "update_date": paper["update_date"],
                    STATUS: "kept" if text else "empty",
                }
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    except GZIP_ERRORS as err:
        raise gzip_error(path, number, err) from None


def _find_file(path: PathLike | None) -> Path:
    place = data_home(create=False) / "arxiv" if path is None else Path(path).expanduser()
    if place.is_dir():
        for name in (ARXIV_FILE, f"{ARXIV_FILE}.gz"):
            if (place / name).is_file():
                return place / name
        raise FileNotFoundError(f"No {ARXIV_FILE} (or .gz) in {place}. {ARXIV_HINT}")
    if not place.is_file():
        raise FileNotFoundError(f"{place} does not exist. {ARXIV_HINT}")
    return place


def _as_date(value: str | datetime.date | None, name: str) -> str:
    if value is None:
        raise ValueError(f"split_by='date' needs {name}= (a date YYYY-MM-DD).")
    if isinstance(value, datetime.date):
        return value.isoformat()[:10]
    try:
        return datetime.date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise ValueError(f"{name} must be a date YYYY-MM-DD, got {value!r}.") from None


def _category_mask(table: pa.Table, wanted: list[str], path: Path) -> np.ndarray:
    """Papers with at least one category matching one filter (``x.`` = prefix, else exact)."""
    import pyarrow.compute as pc

    filters = list(wanted)
    if not filters or any(not isinstance(f, str) or not f.strip() for f in filters):
        raise ValueError(f"categories= must be None or non-empty strings, got {wanted!r}.")
    column = table.column("categories")
    mask = np.zeros(table.num_rows, dtype=bool)
    unmatched = []
    for f in filters:
        f = f.strip()
        body = re.escape(f) + (r"\S*" if f.endswith(".") else "")
        hit = pc.match_substring_regex(column, f"(?:^| ){body}(?: |$)").to_numpy(zero_copy_only=False)
        if not hit.any():
            unmatched.append(f)
        mask |= hit
    if unmatched:
        seen = pc.unique(pc.list_flatten(pc.split_pattern(column, " "))).to_pylist()
        seen = sorted(s for s in seen if s)
        raise ValueError(
            f"categories={filters!r}: no paper in {path} matches {', '.join(repr(u) for u in unmatched)} "
            "(a filter ending in '.' is a prefix, like 'cs.'; any other is exact, like 'math.PR'). "
            f"Categories seen: {', '.join(seen) or 'none'}."
        )
    return mask


def load_arxiv_abstracts(
    path: PathLike | None = None,
    split_by: str = "hash",
    split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    validation_from: str | datetime.date | None = None,
    test_from: str | datetime.date | None = None,
    categories: Iterable[str] | None = None,
    cache_dir: PathLike | None = None,
    writer_batch_size: int | None = None,
) -> DatasetDict:
    """Load arXiv abstracts from the metadata snapshot, streaming.

    Format: ``arxiv-metadata-oai-snapshot.json`` (Kaggle dataset "Cornell-University/arxiv";
    plain or ``.gz``, UTF-8): JSON lines, one object per paper with ``id``, ``abstract``,
    ``categories`` (space-separated, e.g. ``"math.PR math.CO"``) and ``update_date``
    (``YYYY-MM-DD``), all strings and all required, plus fields not read here (title,
    authors, versions, ...). Blank lines are skipped.

    One row per paper, in file order within each split. Columns: ``text`` (the abstract with
    whitespace normalised: the hard line breaks and runs of spaces become single spaces, and
    the ends are stripped; LaTeX and numbers untouched), ``id``, ``categories`` (as in the
    file, single-spaced) and ``update_date``.

    Left out, counted and reported (see :func:`~hf_nlm.data.splits.loader_counts`; also logged
    and in each split's ``info.description``): papers whose abstract is empty after
    normalisation (``empty``) and papers outside ``categories`` (``other_category``).

    Args:
        path: the snapshot file, or a folder holding it. Default: the folder
            ``$HF_NLM_DATA/arxiv`` (or ``~/.cache/hf_nlm/arxiv``).
        split_by: ``"hash"``: each paper goes to a split by the stable hash of its ``id`` and
            ``seed`` with ``split_fractions`` (non-negative, summing to 1), as the notes do by
            patient. ``"date"``: by ``update_date``: before ``validation_from`` to ``train``,
            from ``validation_from`` up to (not including) ``test_from`` to ``validation``,
            from ``test_from`` on to ``test``; ``split_fractions`` and ``seed`` are unused.
        validation_from, test_from: the two cut dates for ``split_by="date"`` (``YYYY-MM-DD``
            strings or dates, ``validation_from <= test_from``); not allowed with ``"hash"``.
        categories: keep papers having at least one category that matches one of these: a
            filter ending in ``.`` is a prefix (``"cs."`` matches ``cs.LG``, ``cs.CL``, ...),
            any other must equal a category (``"math.PR"``, ``"hep-ph"``). A filter matching
            no paper is an error listing the categories seen. None keeps all.
        cache_dir: where the Arrow table is cached (default: the ``datasets`` cache).
        writer_batch_size: papers per Arrow write batch (default 1000, as in ``datasets``): the
            Python memory used while reading is about one batch of papers.

    Raises:
        FileNotFoundError: no snapshot (the message says where to get it).
        CorpusFormatError: a line that is not a JSON object, lacks one of the fields above
            or has one that is not a string, or a bad ``update_date``: each names the file,
            the line and the field; bytes that are not UTF-8 (line and byte offset).
        ValueError: a bad ``split_by``, bad fractions or dates, or a category filter that
            matches nothing.
        EmptySplitError: a split with a fraction above 0 (or, by date, a non-empty date
            range) got no paper.
    """
    if split_by not in ("hash", "date"):
        raise ValueError(f"split_by must be 'hash' or 'date', got {split_by!r}.")
    if split_by == "hash":
        if validation_from is not None or test_from is not None:
            raise ValueError("validation_from= and test_from= apply to split_by='date' only.")
        fractions = check_fractions(split_fractions)
    else:
        first, second = _as_date(validation_from, "validation_from"), _as_date(test_from, "test_from")
        if first > second:
            raise ValueError(f"validation_from ({first}) must not be after test_from ({second}).")
    if categories is not None:
        categories = [categories] if isinstance(categories, str) else list(categories)
    file = _find_file(path)
    table_ds = generate_table(
        _arxiv_rows, {"file": str(file)}, _FEATURES, file_fingerprint("arxiv", [file], {}), cache_dir,
        writer_batch_size,
    )
    table = table_ds.data.table
    kept = kept_rows(table)
    selected = kept if categories is None else kept & _category_mask(table, categories, file)
    left_out = {why: n for why, n in sorted(status_counts(table).items()) if why != "kept"}
    if categories is not None:
        left_out["other_category"] = int((kept & ~selected).sum())
    counts: dict[str, Any] = {
        "files": [str(file)],
        "records": table.num_rows,
        "left_out": left_out,
        "categories": None if categories is None else sorted(categories),
        "split_by": split_by,
    }
    if split_by == "hash":
        counts.update(split_fractions=list(fractions), seed=seed)
        assignment = hashed_assignment(table.column("id"), fractions, seed)
        expected = [f > 0 for f in fractions]
        hint = "Too few papers for these split_fractions: change split_fractions or seed, or filter less."
    else:
        import pyarrow.compute as pc

        counts.update(validation_from=first, test_from=second)
        dates = table.column("update_date")
        later = pc.greater_equal(dates, first).to_numpy(zero_copy_only=False).astype(np.int8)
        latest = pc.greater_equal(dates, second).to_numpy(zero_copy_only=False).astype(np.int8)
        assignment = later + latest
        expected = [True, first < second, True]
        hint = (
            f"Papers are split by update_date: train before {first}, validation from {first} to before "
            f"{second}, test from {second} on. Move the cut dates."
        )
    return assemble(
        "load_arxiv_abstracts", table_ds, assignment, selected, expected, counts, [STATUS], None, hint, logger
    )


CORPUS = CorpusEntry(
    "arxiv", load_arxiv_abstracts, "arxiv-metadata-oai-snapshot.json (or .gz) or its folder",
    CorpusCard(
        "arxiv", "arXiv abstracts",
        "arXiv abstracts from the metadata snapshot (Kaggle dataset Cornell-University/arxiv), whitespace "
        "normalised, split by a hash of the paper id; no Hub dataset, so the metadata names none.",
    ),
    options=HASH_SPLIT_OPTIONS, order=7,
)
