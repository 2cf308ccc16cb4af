"""How a model reads a split of text: the one place that decides whether it carries a state.

A feed-forward n-gram model (NPLM, Bengio et al. 2003; LBL / HLBL, Mnih & Hinton 2007, 2008) sees a
fixed window of ``n - 1`` words, so a split is cut into independent blocks that carry their own
context (``hf_nlm.data.lm``) and can be shuffled. A recurrent model (AWD-LSTM, Merity et al. 2018)
carries its state from one chunk of text to the next, so a split is read as parallel columns of the
stream, in order, the state flowing along them (``hf_nlm.data.stream``). :func:`batching_for` makes
that choice once, from the model, and returns a :class:`Batching` that serves everything reading
text for that model: the training batches (``LMTrainer``) and the order in which evaluation reads a
split (``eval_loader``, ``columns``, ``eval_batches``; the scoring itself is
:mod:`hf_nlm.evaluation.scoring`).

An encoder-decoder model (``config.is_encoder_decoder``) reads paired (source, target) examples
(``hf_nlm.data.pairs``): the third subclass, :class:`PairedBatching`, serves their shuffled, padded
training batches and its evaluation batches, grouped by length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch.utils.data import DataLoader, Subset

from .lm import (
    IGNORE_INDEX,
    LMBlockDataset,
    TokenFeatures,
    bos_token_id,
    collate_blocks,
    group_into_blocks,
    resolve_features,
    stream_stats,
    tokenize_stream,
)
from .pairs import PairBatches, PairedExamples, PairFormat, collate_pairs, tokenize_pairs
from .sampler import BlockBatches, StreamBatches
from .stream import StreamColumns, stream_columns


def split_texts(dataset, text_column: str = "text") -> list[str]:
    """The texts of one split: a ``datasets.Dataset`` with ``text_column``, or a list of strings."""
    if isinstance(dataset, dict) or (hasattr(dataset, "keys") and not hasattr(dataset, "column_names")):
        raise TypeError("pass one split (e.g. dataset['test']), not a DatasetDict")
    if hasattr(dataset, "column_names"):
        if text_column not in dataset.column_names:
            raise KeyError(f"dataset has columns {dataset.column_names}, "
                           f"expected a text column {text_column!r}")
        return dataset[text_column]
    return list(dataset)


def lm_context_size(model) -> int:
    """How many input-only tokens each block needs: n - 1 for n-gram models, 1 otherwise."""
    return int(getattr(model.config, "context_size", 1) or 1)


def is_stateful(model) -> bool:
    """Does ``model`` carry a recurrent state from one chunk of text to the next (``is_stateful``)?"""
    return bool(getattr(model, "is_stateful", False))


def target_labels(batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The targets of a batch in either layout: ``shift_labels`` (stream chunks, already aligned with
    the inputs) or ``labels[:, 1:]`` (blocks, which the model shifts); -100 marks no target."""
    return batch["shift_labels"] if "shift_labels" in batch else batch["labels"][:, 1:]


def is_encoder_decoder(model) -> bool:
    """Does ``model`` read (source, target) pairs (``config.is_encoder_decoder``)?"""
    return bool(getattr(model.config, "is_encoder_decoder", False))


def batching_for(
    model, tokenizer, block_size: int, features: TokenFeatures | None = None, pairs: PairFormat | None = None
) -> Batching:
    """The batching ``model`` reads text with: paired examples for an encoder-decoder model, stream
    columns if it carries a state, else blocks.

    Args:
        model: the model (its ``config.is_encoder_decoder``, ``is_stateful`` and ``config.context_size``
            decide).
        tokenizer: its tokenizer.
        block_size: targets per block, or positions per chunk (the BPTT length) for recurrent models;
            unused for encoder-decoder models.
        features: extra per-token fields (default: the tokenizer's ``token_features``, if any).
        pairs: how an encoder-decoder model's splits are read (columns, maximum lengths; default
            ``PairFormat()``); unused for causal models.
    """
    if is_encoder_decoder(model):
        return PairedBatching(tokenizer, pairs, features)
    if is_stateful(model):
        return StreamBatching(tokenizer, block_size, features)
    return BlockBatching(tokenizer, block_size, lm_context_size(model), features)


