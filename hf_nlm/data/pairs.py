"""Paired (source, target) examples for encoder-decoder models: tokenisation, padded batches, sampler.

An encoder-decoder model (Sutskever et al. 2014; Bahdanau et al. 2015) reads a source text and
predicts a target text token by token, p(y | x) = prod_t p(y_t | y_<t, x). A split of paired
examples is a ``datasets.Dataset`` with a source and a target text column (``PairFormat`` names
them). Both sides are tokenised with the model's one tokenizer (one shared word-level vocabulary):

* the target is its tokens followed by ``<eos>``: every target token and the end of the target are
  predicted, so a target of n words has n + 1 targets and its perplexity counts the end;
* the source is its tokens followed by ``<eos>`` too, which marks the end of the input for the
  encoder (as BART, T5 and Marian do);
* no ``bos`` is added to either side: the decoder's first input is the model's
  ``decoder_start_token_id``, which the model puts in front itself when it shifts ``labels`` right
  (the transformers convention, ``shift_tokens_right``);
* a side longer than its maximum length (``max_source_length``, ``max_target_length``, counted in
  tokens with the ``<eos>``) keeps its first ``max - 1`` tokens and its ``<eos>``. Truncation is never
  silent: the counts of truncated examples and of the tokens cut off are part of the split's stats.

A batch pads each side to its own longest member (``collate_pairs``): the source with the pad
token and ``attention_mask`` 0, the target with label -100 (never a target) and
``decoder_attention_mask`` 0. Bad input (a missing column, a value that is not a string, an empty
text) raises an error that names the split, the row and the column.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset as TorchDataset

from .lm import IGNORE_INDEX, count_words, unknown_token_ids
from .sampler import BlockBatches, BlockBatchSampler

#: How many global batches ``group_by_length`` sorts together (transformers' ``LengthGroupedSampler``
#: uses megabatches of 50 batches too): enough to find similar lengths, few enough to stay random.
LENGTH_GROUP_BATCHES = 50


class PairFormatError(ValueError):
    """A split of paired examples that cannot be read (names the split, the row and the column)."""


@dataclass(frozen=True)
class PairFormat:
    """How a split of paired examples is read: its two text columns and the maximum lengths.

    Args:
        source_column: the column holding the source text (the encoder's input).
        target_column: the column holding the target text (what the decoder predicts).
        max_source_length: keep at most this many source tokens (its ``<eos>`` included); None = all.
        max_target_length: keep at most this many target tokens (its ``<eos>`` included); None = all.
    """

    source_column: str = "source"
    target_column: str = "target"
    max_source_length: int | None = None
    max_target_length: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_source_length", "max_target_length"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"PairFormat.{name} must be >= 2 (one token and <eos>) or None, "
                                 f"got {value}")


def read_pairs(dataset, pair_format: PairFormat = PairFormat(),
               split: str | None = None) -> tuple[list[str], list[str]]:
    """The checked source and target texts of one split (a ``datasets.Dataset`` or a dict of columns).

    Raises ``PairFormatError`` naming the split, the row and the column for a missing column, a value
    that is not a string or an empty (whitespace-only) text.
    """
    split = split or str(getattr(dataset, "split", None) or "the split")
    columns = getattr(dataset, "column_names", None)
    if columns is None and isinstance(dataset, Mapping):
        columns = list(dataset)
    if columns is None:
        raise TypeError(f"{split}: expected a datasets.Dataset (or a dict of columns) of paired examples, "
                        f"got {type(dataset).__name__}")
    wanted = (pair_format.source_column, pair_format.target_column)
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise PairFormatError(f"{split}: no column {', '.join(map(repr, missing))}; "
                              f"the split has columns {list(columns)} "
                              "(set source_column / target_column to name the source and target text)")
    sources, targets = list(dataset[wanted[0]]), list(dataset[wanted[1]])
    if len(sources) != len(targets):
        raise PairFormatError(f"{split}: {len(sources)} sources but {len(targets)} targets")
    if not sources:
        raise PairFormatError(f"{split}: no examples")
    for column, texts in zip(wanted, (sources, targets), strict=True):
        check_texts(texts, f"{split}, column {column!r}")
    return sources, targets


def check_texts(texts: Sequence, where: str) -> None:
    """Raise ``PairFormatError`` at the first text that is not a non-empty string (``where`` starts the
    message)."""
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise PairFormatError(f"{where}, row {row}: expected a string, "
                                  f"got {type(text).__name__} ({text!r:.60})")
        if not text.strip():
            raise PairFormatError(f"{where}, row {row}: empty text")


def encode_side(texts: Sequence[str], tokenizer,
                max_length: int | None = None) -> tuple[list[torch.Tensor], int, int]:
    """Each text's ids followed by ``<eos>``, kept to ``max_length`` tokens (the ``<eos>`` always stays).

    Returns ``(ids per text, texts truncated, tokens cut off)``.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos_token_id: paired examples end each side with <eos>")
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    out, truncated, cut = [], 0, 0
    for ids in encoded:
        if max_length is not None and len(ids) + 1 > max_length:
            truncated += 1
            cut += len(ids) + 1 - max_length
            ids = ids[: max_length - 1]
        out.append(torch.tensor([*ids, tokenizer.eos_token_id], dtype=torch.long))
    return out, truncated, cut


class PairedExamples(TorchDataset):
    """Tokenised pairs: ``sources[i]`` and ``targets[i]`` are 1-D id tensors, each ending with ``<eos>``."""

    def __init__(self, sources: list[torch.Tensor], targets: list[torch.Tensor]) -> None:
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        self.sources, self.targets = sources, targets
        self.source_lengths = torch.tensor([len(s) for s in sources], dtype=torch.long)
        self.target_lengths = torch.tensor([len(t) for t in targets], dtype=torch.long)

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sources[index], self.targets[index]

    def target_stream(self) -> dict[str, torch.Tensor]:
        """Every target token once, example after example: what a head fits or checks before training,
        and the order in which :meth:`PairedBatching.log_probs` returns its log-probabilities."""
        return {"input_ids": torch.cat(self.targets)}


def tokenize_pairs(
    dataset, tokenizer, pair_format: PairFormat = PairFormat(), split: str | None = None
) -> tuple[PairedExamples, dict[str, int]]:
    """Read, check and tokenise one split of paired examples (see the module docstring).

    Returns the examples and their counts: ``num_examples``; ``num_tokens`` (target tokens with their
    ``<eos>``: the targets the perplexity is over), ``num_words`` (target words plus one ``<eos>`` each:
    the per-word perplexity's denominator), ``num_unk`` (targets that are ``<unk>``),
    ``num_source_tokens``; and the truncation counts ``num_truncated_sources`` /
    ``num_truncated_targets`` (examples cut) and ``source_tokens_cut`` / ``target_tokens_cut``.
    """
    sources, targets = read_pairs(dataset, pair_format, split)
    source_ids, truncated_sources, source_cut = encode_side(sources, tokenizer, pair_format.max_source_length)
    target_ids, truncated_targets, target_cut = encode_side(targets, tokenizer, pair_format.max_target_length)
    examples = PairedExamples(source_ids, target_ids)
    all_targets = examples.target_stream()["input_ids"]
    unknown = torch.tensor(unknown_token_ids(tokenizer), dtype=torch.long)
    stats = {
        "num_examples": len(examples),
        "num_tokens": int(all_targets.numel()),
        # Words of the targets as kept (a truncated target is scored on its kept tokens only): the
        # tokens cut are words cut for a word-level tokenizer, an estimate for subwords.
        "num_words": count_words(targets) - target_cut,
        "num_unk": int(torch.isin(all_targets, unknown).sum()),
        "num_source_tokens": int(examples.source_lengths.sum()),
        "num_truncated_sources": truncated_sources,
        "num_truncated_targets": truncated_targets,
        "source_tokens_cut": source_cut,
        "target_tokens_cut": target_cut,
    }
    if truncated_sources or truncated_targets:
        warnings.warn(
            f"{split or 'split'}: truncated {truncated_sources} sources ({source_cut} tokens cut) to "
            f"max_source_length={pair_format.max_source_length} and {truncated_targets} targets "
            f"({target_cut} tokens cut) to max_target_length={pair_format.max_target_length}",
            stacklevel=2,
        )
    return examples, stats


def pad_sources(sources: Sequence[torch.Tensor], pad_token_id: int) -> dict[str, torch.Tensor]:
    """``input_ids`` (B, S) padded on the right with ``pad_token_id`` and their ``attention_mask``."""
    input_ids = torch.nn.utils.rnn.pad_sequence(list(sources), batch_first=True, padding_value=pad_token_id)
    attention_mask = torch.nn.utils.rnn.pad_sequence(
        [torch.ones_like(s) for s in sources], batch_first=True, padding_value=0
    )
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def collate_pairs(examples: Sequence[tuple[torch.Tensor, torch.Tensor]],
                  pad_token_id: int) -> dict[str, torch.Tensor]:
    """A batch of pairs: ``input_ids`` / ``attention_mask`` (B, S) and ``labels`` / ``decoder_attention_mask``
    (B, T), each side padded on the right to its own longest member; padded labels are -100.

    ``labels[b, t]`` is predicted at decoder position t: the model shifts ``labels`` right itself (its
    ``decoder_start_token_id`` first), so ``decoder_attention_mask`` marks the same positions as the labels.
    """
    sources, targets = zip(*examples, strict=True)
    batch = pad_sources(sources, pad_token_id)
    labels = torch.nn.utils.rnn.pad_sequence(list(targets), batch_first=True, padding_value=IGNORE_INDEX)
    batch["labels"] = labels
    batch["decoder_attention_mask"] = (labels != IGNORE_INDEX).long()
    return batch


class PairBatchSampler(BlockBatchSampler):
    """:class:`BlockBatchSampler` over paired examples: every example exactly once per epoch.

    Global batches are cut from the epoch's permutation (``seed + epoch``) and split into contiguous
    per-process chunks as for blocks. A remainder too small to give every process an example is not
    dropped but added to the last global batch, so all processes together see every example once. (One
    process would serve that remainder as a batch of its own: P processes with batch b see what one
    process with batch P*b sees whenever the remainder is 0 or at least P.)

    ``group_by_length``: the permutation is cut into windows of ``LENGTH_GROUP_BATCHES`` global batches,
    each window is sorted by length (source + target tokens, longest first) and cut into global batches,
    and the batches of the epoch are then shuffled. A batch then holds examples of similar length, so
    padding falls, while the data order stays random from batch to batch and the same on every process.
    """

    def __init__(self, lengths: torch.Tensor, batch_size: int, num_processes: int = 1, process_index: int = 0,
                 seed: int = 0, group_by_length: bool = False) -> None:
        if len(lengths) < num_processes:
            raise ValueError(f"the training split has {len(lengths)} examples, "
                             f"fewer than the {num_processes} processes")
        super().__init__(len(lengths), batch_size, num_processes, process_index, seed=seed)
        self.lengths = lengths
        self.group_by_length = group_by_length

    def global_batches(self, epoch: int) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = torch.randperm(self.num_blocks, generator=generator)
        g, steps = self.global_batch_size, self.steps_per_epoch
        if self.group_by_length:
            window = g * LENGTH_GROUP_BATCHES
            pieces = []
            for group in torch.split(order, window):
                # Stable: equal lengths keep their random order.
                pieces.append(group[torch.sort(self.lengths[group], descending=True, stable=True).indices])
            order = torch.cat(pieces)
        sizes = [g] * steps
        sizes[-1] = self.num_blocks - g * (steps - 1)  # the last batch: short, or holding the remainder
        batches = list(torch.split(order, sizes))
        if self.group_by_length:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator)]
        return batches


class PairBatches(BlockBatches):
    """The training batches of encoder-decoder models: shuffled, padded paired examples.

    ``BlockBatches`` over examples instead of blocks: ``epoch(e, start)`` yields ``(batch,
    global_targets, 1.0)`` (this process's share of the global batch, :func:`collate_pairs`; the number
    of target tokens in the whole global batch, by which the trainer weights each process's mean loss).
    Examples are independent: no state flows from one batch to the next.
    """

    def __init__(self, data: PairedExamples, pad_token_id: int, batch_size: int, num_processes: int = 1,
                 process_index: int = 0, seed: int = 0, group_by_length: bool = False,
                 pin_memory: bool = False) -> None:
        lengths = data.source_lengths + data.target_lengths
        self.sampler = PairBatchSampler(lengths, batch_size, num_processes, process_index, seed,
                                        group_by_length)
        self.data, self.pad_token_id, self.pin_memory = data, pad_token_id, pin_memory
        self.targets_per_block = data.target_lengths

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        return collate_pairs([self.data[i] for i in indices], self.pad_token_id)
