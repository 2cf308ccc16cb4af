"""How a model reads a split of text: the one place that decides whether it carries a state.

A feed-forward n-gram model (NPLM, Bengio et al. 2003; LBL / HLBL, Mnih & Hinton 2007, 2008) sees a
fixed window of ``n - 1`` words, so a split is cut into independent blocks that carry their own
context (``hf_nlm.data.lm``) and can be shuffled. A recurrent model (AWD-LSTM, Merity et al. 2018)
carries its state from one chunk of text to the next, so a split is read as parallel columns of the
stream, in order, the state flowing along them (``hf_nlm.data.stream``). :func:`batching_for` makes
that choice once, from the model, and returns a :class:`Batching` that serves everything reading
text for that model: the training batches (``LMTrainer``), the validation and evaluation scorer
(``evaluate_lm``) and the per-token log-probabilities (``token_log_probs``).

An encoder-decoder model (``config.is_encoder_decoder``) reads paired (source, target) examples
(``hf_nlm.data.pairs``): the third subclass, :class:`PairedBatching`, serves their shuffled, padded
training batches and scores the target tokens exactly, whatever the batch size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader, Subset
from tqdm.auto import tqdm

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
from .stream import StreamColumns, bptt_chunks, stream_columns


def split_texts(dataset, text_column: str = "text") -> list[str]:
    """The texts of one split: a ``datasets.Dataset`` with ``text_column``, or a list of strings."""
    if isinstance(dataset, dict) or (hasattr(dataset, "keys") and not hasattr(dataset, "column_names")):
        raise TypeError("pass one split (e.g. dataset['test']), not a DatasetDict")
    if hasattr(dataset, "column_names"):
        if text_column not in dataset.column_names:
            raise KeyError(f"dataset has columns {dataset.column_names}, expected a text column {text_column!r}")
        return dataset[text_column]
    return list(dataset)


def lm_context_size(model) -> int:
    """How many input-only tokens each block needs: n - 1 for n-gram models, 1 otherwise."""
    return int(getattr(model.config, "context_size", 1) or 1)


def is_stateful(model) -> bool:
    """Does ``model`` carry a recurrent state from one chunk of text to the next (``_is_stateful``)?"""
    return bool(getattr(model, "_is_stateful", False))


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
        model: the model (its ``config.is_encoder_decoder``, ``_is_stateful`` and ``config.context_size`` decide).
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


@contextmanager
def eval_mode(model):
    """``model.eval()`` for the ``with`` block, then back to the mode it was in."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _target_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Natural-log probability of each labelled target (labels -100 skipped), on the CPU."""
    keep = labels != IGNORE_INDEX
    logp = torch.log_softmax(logits[keep].float(), dim=-1)
    return logp.gather(1, labels[keep][:, None]).squeeze(1).cpu()


def batch_log_probs(model, batch: Mapping[str, torch.Tensor], **model_kwargs):
    """``(log p of each labelled target of batch, the model's output)``, targets in batch order.

    Our models are asked through their head: ``-head.nll`` of the last hidden states, with the
    per-target fields the head names (a numeral's value, its digits) taken from the batch, which is
    the exact probability of the target itself even where a head's vocabulary-wide distribution can
    only say ``<unk_num>`` (an open-vocabulary numeral branch). Other models: their logits."""
    from ..heads import OutputHead  # here: the data package does not need the models to load
    from ..modeling_utils import align_targets

    head = getattr(model, "lm_head", None)
    if not isinstance(head, OutputHead):
        output = model(**_model_inputs(batch), **model_kwargs)
        logits = output.logits if "shift_labels" in batch else output.logits[:, :-1]
        return _target_log_probs(logits, target_labels(batch)), output
    output = model(**_model_inputs(batch), **model_kwargs, output_hidden_states=True, logits_to_keep=1)
    fields = {name: batch[name] for name in head.target_fields if name in batch}
    hidden, targets = align_targets(output.hidden_states[-1], batch.get("labels"), batch.get("shift_labels"), fields)
    output.target_hidden_states = hidden  # what predicted each target, for callers that want it (number prediction)
    return -head.nll(hidden, targets).float().cpu(), output


