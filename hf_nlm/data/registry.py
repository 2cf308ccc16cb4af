"""The corpora: every :class:`~hf_nlm.data.corpus.CorpusEntry` declared by a module of
:mod:`hf_nlm.data.corpora`, collected in :data:`CORPORA`.

``hf-nlm train/evaluate --corpus``, ``hf-nlm download`` and the model cards of training runs all read this
table. No list names the corpora: :func:`collect_corpora` imports each module of the package (but those
whose name starts with ``_``) and takes the ``CorpusEntry`` objects at its top level, so adding a corpus is
adding one module there. The table is ordered by the entries' ``order``, then their names.

The corpus modules import neither ``datasets`` nor ``pandas`` nor ``pyarrow`` until a loader runs, so
neither does this module (the ``hf-nlm`` parser reads it).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..hub.model_card import named_corpus
from . import corpora
from .corpus import OPTION_FLAGS, CorpusCard, CorpusEntry

__all__ = [
    "CORPORA",
    "OPTION_FLAGS",
    "CorpusCard",
    "CorpusEntry",
    "collect_corpora",
    "corpus_card",
    "corpus_entry",
    "downloadable",
]


def collect_corpora(package: ModuleType = corpora) -> dict[str, CorpusEntry]:
    """Every ``CorpusEntry`` at the top level of a module of ``package``, by name, in ``order`` then name.

    Raises:
        TypeError: a module of the package declares no entry (helpers go in a module named ``_x``).
        ValueError: two entries share a name.
    """
    found: dict[str, tuple[CorpusEntry, str]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        entries = [value for value in vars(module).values() if isinstance(value, CorpusEntry)]
        if not entries:
            raise TypeError(
                f"{module.__file__} declares no CorpusEntry: each module of {package.__name__} holds a "
                "corpus (name a module of helpers with a leading '_')"
            )
        for entry in entries:
            if entry.name in found and found[entry.name][0] is not entry:
                raise ValueError(f"two corpora are named {entry.name!r}: in {found[entry.name][1]} "
                                 f"and {module.__name__}")
            found[entry.name] = (entry, module.__name__)
    ordered = sorted((entry for entry, _ in found.values()), key=lambda entry: (entry.order, entry.name))
    return {entry.name: entry for entry in ordered}


CORPORA: dict[str, CorpusEntry] = collect_corpora()


def corpus_entry(name: str) -> CorpusEntry:
    """The entry of ``name`` (``ValueError`` listing the registered names for another)."""
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")
    return CORPORA[name]


def corpus_card(name: str | None) -> CorpusCard | None:
    """What a model card says about the corpus ``name``: its entry's card, or for a name that is not
    registered a plain one naming no Hub dataset (:func:`~hf_nlm.hub.model_card.named_corpus`). None for no
    name."""
    if not name:
        return None
    return CORPORA[name].card if name in CORPORA else named_corpus(name)


def downloadable(default_only: bool = False) -> tuple[str, ...]:
    """The corpora ``hf-nlm download`` fetches (``default_only``: those it fetches when given no name)."""
    return tuple(
        name for name, entry in CORPORA.items()
        if entry.fetcher is not None and (entry.fetch_by_default or not default_only)
    )
