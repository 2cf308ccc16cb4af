"""Loaders for ROCStories and the Story Cloze Test (Mostafazadeh et al. 2016).

ROCStories are five-sentence everyday stories with a title; the Story Cloze Test gives the first
four sentences of a story and two candidate endings, one right. Both are licensed to each user by
a request form (https://cs.rochester.edu/nlp/rocstories/), so the loaders only read local files.

Files (the official CSVs, UTF-8, one header line):

* ROCStories: ``ROCStories__spring2016 - ROCStories_spring2016.csv`` and
  ``ROCStories_winter2017 - ROCStories_winter2017.csv``, columns ``storyid, storytitle,
  sentence1, ..., sentence5`` (98,161 stories in the two files);
* Story Cloze: ``cloze_test_val__spring2016 - cloze_test_ALL_val.csv`` and
  ``cloze_test_test__spring2016 - cloze_test_ALL_test.csv`` (1,871 stories each), columns
  ``InputStoryid, InputSentence1, ..., InputSentence4, RandomFifthSentenceQuiz1,
  RandomFifthSentenceQuiz2, AnswerRightEnding``.

Column names are matched without regard to case or surrounding spaces; other columns are ignored.
The files are small (about 23 MB for both ROCStories files), so they are read into memory.

Bad input. What makes a whole file unusable is an error (:class:`CorpusFormatError`, a
``ValueError``, naming the file and the line): an empty file, a header without a required column
(or with bytes that are not UTF-8), and broken CSV syntax (a quote opened and never closed, i.e. a
truncated file). A bad *row* is left out, counted under its reason and reported with its file and
line (logged as a warning, and in :func:`~hf_nlm.data.loader_counts`); ``strict=True`` makes the
first bad row an error instead. The reasons:

* ``wrong_field_count``: the row has more or fewer fields than the header (an unquoted comma);
* ``not_utf8``: the row holds bytes that are not UTF-8 (the field is named);
* ``empty_field``: the story id, title, a sentence or an ending is empty or only whitespace;
* ``duplicate_id``: the story id was already seen (in this file or an earlier one): the first
  row is kept, later ones are left out;
* ``bad_answer`` (Story Cloze): ``AnswerRightEnding`` is not 1 or 2.

Nothing else is changed: fields are kept as written, surrounding whitespace stripped.
"""

from __future__ import annotations

import csv
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict, Features, Value
from datasets import Sequence as SequenceFeature

from .file_stream import csv_column_index, csv_syntax_error
from .reading import CorpusFormatError, PathLike, data_home
from .splits import assemble, attach_counts, check_fractions, hash_unit, split_index

__all__ = [
    "ROCSTORIES_FILES",
    "ROCSTORIES_HINT",
    "STORY_CLOZE_FILES",
    "load_rocstories",
    "load_story_cloze",
]

logger = logging.getLogger(__name__)

ROCSTORIES_FILES = (
    "ROCStories__spring2016 - ROCStories_spring2016.csv",
    "ROCStories_winter2017 - ROCStories_winter2017.csv",
)
STORY_CLOZE_FILES = (
    "cloze_test_val__spring2016 - cloze_test_ALL_val.csv",
    "cloze_test_test__spring2016 - cloze_test_ALL_test.csv",
)
ROCSTORIES_HINT = (
    "ROCStories and the Story Cloze Test are licensed to each user: request them with the form at "
    "https://cs.rochester.edu/nlp/rocstories/ and pass the downloaded CSV files (or their folder) as path=..."
)

_ROC_COLUMNS = ("storyid", "storytitle", "sentence1", "sentence2", "sentence3", "sentence4", "sentence5")
_CLOZE_COLUMNS = (
    "InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3", "InputSentence4",
    "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding",
)
# Bytes that are not UTF-8 are read as lone surrogates (errors="surrogateescape"), so one bad row
# can be found, named and left out without giving up on the rest of the file.
_SURROGATE = re.compile("[\udc80-\udcff]")
# Bad rows quoted in the log and in loader_counts (all are counted).
_MAX_REPORTED = 20

_ROC_FEATURES = Features(
    {
        "storyid": Value("string"),
        "title": Value("string"),
        "sentences": SequenceFeature(Value("string")),
        "story": Value("string"),
    }
)
_CLOZE_FEATURES = Features(
    {
        "storyid": Value("string"),
        "sentences": SequenceFeature(Value("string")),
        "endings": SequenceFeature(Value("string")),
        "label": Value("int64"),
    }
)


