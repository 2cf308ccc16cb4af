"""Corpora as ``datasets.DatasetDict`` and language-model batching.

``lm`` tokenises a split into one token stream (ids and extra per-token fields) and cuts it into
blocks; ``stream`` cuts it into columns for stateful BPTT; ``sampler`` serves the training batches of
either; ``pairs`` tokenises and batches paired (source, target) examples for encoder-decoder models;
``batching`` chooses among them for a model (:func:`batching_for`).

The names below load their module on first use (PEP 562), so importing one light module of this
package (``hf_nlm.data.registry``, ``hf_nlm.data.download``) does not load ``datasets``.
"""

from __future__ import annotations

from importlib import import_module

# Every public name and the module that defines it.
_MODULE_OF = {
    "load_arxiv_abstracts": "arxiv",
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
    "CorpusFormatError": "corpora",
    "first_lines": "corpora",
    "load_brown": "corpora",
    "load_csv_files": "corpora",
    "load_ptb": "corpora",
    "load_sotu": "corpora",
    "load_text_files": "corpora",
    "read_text_file": "corpora",
    "data_home": "download",
    "IGNORE_INDEX": "lm",
    "LMBlockDataset": "lm",
    "TokenFeatures": "lm",
    "build_lm_dataset": "lm",
    "collate_blocks": "lm",
    "group_into_blocks": "lm",
    "tokenize_corpus": "lm",
    "tokenize_stream": "lm",
    "EmptySplitError": "notes",
    "load_mimic_iii_notes": "notes",
    "load_mimic_iv_notes": "notes",
    "loader_counts": "notes",
    "replace_mimic_iii_deid": "notes",
    "replace_mimic_iv_deid": "notes",
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
    "load_story_cloze": "stories",
    "StreamColumns": "stream",
    "bptt_chunks": "stream",
    "stream_columns": "stream",
}

__all__ = [
    "IGNORE_INDEX",
    "Batching",
    "BlockBatchSampler",
    "BlockBatches",
    "BlockBatching",
    "CorpusFormatError",
    "EmptySplitError",
    "LMBlockDataset",
    "PairBatchSampler",
    "PairBatches",
    "PairFormat",
    "PairFormatError",
    "PairedBatching",
    "PairedExamples",
    "StreamBatches",
    "StreamBatching",
    "StreamColumns",
    "TokenFeatures",
    "batching_for",
    "bptt_chunks",
    "build_lm_dataset",
    "collate_blocks",
    "collate_pairs",
    "data_home",
    "first_lines",
    "group_into_blocks",
    "is_encoder_decoder",
    "is_stateful",
    "lm_context_size",
    "load_arxiv_abstracts",
    "load_brown",
    "load_csv_files",
    "load_mimic_iii_notes",
    "load_mimic_iv_notes",
    "load_ptb",
    "load_rocstories",
    "load_sotu",
    "load_story_cloze",
    "load_text_files",
    "loader_counts",
    "read_pairs",
    "read_text_file",
    "replace_mimic_iii_deid",
    "replace_mimic_iv_deid",
    "split_texts",
    "stream_columns",
    "target_labels",
    "tokenize_corpus",
    "tokenize_pairs",
    "tokenize_stream",
]


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
