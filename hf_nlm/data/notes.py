"""Streaming loaders for clinical notes: MIMIC-III ``NOTEEVENTS.csv`` and MIMIC-IV-Note.

Both return a ``datasets.DatasetDict`` with the splits ``train``, ``validation`` and ``test``,
a string column ``text`` and metadata columns, like the loaders in :mod:`hf_nlm.data.corpora`.

Streaming. The files are large (MIMIC-III ``NOTEEVENTS.csv`` is about 4 GB), so they are never
read whole: a ``csv.reader`` (strict, over a file opened with ``newline=""``, so quoted fields
may hold newlines) feeds ``datasets.Dataset.from_generator``, which writes Arrow to the
``datasets`` cache in small batches; the splits are then index selections over that
memory-mapped table. Python memory stays bounded by a batch of notes (``writer_batch_size``)
plus a few index arrays of about 20 bytes per note, whatever the size of the notes.
A ``.csv.gz`` file is read the same way, decompressed as it streams.

Caching. The Arrow table is cached under ``cache_dir`` (default: the ``datasets`` cache,
``$HF_DATASETS_CACHE``), keyed by the files' paths, sizes and modification times and by the
options that change the rows (``replace_deid``). Filters, fractions and seeds are applied
after reading, so changing them never re-reads the file.

Splits are by patient: each subject id is hashed (BLAKE2b of ``"<seed>:<subject id>"``, not
Python's per-process randomised ``hash``) to a number ``u`` in [0, 1), and the patient goes to
``train`` if ``u < f_train``, to ``validation`` if ``u < f_train + f_validation``, else to
``test``. So a patient never appears in two splits, and a patient's split depends neither on
the row order nor on what else the file holds. A split whose fraction is 0 is empty; a split
whose fraction is above 0 but that ends up empty raises :class:`EmptySplitError`.

What was left out, and why, is reported three ways: logged (``logging`` at INFO level, logger
``hf_nlm.data.notes``), written into each split's ``info.description``, and returned as a dict
by :func:`loader_counts` (``loader_counts(corpus)`` or ``loader_counts(corpus["train"])``).

Errors: :class:`FileNotFoundError` for a missing file (saying where to get it);
:class:`~hf_nlm.data.corpora.CorpusFormatError` (a ``ValueError``) naming the file, the line
(for a record spanning several lines: the line where it starts) and the field for a missing
column, a record with the wrong number of fields, a quoted field still open at the end of the
file, bytes that are not UTF-8 (with the byte offset), or a bad value; ``ValueError`` for bad
arguments; :class:`EmptySplitError` (a ``ValueError``) as above.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Features, Value
from datasets.exceptions import DatasetGenerationError

from .corpora import CorpusFormatError
from .download import data_home

__all__ = [
    "DEID",
    "DEID_DATE",
    "DEID_NAME",
    "EmptySplitError",
    "load_mimic_iii_notes",
    "load_mimic_iv_notes",
    "loader_counts",
    "replace_mimic_iii_deid",
    "replace_mimic_iv_deid",
]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
SPLITS = ("train", "validation", "test")

# Bump when the rows a generator writes change, so old cached tables are not reused.
_CACHE_VERSION = 1
_STATUS = "_status"  # internal column: "kept", or why the record was left out
_COUNTS_MARK = "\ncounts: "

MIMIC_III_HINT = (
    "MIMIC-III needs PhysioNet credentialed access: request it and download NOTEEVENTS.csv.gz "
    "from https://physionet.org/content/mimiciii/1.4/ (gunzipping is optional), then pass path=..."
)
MIMIC_IV_HINT = (
    "MIMIC-IV-Note needs PhysioNet credentialed access: request it and download note/discharge.csv.gz "
    "and note/radiology.csv.gz from https://physionet.org/content/mimic-iv-note/ (gunzipping is "
    "optional), then pass path=..."
)

DEID_DATE = "<deid_date>"
DEID_NAME = "<deid_name>"
DEID = "<deid>"


class EmptySplitError(ValueError):
    """A split that was meant to hold rows (fraction above 0, or a non-empty date range) holds none."""


# ---------------------------------------------------------------------------------------
# De-identification placeholders.

_III_BRACKET = re.compile(r"\[\*\*(.*?)\*\*\]")
_III_DATE_VALUE = re.compile(r"\d{1,4}(?:[-/]\d{1,4}){0,2}")
_III_DATE_LABEL = re.compile(r"(?:month|year|date|day)(?![a-z])", re.IGNORECASE)
_III_NAME_LABEL = re.compile(
    r"(?:(?:doctor|female|male|known)\s+)?(?:first\s*name|last\s*name|name|initials?)(?![a-z])",
    re.IGNORECASE,
)
_IV_BLANK = re.compile(r"(?<!_)___(?!_)")


def _iii_placeholder(match: re.Match[str]) -> str:
    inner = match.group(1).strip()
    if _III_DATE_VALUE.fullmatch(inner) or _III_DATE_LABEL.match(inner):
        return DEID_DATE
    if _III_NAME_LABEL.match(inner):
        return DEID_NAME
    return DEID


def replace_mimic_iii_deid(text: str) -> str:
    """Replace MIMIC-III's de-identification brackets ``[** ... **]`` by placeholder tokens.

    The mapping looks at what is inside the brackets (surrounding spaces ignored):

    * ``<deid_date>``: a shifted date or part of one, i.e. 1-4 digits in up to three groups
      joined by ``-`` or ``/`` (``[**2101-10-20**]``, ``[**10-20**]``, ``[**2101**]``,
      ``[**10/20**]``), or a label starting with the word Month, Year, Date or Day
      (``[**Month (only) 51**]``, ``[**Year (4 digits) **]``, ``[**Date range (1) 7**]``);
    * ``<deid_name>``: a label starting with First Name, Last Name, Name, Initial(s),
      optionally after Doctor, Female, Male or Known (``[**Known lastname 1234**]``,
      ``[**First Name8 (NamePattern2) **]``, ``[**Doctor Last Name **]``,
      ``[**Name (NI) 12**]``, ``[**Initials (NamePattern4) **]``);
    * ``<deid>``: anything else (hospitals, locations, phone numbers, ages over 90, ...).

    Only the bracket is replaced: the text around it (spaces included) is kept as written.
    A ``[**`` that is never closed is left as it is.
    """
    return _III_BRACKET.sub(_iii_placeholder, text)


def replace_mimic_iv_deid(text: str) -> str:
    """Replace MIMIC-IV-Note's de-identification mark ``___`` (exactly three underscores) by
    ``<deid>``. Longer runs of underscores (form lines such as ``__________``) are kept."""
    return _IV_BLANK.sub(DEID, text)


# ---------------------------------------------------------------------------------------
# Shared pieces (also used by hf_nlm.data.arxiv).


def check_fractions(fractions: Sequence[float], name: str = "split_fractions") -> tuple[float, float, float]:
    """Validate ``(train, validation, test)`` fractions: three finite numbers >= 0 summing to 1."""
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be three numbers (train, validation, test), got {fractions!r}.") from None
    if len(values) != 3:
        raise ValueError(f"{name} must be three numbers (train, validation, test), got {len(values)}: {fractions!r}.")
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


def open_text(path: Path) -> IO[str]:
    """Open a UTF-8 (optionally gzipped) file for streaming, with ``newline=""`` for ``csv``.
    A byte-order mark at the start is dropped."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def utf8_error(path: Path) -> CorpusFormatError:
    """Find the first byte of ``path`` that is not UTF-8 (streaming, 1 MiB at a time) and
    return an error naming its line and byte offset."""
    gz = path.name.endswith(".gz")
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before the current chunk
    line = 1
    line_start = 0
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        while True:
            chunk = f.read(1 << 20)
            pending = decoder.getstate()[0]
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as err:
                data = pending + chunk
                base = offset - len(pending)
                before = data[: err.start]
                if b"\n" in before:
                    line += before.count(b"\n")
                    line_start = base + before.rfind(b"\n") + 1
                position = base + err.start
                where = " of the decompressed data" if gz else ""
                return CorpusFormatError(
                    f"{path}, line {line}: byte 0x{data[err.start]:02x} at byte offset {position}{where} "
                    f"(byte {position - line_start} of the line) is not valid UTF-8 ({err.reason}). "
                    "Convert the file to UTF-8 first."
                )
            if b"\n" in chunk:
                line += chunk.count(b"\n")
                line_start = offset + chunk.rfind(b"\n") + 1
            offset += len(chunk)
            if not chunk:
                break
    return CorpusFormatError(f"{path} is not valid UTF-8.")


def _where(path: Path, first: int, last: int) -> str:
    return f"{path}, line {first}" if first == last else f"{path}, lines {first}-{last}"



def csv_column_index(header: list[str] | None, columns: Sequence[str], path, what: str) -> list[int]:
    """Where each of ``columns`` sits in a CSV ``header`` (names compared without case or surrounding
    spaces); an error naming the file for an empty file or a header without one of them."""
    if not header:
        raise CorpusFormatError(f"{path} is empty: expected a {what} CSV file with a header line.")
    names = [name.strip().lower() for name in header]
    missing = [c for c in columns if c.lower() not in names]
    if missing:
        raise CorpusFormatError(
            f"{path}, line 1: the header has no column {', '.join(missing)}. The header is "
            f"{','.join(header)}; a {what} file has the columns {', '.join(columns)}."
        )
    return [names.index(c.lower()) for c in columns]

def csv_records(path: Path, columns: Sequence[str], what: str) -> Iterator[tuple[int, list[str]]]:
    """Stream a CSV file: yield ``(line, values)`` per record, ``line`` being the line where
    the record starts and ``values`` the fields named in ``columns`` (header matched without
    regard to case). Empty lines between records are skipped."""
    old_limit = csv.field_size_limit(2**31 - 1)  # notes can exceed the 128 KiB default
    try:
        with open_text(path) as f:
            reader = csv.reader(f, strict=True)
            start = 1
            try:
                header = next(reader, None)
                index = csv_column_index(header, columns, path, what)
                width = len(header)
                start = reader.line_num + 1
                for row in reader:
                    if row:
                        if len(row) != width:
                            raise CorpusFormatError(
                                f"{_where(path, start, reader.line_num)}: {len(row)} fields where the header "
                                f"has {width} ({','.join(header)}). A field holding commas, quotes or "
                                "newlines must be quoted, with inner quotes doubled."
                            )
                        yield start, [row[i] for i in index]
                    start = reader.line_num + 1
            except csv.Error as err:
                if "unexpected end of data" in str(err):
                    raise CorpusFormatError(
                        f"{path}, line {start}: the file ends inside a quoted field of the record starting "
                        "at this line (the closing quote is missing): the file looks truncated. "
                        "Download it again."
                    ) from None
                raise CorpusFormatError(
                    f"{_where(path, start, max(start, reader.line_num))}: bad CSV ({err})."
                ) from None
            except UnicodeDecodeError:
                raise utf8_error(path) from None
    finally:
        csv.field_size_limit(old_limit)


def parse_int(value: str, path: Path, line: int, field: str, optional: bool = False) -> int | None:
    value = value.strip()
    if not value and optional:
        return None
    try:
        return int(value)
    except ValueError:
        expected = "an integer or empty" if optional else "an integer"
        raise CorpusFormatError(f"{path}, line {line}, field {field}: expected {expected}, got {value!r}.") from None


def file_fingerprint(kind: str, files: Sequence[Path], options: dict[str, Any]) -> str:
    """Cache key of a generated table: the loader, the files (path, size, mtime) and options."""
    parts = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    blob = json.dumps([kind, _CACHE_VERSION, parts, options], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def generate_table(
    generator: Callable[..., Iterator[dict[str, Any]]],
    gen_kwargs: dict[str, Any],
    features: Features,
    fingerprint: str,
    cache_dir: PathLike | None,
    writer_batch_size: int | None = None,
) -> Dataset:
    """``Dataset.from_generator`` with our own errors passed through unwrapped."""
    try:
        return Dataset.from_generator(
            generator,
            features=features,
            gen_kwargs=gen_kwargs,
            cache_dir=None if cache_dir is None else str(cache_dir),
            fingerprint=fingerprint,
            writer_batch_size=writer_batch_size,
        )
    except DatasetGenerationError as err:
        cause = err.__cause__
        if isinstance(cause, (CorpusFormatError, OSError)):
            raise cause from None
        raise


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
) -> DatasetDict:
    """Select each split's rows (``selected & assignment == i``), drop the internal columns,
    check for unexpectedly empty splits and attach the counts."""
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
    logger.info(summary)
    for split in SPLITS:
        result[split].info.description = summary + _COUNTS_MARK + json.dumps(counts)
    return DatasetDict(result)


def describe(loader: str, counts: dict[str, Any]) -> str:
    left_out = ", ".join(f"{n} {why}" for why, n in counts["left_out"].items()) or "nothing"
    splits = "; ".join(
        f"{split} {c['rows']} rows" + (f" of {c['patients']} patients" if "patients" in c else "")
        for split, c in counts["splits"].items()
    )
    files = ", ".join(counts["files"])
    return f"{loader} from {files}: {counts['records']} records read; left out: {left_out}; {splits}."


def loader_counts(corpus: DatasetDict | Dataset) -> dict[str, Any]:
    """What a streaming loader of this package read, left out and kept, as a dict.

    Keys: ``files`` (paths read), ``records`` (records read), ``left_out`` (reason -> number
    of records: e.g. ``iserror``, ``empty``, ``other_category``), ``splits`` (split ->
    ``{"rows": ..., "patients": ...}``; ``patients`` for the clinical notes only), plus the
    loader's options. Works on the ``DatasetDict`` a loader returned or on one of its splits.
    """
    split = corpus[next(iter(corpus))] if isinstance(corpus, DatasetDict) else corpus
    description = split.info.description or ""
    if _COUNTS_MARK not in description:
        raise ValueError("This dataset carries no loader counts (it was not made by a streaming loader).")
    return json.loads(description.rsplit(_COUNTS_MARK, 1)[1])


def kept_rows(table: pa.Table) -> np.ndarray:
    return pc.equal(table.column(_STATUS), "kept").to_numpy(zero_copy_only=False)


def status_counts(table: pa.Table) -> dict[str, int]:
    values = table.column(_STATUS).value_counts().to_pylist()
    return {v["values"]: int(v["counts"]) for v in values}


def hashed_assignment(keys: pa.ChunkedArray, fractions: Sequence[float], seed: int) -> np.ndarray:
    """Split index (int8) per row, from the stable hash of each row's key (hashed once per
    distinct key, 64k keys at a time so that no Python list of all keys is built)."""
    unique = pc.unique(keys)

    def units() -> Iterator[int]:
        for start in range(0, len(unique), 1 << 16):
            for key in unique.slice(start, 1 << 16).to_pylist():
                yield split_index(hash_unit(str(key), seed), fractions)

    per_key = np.fromiter(units(), dtype=np.int8, count=len(unique))
    where = pc.index_in(keys, value_set=unique).to_numpy(zero_copy_only=False)
    return per_key[where]


def filter_values(
    table: pa.Table, column: str, wanted: Iterable[str] | None, argument: str, path_text: str
) -> np.ndarray:
    """Rows whose ``column`` is one of ``wanted`` (case-insensitive; surrounding spaces
    ignored); an asked value never seen in the file is an error listing those seen."""
    if wanted is None:
        return np.ones(table.num_rows, dtype=bool)
    if isinstance(wanted, str):
        wanted = [wanted]
    asked = {w.strip().lower() for w in wanted}
    if not asked:
        raise ValueError(f"{argument}= is empty: give None for all, or at least one value.")
    seen = sorted(v for v in pc.unique(table.column(column)).to_pylist() if v is not None)
    unknown = sorted(asked - {s.lower() for s in seen})
    if unknown:
        raise ValueError(
            f"{argument}={sorted(wanted)!r}: {', '.join(repr(u) for u in unknown)} never occur in {path_text}. "
            f"The values seen there (case does not matter) are: {', '.join(repr(s) for s in seen)}."
        )
    lowered = pc.utf8_lower(table.column(column))
    mask = pc.is_in(lowered, value_set=pa.array(sorted(asked)))
    return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)