def seq2seq_log_probs(model, batch: Mapping[str, torch.Tensor], **model_kwargs):
    """``(log p of each labelled target of an encoder-decoder batch, the model's output)``, targets in
    batch order (row by row). ``labels[b, t]`` is predicted at decoder position t (the model shifts the
    labels right itself), so nothing is shifted here.

    As :func:`batch_log_probs`: our models through their head, ``-head.nll`` of the decoder's last hidden
    states (exactly what the head is applied to), other models through their logits."""
    from ..heads import OutputHead
    from ..modeling_utils import align_targets

    head = getattr(model, "lm_head", None)
    if not isinstance(head, OutputHead):
        output = model(**batch, **model_kwargs)
        return _target_log_probs(output.logits, batch["labels"]), output
    output = model(**batch, **model_kwargs, output_hidden_states=True)
    hidden, targets = align_targets(output.decoder_hidden_states[-1], shift_labels=batch["labels"])
    output.target_hidden_states = hidden
    return -head.nll(hidden, targets).float().cpu(), output


def _model_inputs(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A batch without its labels: the model's inputs (ids and extra fields) when only logits are wanted."""
    return {k: v for k, v in batch.items() if k not in ("labels", "shift_labels")}


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

    def score(self, model, stream, batch_size: int, device=None, num_processes: int = 1, process_index: int = 0,
              desc: str | None = None) -> tuple[float, int]:
        """Summed -log p(target) over process ``process_index``'s share of ``stream``'s targets, and
        their number; the shares of all processes add up to every target once."""
        raise NotImplementedError

    def log_probs(self, model, stream, batch_size: int, device=None, with_hidden: bool = False):
        """log p(w_t | context) of every token of ``stream``, in stream order; with ``with_hidden``
        ``(log_probs, hidden)``, the hidden state that predicted each token too (our models only)."""
        raise NotImplementedError

    def exact_batch_size(self, batch_size: int) -> int:
        """The evaluation batch size, at most ``batch_size``, whose perplexity is exact."""
        return batch_size


class BlockBatching(Batching):
    """Feed-forward n-gram models: independent blocks, each with its ``context_size`` tokens of context."""

    def __init__(self, tokenizer, block_size: int, context_size: int, features: TokenFeatures | None = None) -> None:
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

    def _loader(self, stream, batch_size: int, num_processes: int = 1, process_index: int = 0) -> DataLoader:
        """The blocks in order, this process's contiguous share of them."""
        data = self.blocks(stream)
        if num_processes > 1:
            data = Subset(data, torch.tensor_split(torch.arange(len(data)), num_processes)[process_index].tolist())
        return DataLoader(data, batch_size=batch_size, shuffle=False, collate_fn=collate_blocks)

    def score(self, model, stream, batch_size: int, device=None, num_processes: int = 1, process_index: int = 0,
              desc: str | None = None) -> tuple[float, int]:
        return summed_nll(model, self._loader(stream, batch_size, num_processes, process_index), device, desc)

    @torch.no_grad()
    def log_probs(self, model, stream, batch_size: int, device=None, with_hidden: bool = False):
        device = device or next(model.parameters()).device
        out, hidden = [], []
        with eval_mode(model):
            for batch in self._loader(stream, batch_size):
                log_probs, output = batch_log_probs(model, {k: v.to(device) for k, v in batch.items()})
                out.append(log_probs)
                if with_hidden:
                    hidden.append(output.target_hidden_states)
        return (torch.cat(out), torch.cat(hidden)) if with_hidden else torch.cat(out)


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
        return StreamBatches(stream, self.bos_token_id, batch_size, self.block_size, num_processes, process_index,
                             variable=variable_bptt, seed=seed, fill=self.fill)

    def score(self, model, stream, batch_size: int, device=None, num_processes: int = 1, process_index: int = 0,
              desc: str | None = None) -> tuple[float, int]:
        # batch_size columns in all, split across processes: the result does not depend on the number
        # of processes. Each column starts from a fresh state, so only batch_size=1 is exact.
        columns = self.columns(stream, batch_size)
        rows = None
        if num_processes > 1:
            rows = torch.tensor_split(torch.arange(columns.num_columns), num_processes)[process_index]
            if not len(rows):
                return 0.0, 0
        return stream_nll(model, columns, self.block_size, device, rows=rows, desc=desc)

    @torch.no_grad()
    def log_probs(self, model, stream, batch_size: int, device=None, with_hidden: bool = False):
        # One column, the state carried from chunk to chunk: every token sees the whole stream before it.
        device = device or next(model.parameters()).device
        columns, state, out, hidden = self.columns(stream, 1), None, [], []
        with eval_mode(model):
            for start, length in bptt_chunks(columns.length, self.block_size):
                chunk = {k: v.to(device) for k, v in columns.chunk(start, length).items()}
                log_probs, output = batch_log_probs(model, chunk, cache=state, use_cache=True)
                state = output.cache
                out.append(log_probs)
                if with_hidden:
                    hidden.append(output.target_hidden_states)
        return (torch.cat(out), torch.cat(hidden)) if with_hidden else torch.cat(out)

    def exact_batch_size(self, batch_size: int) -> int:
        # One column, the state never reset: every token is predicted from the whole stream before it.
        return 1


class PairedBatching(Batching):
    """Encoder-decoder models: paired (source, target) examples (``hf_nlm.data.pairs``), independent of
    one another. Padding is masked on both sides (``attention_mask``; labels -100), so the scores of
    the targets do not depend on the batch size or on which examples share a batch."""

    def __init__(self, tokenizer, pair_format: PairFormat | None = None, features: TokenFeatures | None = None) -> None:
        if resolve_features(tokenizer, features) is not None:
            raise ValueError("paired examples carry no per-token fields (token_features) yet: use a tokenizer without them")
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
            f"{self.pair_format.source_column!r} and {self.pair_format.target_column!r} columns (encode_split)"
        )

    def encode_split(self, dataset, split: str | None = None) -> tuple[PairedExamples, dict[str, int]]:
        """The split's tokenised pairs and their counts, truncation included (``tokenize_pairs``)."""
        return tokenize_pairs(dataset, self.tokenizer, self.pair_format, split)

    def target_stream(self, encoded: PairedExamples) -> dict[str, torch.Tensor]:
        return encoded.target_stream()

    def num_targets(self, batch: Mapping[str, torch.Tensor]) -> int:
        # Every label is a target: the decoder predicts labels[:, t] at position t (nothing to shift off).
        return int((batch["labels"] != IGNORE_INDEX).sum())

    def training_batches(self, stream: PairedExamples, batch_size: int, num_processes: int = 1, process_index: int = 0,
                         *, seed: int = 0, variable_bptt: bool = False, pin_memory: bool = False,
                         group_by_length: bool = False) -> PairBatches:
        return PairBatches(stream, self.pad_token_id, batch_size, num_processes, process_index, seed=seed,
                           group_by_length=group_by_length, pin_memory=pin_memory)

    @torch.no_grad()
    def _example_scores(self, model, examples: PairedExamples, batch_size: int, device, indices: torch.Tensor,
                        with_hidden: bool = False, desc: str | None = None) -> dict[int, tuple]:
        """``{example index: (log p of each target token, hidden states or None)}`` for ``indices``.

        Batches hold examples of similar length (sorted, longest first), which only saves padding:
        the scores are the same in any grouping."""
        device = device or next(model.parameters()).device
        lengths = examples.source_lengths[indices] + examples.target_lengths[indices]
        indices = indices[torch.sort(lengths, descending=True, stable=True).indices]
        scores = {}
        with eval_mode(model):
            for chunk in tqdm(torch.split(indices, batch_size), desc=desc, disable=desc is None, leave=False):
                rows = chunk.tolist()
                batch = {k: v.to(device) for k, v in collate_pairs([examples[i] for i in rows], self.pad_token_id).items()}
                log_probs, output = seq2seq_log_probs(model, batch)
                sizes = examples.target_lengths[chunk].tolist()
                hidden = output.target_hidden_states.split(sizes) if with_hidden else [None] * len(rows)
                for i, lp, h in zip(rows, log_probs.split(sizes), hidden, strict=True):
                    scores[i] = (lp, h)
        return scores

    def score(self, model, stream: PairedExamples, batch_size: int, device=None, num_processes: int = 1,
              process_index: int = 0, desc: str | None = None) -> tuple[float, int]:
        # Each process scores a contiguous share of the examples; the shares add up to every target once.
        indices = torch.tensor_split(torch.arange(len(stream)), num_processes)[process_index]
        if not len(indices):
            return 0.0, 0
        scores = self._example_scores(model, stream, batch_size, device, indices, desc=desc)
        log_probs = torch.cat([lp for lp, _ in scores.values()])
        total = -float(log_probs.double().sum())
        _check_finite(torch.tensor(total), 0)
        return total, int(log_probs.numel())

    def example_log_probs(self, model, stream: PairedExamples, batch_size: int, device=None) -> list[torch.Tensor]:
        """log p(y_t | y_<t, x) of every target token, one tensor per example, in the split's order."""
        scores = self._example_scores(model, stream, batch_size, device, torch.arange(len(stream)))
        return [scores[i][0] for i in range(len(stream))]

    def log_probs(self, model, stream: PairedExamples, batch_size: int, device=None, with_hidden: bool = False):
        """Every target token's log-probability, example after example (``stream.target_stream()``'s order)."""
        scores = self._example_scores(model, stream, batch_size, device, torch.arange(len(stream)), with_hidden)
        out = torch.cat([scores[i][0] for i in range(len(stream))])
        return (out, torch.cat([scores[i][1] for i in range(len(stream))])) if with_hidden else out


