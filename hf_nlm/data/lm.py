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
    """A token stream as a dict (``{"input_ids": ids}`` for a bare tensor of ids), ids as a flat long
    tensor."""
    stream = dict(ids) if isinstance(ids, Mapping) else {"input_ids": ids}
    stream["input_ids"] = torch.as_tensor(stream["input_ids"], dtype=torch.long).flatten()
    return stream


def extra_fields(stream: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The per-token fields of a stream or batch other than ids and labels."""
    return {k: v for k, v in stream.items() if k not in RESERVED_KEYS}


def fill_rows(values: torch.Tensor, count: int, fill: Mapping[str, float | int] | None,
              name: str) -> torch.Tensor:
    """``count`` rows shaped like those of ``values`` holding the field's fill value (0 by default)."""
    value = (fill or {}).get(name, 0)
    return values.new_full((count, *values.shape[1:]), value)


#: Lines encoded at a time. The fast tokenizer returns Python lists (ids, offsets) and the token features
#: one small array per line: built for a whole split at once they take several times the memory of the
#: stream's final tensors, so a split is encoded this many lines at a time and only the compact tensors
#: of each slice are kept. The stream does not depend on it.
ENCODE_SLICE_LINES = 4096


def tokenize_corpus(
    texts: Sequence[str], tokenizer, add_eos: bool = True, slice_lines: int = ENCODE_SLICE_LINES
) -> tuple[torch.LongTensor, int]:
    """Encode ``texts`` (one sentence or line each) into one stream of ids, ``<eos>`` after each line.

    Returns ``(ids, num_words)`` where ``num_words`` counts whitespace-separated words plus one per
    ``<eos>``: the denominator of per-word perplexity, independent of the tokenization. The lines are
    encoded ``slice_lines`` at a time (:data:`ENCODE_SLICE_LINES`).
    """
    texts = _check_texts(texts, tokenizer, add_eos)
    eos = tokenizer.eos_token_id if add_eos else None
    pieces = [
        _concatenate_lines(tokenizer(part, add_special_tokens=False)["input_ids"], eos)
        for part in line_slices(texts, slice_lines)
    ]
    return torch.cat(pieces), count_words(texts, add_eos)


def tokenize_stream(
    texts: Sequence[str],
    tokenizer,
    features: TokenFeatures | None = None,
    add_eos: bool = True,
    slice_lines: int = ENCODE_SLICE_LINES,
) -> tuple[dict[str, torch.Tensor], int]:
    """:func:`tokenize_corpus` as a token stream: ``{"input_ids": (N,), **extra fields}`` and ``num_words``.

    ``features`` (default: the tokenizer's ``token_features``, if it has one) computes the extra
    fields from each line's text and token offsets; each ``<eos>`` gets the field's fill value.
    Without features the stream is ``{"input_ids": ids}``, the ids of :func:`tokenize_corpus`.
    The lines are encoded ``slice_lines`` at a time (:data:`ENCODE_SLICE_LINES`), so the memory of
    encoding follows the stream's tensors, not the tokenizer's lists for the whole split.
    """
    features = resolve_features(tokenizer, features)
    if features is None:
        ids, num_words = tokenize_corpus(texts, tokenizer, add_eos, slice_lines)
        return {"input_ids": ids}, num_words
    texts = _check_texts(texts, tokenizer, add_eos)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("token features need the character offsets of every token: use a fast tokenizer")
    names = _feature_names(features)
    eos = tokenizer.eos_token_id if add_eos else None
    ids, lengths, rows = [], [], {name: [] for name in names}
    for part in line_slices(texts, slice_lines):
        encoded = tokenizer(part, add_special_tokens=False, return_offsets_mapping=True)
        ids.append(_concatenate_lines(encoded["input_ids"], eos))
        lengths.append(torch.tensor([len(line) for line in encoded["input_ids"]], dtype=torch.long))
        for name, values in _token_rows(part, encoded["offset_mapping"], features, names).items():
            rows[name].append(values)
        del encoded  # the slice's lists go before the next slice's come
    stream = {"input_ids": torch.cat(ids)}
    stream.update(_feature_stream(rows, torch.cat(lengths), features.fill, add_eos))
    return stream, count_words(texts, add_eos)


def line_slices(texts: Sequence[str], slice_lines: int = ENCODE_SLICE_LINES):
    """``texts`` in consecutive slices of ``slice_lines`` lines (the last one shorter): how a split is
    given to the tokenizer, so that its per-line lists exist for one slice at a time."""
    if slice_lines < 1:
        raise ValueError(f"slice_lines must be >= 1, got {slice_lines}")
    for start in range(0, len(texts), slice_lines):
        yield texts[start:start + slice_lines]


def check_split_has_text(texts: Sequence[str], where: str = "the split") -> None:
    """Raise ``ValueError`` if ``texts`` (one split) holds no word, only empty or blank lines: such a split
    would be scored as ``<eos>`` tokens alone (a perplexity over sentence ends that are not there), and a
    model cannot train on it. ``where`` names the split (its files) in the message."""
    if not any(text.strip() for text in texts):
        what = f"only {len(texts):,} blank line(s)" if len(texts) else "no line"
        raise ValueError(f"{where} holds {what}: there is no text to train on or to score")


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


def _feature_names(features: TokenFeatures) -> list[str]:
    """The names of the extra fields (``features.fill``'s keys), none of them a reserved key."""
    names = list(features.fill)
    clash = [name for name in names if name in RESERVED_KEYS]
    if clash:
        raise ValueError(f"token feature names {clash} are reserved for ids and labels")
    return names


def _token_rows(
    texts: Sequence[str], offsets: list[list[tuple[int, int]]], features: TokenFeatures, names: list[str]
) -> dict[str, torch.Tensor]:
    """Each field's rows for the tokens of ``texts``, line after line, no ``<eos>`` rows; a field is
    missing when no line has a token."""
    lines = [_line_features(features, names, text, spans) for text, spans in zip(texts, offsets, strict=True)]
    lines = [line for line in lines if line is not None]
    return {name: torch.cat([line[name] for line in lines]) for name in names} if lines else {}


def _feature_stream(
    rows: Mapping[str, list[torch.Tensor]], lengths: torch.Tensor, fill: Mapping[str, float | int],
    add_eos: bool
) -> dict[str, torch.Tensor]:
    """Each extra field over the whole stream: every line's rows (``rows[name]``, the slices' token rows
    in order; ``lengths`` tokens per line), then one fill row for its ``<eos>``."""
    if add_eos:
        # Where each line's <eos> sits in the stream: after the line's tokens and every earlier line's.
        ends = torch.cumsum(lengths + 1, 0) - 1
        is_token = torch.ones(int(lengths.sum()) + len(lengths), dtype=torch.bool)
        is_token[ends] = False
    stream = {}
    for name, pieces in rows.items():
        if not pieces:  # no line has a token: the rows' shape and dtype are unknown, so (1,) float32
            stream[name] = fill_rows(torch.zeros(1), len(lengths) if add_eos else 0, fill, name)
            continue
        tokens = torch.cat(pieces)
        pieces.clear()  # the slices' copies go as soon as they are joined
        if not add_eos:
            stream[name] = tokens
            continue
        stream[name] = fill_rows(tokens, len(is_token), fill, name)
        stream[name][is_token] = tokens
    return stream


def _line_features(features: TokenFeatures, names: list[str], text: str,
                   spans) -> dict[str, torch.Tensor] | None:
    """One line's fields, one row per token, checked against ``names`` (None for a line without tokens)."""
    if not spans:
        return None
    values = features(text, [tuple(span) for span in spans])
    if set(values) != set(names):
        raise ValueError(f"token features returned fields {sorted(values)}, "
                         f"expected {sorted(names)} (fill's keys)")
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
        raise ValueError("context_size must be >= 1 (the token each first target is predicted from), "
                         f"got {context_size}")
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
    labels = torch.cat([ids.new_full((context_size,), IGNORE_INDEX), ids,
                        ids.new_full((tail,), IGNORE_INDEX)])
    blocks = {"input_ids": tokens.unfold(0, width, block_size).contiguous()}
    blocks["labels"] = labels.unfold(0, width, block_size).clone()
    blocks["labels"][:, :context_size] = IGNORE_INDEX
    for name, values in extra_fields(stream).items():
        padded = torch.cat([fill_rows(values, context_size, fill, name), values,
                            fill_rows(values, tail, fill, name)])
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
