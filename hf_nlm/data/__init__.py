"""Corpora as ``datasets.DatasetDict`` and language-model batching.

``lm`` tokenises a split into one token stream (ids and extra per-token fields) and cuts it into
blocks; ``stream`` cuts it into columns for stateful BPTT; ``sampler`` serves the training batches of
either; ``pairs`` tokenises and batches paired (source, target) examples for encoder-decoder models;
``batching`` chooses among them for a model (:func:`batching_for`).
"""

from .arxiv import load_arxiv_abstracts
from .batching import (
    Batching,
    BlockBatching,
    PairedBatching,
    StreamBatching,
    batching_for,
    is_encoder_decoder,
    is_stateful,
    lm_context_size,
    split_texts,
    target_labels,
)
from .corpora import (
    CorpusFormatError,
    first_lines,
    load_brown,
    load_csv_files,
    load_ptb,
    load_sotu,
    load_text_files,
    read_text_file,
)
from .download import data_home
from .lm import (
    IGNORE_INDEX,
    LMBlockDataset,
    TokenFeatures,
    build_lm_dataset,
    collate_blocks,
    group_into_blocks,
    tokenize_corpus,
    tokenize_stream,
)
from .mimic import load_mimic_iii_notes, load_mimic_iv_notes, replace_mimic_iii_deid, replace_mimic_iv_deid
from .pairs import (
    PairBatches,
    PairBatchSampler,
    PairedExamples,
    PairFormat,
    PairFormatError,
    collate_pairs,
    read_pairs,
    tokenize_pairs,
)
from .sampler import BlockBatches, BlockBatchSampler, StreamBatches
from .splits import EmptySplitError, loader_counts
from .stories import load_rocstories, load_story_cloze
from .stream import StreamColumns, bptt_chunks, stream_columns

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
