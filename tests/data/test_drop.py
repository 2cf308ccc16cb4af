"""The DROP passages (Dua et al. 2019): extraction from the bigbench sdist, the loader and its title split.

tests/fixtures/drop/tasks holds three task.json files in the shape of the bigbench natural-instructions
DROP tasks, with invented passages (none copied from DROP); tests/fixtures/drop/passages.jsonl is what
the extraction makes of them. The sdist tarballs are built here, tiny; only the download itself is not
exercised (no network).
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hf_nlm.data import (
    CorpusFormatError,
    EmptySplitError,
    download,
    fetching,
    load_drop_passages,
    loader_counts,
)
from hf_nlm.data.corpora import drop
from hf_nlm.data.corpora.drop import (
    DROP_FILE,
    DROP_TASK_DIR,
    DROP_TASKS,
    drop_title,
    extract_drop_passages,
)
from hf_nlm.data.registry import CORPORA, corpus_entry
from hf_nlm.data.splits import hash_unit, split_index

FIXTURES = Path(__file__).parents[1] / "fixtures" / "drop"
PASSAGES = FIXTURES / DROP_FILE
ISOTOPES = "1999 Springfield Isotopes season"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data home, so a real download never leaks in."""
    home = tmp_path / "empty_home"
    monkeypatch.setenv("HF_NLM_DATA", str(home))
    return home


def fixture_tasks() -> dict[str, bytes]:
    return {task: (FIXTURES / "tasks" / task / "task.json").read_bytes() for task in DROP_TASKS}


def fake_sdist(folder: Path, tasks: dict[str, bytes] | None = None,
               extra: dict[str, bytes] | None = None) -> Path:
    """A .tar.gz laid out like bigbench-1.0.0.tar.gz: the task files under bigbench-1.0.0/bigbench/..., among
    other members."""
    members = {"bigbench-1.0.0/setup.py": b"raise SystemExit('never run')\n",
               f"bigbench-1.0.0/{DROP_TASK_DIR}/subtask001_other/task.json": b"{}"}
    for task, data in (fixture_tasks() if tasks is None else tasks).items():
        members[f"bigbench-1.0.0/{DROP_TASK_DIR}/{task}/task.json"] = data
    members.update(extra or {})
    path = folder / "bigbench-1.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------------------------------
# Extraction from the sdist


def test_extraction_dedups_in_first_seen_order(tmp_path: Path) -> None:
    out = tmp_path / "drop"
    assert extract_drop_passages(fake_sdist(tmp_path), out) == 8
    assert [p.name for p in out.iterdir()] == [DROP_FILE]
    assert (out / DROP_FILE).read_bytes() == PASSAGES.read_bytes()
    records = read_jsonl(out / DROP_FILE)
    assert [r["source"] for r in records] == [DROP_TASKS[0]] * 6 + [DROP_TASKS[1], DROP_TASKS[2]]
    texts = [r["text"] for r in records]
    assert len(set(texts)) == len(texts)
    # subtask027 / 028 repeat passages before " \nQuestion: ..."; the passage itself is cut out exactly.
    assert texts[6] == ("After 7 weeks of siege, the garrison of 4,000 surrendered on 3 May 1521, and 1,500 "
                        "prisoners were exchanged.")
    # kept as written, space and all
    assert texts[1].startswith("(1999 Springfield Isotopes season) In Week 2")
    assert [r["title"] for r in records] == [ISOTOPES, ISOTOPES, "2003 Ogdenville Otters season", "", "", "",
                                             "", ISOTOPES]


def test_drop_title() -> None:
    assert drop_title("(2012 Buffalo Bills season)The game marked ...") == "2012 Buffalo Bills season"
    assert drop_title("(2012 Detroit Lions season) After defeating ...") == "2012 Detroit Lions season"
    assert drop_title("Hoping to rebound (after a loss), the Raiders ...") == ""
    assert drop_title("() empty") == ""


