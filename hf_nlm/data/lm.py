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

Extra per-token fields. A *token stream* is a dict of aligned tensors whose first dimension is the
position in the stream: ``"input_ids"`` (N,) and any extra fields (``"numeral_value"`` (N,),
``"digit_ids"`` (N, k), ...), computed from the original text of each token by a
:class:`TokenFeatures` (:func:`tokenize_stream`). Every step below (blocks, the block dataset and its
collate, the training sampler, stream columns and their chunks) carries the extra fields beside
``input_ids`` with the same indexing, so they stay aligned without special cases. Where the stream has
no token text (each ``<eos>``, the leading boundary token, padding) a field holds its ``fill`` value
(``TokenFeatures.fill``; 0 for a field without one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset as TorchDataset

from ..tokenization.features import TokenFeatures

IGNORE_INDEX = -100

#: Keys of a batch that are not per-token fields of the stream.
RESERVED_KEYS = ("input_ids", "labels", "shift_labels")


def resolve_features(tokenizer, features: TokenFeatures | None = None) -> TokenFeatures | None:
    """``features`` if given, else the tokenizer's own ``token_features`` (None: no extra fields)."""
    return features if features is not None else getattr(tokenizer, "token_features", None)


def as_stream(ids) -> dict[str, torch.Tensor]:
    """A token stream as a dict (``{"input_ids": ids}`` for a bare tensor of ids), ids as a flat long tensor."""
    stream = dict(ids) if isinstance(ids, Mapping) else {"input_ids": ids}
    stream["input_ids"] = torch.as_tensor(stream["input_ids"], dtype=torch.long).flatten()
    return stream


def extra_fields(stream: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The per-token fields of a stream or batch other than ids and labels."""
    return {k: v for k, v in stream.items() if k not in RESERVED_KEYS}


def fill_rows(values: torch.Tensor, count: int, fill: Mapping[str, float | int] | None, name: str) -> torch.Tensor:
    """``count`` rows shaped like those of ``values`` holding the field's fill value (0 by default)."""
    value = (fill or {}).get(name, 0)
    return values.new_full((count, *values.shape[1:]), value)


def tokenize_corpus(texts: Sequence[str], tokenizer, add_eos: bool = True) -> tuple[torch.LongTensor, int]:
    """Encode ``texts`` (one sentence or line each) into one stream of ids, ``<eos>`` after each line.

    Returns ``(ids, num_words)`` where ``num_words`` counts whitespace-separated words plus one per
    ``<eos>``: the denominator of per-word perplexity, independent of the tokenization.
    """
    texts = _check_texts(texts, tokenizer, add_eos)
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return _concatenate_lines(encoded, tokenizer.eos_token_id if add_eos else None), count_words(texts, add_eos)


def tokenize_stream(
    texts: Sequence[str], tokenizer, features: TokenFeatures | None = None, add_eos: bool = True
) -> tuple[dict[str, torch.Tensor], int]:
    """:func:`tokenize_corpus` as a token stream: ``{"input_ids": (N,), **extra fields}`` and ``num_words``.

    ``features`` (default: the tokenizer's ``token_features``, if it has one) computes the extra
    fields from each line's text and token offsets; each ``<eos>`` gets the field's fill value.
    Without features the stream is ``{"input_ids": ids}``, the ids of :func:`tokenize_corpus`.
    """
    features = resolve_features(tokenizer, features)
    if features is None:
        ids, num_words = tokenize_corpus(texts, tokenizer, add_eos)
        return {"input_ids": ids}, num_words
    texts = _check_texts(texts, tokenizer, add_eos)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("token features need the character offsets of every token: use a fast tokenizer")
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    eos = tokenizer.eos_token_id if add_eos else None
    stream = {"input_ids": _concatenate_lines(encoded["input_ids"], eos)}
    stream.update(_feature_stream(texts, encoded["offset_mapping"], features, add_eos))
    return stream, count_words(texts, add_eos)


def _check_texts(texts: Sequence[str], tokenizer, add_eos: bool) -> list[str]:
    texts = list(texts)
    if not texts:
        raise ValueError("cannot build a token stream from an empty list of texts")
    if add_eos and tokenizer.eos_token_id is None:
        raise ValueError("tokenizer has no eos_token_id; set tokenizer.eos_token or pass add_eos=False")
    return texts


def _concatenate_lines(encoded: list[list[int]], eos: int | None) -> torch.LongTensor:
    """The lines' ids one after the other, ``eos`` after each line (none if ``eos`` is None)."""
    if eos is not None:
        encoded = [[*ids, eos] for ids in encoded]
    lengths = np.fromiter((len(ids) for ids in encoded), dtype=np.int64, count=len(encoded))
    stream = np.fromiter((t for ids in encoded for t in ids), dtype=np.int64, count=int(lengths.sum()))
    return torch.from_numpy(stream)


def count_words(texts: Sequence[str], add_eos: bool = True) -> int:
    """Whitespace-separated words plus one per ``<eos>``: the denominator of per-word perplexity."""
    return sum(len(t.split()) for t in texts) + (len(texts) if add_eos else 0)


def _feature_stream(
    texts: Sequence[str], offsets: list[list[tuple[int, int]]], features: TokenFeatures, add_eos: bool
) -> dict[str, torch.Tensor]:
    """Each extra field over the whole stream: every line's rows, then one fill row for its ``<eos>``."""
    names = list(features.fill)
    clash = [name for name in names if name in RESERVED_KEYS]
    if clash:
        raise ValueError(f"token feature names {clash} are reserved for ids and labels")
    lines = [_line_features(features, names, text, spans) for text, spans in zip(texts, offsets, strict=True)]
    stream = {}
    for name in names:
        like = next((line[name] for line in lines if line), torch.zeros(1))  # a row's shape and dtype
        eos_row = fill_rows(like, 1, features.fill, name)
        pieces = []
        for line in lines:
            pieces += ([line[name]] if line else []) + ([eos_row] if add_eos else [])
        stream[name] = torch.cat(pieces) if pieces else like[:0]
    return stream


def _line_features(features: TokenFeatures, names: list[str], text: str, spans) -> dict[str, torch.Tensor] | None:
    """One line's fields, one row per token, checked against ``names`` (None for a line without tokens)."""
    if not spans:
        return None
    values = features(text, [tuple(span) for span in spans])
    if set(values) != set(names):
        raise ValueError(f"token features returned fields {sorted(values)}, expected {sorted(names)} (fill's keys)")
    line = {name: torch.as_tensor(np.asarray(values[name])) for name in names}
    for name, rows in line.items():
        if rows.ndim == 0 or len(rows) != len(spans):
            raise ValueError(f"token feature {name!r} has {tuple(rows.shape)} values for {len(spans)} tokens")
    return line


def group_into_blocks(
    ids,
    block_size: int,
    context_size: int,
    bos_token_id: int,
    pad_token_id: int | None = None,
    fill: Mapping[str, float | int] | None = None,
) -> dict[str, torch.Tensor]:
    """Cut a token stream into blocks of ``context_size + block_size`` tokens.

    ``ids`` is the stream's ids (N,) or a token stream ``{"input_ids": (N,), **extra fields}``.
    Returns ``{"input_ids": (num_blocks, context_size + block_size), "labels": same shape, **extra}``.
    The first ``context_size`` labels of each block are -100 (context only); the last block is padded
    on the right with ``pad_token_id`` (default ``bos_token_id``) and label -100, which a causal model
    never reads for earlier positions.

    Extra fields are position-aligned like ``labels``: ``field[b, j]`` belongs to the token
    ``input_ids[b, j]`` (context positions included), so ``field[:, 1:]`` belongs to the targets
    ``labels[:, 1:]``; the leading boundary tokens and the padding hold ``fill[field]`` (default 0).
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if context_size < 1:
        raise ValueError(f"context_size must be >= 1 (the token each first target is predicted from), got {context_size}")
    stream = as_stream(ids)
    ids = stream["input_ids"]
    n = ids.numel()
    if n == 0:
        raise ValueError("cannot cut an empty token stream into blocks")
    pad = bos_token_id if pad_token_id is None else pad_token_id
    num_blocks = -(-n // block_size)
    tail = num_blocks * block_size - n
    width = context_size + block_size
    # The stream with `context_size` sentence-boundary tokens in front and padding at the end.
    tokens = torch.cat([ids.new_full((context_size,), bos_token_id), ids, ids.new_full((tail,), pad)])
    labels = torch.cat([ids.new_full((context_size,), IGNORE_INDEX), ids, ids.new_full((tail,), IGNORE_INDEX)])
    blocks = {"input_ids": tokens.unfold(0, width, block_size).contiguous()}
    blocks["labels"] = labels.unfold(0, width, block_size).clone()
    blocks["labels"][:, :context_size] = IGNORE_INDEX
    for name, values in extra_fields(stream).items():
        padded = torch.cat([fill_rows(values, context_size, fill, name), values, fill_rows(values, tail, fill, name)])
        # unfold puts the window last: move it back next to the block dimension, before a field's own dims.
        blocks[name] = padded.unfold(0, width, block_size).movedim(-1, 1).contiguous()
    return blocks


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
    texts: Sequence[str], tokenizer, block_size: int, context_size: int, features: TokenFeatures | None = None
) -> tuple[LMBlockDataset, dict[str, int]]:
    """Tokenize a split (with ``features``, see :func:`tokenize_stream`) and cut it into blocks.
    Returns the dataset and its counts (``num_tokens`` targets, ``num_words`` words incl. sentence
    ends, ``num_unk`` targets that are ``<unk>``)."""
    stream, num_words = tokenize_stream(texts, tokenizer, features)
    fill = getattr(resolve_features(tokenizer, features), "fill", None)
    blocks = group_into_blocks(stream, block_size, context_size, bos_token_id(tokenizer), fill=fill)
    return LMBlockDataset(blocks), stream_stats(stream["input_ids"], num_words, tokenizer)


def bos_token_id(tokenizer) -> int:
    """The token a stream starts with: ``bos``, else ``eos`` (our tokenizers use ``<eos>`` for both)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def unknown_token_ids(tokenizer) -> list[int]:
    """The ids that stand for out-of-vocabulary text: ``<unk>``, and a numeracy tokenizer's ``<unk_num>``."""
    ids = [tokenizer.unk_token_id, getattr(tokenizer, "unk_num_token_id", None)]
    return [i for i in ids if i is not None]


def stream_stats(ids: torch.LongTensor, num_words: int, tokenizer) -> dict[str, int]:
    """The counts every evaluation reports: ``num_tokens`` targets, ``num_words`` words incl. sentence
    ends, ``num_unk`` targets that are unknown (``<unk>``; ``<unk_word>`` or ``<unk_num>``)."""
    return {
        "num_tokens": int(ids.numel()),
        "num_words": num_words,
        "num_unk": int(torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer), dtype=ids.dtype)).sum()),
    }