def _check_finite(loss: torch.Tensor, count: int) -> None:
    if not torch.isfinite(loss):
        raise FloatingPointError(f"evaluation loss is {loss.item()} (not finite) after {count} tokens")


@torch.no_grad()
def stream_nll(
    model, columns: StreamColumns, bptt: int, device=None, rows=None, desc: str | None = None
) -> tuple[float, int]:
    """Sum of -log p(target) over the targets of ``columns`` (or of its ``rows``), and their number,
    reading each column in chunks of ``bptt`` with the recurrent state carried from chunk to chunk."""
    device = device or next(model.parameters()).device
    total, count, state = 0.0, 0, None
    with eval_mode(model):
        for start, length in tqdm(bptt_chunks(columns.length, bptt), desc=desc, disable=desc is None, leave=False):
            batch = {k: v.to(device) for k, v in columns.chunk(start, length, rows).items()}
            out = model(**batch, cache=state, use_cache=True, logits_to_keep=1)
            state = out.cache
            n = int((target_labels(batch) != IGNORE_INDEX).sum())
            if n == 0:
                continue
            _check_finite(out.loss, count)
            total += out.loss.item() * n
            count += n
    return total, count


@torch.no_grad()
def summed_nll(model, loader, device=None, desc: str | None = None) -> tuple[float, int]:
    """Sum of -log p(target) over every labelled token the loader yields, and their number."""
    from ..modeling_utils import NLMPreTrainedModel  # here: the data package does not need the models to load

    device = device or next(model.parameters()).device
    total, count = 0.0, 0
    # Our models compute the loss from the head whatever logits_to_keep says; skipping the |V|-wide
    # logits of every position halves the cost of evaluating a softmax model.
    extra = {"logits_to_keep": 1} if isinstance(model, NLMPreTrainedModel) else {}
    with eval_mode(model):
        for batch in tqdm(loader, desc=desc, disable=desc is None, leave=False):
            batch = {k: v.to(device) for k, v in batch.items()}
            n = int((target_labels(batch) != IGNORE_INDEX).sum())
            if n == 0:
                continue
            loss = model(**batch, **extra).loss
            _check_finite(loss, count)
            total += loss.item() * n
            count += n
    return total, count
