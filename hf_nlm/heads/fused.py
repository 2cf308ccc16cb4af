"""Fused training losses of the full and the split softmax: forward and backward written out by hand.

Full softmax (:func:`softmax_nll`). Left to autograd, ``cross_entropy(linear(h, W, b), t)`` allocates
the |V|-wide scores, then their log-softmax, then in the backward a zero-filled gradient of the
log-softmax and the gradient of the scores: four N x |V| buffers and as many passes over them, about
a quarter of a CPU training step of an NPLM at |V| = 16k. Here the scores are computed once into one
N x |V| buffer, turned in place into their log-softmax (the loss is read off it) and then into
softmax(y) - onehot(t) during the forward pass (the gradient of every row's NLL does not depend on
anything after the loss), and the backward only multiplies. The buffer is N x |V| (``h @ W^T``), so that
the softmax runs along contiguous rows, torch's fastest softmax kernel, and, on a CPU, it is kept for
the next step (:func:`_score_buffer`) rather than mapped and page-faulted anew each step (a 34 MB
buffer per step at |V| = 16k, N = 512). The upstream gradient g scales rows, so it is applied to the
N x D operands, never to the N x |V| buffer.

Split softmax (:func:`split_softmax_nll`).

The split softmax (Merity et al. 2018's SplitCrossEntropyLoss; :mod:`hf_nlm.heads.split`) reads disjoint row
blocks of one |V| x D output matrix W. Left to autograd, every block read (a slice or a ``split``) ends in a
backward that materialises a |V| x D gradient and copies the block into it. Here the backward allocates the
gradient of W once and writes each block's gradient straight into its rows
(``torch.mm(..., out=grad_W[lo:hi])``), so no |V| x D copy or zero-fill happens beyond that one allocation.
The arithmetic is the textbook cross-entropy gradient: for logits y and target k,
d(-log softmax(y)_k)/dy = softmax(y) - onehot(k).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .base import upcast

# Free N x |V| score buffers of the CPU training loss, one per (shape, dtype), taken by a forward pass
# and given back by its backward pass (see _score_buffer).
_free_buffers: dict[tuple, torch.Tensor] = {}
#: The largest score buffer kept between steps (an NPLM's at |V| = 16k, N = 512: 34 MB); larger ones are
#: allocated per step, so that a big buffer is not held beside evaluation and the rest of a run.
SCORE_BUFFER_MAX_BYTES = 64 << 20


def _score_buffer(shape: tuple[int, int], like: torch.Tensor) -> torch.Tensor:
    """An N x |V| buffer for the scores: the one a finished backward gave back, else a new one.

    A graph kept for a second backward (``retain_graph``) whose buffer was taken by a later forward pass
    meanwhile fails that backward with autograd's in-place modification error, never with wrong numbers.
    """
    key = (shape, like.dtype, like.device)
    buffer = _free_buffers.pop(key, None)
    return buffer if buffer is not None else like.new_empty(shape)


def _give_back(buffer: torch.Tensor) -> None:
    if buffer.device.type == "cpu" and buffer.numel() * buffer.element_size() <= SCORE_BUFFER_MAX_BYTES:
        _free_buffers[(tuple(buffer.shape), buffer.dtype, buffer.device)] = buffer


def _softmax_nll_scores(scores: torch.Tensor, target: torch.Tensor, gradient: bool) -> torch.Tensor:
    """-log softmax(scores[i])[target_i] for each row i of the N x |V| ``scores``, which are overwritten:
    by their log-softmax, and with ``gradient`` by softmax - onehot(target), the gradient of each row's
    NLL."""
    t = target[:, None]
    torch._log_softmax(scores, 1, False, out=scores)
    loss = -scores.gather(1, t).squeeze(1)
    if gradient:
        scores.exp_().scatter_add_(1, t, scores.new_full(t.shape, -1.0))
    return loss


def _scores(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """The scores b + h W^T as an N x |V| matrix, into ``out`` when given."""
    if out is None:
        return F.linear(hidden, weight, bias)
    if bias is None:
        return torch.mm(hidden, weight.t(), out=out)
    return torch.addmm(bias, hidden, weight.t(), out=out)


class SoftmaxNLL(torch.autograd.Function):
    """-log softmax(b + W h)[t] per row; see :func:`softmax_nll`."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, target):
        valid = target != -100
        buffer = _score_buffer((hidden.shape[0], weight.shape[0]), hidden)
        grad_scores = _scores(hidden, weight, bias, out=buffer)
        loss = _softmax_nll_scores(grad_scores, target.masked_fill(~valid, 0), gradient=True)
        ctx.has_bias = bias is not None
        ctx.save_for_backward(hidden, weight, grad_scores, valid)
        return loss.masked_fill(~valid, 0.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss):
        hidden, weight, grad_scores, valid = ctx.saved_tensors
        g = grad_loss * valid.to(grad_loss.dtype)  # ignored rows get no gradient
        need_h, need_w, need_b, _ = ctx.needs_input_grad
        grad_h = (grad_scores @ weight).mul_(g[:, None]) if need_h else None
        grad_w = grad_scores.t() @ (hidden * g[:, None]) if need_w else None
        grad_b = grad_scores.t() @ g if need_b and ctx.has_bias else None
        _give_back(grad_scores)
        return grad_h, grad_w, grad_b, None


