"""Stateful (truncated BPTT) batching for recurrent models: a split as B parallel columns.

A feed-forward n-gram model reads independent blocks (``hf_nlm.data.lm``). A recurrent model carries
its state from one chunk of text to the next, so the split's stream (a leading ``<eos>``, then every
line's tokens and ``<eos>``, as in ``hf_nlm.data.lm``) is cut into ``B`` contiguous columns read side
by side (Zaremba et al. 2014; Merity et al. 2018's ``batchify``), and each step feeds the next ``T``
positions of every column, the state left by the previous step flowing in.

Targets are aligned with inputs (``labels[b, t]`` is the word after ``input_ids[b, t]``), so a chunk's
last input predicts a target and the state after the chunk has read exactly the chunk's inputs:
nothing is read twice and every token of the stream is a target exactly once. The columns are padded
at the end (input ``<eos>``, label -100) rather than cut, so no token is dropped either.

Extra per-token fields of the stream (``hf_nlm.data.lm``) are cut the same way and aligned with the
targets, like ``labels``: ``field[b, t]`` is the value of the target ``labels[b, t]``, the padding at
the end holds the field's fill value.

Variable-length BPTT (Merity et al. 2018, sec. 4.1): each chunk's length is drawn as
``N(bptt, 5)`` with probability 0.95 and ``N(bptt / 2, 5)`` otherwise, at least 5, and the update's
learning rate is scaled by ``length / bptt`` so short and long chunks weigh the same per target.
The lengths come from a generator seeded with ``seed + epoch``: a resumed run rebuilds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from .lm import IGNORE_INDEX, as_stream, extra_fields, fill_rows

MIN_BPTT = 5  # shortest chunk of variable BPTT (Merity et al.'s `max(5, ...)`)


@dataclass
class StreamColumns:
    """A split's stream as ``(B, L)`` columns: ``input_ids``, the aligned next-token ``labels`` and the
    extra per-token fields of those targets."""

    input_ids: torch.LongTensor  # (B, L): the token before each target
    labels: torch.LongTensor  # (B, L): the target, -100 in the padding at the end
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # (B, L, ...): each target's values

    @property
    def num_columns(self) -> int:
        return self.input_ids.shape[0]

    @property
    def length(self) -> int:
        return self.input_ids.shape[1]

    def chunk(self, start: int, length: int, columns: slice | None = None) -> dict[str, torch.LongTensor]:
        """Positions ``[start, start + length)`` of the (selected) columns, as model inputs:
        ``{"input_ids", "shift_labels", **extra fields}``."""
        columns = columns if columns is not None else slice(None)
        chunk = {"input_ids": self.input_ids, "shift_labels": self.labels, **self.extras}
        return {k: v[columns, start : start + length] for k, v in chunk.items()}


def stream_columns(
    ids,
    num_columns: int,
    bos_token_id: int,
    pad_token_id: int | None = None,
    fill: Mapping[str, float | int] | None = None,
) -> StreamColumns:
    """Cut the targets ``ids`` (a split's token stream) into ``num_columns`` columns of equal length.

    Column ``b`` holds the targets ``ids[b*L : (b+1)*L]`` (``L = ceil(len(ids) / num_columns)``) and as
    inputs the tokens just before them, ``bos_token_id`` before the very first. ``ids`` may be a token
    stream dict; its extra fields are cut like the targets, padded with ``fill[field]`` (default 0).
    """
    stream = as_stream(ids)
    ids = stream["input_ids"]
    n = ids.numel()
    if n == 0:
        raise ValueError("cannot cut an empty token stream into columns")
    if num_columns < 1:
        raise ValueError(f"num_columns must be >= 1, got {num_columns}")
    length = -(-n // num_columns)
    tail = length * num_columns - n
    pad = bos_token_id if pad_token_id is None else pad_token_id
    inputs = torch.cat([ids.new_full((1,), bos_token_id), ids[:-1], ids.new_full((tail,), pad)])
    labels = torch.cat([ids, ids.new_full((tail,), IGNORE_INDEX)])
    extras = {
        name: torch.cat([values, fill_rows(values, tail, fill, name)]).view(num_columns, length,
                                                                            *values.shape[1:])
        for name, values in extra_fields(stream).items()
    }
    return StreamColumns(inputs.view(num_columns, length), labels.view(num_columns, length), extras)


def bptt_chunks(total_length: int, bptt: int, variable: bool = False, seed: int = 0) -> list[tuple[int, int]]:
    """``(start, length)`` of every chunk of one pass over columns of ``total_length`` positions.

    Fixed: chunks of ``bptt`` (the last one shorter). Variable: Merity et al.'s lengths, drawn from a
    generator seeded with ``seed``; the last chunk is cut at the end of the columns.
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    if not variable:
        return [(s, min(bptt, total_length - s)) for s in range(0, total_length, bptt)]
    generator = torch.Generator().manual_seed(seed)
    chunks, start = [], 0
    while start < total_length:
        mean = bptt if torch.rand((), generator=generator).item() < 0.95 else bptt / 2
        length = max(MIN_BPTT, int(torch.normal(float(mean), 5.0, (), generator=generator).item()))
        length = min(length, total_length - start)
        chunks.append((start, length))
        start += length
    return chunks