def _note_status(iserror: str, text: str, path: Path, line: int, field: str) -> str:
    flag = iserror.strip()
    if flag == "1":
        return "iserror"
    if flag not in ("", "0"):
        raise CorpusFormatError(f"{path}, line {line}, field {field}: expected 1 or empty, got {iserror!r}.")
    return "kept" if text.strip() else "empty"


def _check_file(path: Path, hint: str) -> Path:
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"{path} {what}. {hint}")
    return path


def _find(path: PathLike | None, default: Path, names: Sequence[str], hint: str, what: str) -> list[Path]:
    """The files to read: ``path`` itself if it is a file, else those of ``names`` found in the
    folder ``path`` (or ``default``) or its ``note/`` subfolder."""
    folder = default if path is None else Path(path).expanduser()
    if path is not None and not folder.is_dir():
        return [_check_file(folder, hint)]
    looked = [folder, folder / "note"]
    for place in looked:
        found = []
        for name in names:
            for candidate in (place / name, place / f"{name}.gz"):
                if candidate.is_file():
                    found.append(candidate)
                    break
        if found:
            return found
    raise FileNotFoundError(
        f"No {what} file ({' or '.join(names)}, optionally .gz) in {' or '.join(str(p) for p in looked)}. {hint}"
    )


# ---------------------------------------------------------------------------------------
# MIMIC-III NOTEEVENTS.


