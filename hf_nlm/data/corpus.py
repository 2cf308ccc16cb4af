"""What a corpus module declares: one :class:`CorpusEntry` per corpus, holding its loader, what its
``path`` reads, the loader options the command line may set, its fetcher for ``hf-nlm download`` and
what model cards say about it (a :class:`~hf_nlm.hub.model_card.CorpusCard`).

The modules of :mod:`hf_nlm.data.corpora` declare the entries; :mod:`hf_nlm.data.registry` collects them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..hub.model_card import CorpusCard
from .fetching import Fetcher

__all__ = ["HASH_SPLIT_OPTIONS", "OPTION_FLAGS", "CorpusCard", "CorpusEntry", "Fetcher"]

#: Loader options the command line can set, by loader keyword: ``hf-nlm train --split-fractions``
#: and ``--split-seed`` (the corpora split by a hash of a record id), ``--text-column`` (CSV) and
#: ``--story-stage`` (ROCStories as the (source, target) pairs of one stage of the seq2seq story generator).
OPTION_FLAGS = {"split_fractions": "--split-fractions", "seed": "--split-seed",
                "text_column": "--text-column", "stage": "--story-stage"}
#: The options of a loader that splits by a hash of a record id (:mod:`hf_nlm.data.splits`).
HASH_SPLIT_OPTIONS = ("split_fractions", "seed")


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus, as ``--corpus NAME``, ``hf-nlm download NAME`` and the model cards know it.

    * ``loader``: the function returning the corpus, a ``datasets.DatasetDict`` with a string column
      ``text``; :meth:`load` calls it;
    * ``path_help``: what the loader's ``path`` reads (``--corpus-path``), or, for a corpus of local
      split files (``split_files``), what ``--train-file`` and the like read;
    * ``card``: what model cards say about the corpus;
    * ``split_files``: the loader takes ``train`` / ``validation`` / ``test`` file lists, not ``path``;
    * ``options``: loader keywords (of :data:`OPTION_FLAGS`) the command line passes when given;
    * ``fetcher``: how ``hf-nlm download NAME`` fetches it, or None;
    * ``fetch_by_default``: ``hf-nlm download`` without names fetches it (large corpora: only by name);
    * ``order``: where it comes in :data:`hf_nlm.data.registry.CORPORA` (and so in ``--corpus`` and the help):
      lower first, ties by name. The built-in corpora use 1 to 8 and, for the local text and CSV files, 90
      and 91; the default 50 puts a new corpus after the built-in ones and before the local files.
    """

    name: str
    loader: Callable[..., Any]
    path_help: str
    card: CorpusCard
    split_files: bool = False
    options: tuple[str, ...] = ()
    fetcher: Fetcher | None = None
    fetch_by_default: bool = True
    order: int = 50

    def __post_init__(self) -> None:
        unknown = [option for option in self.options if option not in OPTION_FLAGS]
        if unknown:
            raise ValueError(
                f"corpus {self.name!r}: the option {unknown[0]!r} is not one the command line sets "
                f"({', '.join(OPTION_FLAGS)})"
            )

    def load(self, **kwargs: Any):
        """The corpus as a ``DatasetDict``: ``loader(**kwargs)``."""
        return self.loader(**kwargs)
