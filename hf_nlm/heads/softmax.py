"""The full softmax output layer: p(w | h) = softmax(b + U h)_w.

Its training loss (:func:`softmax_nll`) is written out by hand. Left to autograd, ``cross_entropy(linear(h,
W, b), t)`` allocates the |V|-wide scores, then their log-softmax, then in the backward a zero-filled
gradient of the log-softmax and the gradient of the scores: four N x |V| buffers and as many passes over
them, about a quarter of a CPU training step of an NPLM at |V| = 16k. Here the scores are computed once into
one N x |V| buffer, turned in place into their log-softmax (the loss is read off it) and then into
softmax(y) - onehot(t) during the forward pass (the gradient of every row's NLL does not depend on anything
after the loss), and the backward only multiplies. The buffer is N x |V| (``h @ W^T``), so that the softmax
runs along contiguous rows, torch's fastest softmax kernel, and, on a CPU, it is kept for the next step
(:func:`_score_buffer`) rather than mapped and page-faulted anew each step (a 34 MB buffer per step at |V| =
16k, N = 512). The upstream gradient g scales rows, so it is applied to the N x D operands, never to the N x
|V| buffer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from .base import OutputHead, Targets, register_head, upcast

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


def resized_rows(tensor: torch.Tensor, num_rows: int, mean_init: bool = True) -> torch.Tensor:
    """``tensor`` (one row per word) cut or extended to ``num_rows``.

    Added rows are the mean of the old ones (J. Hewitt, "Initializing new word embeddings for pretrained
    language models", 2021: a new word then starts with an average score, so the other words'
    probabilities barely move), or zeros with ``mean_init=False``.
    """
    old = tensor.shape[0]
    if num_rows <= old:
        return tensor[:num_rows].detach().clone()
    fill = tensor.detach().mean(0, keepdim=True) if mean_init else tensor.new_zeros((1, *tensor.shape[1:]))
    return torch.cat([tensor.detach(), fill.expand(num_rows - old, *tensor.shape[1:])])


def init_output_weights(weights, biases, std: float | None = None) -> None:
    """Every head's initialisation: weights (rows x in_features) uniform(+-1/sqrt(in_features)) as
    nn.Linear does, or normal(0, std) when the model asks for it; biases zero."""
    for w in weights:
        if std is None:
            bound = 1.0 / math.sqrt(w.shape[1]) if w.shape[1] > 0 else 0.0
            nn.init.uniform_(w, -bound, bound)
        else:
            nn.init.normal_(w, std=std)
    for b in biases:
        if b is not None:
            nn.init.zeros_(b)


def resize_word_rows(head: nn.Module, vocab_size: int, mean_init: bool = True) -> None:
    """Cut or extend ``head.weight`` and ``head.bias`` (one row per word) to ``vocab_size`` rows.

    A weight tied to the input embedding arrives already resized (tied to the new embedding)."""
    if head.weight.shape[0] != vocab_size:
        head.weight = nn.Parameter(resized_rows(head.weight, vocab_size, mean_init))
    if head.bias is not None:
        head.bias = nn.Parameter(resized_rows(head.bias, vocab_size, mean_init))
    head.vocab_size = vocab_size


@register_head("softmax", place=0)  # first: the papers' own head, every config's default
class SoftmaxHead(OutputHead):
    """Affine map to ``vocab_size`` scores followed by a softmax.

    Holds ``weight`` (|V| x in_features) and ``bias`` (|V|) directly so that checkpoints read
    ``lm_head.weight`` / ``lm_head.bias`` as in every transformers causal LM, and so that the
    weight can be tied to an input embedding of the same shape.
    """

    tieable = True
    resizable = True

    def __init__(self, in_features: int, vocab_size: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features = in_features
        self.vocab_size = vocab_size
        self.weight = nn.Parameter(torch.empty(vocab_size, in_features))
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self, std: float | None = None) -> None:
        init_output_weights([self.weight], [self.bias], std)

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Follow a resized vocabulary (``resize_token_embeddings``): rows are cut or added at the end."""
        resize_word_rows(self, vocab_size, mean_init)

    def output_embeddings(self) -> torch.Tensor:
        """U, the output row of every token (|V| x in_features): ``weight`` here; a subclass may build
        its rows another way (digit-augmented numerals) and keep the fused loss."""
        return self.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Unnormalised scores ``b + U h`` of shape ``hidden.shape[:-1] + (|V|,)``."""
        return F.linear(hidden, self.output_embeddings(), self.bias)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """Per-token negative log-likelihood of ``target`` (shape ``hidden.shape[:-1]``); -100 gives 0.

        In float32 / float64 this is the fused :func:`softmax_nll` (one |V|-wide
        buffer instead of four; 1.3x a CPU training step of the NPLM at |V| = 16k). Under autocast or in
        half precision it is ``cross_entropy`` on the upcast scores.
        """
        target = Targets.of(targets).ids
        if type(self).forward is SoftmaxHead.forward:
            loss = linear_nll(hidden.reshape(-1, self.in_features), self.output_embeddings(), self.bias,
                              target.reshape(-1))
            return loss.view(target.shape)
        # A subclass with a forward of its own: the loss of the scores that forward gives.
        scores = upcast(self.forward(hidden))
        return F.cross_entropy(scores.reshape(-1, self.vocab_size), target.reshape(-1),
                               reduction="none").view(target.shape)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, vocab_size={self.vocab_size}, bias={self.bias is not None}"