_III_COLUMNS = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "CATEGORY", "DESCRIPTION", "ISERROR", "TEXT")
_III_FEATURES = Features(
    {
        "text": Value("string"),
        "row_id": Value("int64"),
        "subject_id": Value("int64"),
        "hadm_id": Value("int64"),
        "chartdate": Value("string"),
        "charttime": Value("string"),
        "category": Value("string"),
        "description": Value("string"),
        _STATUS: Value("string"),
    }
)


def _mimic_iii_rows(files: list[str], replace_deid: bool) -> Iterator[dict[str, Any]]:
    for name in files:
        path = Path(name)
        for line, values in csv_records(path, _III_COLUMNS, "MIMIC-III NOTEEVENTS"):
            row_id, subject, hadm, chartdate, charttime, category, description, iserror, text = values
            status = _note_status(iserror, text, path, line, "ISERROR")
            if status == "kept" and replace_deid:
                text = replace_mimic_iii_deid(text)
            yield {
                "text": text if status == "kept" else "",
                "row_id": parse_int(row_id, path, line, "ROW_ID"),
                "subject_id": parse_int(subject, path, line, "SUBJECT_ID"),
                "hadm_id": parse_int(hadm, path, line, "HADM_ID", optional=True),
                "chartdate": chartdate.strip() or None,
                "charttime": charttime.strip() or None,
                "category": category.strip(),
                "description": description.strip(),
                _STATUS: status,
            }


