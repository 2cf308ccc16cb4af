"""Corpora as ``datasets.DatasetDict`` and language-model batching.

``corpora`` holds the corpora, one module each (loader, fetcher, card text, entry), which ``registry``
collects; ``reading``, ``splits``, ``file_stream`` and ``fetching`` hold what their loaders and fetchers
share, ``download`` fetches them (``hf-nlm download``), ``stories`` reads the ROCStories and Story Cloze
files and ``storylines`` extracts storylines.

``lm`` tokenises a split into one token stream (ids and extra per-token fields) and cuts it into
blocks; ``stream`` cuts it into columns for stateful BPTT; ``sampler`` serves the training batches of
either; ``pairs`` tokenises and batches paired (source, target) examples for encoder-decoder models;
``collator`` pads examples for transformers' ``Trainer`` and keeps every ``<eos>`` a target;
``batching`` chooses among them for a model (:func:`batching_for`).

The names below load their module on first use (PEP 562), so importing one light module of this
package (``hf_nlm.data.registry``, ``hf_nlm.data.download``, a corpus module) does not load ``datasets``.
"""

from __future__ import annotations

from importlib import import_module

# Every public name and the module that defines it.
_MODULE_OF = {
    "load_arxiv_abstracts": "corpora.arxiv",
    "Batching": "batching",
    "BlockBatching": "batching",
    "PairedBatching": "batching",
    "StreamBatching": "batching",
    "batching_for": "batching",
    "is_encoder_decoder": "batching",
    "is_stateful": "batching",
    "lm_context_size": "batching",
    "split_texts": "batching",
    "target_labels": "batching",
    "DataCollatorForCausalLM": "collator",
    "check_collator": "collator",
    "CorpusFormatError": "reading",
    "first_lines": "splits",
    "load_brown": "corpora.brown",
    "load_csv_files": "corpora.text_files",
    "load_drop_passages": "corpora.drop",
    "load_ptb": "corpora.ptb",
    "load_sotu": "corpora.sotu",
    "load_text_files": "corpora.text_files",
    "read_text_file": "reading",
    "data_home": "reading",
    "IGNORE_INDEX": "lm",
    "LMBlockDataset": "lm",
    "TokenFeatures": "lm",
    "build_lm_dataset": "lm",
    "collate_blocks": "lm",
    "group_into_blocks": "lm",
    "tokenize_corpus": "lm",
    "tokenize_stream": "lm",
    "EmptySplitError": "splits",
    "load_mimic_iii_notes": "corpora.mimic",
    "load_mimic_iv_notes": "corpora.mimic",
    "loader_counts": "splits",
    "replace_mimic_iii_deid": "corpora.mimic",
    "replace_mimic_iv_deid": "corpora.mimic",
    "PairBatches": "pairs",
    "PairBatchSampler": "pairs",
    "PairedExamples": "pairs",
    "PairFormat": "pairs",
    "PairFormatError": "pairs",
    "collate_pairs": "pairs",
    "read_pairs": "pairs",
    "tokenize_pairs": "pairs",
    "BlockBatches": "sampler",
    "BlockBatchSampler": "sampler",
    "StreamBatches": "sampler",
    "load_rocstories": "stories",
    "load_rocstories_lm": "corpora.rocstories",
    "load_story_cloze": "stories",
    "StreamColumns": "stream",
    "bptt_chunks": "stream",
    "stream_columns": "stream",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