def test_extraction_names_the_task_and_example(tmp_path: Path) -> None:
    tasks = fixture_tasks()
    task = json.loads(tasks[DROP_TASKS[1]])
    task["examples"][2]["input"] = "Question: where is the passage?"
    tasks[DROP_TASKS[1]] = json.dumps(task).encode()
    with pytest.raises(RuntimeError, match=r"subtask027_drop_answer_type_generation/task.json, example 2: "
                                           r"'input' should start with 'Passage: ', got 'Question: where"):
        extract_drop_passages(fake_sdist(tmp_path, tasks), tmp_path / "out")
    tasks[DROP_TASKS[1]] = b'{"examples": [{"input": "Passage: a"}, '
    with pytest.raises(RuntimeError,
                       match=r"subtask027_drop_answer_type_generation/task.json: not a UTF-8 JSON"):
        extract_drop_passages(fake_sdist(tmp_path, tasks), tmp_path / "out")
    tasks[DROP_TASKS[1]] = b'{"examples": [{"input": "Passage: a"}, {"target": "b"}]}'
    with pytest.raises(RuntimeError, match=r"task.json, example 1: expected an object with a string 'input'"):
        extract_drop_passages(fake_sdist(tmp_path, tasks), tmp_path / "out")
    tasks[DROP_TASKS[1]] = b'{"name": "no examples"}'
    with pytest.raises(RuntimeError, match=r"task.json: expected a JSON object with a list 'examples'"):
        extract_drop_passages(fake_sdist(tmp_path, tasks), tmp_path / "out")


def test_extraction_of_a_tarball_without_the_tasks(tmp_path: Path) -> None:
    tasks = fixture_tasks()
    del tasks[DROP_TASKS[2]]
    with pytest.raises(RuntimeError, match=r"has no .*subtask028_drop_answer_generation/task.json"):
        extract_drop_passages(fake_sdist(tmp_path, tasks), tmp_path / "out")