def load_mimic_iii_notes(
    path: PathLike | None = None,
    categories: Iterable[str] | None = None,
    split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    replace_deid: bool = True,
    cache_dir: PathLike | None = None,
    writer_batch_size: int | None = None,
) -> DatasetDict:
    """Load MIMIC-III clinical notes (``NOTEEVENTS.csv``), split by patient, streaming.

    Format: the official CSV (``NOTEEVENTS.csv`` or ``NOTEEVENTS.csv.gz``, UTF-8) with the
    header ``ROW_ID, SUBJECT_ID, HADM_ID, CHARTDATE, CHARTTIME, STORETIME, CATEGORY,
    DESCRIPTION, CGID, ISERROR, TEXT`` (column names matched without regard to case; STORETIME
    and CGID are not needed). TEXT is quoted and spans many lines.

    One row per note, in file order within each split. Columns: ``text`` (TEXT kept as written,
    newlines and spacing included, except that each de-identification bracket ``[** ... **]``
    becomes ``<deid_date>``, ``<deid_name>`` or ``<deid>``: the rule is in
    :func:`replace_mimic_iii_deid`), ``row_id``, ``subject_id``, ``hadm_id`` (int64, None when
    empty), ``chartdate``, ``charttime`` (strings as written, None when empty), ``category``
    and ``description`` (surrounding spaces stripped: the real file has ``"Physician "``).

    Left out, counted and reported (see :func:`loader_counts`; also logged and in each split's
    ``info.description``): notes with ``ISERROR`` = 1 (``iserror``), notes whose TEXT is empty
    or only whitespace (``empty``), and notes outside ``categories`` (``other_category``).

    Args:
        path: ``NOTEEVENTS.csv`` (or ``.csv.gz``), or the folder holding it. Default: the
            folder ``$HF_NLM_DATA/mimic-iii`` (or ``~/.cache/hf_nlm/mimic-iii``).
        categories: keep only these CATEGORY values (e.g. ``["Discharge summary"]``), compared
            without regard to case or surrounding spaces. None keeps all. A value that never
            occurs in the file is an error listing the categories seen.
        split_fractions: ``(train, validation, test)`` fractions of patients: non-negative,
            summing to 1. Notes, not patients, are what end up counted in each split, so the
            note fractions only roughly follow.
        seed: changes the patient hash, hence the split.
        replace_deid: map ``[** ... **]`` brackets to placeholders (False keeps them).
        cache_dir: where the Arrow table is cached (default: the ``datasets`` cache).
        writer_batch_size: notes per Arrow write batch (default 1000, as in ``datasets``): the
            Python memory used while reading is about one batch of notes.

    Raises:
        FileNotFoundError: no such file (the message says how to get MIMIC-III).
        CorpusFormatError: no header, a missing column (the header is quoted), a record with
            the wrong number of fields, a quoted field open at the end of the file, a
            non-integer ROW_ID / SUBJECT_ID / HADM_ID, an ISERROR other than 1, 0 or empty,
            or bytes that are not UTF-8: each names the file and the line where the record
            starts (and the byte offset, or the field).
        ValueError: bad ``split_fractions``, or a category not in the file.
        EmptySplitError: a split with a fraction above 0 got no note.
    """
    fractions = check_fractions(split_fractions)
    files = _find(path, data_home(create=False) / "mimic-iii", ["NOTEEVENTS.csv"], MIMIC_III_HINT, "NOTEEVENTS")
    table_ds = generate_table(
        _mimic_iii_rows,
        {"files": [str(f) for f in files], "replace_deid": replace_deid},
        _III_FEATURES,
        file_fingerprint("mimic-iii", files, {"replace_deid": replace_deid}),
        cache_dir,
        writer_batch_size,
    )
    return _finish_notes(
        "load_mimic_iii_notes", table_ds, files, categories, "categories", "category", fractions, seed
    )


