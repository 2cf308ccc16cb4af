"""A recurrent-state ``Cache`` for ``generate()`` and beam search.

A transformer's cache grows with every token (keys and values of the whole prefix); a recurrent
network's "cache" is just its state after the prefix: for an LSTM, the pair (h_t, c_t) of every
layer (Hochreiter & Schmidhuber 1997). Feeding only the new tokens from that state gives exactly
the outputs of re-reading the whole prefix, at a cost per step that does not grow with the prefix.

:class:`RecurrentCache` holds that state as lists of (B, H_l) tensors, batch on dim 0, so that
``generate()`` can reorder it between beam-search steps (``reorder_cache``) and expand or select
batch rows (``batch_repeat_interleave`` / ``batch_select_indices``). It also counts the tokens
consumed so far (``get_seq_length``), which ``prepare_inputs_for_generation`` uses to feed only the
tokens not yet read. A recurrent state cannot be cut back to an earlier length: ``crop`` refuses and
``is_croppable`` is False, and a model using this cache sets ``is_stateful = True`` so that its
``generate()`` refuses assisted decoding and contrastive search, which need cropping.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache


def unread_tokens(input_ids: torch.LongTensor,
                  cache: RecurrentCache | None) -> tuple[torch.LongTensor, RecurrentCache | None]:
    """What ``prepare_inputs_for_generation`` feeds a recurrent model: with a state, only the tokens it has
    not read yet, and the state; without one (the first step, or ``use_cache=False``), the whole prefix and
    no state, so the model reads it from the start as ``forward()`` reads every new sequence."""
    if cache is not None and cache.get_seq_length() > 0:
        return input_ids[:, cache.get_seq_length() :], cache
    return input_ids, None


class RecurrentCache(Cache):
    """Per-layer LSTM states (h, c), each a (batch, hidden) tensor, plus the number of tokens read.

    Args:
        hidden: h_t of each layer, a list of (B, H_l) tensors (``None``: empty cache).
        cell: c_t of each layer, a list of (B, H_l) tensors, same shapes as ``hidden``.
        seq_length: the number of positions (padding included) already consumed.
    """

    def __init__(
        self,
        hidden: list[torch.Tensor] | None = None,
        cell: list[torch.Tensor] | None = None,
        seq_length: int = 0,
    ) -> None:
        # Cache.__init__ wants attention layers; a recurrent state has none, so give it an empty list.
        super().__init__(layers=[])
        hidden = list(hidden) if hidden is not None else []
        cell = list(cell) if cell is not None else []
        if len(hidden) != len(cell):
            raise ValueError(f"RecurrentCache: {len(hidden)} hidden states but {len(cell)} cell states")
        for layer, (h, c) in enumerate(zip(hidden, cell, strict=True)):
            if h.ndim != 2 or h.shape != c.shape:
                raise ValueError(
                    f"RecurrentCache: layer {layer} needs h and c of the same shape (batch, hidden); "
                    f"got {tuple(h.shape)} and {tuple(c.shape)}"
                )
        self.hidden = hidden
        self.cell = cell
        self.seq_length = seq_length

    def __repr__(self) -> str:
        shapes = [tuple(h.shape) for h in self.hidden]
        return f"{type(self).__name__}(seq_length={self.seq_length}, layers={shapes})"

    def __len__(self) -> int:
        return len(self.hidden)

    # --- what the model calls -------------------------------------------------------------------

    def update_state(self, layer_idx: int, h: torch.Tensor, c: torch.Tensor) -> None:
        """Store layer ``layer_idx``'s new state (layers are filled in order 0, 1, ...)."""
        if layer_idx < len(self.hidden):
            self.hidden[layer_idx], self.cell[layer_idx] = h, c
        elif layer_idx == len(self.hidden):
            self.hidden.append(h)
            self.cell.append(c)
        else:
            raise IndexError(f"RecurrentCache: layer {layer_idx} set before layer {len(self.hidden)}")

    def get_state(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(h, c) of layer ``layer_idx``, or ``None`` if the cache holds no state for it yet."""
        if layer_idx >= len(self.hidden):
            return None
        return self.hidden[layer_idx], self.cell[layer_idx]

    # --- what generate() calls ------------------------------------------------------------------

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The number of positions already consumed (the same for every layer and batch row)."""
        return self.seq_length

    def get_max_length(self, layer_idx: int | None = None) -> int:
        return -1  # no limit: the state has a fixed size whatever the length

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        return len(self.hidden) > 0

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search: row i of the new state is row ``beam_idx[i]`` of the old one (in place)."""
        for layer in range(len(self.hidden)):
            idx = beam_idx.to(self.hidden[layer].device)
            self.hidden[layer] = self.hidden[layer].index_select(0, idx)
            self.cell[layer] = self.cell[layer].index_select(0, idx)

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every batch row ``repeats`` times in a row (as ``generate`` expands inputs)."""
        self.hidden = [h.repeat_interleave(repeats, dim=0) for h in self.hidden]
        self.cell = [c.repeat_interleave(repeats, dim=0) for c in self.cell]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows ``indices``."""
        self.hidden = [h[indices] for h in self.hidden]
        self.cell = [c[indices] for c in self.cell]

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions (negative: drop that many), as ``DynamicCache.crop``.

        Only the trivial cases are possible for a recurrent state: keeping everything (no-op) or
        nothing (back to the empty state).
        """
        keep = self.seq_length + max_length if max_length < 0 else max_length
        if keep >= self.seq_length:
            return
        if keep <= 0:
            self.reset()
            return
        raise ValueError(
            "RecurrentCache cannot be cropped: an LSTM state summarises the whole prefix and cannot be "
            "rolled back to an earlier length (assisted generation is not supported for recurrent models)"
        )

    def reset(self) -> None:
        self.hidden, self.cell, self.seq_length = [], [], 0

    def detach(self) -> RecurrentCache:
        """A copy whose tensors are cut from the autograd graph (truncated BPTT across batches)."""
        return RecurrentCache(
            [h.detach() for h in self.hidden], [c.detach() for c in self.cell], self.seq_length
        )

    # --- what a training checkpoint calls -------------------------------------------------------

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The state as named tensors, batch on dim 0 (``hidden.<layer>``, ``cell.<layer>``): what a
        checkpoint saves in the middle of an epoch so that truncated BPTT resumes exactly."""
        tensors = {}
        for layer, (h, c) in enumerate(zip(self.hidden, self.cell, strict=True)):
            tensors[f"hidden.{layer}"], tensors[f"cell.{layer}"] = h, c
        return tensors

    @classmethod
    def from_state_tensors(
        cls, tensors: dict[str, torch.Tensor], rows: slice | torch.Tensor | None = None, device=None
    ) -> RecurrentCache | None:
        """The cache saved by :meth:`state_tensors` (only batch ``rows``, on ``device``); None if
        ``tensors`` hold no state."""
        layers = sorted(int(k.rsplit(".", 1)[1]) for k in tensors if k.startswith("hidden."))
        if not layers:
            return None
        rows = rows if rows is not None else slice(None)
        return cls(
            [tensors[f"hidden.{i}"][rows].to(device) for i in layers],
            [tensors[f"cell.{i}"][rows].to(device) for i in layers],
        )

    @property
    def batch_size(self) -> int:
        return self.hidden[0].shape[0] if self.hidden else 0

    @property
    def max_batch_size(self) -> int:
        return self.batch_size

    @property
    def is_compileable(self) -> bool:
        # No fixed-shape key/value buffers: generate() must not build 4D attention masks for it.
        return False

    @property
    def is_initialized(self) -> bool:
        return len(self.hidden) > 0

    @property
    def is_croppable(self) -> bool:
        return False

    @property
    def is_sliding(self) -> list[bool]:
        return [False] * len(self.hidden)


class Seq2SeqRecurrentCache(RecurrentCache):
    """An attention decoder's state for ``generate()``: each decoder layer's (h, c), as in
    :class:`RecurrentCache`, plus ``input_feed``, the last attentional vector h~_{t-1} (B, H) that input
    feeding (Luong et al. 2015, sec. 3.3) concatenates to the next input (``None`` before the first step, or
    when the model does not feed it).

    The encoder's outputs are not held here: ``generate()`` keeps them in its ``encoder_outputs`` (computed
    once, expanded per beam) and hands them to every decoder step; beams of one source share them, so
    reordering the beams reorders only this state.
    """

    def __init__(
        self,
        hidden: list[torch.Tensor] | None = None,
        cell: list[torch.Tensor] | None = None,
        seq_length: int = 0,
        input_feed: torch.Tensor | None = None,
    ) -> None:
        super().__init__(hidden, cell, seq_length)
        self.input_feed = input_feed

    def __repr__(self) -> str:
        feed = None if self.input_feed is None else tuple(self.input_feed.shape)
        return f"{super().__repr__()[:-1]}, input_feed={feed})"

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        if self.input_feed is not None:
            self.input_feed = self.input_feed.index_select(0, beam_idx.to(self.input_feed.device))

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        if self.input_feed is not None:
            self.input_feed = self.input_feed.repeat_interleave(repeats, dim=0)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        if self.input_feed is not None:
            self.input_feed = self.input_feed[indices]

    def reset(self) -> None:
        super().reset()
        self.input_feed = None

    def detach(self) -> Seq2SeqRecurrentCache:
        feed = None if self.input_feed is None else self.input_feed.detach()
        return Seq2SeqRecurrentCache(
            [h.detach() for h in self.hidden], [c.detach() for c in self.cell], self.seq_length, feed
        )


__all__ = ["RecurrentCache", "Seq2SeqRecurrentCache"]
