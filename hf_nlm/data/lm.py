"""Language-model batching: one token stream per split, cut into fixed-size blocks.

Every split is read as one stream: each line's tokens followed by ``<eos>``, all lines in order,
preceded by one ``<eos>`` that stands for "a sentence starts here" (so the first word is predicted
too, from a context of sentence boundaries, as an n-gram model pads with <s>). Every token of the
stream after that leading ``<eos>`` is a target exactly once, whatever the block size.

A block holds ``block_size`` targets plus the ``context_size`` tokens before them, which are input
only (label -100). With ``context_size = n - 1`` a feed-forward n-gram model (NPLM, LBL) sees the full
context of every target, so blocks give the same result as one n-gram window per token, only
faster; ``block_size=1`` *is* one window per token. Recurrent models use ``context_size=1``: the
block's first token is the previous block's last target, the usual BPTT layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset as TorchDataset

IGNORE_INDEX = -100


def tokenize_corpus(texts: Sequence[str], tokenizer, add_eos: bool = True) -> tuple[torch.LongTensor, int]:
    """Encode ``texts`` (one sentence or line each) into one stream of ids, ``<eos>`` after each line.

    Returns ``(ids, num_words)`` where ``num_words`` counts whitespace-separated words plus one per
    ``<eos>``: the denominator of per-word perplexity, independent of the tokenization.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("cannot build a token stream from an empty list of texts")
    eos = tokenizer.eos_token_id
    if add_eos and eos is None:
        raise ValueError("tokenizer has no eos_token_id; set tokenizer.eos_token or pass add_eos=False")
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    if add_eos:
        encoded = [[*ids, eos] for ids in encoded]
    lengths = np.fromiter((len(ids) for ids in encoded), dtype=np.int64, count=len(encoded))
    stream = np.fromiter((t for ids in encoded for t in ids), dtype=np.int64, count=int(lengths.sum()))
    num_words = sum(len(t.split()) for t in texts) + (len(texts) if add_eos else 0)
    return torch.from_numpy(stream), num_words


def group_into_blocks(
    ids: torch.LongTensor, block_size: int, context_size: int, bos_token_id: int, pad_token_id: int | None = None
) -> dict[str, torch.LongTensor]:
    """Cut a token stream into blocks of ``context_size + block_size`` tokens.

    Returns ``{"input_ids": (num_blocks, context_size + block_size), "labels": same shape}``. The first
    ``context_size`` labels of each block are -100 (context only); the last block is padded on the
    right with ``pad_token_id`` (default ``bos_token_id``) and label -100, which a causal model never
    reads for earlier positions.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if context_size < 1:
        raise ValueError(f"context_size must be >= 1 (the token each first target is predicted from), got {context_size}")
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    n = ids.numel()
    if n == 0:
        raise ValueError("cannot cut an empty token stream into blocks")
    pad = bos_token_id if pad_token_id is None else pad_token_id
    num_blocks = -(-n // block_size)
    tail = num_blocks * block_size - n
    # The stream with `context_size` sentence-boundary tokens in front and padding at the end.
    tokens = torch.cat([ids.new_full((context_size,), bos_token_id), ids, ids.new_full((tail,), pad)])
    labels = torch.cat([ids.new_full((context_size,), IGNORE_INDEX), ids, ids.new_full((tail,), IGNORE_INDEX)])
    width = context_size + block_size
    input_ids = tokens.unfold(0, width, block_size).contiguous()
    block_labels = labels.unfold(0, width, block_size).clone()
    block_labels[:, :context_size] = IGNORE_INDEX
    return {"input_ids": input_ids, "labels": block_labels}


class LMBlockDataset(TorchDataset):
    """A map-style dataset over pre-built blocks that serves whole batches by fancy indexing.

    ``DataLoader`` calls ``__getitems__`` with the batch's indices, so a batch is one tensor gather
    instead of ``batch_size`` small tensors stacked by the collate function.
    """

    def __init__(self, blocks: dict[str, torch.Tensor]) -> None:
        lengths = {len(v) for v in blocks.values()}
        if len(lengths) != 1:
            raise ValueError(f"all block tensors need the same first dimension, got {sorted(lengths)}")
        self.blocks = blocks

    def __len__(self) -> int:
        return len(next(iter(self.blocks.values())))

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {k: v[index] for k, v in self.blocks.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return {k: v[index] for k, v in self.blocks.items()}


def collate_blocks(batch):
    """Collate for :class:`LMBlockDataset`: batches arrive already stacked from ``__getitems__``."""
    if isinstance(batch, dict):
        return batch
    return {k: torch.stack([b[k] for b in batch]) for k in batch[0]}


def build_lm_dataset(
    texts: Sequence[str], tokenizer, block_size: int, context_size: int
) -> tuple[LMBlockDataset, dict[str, int]]:
    """Tokenize a split and cut it into blocks. Returns the dataset and its counts
    (``num_tokens`` targets, ``num_words`` words incl. sentence ends, ``num_unk`` targets that are ``<unk>``)."""
    ids, num_words = tokenize_corpus(texts, tokenizer)
    blocks = group_into_blocks(ids, block_size, context_size, bos_token_id(tokenizer))
    return LMBlockDataset(blocks), stream_stats(ids, num_words, tokenizer)


def bos_token_id(tokenizer) -> int:
    """The token a stream starts with: ``bos``, else ``eos`` (our tokenizers use ``<eos>`` for both)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def stream_stats(ids: torch.LongTensor, num_words: int, tokenizer) -> dict[str, int]:
    """The counts every evaluation reports: ``num_tokens`` targets, ``num_words`` words incl. sentence
    ends, ``num_unk`` targets that are ``<unk>``."""
    unk = tokenizer.unk_token_id
    return {
        "num_tokens": int(ids.numel()),
        "num_words": num_words,
        "num_unk": int((ids == unk).sum()) if unk is not None else 0,
    }
