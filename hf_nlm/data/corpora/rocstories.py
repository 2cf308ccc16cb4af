"""ROCStories (Mostafazadeh et al. 2016) in the storyline LM format of Yao et al. (2019): one story per row
as ``title <sep> storyline <sep> story``, the text ``hf-nlm story --model`` generates from:
``--corpus rocstories``; with ``--story-stage storyline`` or ``story``, the (source, target) pairs of that
stage of their seq2seq approach (title -> storyline, ``title <sep> storyline`` -> story). Licensed per user,
so not fetched: the CSVs are read by
:func:`hf_nlm.data.load_rocstories` (:mod:`hf_nlm.data.stories`), the storylines extracted by RAKE
(:mod:`hf_nlm.data.storylines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..corpus import HASH_SPLIT_OPTIONS, CorpusCard, CorpusEntry
from ..reading import PathLike
from ..storylines import SEP, check_story_stage, story_pair_dataset, storyline_lm_dataset

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = ["CORPUS", "load_rocstories_lm"]


def load_rocstories_lm(
    path: PathLike | Sequence[PathLike] | None = None,
    split_fractions: Sequence[float] = (0.9, 0.05, 0.05),
    seed: int = 0,
    max_words: int | None = 3,
    sep: str = SEP,
    stage: str | None = None,
) -> DatasetDict:
    """ROCStories (:func:`hf_nlm.data.load_rocstories` with ``path``, ``split_fractions``, ``seed``) in the LM
    format of :func:`~hf_nlm.data.storylines.storyline_lm_dataset`: the corpus ``hf-nlm train --corpus
    rocstories`` reads, whose models ``hf-nlm story --model`` runs. With ``stage`` (``"storyline"`` or
    ``"story"``, ``--story-stage``): the ``source`` and ``target`` columns of that stage of Yao et al.'s
    (2019) seq2seq approach (:func:`~hf_nlm.data.storylines.story_pair_dataset`), what ``hf-nlm train --model
    story_seq2seq --corpus rocstories --story-stage STAGE`` trains on."""
    from ..stories import load_rocstories

    if stage is not None:
        check_story_stage(stage)
    stories = load_rocstories(path, split_fractions=split_fractions, seed=seed)
    if stage is None:
        return storyline_lm_dataset(stories, max_words=max_words, sep=sep)
    pairs = story_pair_dataset(stories, stage, max_words=max_words, sep=sep)
    return pairs.select_columns(["source", "target"])


CORPUS = CorpusEntry(
    "rocstories", load_rocstories_lm, "the folder of the ROCStories CSVs, or one CSV",
    CorpusCard(
        "rocstories", "ROCStories corpus",
        "ROCStories (Mostafazadeh et al. 2016), five-sentence stories, one per row as 'title <sep> storyline "
        "<sep> story' (Yao et al. 2019), split by a hash of the story id. Licensed per user, so the metadata "
        "names no dataset.",
    ),
    options=(*HASH_SPLIT_OPTIONS, "stage"), order=8,
)