def test_fetch_downloads_into_scratch_and_checks_the_count(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetcher with the download replaced: the sdist lands in the scratch folder and is deleted there."""
    scratches = []

    def fake_download(filename, sha256, scratch, name, by_hand):
        assert (filename, sha256, name) == (drop.DROP_SDIST, drop.DROP_SDIST_SHA256, "drop")
        scratches.append(scratch)
        return fake_sdist(scratch)

    monkeypatch.setattr(drop, "download_checked", fake_download)
    with pytest.raises(RuntimeError, match="held 8 distinct DROP passages, expected 6,107"):
        download.download(["drop"], dest=tmp_path / "data")
    assert list((tmp_path / "data").iterdir()) == []  # no staging left behind
    monkeypatch.setattr(drop, "DROP_PASSAGE_COUNT", 8)
    folders = download.download(["drop"], dest=tmp_path / "data")
    assert folders == {"drop": tmp_path / "data" / "drop"}
    assert (folders["drop"] / DROP_FILE).read_bytes() == PASSAGES.read_bytes()
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["drop"]
    assert not any(s.exists() for s in scratches)


def fake_pypi(sdist: bytes, fail: bool = False):
    """urlopen for PyPI's simple index (PEP 691 JSON) and the file it lists."""
    url = "https://files.example/bigbench-1.0.0.tar.gz"

    def urlopen(request, timeout=None):
        if fail:
            raise urllib.error.URLError("no route to host")
        if isinstance(request, urllib.request.Request):
            assert request.full_url == "https://pypi.org/simple/bigbench/"
            assert request.get_header("Accept") == "application/vnd.pypi.simple.v1+json"
            return io.BytesIO(json.dumps({"files": [
                {"filename": "bigbench-0.0.1.tar.gz", "url": "elsewhere"},
                {"filename": "bigbench-1.0.0.tar.gz", "url": url},
            ]}).encode())
        assert request == url
        return io.BytesIO(sdist)

    return urlopen


def test_download_checks_the_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = fake_sdist(tmp_path).read_bytes()
    monkeypatch.setattr(fetching.urllib.request, "urlopen", fake_pypi(sdist))
    with pytest.raises(RuntimeError,
                       match=r"bigbench-1.0.0.tar.gz has SHA-256 [0-9a-f]{64}, expected 1bb398a5"):
        download.download(["drop"], dest=tmp_path / "data")
    monkeypatch.setattr(drop, "DROP_SDIST_SHA256", hashlib.sha256(sdist).hexdigest())
    monkeypatch.setattr(drop, "DROP_PASSAGE_COUNT", 8)
    folder = download.download(["drop"], dest=tmp_path / "data")["drop"]
    assert (folder / DROP_FILE).read_bytes() == PASSAGES.read_bytes()
    monkeypatch.setattr(fetching.urllib.request, "urlopen", fake_pypi(sdist, fail=True))
    with pytest.raises(RuntimeError,
                       match=r"reading https://pypi.org/simple/bigbench/ failed .*extract_drop_passages"):
        download.download(["drop"], dest=tmp_path / "data", force=True)
    assert (folder / DROP_FILE).is_file()  # a failed fetch leaves the complete copy as it was


def test_drop_is_fetched_by_name_only() -> None:
    assert "drop" in download.CORPORA
    assert download.DEFAULT_CORPORA == ("brown", "ptb", "sotu")
    assert download.download.__defaults__[0] == download.DEFAULT_CORPORA


# ---------------------------------------------------------------------------------------
# The loader


def test_loader_columns_and_rows() -> None:
    corpus = load_drop_passages(PASSAGES, split_fractions=(1.0, 0.0, 0.0))
    train = corpus["train"]
    assert train.column_names == ["text", "title", "source"]
    assert train["text"] == [r["text"] for r in read_jsonl(PASSAGES)]
    assert len(corpus["validation"]) == len(corpus["test"]) == 0
    counts = loader_counts(corpus)
    assert counts["records"] == 8 and counts["splits"]["train"] == {"rows": 8}


def test_loader_folder_and_data_home(isolated_home: Path) -> None:
    (isolated_home / "drop").mkdir(parents=True)
    shutil.copy(PASSAGES, isolated_home / "drop" / DROP_FILE)
    everything = (1.0, 0.0, 0.0)
    assert load_drop_passages(split_fractions=everything)["train"]["text"] == \
        load_drop_passages(isolated_home / "drop", split_fractions=everything)["train"]["text"]


def test_split_by_title_hand_checked() -> None:
    fractions = (0.4, 0.3, 0.3)
    corpus = load_drop_passages(PASSAGES, split_fractions=fractions, seed=0)
    # BLAKE2b (8 bytes) of "0:1999 Springfield Isotopes season" is 0x7982... / 2**64 = 0.4747: validation
    # (0.4 <= u < 0.7), for all three passages of that article.
    digest = hashlib.blake2b(f"0:{ISOTOPES}".encode(), digest_size=8).digest()
    assert digest.hex().startswith("7982") and hash_unit(ISOTOPES, 0) == pytest.approx(0.4747, abs=1e-4)
    assert [row["title"] for row in corpus["validation"]].count(ISOTOPES) == 3
    assert corpus["train"]["text"] == [read_jsonl(PASSAGES)[4]["text"]]
    assert [len(corpus[split]) for split in corpus] == [1, 4, 3]
    titles = {split: set(corpus[split]["title"]) - {""} for split in corpus}
    assert not (titles["train"] & titles["validation"] or titles["train"] & titles["test"]
                or titles["validation"] & titles["test"])
    # A passage without a title is hashed by its text.
    for split_number, split in enumerate(corpus):
        for row in corpus[split]:
            assert split_index(hash_unit(row["title"] or row["text"], 0), fractions) == split_number
    again = load_drop_passages(PASSAGES, split_fractions=fractions, seed=0)
    assert all(again[split]["text"] == corpus[split]["text"] for split in corpus)


def many_passages(path: Path, titles: int) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(titles):
            for game in range(3):
                title = f"{1950 + i % 70} Team {i} season"
                text = f"({title})In week {game + 1} the team scored {7 * game + i} points."
                handle.write(json.dumps({"title": title, "text": text, "source": DROP_TASKS[0]}) + "\n")
    return path


def test_fractions_roughly_kept_and_no_title_in_two_splits(tmp_path: Path) -> None:
    corpus = load_drop_passages(many_passages(tmp_path / DROP_FILE, 400))
    titles = {split: collections.Counter(corpus[split]["title"]) for split in corpus}
    assert sum(len(t) for t in titles.values()) == 400
    assert all(set(count.values()) == {3} for count in titles.values())  # every article whole in one split
    assert 0.74 < len(titles["train"]) / 400 < 0.86
    assert 0.05 < len(titles["validation"]) / 400 < 0.15 and 0.05 < len(titles["test"]) / 400 < 0.15
    other = load_drop_passages(tmp_path / DROP_FILE, seed=1)
    assert set(other["test"]["title"]) != set(corpus["test"]["title"])
    with pytest.raises(ValueError, match="must sum to 1"):
        load_drop_passages(tmp_path / DROP_FILE, split_fractions=(0.8, 0.1, 0.2))


def test_empty_split_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / DROP_FILE
    path.write_text(json.dumps({"title": "", "text": "Only one, 1 passage.", "source": "x"}) + "\n",
                    encoding="utf-8")
    with pytest.raises(EmptySplitError, match="load_drop_passages: the .* split is empty"):
        load_drop_passages(path)


def test_missing_corpus_says_how_to_fetch(isolated_home: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        load_drop_passages()
    message = str(err.value)
    assert str(isolated_home / "drop" / DROP_FILE) in message and "hf-nlm download drop" in message
    with pytest.raises(FileNotFoundError, match=r"nowhere does not exist.*hf-nlm download drop"):
        load_drop_passages(tmp_path / "nowhere")
    (tmp_path / "folder").mkdir()
    with pytest.raises(FileNotFoundError, match=rf"folder/{DROP_FILE} does not exist"):
        load_drop_passages(tmp_path / "folder")


GOOD = json.dumps({"title": "", "text": "In 1648, 2,500 people.", "source": "t"})


@pytest.mark.parametrize(("content", "message"), [
    (b"", rf"{DROP_FILE} is empty"),
    (b"\n\n", rf"{DROP_FILE} holds no passage"),
    (f"{GOOD}\n".encode() + b'{"title": "", "text": "caf\xe9"}\n',
     rf"{DROP_FILE}, line 2: byte 0xe9 .*not valid UTF-8"),
    (f'{GOOD}\n{{"title": "", "text": \n'.encode(),
     rf"{DROP_FILE}, line 2: not valid JSON .*one JSON object"),
    (f"{GOOD}\n[1, 2]\n".encode(), rf"{DROP_FILE}, line 2: expected one JSON object .*got a JSON list"),
    (b'{"title": "", "source": "t"}\n',
     rf"{DROP_FILE}, line 1, field 'text': expected a string, got no such field"),
    (b'{"title": 3, "text": "a", "source": "t"}\n',
     rf"{DROP_FILE}, line 1, field 'title': expected a string, got a int"),
    (b'{"title": "", "text": "  ", "source": "t"}\n',
     rf"{DROP_FILE}, line 1, field 'text': the passage is empty"),
    (b'{"title": "1999 Season", "text": "No title here, 1 game.", "source": "t"}\n',
     rf"{DROP_FILE}, line 1, field 'title': '1999 Season' does not match the passage, which starts with no "
     r"title in parentheses"),
    (b'{"title": "", "text": "(2003 Season)Won 3 games.", "source": "t"}\n',
     rf"{DROP_FILE}, line 1, field 'title': '' does not match the passage, which starts with the title "
     r"\(2003 Season\)"),
    (f"{GOOD}\n\n{GOOD}\n".encode(), rf"{DROP_FILE}, line 3: repeats the passage of line 1"),
])
def test_malformed_passages_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / DROP_FILE
    path.write_bytes(content)
    with pytest.raises(CorpusFormatError, match=message) as err:
        load_drop_passages(path)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------------------------------
# The registry


def test_registry_entry() -> None:
    entry = corpus_entry("drop")
    assert entry is CORPORA["drop"]
    assert entry is drop.CORPUS and entry.loader is load_drop_passages
    assert entry.fetcher is not None and not entry.fetch_by_default
    assert entry.options == ("split_fractions", "seed")
    assert entry.card.hub_id is None and "ucinlp/drop" in entry.card.description
    assert "CC BY-SA 4.0" in entry.card.description and "Dua et al. 2019" in entry.card.description
    corpus = entry.load(path=PASSAGES, split_fractions=(0.5, 0.25, 0.25), seed=0)
    assert sum(len(split) for split in corpus.values()) == 8

