"""Clinical notes, streamed: MIMIC-III ``NOTEEVENTS.csv`` (``--corpus mimic-iii``) and MIMIC-IV-Note
(``--corpus mimic-iv``). PhysioNet credentialed access: not fetched, each user downloads them.

Both loaders return a ``datasets.DatasetDict`` with the splits ``train``, ``validation`` and ``test``,
a string column ``text`` and metadata columns, like the other corpora of :mod:`hf_nlm.data.corpora`.

Streaming (:mod:`hf_nlm.data.file_stream`). The files are large (MIMIC-III ``NOTEEVENTS.csv`` is
about 4 GB), so they are never read whole: a ``csv.reader`` (strict, over a file opened with
``newline=""``, so quoted fields may hold newlines) feeds ``datasets.Dataset.from_generator``, which
writes Arrow to the ``datasets`` cache in small batches; the splits are then index selections over that
memory-mapped table. Python memory stays bounded by a batch of notes (``writer_batch_size``)
plus a few index arrays of about 20 bytes per note, whatever the size of the notes.
A ``.csv.gz`` file is read the same way, decompressed as it streams.

Caching. The Arrow table is cached under ``cache_dir`` (default: the ``datasets`` cache,
``$HF_DATASETS_CACHE``), keyed by the files' paths, sizes and modification times and by the
options that change the rows (``replace_deid``). Filters, fractions and seeds are applied
after reading, so changing them never re-reads the file.

Splits are by patient (:mod:`hf_nlm.data.splits`): each subject id is hashed (BLAKE2b of
``"<seed>:<subject id>"``, not Python's per-process randomised ``hash``) to a number ``u`` in [0, 1),
and the patient goes to ``train`` if ``u < f_train``, to ``validation`` if
``u < f_train + f_validation``, else to ``test``. So a patient never appears in two splits, and a
patient's split depends neither on the row order nor on what else the file holds. A split whose
fraction is 0 is empty; a split whose fraction is above 0 but that ends up empty raises
:class:`~hf_nlm.data.splits.EmptySplitError`.

What was left out, and why, is reported three ways: logged (``logging`` at INFO level, logger
``hf_nlm.data.corpora.mimic``), written into each split's ``info.description``, and returned as a dict
by :func:`~hf_nlm.data.splits.loader_counts` (``loader_counts(corpus)`` or
``loader_counts(corpus["train"])``).

Errors: :class:`FileNotFoundError` for a missing file (saying where to get it);
:class:`~hf_nlm.data.reading.CorpusFormatError` (a ``ValueError``) naming the file, the line
(for a record spanning several lines: the line where it starts) and the field for a missing
column, a record with the wrong number of fields, a quoted field still open at the end of the
file, bytes that are not UTF-8 (with the byte offset), or a bad value; ``ValueError`` for bad
arguments; :class:`~hf_nlm.data.splits.EmptySplitError` (a ``ValueError``) as above.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..corpus import HASH_SPLIT_OPTIONS, CorpusCard, CorpusEntry
from ..file_stream import (
    STATUS,
    PathLike,
    csv_records,
    file_fingerprint,
    filter_values,
    generate_table,
    kept_rows,
    parse_int,
    status_counts,
)
from ..reading import CorpusFormatError, data_home
from ..splits import assemble, check_fractions, hashed_assignment

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = [
    "DEID",
    "DEID_DATE",
    "DEID_NAME",
    "MIMIC_III",
    "MIMIC_IV",
    "load_mimic_iii_notes",
    "load_mimic_iv_notes",
    "replace_mimic_iii_deid",
    "replace_mimic_iv_deid",
]

logger = logging.getLogger(__name__)

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
        f"No {what} file ({' or '.join(names)}, optionally .gz) in {' or '.join(str(p) for p in looked)}. "
        f"{hint}"
    )

# ---------------------------------------------------------------------------------------
# MIMIC-III NOTEEVENTS.


_III_COLUMNS = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "CATEGORY", "DESCRIPTION",
                "ISERROR", "TEXT")
_III_FEATURES = {
    "text": "string",
    "row_id": "int64",
    "subject_id": "int64",
    "hadm_id": "int64",
    "chartdate": "string",
    "charttime": "string",
    "category": "string",
    "description": "string",
    STATUS: "string",
}


def _iii_row(values: list[str], path: Path, line: int) -> dict[str, Any]:
    row_id, subject, hadm, chartdate, charttime, category, description, iserror, text = values
    status = _note_status(iserror, text, path, line, "ISERROR")
    return {
        "text": text,
        "row_id": parse_int(row_id, path, line, "ROW_ID"),
        "subject_id": parse_int(subject, path, line, "SUBJECT_ID"),
        "hadm_id": parse_int(hadm, path, line, "HADM_ID", optional=True),
        "chartdate": chartdate.strip() or None,
        "charttime": charttime.strip() or None,
        "category": category.strip(),
        "description": description.strip(),
        STATUS: status,
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

    Left out, counted and reported (see :func:`~hf_nlm.data.splits.loader_counts`; also logged and
    in each split's ``info.description``): notes with ``ISERROR`` = 1 (``iserror``), notes whose TEXT is empty
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
    files = _find(path, data_home(create=False) / "mimic-iii", ["NOTEEVENTS.csv"], MIMIC_III_HINT,
                  "NOTEEVENTS")
    return _load_notes(
        _FORMATS["mimic-iii"], files, categories, fractions, seed, replace_deid, cache_dir, writer_batch_size
    )


# ---------------------------------------------------------------------------------------
# MIMIC-IV-Note.


_IV_COLUMNS = ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text")
_IV_FEATURES = {
    "text": "string",
    "note_id": "string",
    "subject_id": "int64",
    "hadm_id": "int64",
    "note_type": "string",
    "note_seq": "int64",
    "charttime": "string",
    "storetime": "string",
    STATUS: "string",
}


def _iv_row(values: list[str], path: Path, line: int) -> dict[str, Any]:
    note_id, subject, hadm, note_type, note_seq, charttime, storetime, text = values
    status = "kept" if text.strip() else "empty"
    return {
        "text": text,
        "note_id": note_id.strip(),
        "subject_id": parse_int(subject, path, line, "subject_id"),
        "hadm_id": parse_int(hadm, path, line, "hadm_id", optional=True),
        "note_type": note_type.strip(),
        "note_seq": parse_int(note_seq, path, line, "note_seq", optional=True),
        "charttime": charttime.strip() or None,
        "storetime": storetime.strip() or None,
        STATUS: status,
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

    Left out, counted and reported (see :func:`~hf_nlm.data.splits.loader_counts`; also logged and
    in each split's ``info.description``): notes whose text is empty or only whitespace (``empty``) and notes
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
    return _load_notes(
        _FORMATS["mimic-iv-note"], files, note_types, fractions, seed, replace_deid, cache_dir,
        writer_batch_size
    )


# ---------------------------------------------------------------------------------------
# Both files: a format description each, one reader and one loader.


@dataclass(frozen=True)
class _NoteFormat:
    """What differs between the MIMIC note files."""

    loader: str  # the loader's name, in messages and counts
    kind: str  # the loader part of the cache key
    what: str  # the file, in messages
    columns: tuple[str, ...]  # the CSV columns read
    features: dict[str, str]  # the table's columns and their types
    row: Callable[[list[str], Path, int], dict[str, Any]]  # a record's row: text as written, status
    replace_deid: Callable[[str], str]
    argument: str  # the loader's filter argument
    column: str  # the column it filters


def _note_rows(files: list[str], replace_deid: bool, kind: str) -> Iterator[dict[str, Any]]:
    note = _FORMATS[kind]
    for name in files:
        path = Path(name)
        for line, values in csv_records(path, note.columns, note.what):
            row = note.row(values, path, line)
            if row[STATUS] != "kept":
                row["text"] = ""
            elif replace_deid:
                row["text"] = note.replace_deid(row["text"])
            yield row


def _load_notes(
    note: _NoteFormat,
    files: Sequence[Path],
    wanted: Iterable[str] | None,
    fractions: tuple[float, float, float],
    seed: int,
    replace_deid: bool,
    cache_dir: PathLike | None,
    writer_batch_size: int | None,
) -> DatasetDict:
    table_ds = generate_table(
        _note_rows,
        {"files": [str(f) for f in files], "replace_deid": replace_deid, "kind": note.kind},
        note.features,
        file_fingerprint(note.kind, files, {"replace_deid": replace_deid}),
        cache_dir,
        writer_batch_size,
    )
    if wanted is not None:
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    table = table_ds.data.table
    paths = ", ".join(str(f) for f in files)
    kept = kept_rows(table)
    in_filter = filter_values(table, note.column, wanted, note.argument, paths)
    statuses = status_counts(table)
    left_out = {why: n for why, n in sorted(statuses.items()) if why != "kept"}
    if wanted is not None:
        left_out[f"other_{note.column}"] = int((kept & ~in_filter).sum())
    counts = {
        "files": [str(f) for f in files],
        "records": table.num_rows,
        "left_out": left_out,
        note.argument: None if wanted is None else sorted(wanted),
        "split_fractions": list(fractions),
        "seed": seed,
    }
    assignment = hashed_assignment(table.column("subject_id"), fractions, seed)
    return assemble(
        note.loader,
        table_ds,
        assignment,
        kept & in_filter,
        [f > 0 for f in fractions],
        counts,
        [STATUS],
        "subject_id",
        "Too few patients for these split_fractions: load more notes, or change split_fractions or seed.",
        logger,
    )


_FORMATS = {
    "mimic-iii": _NoteFormat(
        "load_mimic_iii_notes", "mimic-iii", "MIMIC-III NOTEEVENTS", _III_COLUMNS, _III_FEATURES, _iii_row,
        replace_mimic_iii_deid, "categories", "category",
    ),
    "mimic-iv-note": _NoteFormat(
        "load_mimic_iv_notes", "mimic-iv-note", "MIMIC-IV-Note", _IV_COLUMNS, _IV_FEATURES, _iv_row,
        replace_mimic_iv_deid, "note_types", "note_type",
    ),
}


MIMIC_III = CorpusEntry(
    "mimic-iii", load_mimic_iii_notes, "NOTEEVENTS.csv (or .csv.gz) or its folder",
    CorpusCard(
        "mimic-iii", "MIMIC-III clinical notes",
        "the MIMIC-III clinical notes (NOTEEVENTS; Johnson et al. 2016, PhysioNet, credentialed access), "
        "de-identification brackets replaced by placeholders, split by patient. The data may not be "
        "shared, so the metadata names no dataset.",
    ),
    options=HASH_SPLIT_OPTIONS, order=5,
)
MIMIC_IV = CorpusEntry(
    "mimic-iv", load_mimic_iv_notes,
    "discharge.csv / radiology.csv (or .csv.gz), or the folder holding them (or note/)",
    CorpusCard(
        "mimic-iv", "MIMIC-IV-Note clinical notes",
        "the MIMIC-IV-Note discharge summaries and radiology reports (Johnson et al. 2023, PhysioNet, "
        "credentialed access), de-identification marks replaced by placeholders, split by patient. The data "
        "may not be shared, so the metadata names no dataset.",
    ),
    options=HASH_SPLIT_OPTIONS, order=6,
)
