"""The full softmax output layer: p(w | h) = softmax(b + U h)_w."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Half-precision scores -> float32 before a softmax (its sums lose too much in 16 bits)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class SoftmaxNLL(torch.autograd.Function):
    """-log softmax(b + W h)_t for N rows, with a hand-written backward.

    Autograd's ``cross_entropy(linear(h))`` keeps the logits, the log-softmax output and a gradient
    buffer of the same N x |V| size, and walks over them several times. Here the backward turns the
    saved logits into the gradient with one new buffer: d(-log softmax(y)_t)/dy = softmax(y) - onehot(t). On a
    CPU that halves the memory traffic of the output layer, whose N x |V| tensors dominate the step.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, target):
        # Target -100 (ignored) gives a loss of 0 and no gradient, as in cross_entropy.
        valid = target != -100
        target = target.masked_fill(~valid, 0)
        logits = upcast(F.linear(hidden, weight, bias))
        lse = torch.logsumexp(logits, dim=-1)
        nll = (lse - logits.gather(1, target[:, None]).squeeze(1)).masked_fill(~valid, 0.0)
        ctx.save_for_backward(hidden, weight, logits, lse, target, valid)
        ctx.has_bias = bias is not None
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll):
        hidden, weight, logits, lse, target, valid = ctx.saved_tensors
        # softmax(y), then everything else in that one buffer (the saved logits stay intact, so a
        # retained graph can be differentiated again).
        grad = torch.sub(logits, lse[:, None]).exp_()
        grad.scatter_add_(1, target[:, None], torch.full_like(lse[:, None], -1.0))
        grad.mul_((grad_nll * valid)[:, None].to(grad.dtype))
        grad = grad.to(weight.dtype)
        grad_hidden = grad @ weight if ctx.needs_input_grad[0] else None
        grad_weight = grad.t() @ hidden if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_hidden, grad_weight, grad_bias, None


class SoftmaxHead(nn.Module):
    """Affine map to ``vocab_size`` scores followed by a softmax.

    Holds ``weight`` (|V| x in_features) and ``bias`` (|V|) directly so that checkpoints read
    ``lm_head.weight`` / ``lm_head.bias`` as in every transformers causal LM, and so that the
    weight can be tied to an input embedding of the same shape.
    """

    def __init__(self, in_features: int, vocab_size: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features = in_features
        self.vocab_size = vocab_size
        self.weight = nn.Parameter(torch.empty(vocab_size, in_features))
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self, std: float | None = None) -> None:
        # Uniform(+-1/sqrt(fan_in)) as nn.Linear does, unless the model asks for a normal init.
        if std is None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            nn.init.uniform_(self.weight, -bound, bound)
        else:
            nn.init.normal_(self.weight, std=std)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Unnormalised scores ``b + U h`` of shape ``hidden.shape[:-1] + (|V|,)``."""
        return F.linear(hidden, self.weight, self.bias)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(upcast(self.forward(hidden)), dim=-1)

    def nll(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-token negative log-likelihood of ``target`` (shape ``hidden.shape[:-1]``), through
        :class:`SoftmaxNLL` (same value and gradient as :meth:`nll_reference`, less memory traffic)."""
        flat = SoftmaxNLL.apply(hidden.reshape(-1, self.in_features), self.weight, self.bias, target.reshape(-1))
        return flat.view(target.shape)

    def nll_reference(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """:meth:`nll` by autograd through ``cross_entropy``: the reference it is tested against."""
        scores = upcast(self.forward(hidden))
        return F.cross_entropy(scores.reshape(-1, self.vocab_size), target.reshape(-1), reduction="none").view(
            target.shape
        )

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, vocab_size={self.vocab_size}, bias={self.bias is not None}"
