"""What every corpus loader shares: where the downloaded corpora live, and reading their files.

* :func:`data_home`: the folder ``hf-nlm download`` fills (``$HF_NLM_DATA`` or ``~/.cache/hf_nlm``), where
  the loaders look first (:func:`download_hint`: what their errors say when a corpus is not there);
* :func:`read_text_file`, :func:`split_lines`, :func:`read_csv`: UTF-8 files read whole, with errors that
  name the file and the line;
* :func:`text_dataset`: rows of text as a ``datasets.Dataset`` with one string column ``text``.

Line handling, the same everywhere unless a loader says otherwise: a line ends at ``"\\n"``,
``"\\r\\n"`` or a lone ``"\\r"`` (old Mac files), as Python's universal newlines read them; a final
line end does not start an extra empty line.

Bad input raises an error that names the file and, where it applies, the line:
:class:`FileNotFoundError` for a missing file, :class:`CorpusFormatError` (a ``ValueError``) for an
empty file, bytes that are not UTF-8, a CSV without the expected column or with a record of the wrong
length.

``datasets`` is imported only when a dataset is built, so the corpus modules that import this one (and
the registry that collects them) load without it.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "CorpusFormatError",
    "PathLike",
    "data_home",
    "download_hint",
    "installed_package_dir",
    "read_csv",
    "read_text_file",
    "split_lines",
    "table_header",
    "text_dataset",
]

PathLike = str | os.PathLike[str]

_LINE_END = re.compile(r"\r\n|\r|\n")
_LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")


class CorpusFormatError(ValueError):
    """A corpus file exists but its content is not what the loader expects."""


def data_home(create: bool = True) -> Path:
    """Return the folder that holds the downloaded corpora.

    It is ``$HF_NLM_DATA`` when that variable is set and non-empty, else ``~/.cache/hf_nlm``.
    The folder is created unless ``create`` is False.
    """
    env = os.environ.get("HF_NLM_DATA")
    home = Path(env).expanduser() if env else Path.home() / ".cache" / "hf_nlm"
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


def download_hint(name: str) -> str:
    """How to get a corpus that ``hf-nlm download`` fetches, for a loader's "not found" error."""
    return f"run `hf-nlm download {name}`, or pass path=..."