class Batching:
    """How one kind of model reads a split: its token stream, training batches and scorer.

    Subclasses decide the layout; everything else (tokenisation with extra fields, counts) is shared.
    ``stateful`` says whether the model's state flows from one batch to the next.
    """

    stateful = False

    def __init__(self, tokenizer, block_size: int, features: TokenFeatures | None = None) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.features = resolve_features(tokenizer, features)

    @property
    def fill(self) -> Mapping[str, float | int] | None:
        """The extra fields' values where the stream has no token text (see ``TokenFeatures``)."""
        return getattr(self.features, "fill", None)

    @property
    def bos_token_id(self) -> int:
        return bos_token_id(self.tokenizer)

    def encode(self, texts: Sequence[str]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
        """A split's token stream (``{"input_ids", **extra fields}``) and its counts (``stream_stats``)."""
        stream, num_words = tokenize_stream(texts, self.tokenizer, self.features)
        return stream, stream_stats(stream["input_ids"], num_words, self.tokenizer)

    def encode_split(self, dataset, split: str | None = None):
        """:meth:`encode` of one split (a ``datasets.Dataset`` with a ``text`` column, or a list of strings);
        ``split`` names it in error messages."""
        return self.encode(split_texts(dataset))

    def target_stream(self, encoded) -> dict[str, torch.Tensor]:
        """Every target of an encoded split once (``input_ids`` and extra fields): what a head checks or
        fits before training. For a token stream, the stream itself."""
        return encoded

    def num_targets(self, batch: Mapping[str, torch.Tensor]) -> int:
        """How many targets a training batch holds (labels other than -100 that are predicted)."""
        return int((target_labels(batch) != IGNORE_INDEX).sum())

    def training_batches(self, stream, batch_size: int, num_processes: int = 1, process_index: int = 0, *,
                         seed: int = 0, variable_bptt: bool = False, pin_memory: bool = False,
                         group_by_length: bool = False):
        """This process's training batches over ``stream`` (``BlockBatches``, ``StreamBatches`` or
        ``PairBatches``). ``variable_bptt`` applies to recurrent models, ``group_by_length`` to pairs."""
        raise NotImplementedError

    def exact_batch_size(self, batch_size: int) -> int:
        """The evaluation batch size, at most ``batch_size``, whose perplexity is exact."""
        return batch_size


class BlockBatching(Batching):
    """Feed-forward n-gram models: independent blocks, each with its ``context_size`` tokens of context."""

    def __init__(self, tokenizer, block_size: int, context_size: int,
                 features: TokenFeatures | None = None) -> None:
        super().__init__(tokenizer, block_size, features)
        self.context_size = context_size

    def blocks(self, stream) -> LMBlockDataset:
        """The stream cut into blocks (``group_into_blocks``), extra fields position-aligned."""
        return LMBlockDataset(
            group_into_blocks(stream, self.block_size, self.context_size, self.bos_token_id, fill=self.fill)
        )

    def training_batches(self, stream, batch_size: int, num_processes: int = 1, process_index: int = 0, *,
                         seed: int = 0, variable_bptt: bool = False, pin_memory: bool = False,
                         group_by_length: bool = False) -> BlockBatches:
        return BlockBatches(self.blocks(stream), batch_size, num_processes, process_index, seed=seed,
                            pin_memory=pin_memory)

    def eval_loader(self, stream, batch_size: int, num_processes: int = 1,
                    process_index: int = 0) -> DataLoader:
        """The blocks in order, this process's contiguous share of them: what evaluation reads."""
        data = self.blocks(stream)
        if num_processes > 1:
            data = Subset(data,
                          torch.tensor_split(torch.arange(len(data)), num_processes)[process_index].tolist())
        return DataLoader(data, batch_size=batch_size, shuffle=False, collate_fn=collate_blocks)


class StreamBatching(Batching):
    """Recurrent models: the stream as parallel columns, read in chunks of ``block_size`` positions
    with the state carried from chunk to chunk (truncated BPTT)."""

    stateful = True

    def columns(self, stream, num_columns: int) -> StreamColumns:
        """The stream as ``num_columns`` columns (at most one per token), extra fields target-aligned."""
        num_columns = min(num_columns, stream["input_ids"].numel())
        return stream_columns(stream, num_columns, self.bos_token_id, fill=self.fill)

    def training_batches(self, stream, batch_size: int, num_processes: int = 1, process_index: int = 0, *,
                         seed: int = 0, variable_bptt: bool = False, pin_memory: bool = False,
                         group_by_length: bool = False) -> StreamBatches:
        return StreamBatches(stream, self.bos_token_id, batch_size, self.block_size, num_processes,
                             process_index, variable=variable_bptt, seed=seed, fill=self.fill)

    def exact_batch_size(self, batch_size: int) -> int:
        # One column, the state never reset: every token is predicted from the whole stream before it.
        return 1


class PairedBatching(Batching):
    """Encoder-decoder models: paired (source, target) examples (``hf_nlm.data.pairs``), independent of
    one another. Padding is masked on both sides (``attention_mask``; labels -100), so the scores of
    the targets do not depend on the batch size or on which examples share a batch."""

    def __init__(self, tokenizer, pair_format: PairFormat | None = None,
                 features: TokenFeatures | None = None) -> None:
        if resolve_features(tokenizer, features) is not None:
            raise ValueError("paired examples carry no per-token fields (token_features) yet: "
                             "use a tokenizer without them")
        super().__init__(tokenizer, block_size=0, features=None)
        self.pair_format = pair_format or PairFormat()

    @property
    def pad_token_id(self) -> int:
        """What pads a batch's sources (masked out); ``<eos>`` for a tokenizer without a pad token."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id

    def encode(self, texts: Sequence[str]):
        raise TypeError(
            "an encoder-decoder model reads (source, target) pairs, not lines of text: give a split with "
            f"{self.pair_format.source_column!r} and {self.pair_format.target_column!r} columns "
            "(encode_split)"
        )

    def encode_split(self, dataset, split: str | None = None) -> tuple[PairedExamples, dict[str, int]]:
        """The split's tokenised pairs and their counts, truncation included (``tokenize_pairs``)."""
        return tokenize_pairs(dataset, self.tokenizer, self.pair_format, split)

    def target_stream(self, encoded: PairedExamples) -> dict[str, torch.Tensor]:
        return encoded.target_stream()

    def num_targets(self, batch: Mapping[str, torch.Tensor]) -> int:
        # Every label is a target: the decoder predicts labels[:, t] at position t (nothing to shift off).
        return int((batch["labels"] != IGNORE_INDEX).sum())

    def training_batches(self, stream: PairedExamples, batch_size: int, num_processes: int = 1,
                         process_index: int = 0, *, seed: int = 0, variable_bptt: bool = False,
                         pin_memory: bool = False, group_by_length: bool = False) -> PairBatches:
        return PairBatches(stream, self.pad_token_id, batch_size, num_processes, process_index, seed=seed,
                           group_by_length=group_by_length, pin_memory=pin_memory)

    def eval_batches(self, examples: PairedExamples, batch_size: int, indices: torch.Tensor):
        """``(rows, batch)`` over the examples ``indices``, ``batch_size`` at a time: what evaluation reads.

        Batches hold examples of similar length (sorted, longest first), which only saves padding:
        padding is masked, so the scores are the same in any grouping."""
        lengths = examples.source_lengths[indices] + examples.target_lengths[indices]
        indices = indices[torch.sort(lengths, descending=True, stable=True).indices]
        for chunk in torch.split(indices, batch_size):
            rows = chunk.tolist()
            yield rows, collate_pairs([examples[i] for i in rows], self.pad_token_id)