def softmax_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                target: torch.Tensor) -> torch.Tensor:
    """Per-row -log softmax(b + W h)[target] of the full softmax, equal to
    ``F.cross_entropy(F.linear(hidden, weight, bias), target, reduction="none")`` up to rounding.

    ``hidden`` (N, D) and ``weight`` (|V|, D) in float32 or float64, ``target`` (N,) with -100 ignored
    (loss 0, no gradient). Gradients flow to hidden, weight and bias (first order only).
    """
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (hidden, weight, bias)):
        return SoftmaxNLL.apply(hidden, weight, bias, target)
    valid = target != -100
    loss = _softmax_nll_scores(_scores(hidden, weight, bias), target.masked_fill(~valid, 0), gradient=False)
    return loss.masked_fill(~valid, 0.0)


def linear_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               target: torch.Tensor) -> torch.Tensor:
    """Per-row -log softmax(b + W h)[target], ``hidden`` (N, D): :func:`softmax_nll` in float32 / float64,
    ``cross_entropy`` on the upcast scores under autocast or in half precision (where the fused kernel's
    in-place softmax would lose precision)."""
    # The meta device has no autocast (and torch refuses to be asked): a model built on it runs in its dtype.
    autocast = hidden.device.type != "meta" and torch.is_autocast_enabled(hidden.device.type)
    if hidden.dtype in (torch.float32, torch.float64) and not autocast:
        return softmax_nll(hidden, weight, bias, target)
    return F.cross_entropy(upcast(F.linear(hidden, weight, bias)), target, reduction="none")


