"""The full softmax output layer: p(w | h) = softmax(b + U h)_w."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import OutputHead, Targets, register_head, upcast
from .fused import linear_nll


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

        In float32 / float64 this is the fused :func:`~hf_nlm.heads.fused.softmax_nll` (one |V|-wide
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
