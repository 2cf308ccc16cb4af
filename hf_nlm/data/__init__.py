"""Corpora as ``datasets.DatasetDict`` and language-model batching.

``lm`` tokenises a split into one token stream (ids and extra per-token fields) and cuts it into
blocks; ``stream`` cuts it into columns for stateful BPTT; ``sampler`` serves the training batches of
either; ``pairs`` tokenises and batches paired (source, target) examples for encoder-decoder models;
``collator`` pads examples for transformers' ``Trainer`` and keeps every ``<eos>`` a target;
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
    "DataCollatorForCausalLM": "collator",
    "check_collator": "collator",
    "CorpusFormatError": "corpora",
    "first_lines": "corpora",
    "load_brown": "corpora",
    "load_csv_files": "corpora",
    "load_drop_passages": "corpora",
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
    "EmptySplitError": "splits",
    "load_mimic_iii_notes": "mimic",
    "load_mimic_iv_notes": "mimic",
    "loader_counts": "splits",
    "replace_mimic_iii_deid": "mimic",
    "replace_mimic_iv_deid": "mimic",
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