class SplitSoftmaxNLL(torch.autograd.Function):
    """-log P(t | h) of the split softmax for N rows; see :func:`split_softmax_nll`."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, tomb_weight, tomb_bias, target, boundaries):
        s1 = boundaries[1]
        valid = target != -100
        t = target.masked_fill(~valid, 0)
        cluster = torch.bucketize(
            t, torch.tensor(boundaries[1:-1], dtype=t.dtype, device=t.device), right=True
        )
        # Head: the s_1 head words and the m-1 tombstones in one matmul (Y_head in :mod:`hf_nlm.heads.split`).
        head_w = torch.cat([weight[:s1], tomb_weight])
        head_b = None if bias is None else torch.cat([bias[:s1], tomb_bias])
        head_lp = torch.log_softmax(upcast(F.linear(hidden, head_w, head_b)), dim=-1)
        head_t = torch.where(cluster == 0, t, s1 + cluster - 1)
        loss = -head_lp.gather(1, head_t[:, None]).squeeze(1)
        tails = []
        for p in range(1, len(boundaries) - 1):
            rows = torch.nonzero((cluster == p) & valid).squeeze(1)
            if rows.numel() == 0:
                tails.append(None)
                continue
            lo, hi = boundaries[p], boundaries[p + 1]
            h_p = hidden.index_select(0, rows)
            lp = torch.log_softmax(
                upcast(F.linear(h_p, weight[lo:hi], None if bias is None else bias[lo:hi])), -1
            )
            t_p = t.index_select(0, rows) - lo
            loss.index_add_(0, rows, -lp.gather(1, t_p[:, None]).squeeze(1))
            tails.append((rows, t_p, lp))
        loss = loss.masked_fill(~valid, 0.0)
        ctx.boundaries = boundaries
        ctx.has_bias = bias is not None
        ctx.tails = tails
        ctx.save_for_backward(hidden, weight, head_w, head_lp, head_t, valid)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss):
        hidden, weight, head_w, head_lp, head_t, valid = ctx.saved_tensors
        boundaries, s1 = ctx.boundaries, ctx.boundaries[1]
        # Per-row upstream gradient; ignored rows get none. It scales rows, so it is applied to the
        # (N, D) operands rather than to the (N, |cluster|) softmax gradients (one pass fewer over those).
        g = (grad_loss * valid.to(grad_loss.dtype)).to(weight.dtype)
        g_h = hidden * g[:, None]
        # d loss_i / d Y_head[i] = g_i (softmax(Y_head[i]) - onehot(head_t[i])).
        d_head = head_lp.exp()
        d_head[torch.arange(d_head.shape[0], device=d_head.device), head_t] -= 1
        d_head = d_head.to(weight.dtype)
        grad_h = (d_head @ head_w) * g[:, None]
        grad_w = torch.empty_like(weight)  # every row block is written below, exactly once
        torch.mm(d_head[:, :s1].t(), g_h, out=grad_w[:s1])
        grad_tw = d_head[:, s1:].t() @ g_h
        grad_b = grad_tb = None
        if ctx.has_bias:
            grad_b = torch.empty(weight.shape[0], dtype=weight.dtype, device=weight.device)
            torch.mv(d_head[:, :s1].t(), g, out=grad_b[:s1])
            grad_tb = d_head[:, s1:].t() @ g
        for p, tail in enumerate(ctx.tails, start=1):
            lo, hi = boundaries[p], boundaries[p + 1]
            if tail is None:  # no target in this cluster: its rows of W get a zero gradient
                grad_w[lo:hi].zero_()
                if grad_b is not None:
                    grad_b[lo:hi].zero_()
                continue
            rows, t_p, lp = tail
            d = lp.exp()
            d[torch.arange(d.shape[0], device=d.device), t_p] -= 1
            d = d.to(weight.dtype)
            g_p = g.index_select(0, rows)
            grad_h.index_add_(0, rows, (d @ weight[lo:hi]) * g_p[:, None])
            torch.mm(d.t(), g_h.index_select(0, rows), out=grad_w[lo:hi])
            if grad_b is not None:
                torch.mv(d.t(), g_p, out=grad_b[lo:hi])
        return grad_h, grad_w, grad_b, grad_tw, grad_tb, None, None


def split_softmax_nll(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    tombstone_weight: torch.Tensor,
    tombstone_bias: torch.Tensor | None,
    target: torch.Tensor,
    boundaries: list[int],
) -> torch.Tensor:
    """Per-row -log P(target | hidden) of the split softmax with cluster bounds s_0 = 0 < ... < s_m = |V|.

    ``hidden`` (N, D), ``target`` (N,) with -100 ignored (loss 0, no gradient). Gradients flow to
    hidden, weight, bias and the tombstone parameters.
    """
    return SplitSoftmaxNLL.apply(
        hidden, weight, bias, tombstone_weight, tombstone_bias, target, list(boundaries)
    )