def read_text_file(path: PathLike) -> str:
    """Read a whole UTF-8 text file, with errors that say which file and where.

    Raises:
        FileNotFoundError: no such file (or it is a folder).
        CorpusFormatError: the file is empty, or holds bytes that are not UTF-8 (the message
            gives the line number and the byte offset in the file and in the line).
    """
    path = Path(path)
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"{path} {what}.")
    data = path.read_bytes()
    if not data:
        raise CorpusFormatError(f"{path} is empty.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = len(_LINE_END_BYTES.findall(data, 0, err.start)) + 1
        line_start = max(data.rfind(b"\n", 0, err.start), data.rfind(b"\r", 0, err.start)) + 1
        raise CorpusFormatError(
            f"{path}, line {line}: byte 0x{data[err.start]:02x} at byte offset {err.start} "
            f"(byte {err.start - line_start} of the line) is not valid UTF-8 ({err.reason}). "
            "Convert the file to UTF-8 first."
        ) from None
    # A byte-order mark is an encoding artefact, not text.
    return text.removeprefix("\ufeff")


def split_lines(text: str) -> list[str]:
    """Split at "\\n", "\\r\\n" and a lone "\\r" only (str.splitlines also breaks on form feeds and other
    characters)."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def read_csv(path: Path, text_column: str | None, columns: Sequence[str]) -> dict[str, list[str]]:
    """The values of ``text_column`` (None: no text column) and ``columns`` in a UTF-8 CSV file with a header
    line, by column name.

    Raises:
        CorpusFormatError: no header, a column missing (the message lists the file's columns), a record with
            the wrong number of fields or broken CSV syntax (file and line named: for a quoted field that
            does not close where it should, the line where it opens, so that records are never merged);
            see also :func:`read_text_file`.
    """
    text = read_text_file(path)
    wanted = [text_column, *columns] if text_column is not None else list(columns)
    out: dict[str, list[str]] = {name: [] for name in wanted}
    # Clinical notes and abstracts can exceed csv's default 128 KiB field limit; raise it
    # for this read only, since the limit is process-wide.
    old_limit = csv.field_size_limit(2**31 - 1)
    start = 1  # the line where the record being read starts
    try:
        # strict: a quote that does not close where a field can end is an error, not the start of a field
        # that swallows the records after it
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        header = next(reader, None)
        if not header:
            raise CorpusFormatError(f"{path} has no header line.")
        missing = [name for name in wanted if name not in header]
        if missing:
            raise CorpusFormatError(
                f"{path} has no column {missing[0]!r}; its columns are {header}. "
                f"Pass text_column= (and columns=) naming columns that exist."
            )
        index = {name: header.index(name) for name in wanted}
        start = reader.line_num + 1
        for row in reader:
            if row:  # csv yields [] only for a truly empty line, which holds no record
                if len(row) != len(header):
                    raise CorpusFormatError(
                        f"{path}, line {start}: {len(row)} fields where the header has {len(header)}."
                    )
                for name, i in index.items():
                    out[name].append(row[i])
            start = reader.line_num + 1
    except csv.Error as err:
        raise _csv_syntax_error(path, text, start, reader.line_num, err) from None
    finally:
        csv.field_size_limit(old_limit)
    return out


def _csv_syntax_error(path: Path, text: str, first: int, last: int, err: csv.Error) -> CorpusFormatError:
    """The error for broken CSV syntax in the record on lines ``first`` .. ``last``: where a quoted field
    that runs over several lines opened (a closing quote missing there), else the line ``csv`` stopped at."""
    opened = _open_quote_line(split_lines(text), first, max(first, last))
    if opened is None:
        return CorpusFormatError(f"{path}, line {max(first, last)}: bad CSV ({err}).")
    ends = "the file ends inside it" if "unexpected end of data" in str(err) else f"at line {last}: {err}"
    return CorpusFormatError(
        f"{path}, line {opened}: a quoted field opens on this line and does not close where a field can end "
        f"({ends}); the closing quote is missing, which would merge the records after it into this one. "
        'Close the quote (a quote inside a quoted field is written twice: "").'
    )


def _open_quote_line(lines: Sequence[str], first: int, last: int) -> int | None:
    """The line where a quoted field opened that is still open after line ``last``, or else the last one
    that closed on a later line than it opened (scanning the record that starts on line ``first``); None if
    no quoted field runs over a line end."""
    quoted, field_start, opened, spanning = False, True, None, None
    for number in range(first, min(last, len(lines)) + 1):
        line, i = lines[number - 1], 0
        while i < len(line):
            char = line[i]
            if quoted and char == '"':
                if line[i + 1:i + 2] == '"':
                    i += 1  # a doubled quote inside the field
                else:
                    quoted = False
                    spanning = opened if opened != number else spanning
            elif not quoted:
                quoted, opened = (True, number) if char == '"' and field_start else (False, opened)
                field_start = char == ","
            i += 1
        field_start = field_start or not quoted
    return opened if quoted else spanning


#: A column name of a header line: a letter or _, then letters, digits, _, . or -.
_COLUMN_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


def table_header(path: PathLike) -> tuple[str, str] | None:
    """``(first line, delimiter)`` when the first line of ``path`` reads as the header of a table (two or
    more column names, separated by commas or by tabs) and the next line, if any, has that delimiter too;
    else None. How a CSV or TSV file given as plain text is recognised (only the first two lines are read)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
            first, second = f.readline().rstrip("\r\n"), f.readline()
    except OSError:
        return None
    for delimiter in (",", "\t"):
        names = [name.strip().strip('"') for name in first.split(delimiter)]
        if (len(names) >= 2 and all(_COLUMN_NAME.fullmatch(name) for name in names)
                and (not second or delimiter in second)):
            return first, delimiter
    return None


def text_dataset(rows: list[str]):
    """``rows`` as a ``datasets.Dataset`` with one string column ``text``."""
    from datasets import Dataset, Features, Value

    return Dataset.from_dict({"text": rows}, features=Features({"text": Value("string")}))


def installed_package_dir(name: str) -> Path | None:
    """Folder of an installed package, found without importing (running) it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent
