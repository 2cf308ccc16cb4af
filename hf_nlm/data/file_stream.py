"""Streaming a large UTF-8 file (plain or gzipped) into a cached Arrow table, for the corpus loaders.

The file is never read whole: a generator reads it record by record (CSV records: :func:`csv_records`)
and feeds ``datasets.Dataset.from_generator`` (:func:`generate_table`), which writes Arrow to the
``datasets`` cache in small batches, so Python memory stays bounded by a batch of rows. The table is
cached under a key made of the files' paths, sizes and modification times and the options that change
the rows (:func:`file_fingerprint`). Every row has a :data:`STATUS` column: ``"kept"``, or why the record
is left out (counted by :func:`status_counts`).

Errors name the file and the line (for a record spanning several lines: the line where it starts):
:class:`~hf_nlm.data.reading.CorpusFormatError` for bytes that are not UTF-8 (with the byte offset),
broken CSV syntax, a missing column, a record with the wrong number of fields or a bad value, and a
gzip file that is truncated or damaged (:func:`gzip_error`).

``datasets`` and ``pyarrow`` are imported when a table is generated or read, not with this module, which
the corpus modules import.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .reading import CorpusFormatError, PathLike

if TYPE_CHECKING:
    import pyarrow as pa
    from datasets import Dataset

# Bump when the rows a generator writes change, so old cached tables are not reused.
_CACHE_VERSION = 1
STATUS = "_status"  # internal column: "kept", or why the record was left out


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


#: What a damaged gzip file raises as it streams: it ends early (``EOFError``), is no gzip file
#: (``gzip.BadGzipFile``) or holds bad compressed data (``zlib.error``).
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def gzip_error(path: Path, line: int, err: Exception) -> CorpusFormatError:
    """The error for a gzip file that breaks off or is damaged after ``line`` lines of its text."""
    where = f"after line {line} of the decompressed text" if line else "at its start"
    return CorpusFormatError(
        f"{path}: the gzip data is truncated or corrupted {where} ({err}). Download it again (gzip -t "
        "checks a copy)."
    )


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


def csv_syntax_error(err: csv.Error, path, first: int, last: int, advice: str = "") -> CorpusFormatError:
    """The error for broken CSV syntax in the record on lines ``first`` .. ``last``: a quoted field
    still open at the end of the file (a truncated file: ``advice`` follows), else what ``csv`` found."""
    if "unexpected end of data" in str(err):
        return CorpusFormatError(
            f"{path}, line {first}: the file ends inside a quoted field of the record starting at this line "
            f"(the closing quote is missing): the file looks truncated.{advice}"
        )
    return CorpusFormatError(f"{_where(path, first, last)}: bad CSV ({err}).")


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
                last = max(start, reader.line_num)
                raise csv_syntax_error(err, path, start, last, " Download it again.") from None
            except UnicodeDecodeError:
                raise utf8_error(path) from None
            except GZIP_ERRORS as err:
                raise gzip_error(path, reader.line_num, err) from None
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
        raise CorpusFormatError(f"{path}, line {line}, field {field}: expected {expected}, "
                                f"got {value!r}.") from None


def file_fingerprint(kind: str, files: Sequence[Path], options: dict[str, Any]) -> str:
    """Cache key of a generated table: the loader, the files (path, size, mtime) and options."""
    parts = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    blob = json.dumps([kind, _CACHE_VERSION, parts, options], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def generate_table(
    generator: Callable[..., Iterator[dict[str, Any]]],
    gen_kwargs: dict[str, Any],
    features: Mapping[str, str],
    fingerprint: str,
    cache_dir: PathLike | None,
    writer_batch_size: int | None = None,
) -> Dataset:
    """``Dataset.from_generator`` with our own errors passed through unwrapped; ``features`` gives each
    column's ``datasets.Value`` type (``{"text": "string", "row_id": "int64", ...}``)."""
    from datasets import Dataset, Features, Value
    from datasets.exceptions import DatasetGenerationError

    try:
        return Dataset.from_generator(
            generator,
            features=Features({name: Value(dtype) for name, dtype in features.items()}),
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


def kept_rows(table: pa.Table) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.equal(table.column(STATUS), "kept").to_numpy(zero_copy_only=False)


def status_counts(table: pa.Table) -> dict[str, int]:
    values = table.column(STATUS).value_counts().to_pylist()
    return {v["values"]: int(v["counts"]) for v in values}


def filter_values(
    table: pa.Table, column: str, wanted: Iterable[str] | None, argument: str, path_text: str
) -> np.ndarray:
    """Rows whose ``column`` is one of ``wanted`` (case-insensitive; surrounding spaces
    ignored); an asked value never seen in the file is an error listing those seen."""
    import pyarrow as pa
    import pyarrow.compute as pc

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
            f"{argument}={sorted(wanted)!r}: {', '.join(repr(u) for u in unknown)} never occur in "
            f"{path_text}. The values seen there (case does not matter) are: "
            f"{', '.join(repr(s) for s in seen)}."
        )
    lowered = pc.utf8_lower(table.column(column))
    mask = pc.is_in(lowered, value_set=pa.array(sorted(asked)))
    return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
