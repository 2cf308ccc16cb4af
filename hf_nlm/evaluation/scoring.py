"""Scoring a split: summed -log p(target) and per-token log-probabilities, the way each batching reads it.

:func:`hf_nlm.data.batching.batching_for` decides how a model reads a split (independent blocks, stream
columns with the state carried along, or paired examples); this module asks the model for the
probability of every target in that order:

* :func:`score_split`: summed -log p(target) over a process's share of the targets and their number,
  for perplexities (evaluation, validation during training, ``accelerate launch``);
* :func:`split_log_probs`: log p(w_t | context) of every target in stream order, optionally with the
  hidden state that predicted it (adjusted perplexity, number prediction, mixtures);
* :func:`example_log_probs`: the same per paired example.

Our models are asked through their output head (``-head.nll`` of the last hidden states), which is the
exact probability of the target even where the head's vocabulary-wide distribution can only say
``<unk_num>``; any other ``transformers`` model through its logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from functools import singledispatch

import torch
from tqdm.auto import tqdm

from ..data.batching import BlockBatching, PairedBatching, StreamBatching, target_labels
from ..data.lm import IGNORE_INDEX
from ..data.pairs import PairedExamples
from ..data.stream import StreamColumns, bptt_chunks
from ..heads import OutputHead
from ..modeling_utils import NLMPreTrainedModel, align_targets

#: ``logits_to_keep`` that scores no position: our models' loss and hidden states come from the head's
#: ``nll`` of the targets alone, so a caller that reads nothing else skips the vocabulary-wide logits (for an
#: open numeral branch, a digit-RNN pass over every numeral of the vocabulary at each position asked for).
NO_LOGITS = torch.empty(0, dtype=torch.long)


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
    head = getattr(model, "lm_head", None)
    if not isinstance(head, OutputHead):
        output = model(**_model_inputs(batch), **model_kwargs)
        logits = output.logits if "shift_labels" in batch else output.logits[:, :-1]
        return _target_log_probs(logits, target_labels(batch)), output
    output = model(**_model_inputs(batch), **model_kwargs, output_hidden_states=True,
                   logits_to_keep=NO_LOGITS)
    fields = {name: batch[name] for name in head.target_fields if name in batch}
    hidden, targets = align_targets(output.hidden_states[-1], batch.get("labels"), batch.get("shift_labels"),
                                    fields)
    # what predicted each target, for callers that want it (number prediction)
    output.target_hidden_states = hidden
    return -head.nll(hidden, targets).float().cpu(), output


def seq2seq_log_probs(model, batch: Mapping[str, torch.Tensor], **model_kwargs):
    """``(log p of each labelled target of an encoder-decoder batch, the model's output)``, targets in
    batch order (row by row). ``labels[b, t]`` is predicted at decoder position t (the model shifts the
    labels right itself), so nothing is shifted here.

    As :func:`batch_log_probs`: our models through their head, ``-head.nll`` of the decoder's last hidden
    states (exactly what the head is applied to), other models through their logits."""
    head = getattr(model, "lm_head", None)
    if not isinstance(head, OutputHead):
        output = model(**batch, **model_kwargs)
        return _target_log_probs(output.logits, batch["labels"]), output
    output = model(**batch, **model_kwargs, output_hidden_states=True, logits_to_keep=NO_LOGITS)
    hidden, targets = align_targets(output.decoder_hidden_states[-1], shift_labels=batch["labels"])
    output.target_hidden_states = hidden
    return -head.nll(hidden, targets).float().cpu(), output


def _model_inputs(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A batch without its labels: the model's inputs (ids and extra fields) when only logits are wanted."""
    return {k: v for k, v in batch.items() if k not in ("labels", "shift_labels")}


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
        for start, length in tqdm(bptt_chunks(columns.length, bptt), desc=desc, disable=desc is None,
                                  leave=False):
            batch = {k: v.to(device) for k, v in columns.chunk(start, length, rows).items()}
            out = model(**batch, cache=state, use_cache=True, logits_to_keep=NO_LOGITS)
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
    device = device or next(model.parameters()).device
    total, count = 0.0, 0
    # Our models compute the loss from the head whatever logits_to_keep says; skipping the |V|-wide
    # logits of every position halves the cost of evaluating a softmax model.
    extra = {"logits_to_keep": NO_LOGITS} if isinstance(model, NLMPreTrainedModel) else {}
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


@singledispatch
def score_split(batching, model, stream, batch_size: int, device=None, num_processes: int = 1,
                process_index: int = 0, desc: str | None = None) -> tuple[float, int]:
    """Summed -log p(target) over process ``process_index``'s share of ``stream``'s targets, and their
    number; the shares of all processes add up to every target once. ``desc`` shows a progress bar."""
    raise TypeError(f"no scorer for {type(batching).__name__}")


@score_split.register
def _(batching: BlockBatching, model, stream, batch_size: int, device=None, num_processes: int = 1,
      process_index: int = 0, desc: str | None = None) -> tuple[float, int]:
    return summed_nll(model, batching.eval_loader(stream, batch_size, num_processes, process_index), device,
                      desc)


@score_split.register
def _(batching: StreamBatching, model, stream, batch_size: int, device=None, num_processes: int = 1,
      process_index: int = 0, desc: str | None = None) -> tuple[float, int]:
    # batch_size columns in all, split across processes: the result does not depend on the number
    # of processes. Each column starts from a fresh state, so only batch_size=1 is exact.
    columns = batching.columns(stream, batch_size)
    rows = None
    if num_processes > 1:
        rows = torch.tensor_split(torch.arange(columns.num_columns), num_processes)[process_index]
        if not len(rows):
            return 0.0, 0
    return stream_nll(model, columns, batching.block_size, device, rows=rows, desc=desc)


@score_split.register
def _(batching: PairedBatching, model, stream: PairedExamples, batch_size: int, device=None,
      num_processes: int = 1, process_index: int = 0, desc: str | None = None) -> tuple[float, int]:
    # Each process scores a contiguous share of the examples; the shares add up to every target once.
    indices = torch.tensor_split(torch.arange(len(stream)), num_processes)[process_index]
    if not len(indices):
        return 0.0, 0
    scores = _example_scores(batching, model, stream, batch_size, device, indices, desc=desc)
    log_probs = torch.cat([lp for lp, _ in scores.values()])
    total = -float(log_probs.double().sum())
    _check_finite(torch.tensor(total), 0)
    return total, int(log_probs.numel())


@singledispatch
def split_log_probs(batching, model, stream, batch_size: int, device=None, with_hidden: bool = False,
                    hidden_mask: torch.Tensor | None = None):
    """log p(w_t | context) of every target of ``stream``, in stream order; with ``with_hidden``
    ``(log_probs, hidden)``, the hidden state that predicted each target too (our models only).

    ``hidden_mask`` (one bool per target, stream order) keeps the hidden states of those targets only,
    batch by batch: the numeracy evaluation keeps its numerals' states (a few per cent of the tokens)
    rather than one vector per token of the split."""
    raise TypeError(f"no scorer for {type(batching).__name__}")


@split_log_probs.register
@torch.no_grad()
def _(batching: BlockBatching, model, stream, batch_size: int, device=None, with_hidden: bool = False,
      hidden_mask: torch.Tensor | None = None):
    device = device or next(model.parameters()).device
    out, hidden, done = (_TargetBuffer(stream["input_ids"].numel()),
                         _TargetBuffer(_kept_rows(stream, hidden_mask)), 0)
    with eval_mode(model):
        for batch in batching.eval_loader(stream, batch_size):
            log_probs, output = batch_log_probs(model, {k: v.to(device) for k, v in batch.items()})
            out.add(log_probs)
            if with_hidden:
                hidden.add(_kept_hidden(output.target_hidden_states, hidden_mask, done))
            done += log_probs.numel()
    return (out.result(), hidden.result()) if with_hidden else out.result()


class _TargetBuffer:
    """Per-target results of a split, written batch after batch into one tensor allocated once (``capacity``
    rows, grown only if more come). Many small tensors kept between the large temporaries of each batch
    fragment the C heap: the process's memory then grows with the split although no tensor does."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.data, self.size = capacity, None, 0

    def add(self, rows: torch.Tensor) -> None:
        if self.data is None:
            self.data = rows.new_empty((max(self.capacity, rows.shape[0]), *rows.shape[1:]))
        elif self.size + rows.shape[0] > self.data.shape[0]:
            grown = rows.new_empty((2 * (self.size + rows.shape[0]), *rows.shape[1:]))
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:self.size + rows.shape[0]] = rows
        self.size += rows.shape[0]

    def result(self) -> torch.Tensor:
        return self.data[: self.size] if self.data is not None else torch.empty(0)


def _kept_rows(stream, mask: torch.Tensor | None) -> int:
    """How many hidden states a split keeps: one per target, or those of ``mask``."""
    return int(mask.sum()) if mask is not None else stream["input_ids"].numel()


def _kept_hidden(hidden: torch.Tensor, mask: torch.Tensor | None, start: int) -> torch.Tensor:
    """The rows of ``hidden`` (the targets ``start``, ``start + 1``, ... of the stream) that ``mask``
    keeps."""
    if mask is None:
        return hidden
    return hidden[mask[start:start + hidden.shape[0]].to(hidden.device)]


@split_log_probs.register
@torch.no_grad()
def _(batching: StreamBatching, model, stream, batch_size: int, device=None, with_hidden: bool = False,
      hidden_mask: torch.Tensor | None = None):
    # One column, the state carried from chunk to chunk: every token sees the whole stream before it.
    device = device or next(model.parameters()).device
    columns, state, done = batching.columns(stream, 1), None, 0
    out, hidden = _TargetBuffer(stream["input_ids"].numel()), _TargetBuffer(_kept_rows(stream, hidden_mask))
    with eval_mode(model):
        for start, length in bptt_chunks(columns.length, batching.block_size):
            chunk = {k: v.to(device) for k, v in columns.chunk(start, length).items()}
            log_probs, output = batch_log_probs(model, chunk, cache=state, use_cache=True)
            state = output.cache
            out.add(log_probs)
            if with_hidden:
                hidden.add(_kept_hidden(output.target_hidden_states, hidden_mask, done))
            done += log_probs.numel()
    return (out.result(), hidden.result()) if with_hidden else out.result()


@split_log_probs.register
def _(batching: PairedBatching, model, stream: PairedExamples, batch_size: int, device=None,
      with_hidden: bool = False, hidden_mask: torch.Tensor | None = None):
    # Every target token, example after example (stream.target_stream()'s order).
    scores = _example_scores(batching, model, stream, batch_size, device, torch.arange(len(stream)),
                             with_hidden)
    out = torch.cat([scores[i][0] for i in range(len(stream))])
    if not with_hidden:
        return out
    return out, _kept_hidden(torch.cat([scores[i][1] for i in range(len(stream))]), hidden_mask, 0)


def example_log_probs(batching: PairedBatching, model, stream: PairedExamples, batch_size: int,
                      device=None) -> list[torch.Tensor]:
    """log p(y_t | y_<t, x) of every target token, one tensor per example, in the split's order."""
    scores = _example_scores(batching, model, stream, batch_size, device, torch.arange(len(stream)))
    return [scores[i][0] for i in range(len(stream))]


@torch.no_grad()
def _example_scores(batching: PairedBatching, model, examples: PairedExamples, batch_size: int, device,
                    indices: torch.Tensor, with_hidden: bool = False,
                    desc: str | None = None) -> dict[int, tuple]:
    """``{example index: (log p of each target token, hidden states or None)}`` for ``indices``."""
    device = device or next(model.parameters()).device
    scores = {}
    batches = batching.eval_batches(examples, batch_size, indices)
    total = -(-len(indices) // batch_size)
    with eval_mode(model):
        for rows, batch in tqdm(batches, total=total, desc=desc, disable=desc is None, leave=False):
            log_probs, output = seq2seq_log_probs(model, {k: v.to(device) for k, v in batch.items()})
            sizes = examples.target_lengths[rows].tolist()
            hidden = output.target_hidden_states.split(sizes) if with_hidden else [None] * len(rows)
            for i, lp, h in zip(rows, log_probs.split(sizes), hidden, strict=True):
                scores[i] = (lp, h)
    return scores