def _finish_notes(
    loader: str,
    table_ds: Dataset,
    files: Sequence[Path],
    wanted: Iterable[str] | None,
    argument: str,
    column: str,
    fractions: tuple[float, float, float],
    seed: int,
) -> DatasetDict:
    if wanted is not None:
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    table = table_ds.data.table
    paths = ", ".join(str(f) for f in files)
    kept = kept_rows(table)
    in_filter = filter_values(table, column, wanted, argument, paths)
    statuses = status_counts(table)
    left_out = {why: n for why, n in sorted(statuses.items()) if why != "kept"}
    if wanted is not None:
        left_out[f"other_{column}"] = int((kept & ~in_filter).sum())
    counts = {
        "files": [str(f) for f in files],
        "records": table.num_rows,
        "left_out": left_out,
        argument: None if wanted is None else sorted(wanted),
        "split_fractions": list(fractions),
        "seed": seed,
    }
    assignment = hashed_assignment(table.column("subject_id"), fractions, seed)
    return assemble(
        loader,
        table_ds,
        assignment,
        kept & in_filter,
        [f > 0 for f in fractions],
        counts,
        [_STATUS],
        "subject_id",
        "Too few patients for these split_fractions: load more notes, or change split_fractions or seed.",
    )


# ---------------------------------------------------------------------------------------
# MIMIC-IV-Note.