class _BadRows:
    """What reading found: the records read (data rows, blank lines not counted) and the bad ones,
    counted by reason, the first few kept with file and line."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.records = 0
        self.counts: Counter[str] = Counter()
        self.examples: list[str] = []
        self.first_seen: dict[str, str] = {}  # story id -> where it was read

    def add(self, reason: str, path: Path, line: int, message: str) -> None:
        text = f"{path}, line {line}: {message}"
        if self.strict:
            raise CorpusFormatError(f"{text} (strict=True: pass strict=False to leave bad rows out and "
                                    "count them)")
        self.counts[reason] += 1
        if len(self.examples) < _MAX_REPORTED:
            self.examples.append(f"{text} [{reason}]")

    def filled(self, values: Sequence[str], columns: Sequence[str], path: Path, line: int) -> bool:
        """Whether every field of the row holds text; else the row is bad (``empty_field``)."""
        empty = next((c for c, v in zip(columns, values, strict=True) if not v), None)
        if empty is not None:
            self.add("empty_field", path, line, f"field {empty} is empty")
        return empty is None

    def new_id(self, story_id: str, column: str, path: Path, line: int) -> bool:
        """Whether ``story_id`` is read for the first time (in any file); a repeat is a bad row
        (``duplicate_id``), the first one read is kept."""
        if story_id in self.first_seen:
            self.add("duplicate_id", path, line,
                     f"{column} {story_id} was already read at {self.first_seen[story_id]}")
            return False
        self.first_seen[story_id] = f"{path}, line {line}"
        return True

    def report(self, loader: str) -> None:
        if self.counts:
            total = sum(self.counts.values())
            shown = "\n  ".join(self.examples)
            more = f"\n  ... and {total - len(self.examples)} more" if total > len(self.examples) else ""
            logger.warning(f"{loader}: left out {total} bad rows ({dict(self.counts)}):\n  {shown}{more}")


def _csv_rows(path: Path, columns: Sequence[str], what: str,
              bad: _BadRows) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line, values)`` for each good record of a CSV file, ``values`` being the fields named in
    ``columns`` (stripped), ``line`` the line where the record starts. Rows with the wrong number of
    fields or with bytes that are not UTF-8 go to ``bad``; blank lines are skipped."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        reader = csv.reader(f, strict=True)
        start = 1
        try:
            header = next(reader, None)
            if header and any(_SURROGATE.search(name) for name in header):
                raise CorpusFormatError(f"{path}, line 1: the header holds bytes that are not UTF-8.")
            index = csv_column_index(header, columns, path, what)
            start = reader.line_num + 1
            for row in reader:
                if row:
                    bad.records += 1
                    if len(row) != len(header):
                        bad.add("wrong_field_count", path, start,
                                f"{len(row)} fields where the header has {len(header)} (a field holding "
                                "commas must be quoted)")
                    elif (field := next((i for i, v in enumerate(row) if _SURROGATE.search(v)),
                                        None)) is not None:
                        bad.add("not_utf8", path, start,
                                f"field {header[field].strip()} holds bytes that are not UTF-8")
                    else:
                        yield start, [row[i].strip() for i in index]
                start = reader.line_num + 1
        except csv.Error as err:
            raise csv_syntax_error(err, path, start, start) from None


def _paths(path: PathLike | Sequence[PathLike] | None, default: Path, names: Sequence[str],
           what: str) -> list[Path]:
    """The files to read: the files given, or the official files found in a folder (``default`` if None)."""
    given = [default] if path is None else [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not given:
        raise ValueError(f"path= is an empty list: give a {what} CSV file or a folder holding one.")
    files: list[Path] = []
    for item in given:
        place = Path(item).expanduser()
        if place.is_dir():
            found = [place / name for name in names if (place / name).is_file()]
            if not found:
                raise FileNotFoundError(f"{place} holds none of the {what} files ({', '.join(names)}). "
                                        f"{ROCSTORIES_HINT}")
            files += found
        elif place.is_file():
            files.append(place)
        else:
            raise FileNotFoundError(f"{place} does not exist. {ROCSTORIES_HINT}")
    return files


def _bad_row_counts(files: list[Path], bad: _BadRows) -> dict[str, Any]:
    return {
        "files": [str(f) for f in files],
        "records": bad.records,
        "left_out": dict(sorted(bad.counts.items())),
        "bad_rows": bad.examples,
    }


def load_rocstories(
    path: PathLike | Sequence[PathLike] | None = None,
    split_fractions: Sequence[float] = (0.9, 0.05, 0.05),
    seed: int = 0,
    strict: bool = False,
) -> DatasetDict:
    """Load ROCStories (Mostafazadeh et al. 2016) with deterministic train / validation / test splits.

    One row per story, files in the order given (a folder: spring 2016, then winter 2017), rows in
    file order within each split. Columns:

    * ``storyid`` (str), ``title`` (the ``storytitle`` field);
    * ``sentences``: the five sentences as a list, so that a storyline (one keyword phrase per
      sentence, :func:`hf_nlm.data.storylines.storyline`) and per-sentence generation read them directly;
    * ``story``: the five sentences joined by single spaces.

    Splits are by a stable hash of the story id (BLAKE2b of ``"<seed>:<storyid>"``, as for the
    clinical notes): a story's split depends neither on the row order nor on the other files.
    Bad rows are left out and counted (see the module docstring); :func:`~hf_nlm.data.loader_counts`
    returns ``files``, ``records`` (data rows read), ``left_out`` (reason -> rows), ``bad_rows``
    (the first 20, with file and line), ``splits`` and the options.

    Args:
        path: a ROCStories CSV file, a list of them, or a folder holding the official files. Default:
            the folder ``$HF_NLM_DATA/rocstories`` (or ``~/.cache/hf_nlm/rocstories``).
        split_fractions: ``(train, validation, test)`` fractions of stories, >= 0, summing to 1.
        seed: changes the hash, hence the split.
        strict: raise on the first bad row instead of leaving it out.

    Raises:
        FileNotFoundError: no such file or folder (the message says where to request the data).
        CorpusFormatError: an empty file, a header without a required column, broken CSV syntax, or
            (``strict=True``) a bad row; each names the file and line.
        EmptySplitError: a split with a fraction above 0 got no story.
    """
    fractions = check_fractions(split_fractions)
    files = _paths(path, data_home(create=False) / "rocstories", ROCSTORIES_FILES, "ROCStories")
    bad = _BadRows(strict)
    rows: dict[str, list[Any]] = {name: [] for name in _ROC_FEATURES}
    for file in files:
        for line, values in _csv_rows(file, _ROC_COLUMNS, "ROCStories", bad):
            storyid, title, *sentences = values
            if bad.filled(values, _ROC_COLUMNS, file, line) and bad.new_id(storyid, "storyid", file, line):
                rows["storyid"].append(storyid)
                rows["title"].append(title)
                rows["sentences"].append(sentences)
                rows["story"].append(" ".join(sentences))
    bad.report("load_rocstories")
    table = Dataset.from_dict(rows, features=_ROC_FEATURES)
    assignment = np.fromiter(
        (split_index(hash_unit(storyid, seed), fractions) for storyid in rows["storyid"]),
        dtype=np.int8, count=len(rows["storyid"]),
    )
    counts = {**_bad_row_counts(files, bad), "split_fractions": list(fractions), "seed": seed}
    return assemble(
        "load_rocstories", table, assignment, np.ones(len(assignment), dtype=bool),
        [f > 0 for f in fractions], counts, [], None,
        "Too few stories for these split_fractions: load more, or change split_fractions or seed.", logger,
    )


def load_story_cloze(path: PathLike | Sequence[PathLike], strict: bool = False) -> Dataset:
    """Load a Story Cloze Test file (Mostafazadeh et al. 2016): four sentences and two endings.

    One row per story, in file order (files in the order given). Columns: ``storyid``
    (``InputStoryid``), ``sentences`` (the four context sentences), ``endings``
    (``[RandomFifthSentenceQuiz1, RandomFifthSentenceQuiz2]``) and ``label``, the 0-based index of
    the right ending in ``endings`` (``AnswerRightEnding - 1``), as the ``story_cloze`` metric
    takes it. The validation and test files are loaded separately (pass one), since Story Cloze
    is evaluated on each; the blind 2018 test file has no ``AnswerRightEnding`` and is refused.

    Bad rows are left out and counted as for :func:`load_rocstories`, with one more reason:
    ``bad_answer``, an ``AnswerRightEnding`` other than 1 or 2. :func:`~hf_nlm.data.loader_counts`
    works on the returned dataset.

    Args:
        path: a Story Cloze CSV file, or a list of them (read in order into one dataset).
        strict: raise on the first bad row instead of leaving it out.

    Raises:
        FileNotFoundError: no such file, or a folder (which of its files to read is ambiguous).
        CorpusFormatError: as for :func:`load_rocstories`.
    """
    given = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    for item in given:
        if Path(item).expanduser().is_dir():
            found = sorted(p.name for p in Path(item).expanduser().glob("*.csv"))
            raise FileNotFoundError(
                f"{item} is a folder: pass the Story Cloze file itself (validation or test; official names "
                f"{' and '.join(STORY_CLOZE_FILES)}). CSV files there: {', '.join(found) or 'none'}."
            )
    files = _paths(given, Path(), STORY_CLOZE_FILES, "Story Cloze")
    bad = _BadRows(strict)
    rows: dict[str, list[Any]] = {name: [] for name in _CLOZE_FEATURES}
    for file in files:
        for line, values in _csv_rows(file, _CLOZE_COLUMNS, "Story Cloze", bad):
            storyid, *sentences, ending1, ending2, answer = values
            if not bad.filled(values, _CLOZE_COLUMNS, file, line):
                continue
            if answer not in ("1", "2"):
                bad.add("bad_answer", file, line, f"AnswerRightEnding is {answer!r}, expected 1 or 2")
            elif bad.new_id(storyid, "InputStoryid", file, line):
                rows["storyid"].append(storyid)
                rows["sentences"].append(sentences)
                rows["endings"].append([ending1, ending2])
                rows["label"].append(int(answer) - 1)
    bad.report("load_story_cloze")
    dataset = Dataset.from_dict(rows, features=_CLOZE_FEATURES)
    counts = {**_bad_row_counts(files, bad), "splits": {"all": {"rows": dataset.num_rows}}}
    left_out = ", ".join(f"{n} {why}" for why, n in counts["left_out"].items()) or "nothing"
    summary = (f"load_story_cloze from {', '.join(counts['files'])}: {bad.records} records read; "
               f"left out: {left_out}; {dataset.num_rows} rows.")
    logger.info(summary)
    attach_counts(dataset, summary, counts)
    return dataset