_IV_COLUMNS = ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text")
_IV_FEATURES = Features(
    {
        "text": Value("string"),
        "note_id": Value("string"),
        "subject_id": Value("int64"),
        "hadm_id": Value("int64"),
        "note_type": Value("string"),
        "note_seq": Value("int64"),
        "charttime": Value("string"),
        "storetime": Value("string"),
        _STATUS: Value("string"),
    }
)


def _mimic_iv_rows(files: list[str], replace_deid: bool) -> Iterator[dict[str, Any]]:
    for name in files:
        path = Path(name)
        for line, values in csv_records(path, _IV_COLUMNS, "MIMIC-IV-Note"):
            note_id, subject, hadm, note_type, note_seq, charttime, storetime, text = values
            status = "kept" if text.strip() else "empty"
            if status == "kept" and replace_deid:
                text = replace_mimic_iv_deid(text)
            yield {
                "text": text if status == "kept" else "",
                "note_id": note_id.strip(),
                "subject_id": parse_int(subject, path, line, "subject_id"),
                "hadm_id": parse_int(hadm, path, line, "hadm_id", optional=True),
                "note_type": note_type.strip(),
                "note_seq": parse_int(note_seq, path, line, "note_seq", optional=True),
                "charttime": charttime.strip() or None,
                "storetime": storetime.strip() or None,
                _STATUS: status,
            }


def load_mimic_iv_notes(
    path: PathLike | None = None,
    note_types: Iterable[str] | None = None,
    split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    replace_deid: bool = True,
    cache_dir: PathLike | None = None,
    writer_batch_size: int | None = None,
) -> DatasetDict:
    """Load MIMIC-IV-Note (``discharge.csv``, ``radiology.csv``), split by patient, streaming.

    Format: the official CSV files (plain or ``.csv.gz``, UTF-8) with the header ``note_id,
    subject_id, hadm_id, note_type, note_seq, charttime, storetime, text`` (names matched
    without regard to case). ``text`` is quoted and spans many lines. The ``*_detail.csv``
    files are not read.

    One row per note: the files in the order discharge, radiology, each in file order within
    each split. Columns: ``text`` (kept as written, except that each de-identification mark
    ``___`` becomes ``<deid>``: see :func:`replace_mimic_iv_deid`), ``note_id``,
    ``subject_id``, ``hadm_id`` (None when empty, as for many radiology reports),
    ``note_type`` (``DS`` discharge, ``RR`` radiology report, ``AR`` addendum), ``note_seq``,
    ``charttime``, ``storetime`` (strings as written, None when empty).

    Left out, counted and reported (see :func:`loader_counts`; also logged and in each split's
    ``info.description``): notes whose text is empty or only whitespace (``empty``) and notes
    outside ``note_types`` (``other_note_type``). MIMIC-IV-Note has no ISERROR column.

    Args:
        path: one CSV file (e.g. ``radiology.csv.gz``), or a folder holding ``discharge.csv``
            and / or ``radiology.csv`` (each optionally ``.gz``) directly or in ``note/`` (the
            PhysioNet layout). Default: the folder ``$HF_NLM_DATA/mimic-iv-note``.
        note_types: keep only these ``note_type`` values (e.g. ``["DS"]``), without regard to
            case; a value never seen is an error listing those seen. None keeps all.
        split_fractions, seed: as in :func:`load_mimic_iii_notes` (by ``subject_id``).
        replace_deid: map ``___`` to ``<deid>`` (False keeps it).
        cache_dir, writer_batch_size: as in :func:`load_mimic_iii_notes`.

    Raises:
        FileNotFoundError: no such file, or a folder without either file (the message says
            how to get MIMIC-IV-Note).
        CorpusFormatError, ValueError, EmptySplitError: as in :func:`load_mimic_iii_notes`.
    """
    fractions = check_fractions(split_fractions)
    files = _find(
        path, data_home(create=False) / "mimic-iv-note", ["discharge.csv", "radiology.csv"], MIMIC_IV_HINT,
        "MIMIC-IV-Note",
    )
    table_ds = generate_table(
        _mimic_iv_rows,
        {"files": [str(f) for f in files], "replace_deid": replace_deid},
        _IV_FEATURES,
        file_fingerprint("mimic-iv-note", files, {"replace_deid": replace_deid}),
        cache_dir,
        writer_batch_size,
    )
    return _finish_notes(
        "load_mimic_iv_notes", table_ds, files, note_types, "note_types", "note_type", fractions, seed
    )
