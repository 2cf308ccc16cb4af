"""A neural LM interpolated with an n-gram LM: P(w | h) = a P_nn(w | h) + (1 - a) P_ngram(w | h).

Bengio et al. (2003, section 4.1, the "mix" rows of Table 1) average the MLP's and the interpolated
trigram's probabilities with a = 0.5. The weight may also be fitted on validation data: the
log-likelihood of a two-component mixture is concave in a, and EM (a <- mean posterior of the
neural component) climbs to its maximum.

Two ways to use a mixture:

* evaluation: :func:`evaluate_mixture` (perplexity of the mixture on a split, same keys as
  ``evaluate_lm``); :func:`fit_mixture_weight` for a;
* generation: :class:`NgramMixtureLogitsProcessor`, a ``transformers`` logits processor that replaces
  the model's next-token distribution by the mixture inside ``generate()`` (greedy, beam, sampling).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from transformers import LogitsProcessor

from ..evaluation import perplexity_report, token_log_probs
from .base import NgramLM


def mix_log_probs(log_p_nn, log_p_ngram, weight: float):
    """log(a exp(log_p_nn) + (1 - a) exp(log_p_ngram)), elementwise, stable (tensors or arrays)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the mixture weight must lie in [0, 1], got {weight}")
    if weight in (0.0, 1.0):
        return log_p_nn if weight == 1.0 else log_p_ngram
    if isinstance(log_p_nn, torch.Tensor):
        return torch.logaddexp(log_p_nn + math.log(weight), log_p_ngram + math.log1p(-weight))
    return np.logaddexp(log_p_nn + math.log(weight), log_p_ngram + math.log1p(-weight))


def fit_mixture_weight(log_p_nn, log_p_ngram, init: float = 0.5, tol: float = 1e-7,
                       max_iter: int = 500) -> float:
    """The weight a of the neural model that maximises the mixture's likelihood (EM).

    Args:
        log_p_nn, log_p_ngram: per-token log-probabilities of the same tokens under the two models
            (e.g. of the validation split).
    """
    a_nn = np.asarray(log_p_nn, dtype=np.float64)
    a_ng = np.asarray(log_p_ngram, dtype=np.float64)
    if a_nn.shape != a_ng.shape or a_nn.size == 0:
        raise ValueError(f"need two equally long, non-empty arrays of log-probabilities, got {a_nn.shape} "
                         f"and {a_ng.shape}")
    a = float(init)
    for _ in range(max_iter):
        mixed = mix_log_probs(a_nn, a_ng, a)
        new = float(np.mean(np.exp(a_nn + math.log(a) - mixed)))  # mean posterior of the neural component
        if abs(new - a) < tol:
            return new
        a = min(max(new, 1e-6), 1 - 1e-6)
    return a


def _aligned_log_probs(model, ngram: NgramLM, split, tokenizer, **kwargs):
    if ngram.bos_id != (tokenizer.bos_token_id if tokenizer.bos_token_id is not None
                        else tokenizer.eos_token_id):
        raise ValueError(f"the n-gram model pads contexts with id {ngram.bos_id}, "
                         "the tokenizer's bos differs")
    ids, log_p_nn, num_words = token_log_probs(model, split, tokenizer, **kwargs)
    log_p_ngram = ngram.stream_log_probs(ids.numpy())
    return ids, log_p_nn.double().numpy(), log_p_ngram, num_words


def evaluate_mixture(
    model,
    ngram: NgramLM,
    dataset,
    tokenizer,
    weight: float | str = 0.5,
    validation=None,
    **kwargs,
) -> dict[str, float | int]:
    """Perplexity of a P_nn + (1 - a) P_ngram on one split, with the keys of ``evaluate_lm``.

    Args:
        weight: a, the neural model's weight; ``"fit"`` fits it on ``validation`` (a split of text)
            with :func:`fit_mixture_weight`. The result reports the weight used as ``mixture_weight``.
        **kwargs: ``block_size``, ``batch_size``, ``device`` for the neural model's pass.
    """
    if weight == "fit":
        if validation is None:
            raise ValueError("weight='fit' needs a validation split to fit the weight on")
        _, v_nn, v_ng, _ = _aligned_log_probs(model, ngram, validation, tokenizer, **kwargs)
        weight = fit_mixture_weight(v_nn, v_ng)
    elif not isinstance(weight, (int, float)):
        raise ValueError(f"weight must be a number in [0, 1] or 'fit', got {weight!r}")
    ids, log_p_nn, log_p_ngram, num_words = _aligned_log_probs(model, ngram, dataset, tokenizer, **kwargs)
    mixed = mix_log_probs(log_p_nn, log_p_ngram, float(weight))
    unk = tokenizer.unk_token_id
    num_unk = int((ids == unk).sum()) if unk is not None else 0
    return {**perplexity_report(-float(mixed.sum()), int(ids.numel()), num_words, num_unk),
            "mixture_weight": float(weight)}


class NgramMixtureLogitsProcessor(LogitsProcessor):
    """Make ``generate()`` sample / search from a P_nn + (1 - a) P_ngram.

    ``model.generate(ids, logits_processor=LogitsProcessorList([NgramMixtureLogitsProcessor(kn, 0.5)]))``

    The n-gram context is the last ``order - 1`` ids of each sequence, left-filled with the n-gram's
    ``bos_id`` when shorter (the sentence-start convention of the whole package). Returns
    normalised log-probabilities, so ``log_softmax`` (which beam search applies) leaves them as they
    are. A token another processor has already banned (score -inf, e.g. ``no_repeat_ngram_size``) stays
    banned: the n-gram's share must not bring it back.
    """

    def __init__(self, ngram: NgramLM, weight: float = 0.5) -> None:
        mix_log_probs(0.0, 0.0, weight)  # validates the weight
        self.ngram = ngram
        self.weight = float(weight)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[-1] < self.ngram.vocab_size:
            raise ValueError(f"the model scores {scores.shape[-1]} tokens but the n-gram model has "
                             f"{self.ngram.vocab_size}")
        n_1 = self.ngram.order - 1
        context = input_ids[:, -n_1:] if n_1 else input_ids[:, :0]
        if context.shape[1] < n_1:
            fill = context.new_full((context.shape[0], n_1 - context.shape[1]), self.ngram.bos_id)
            context = torch.cat([fill, context], dim=1)
        log_p_ngram = (torch.from_numpy(self.ngram.log_probs(context.cpu().numpy()))
                       .to(scores.device, torch.float32))
        log_p_nn = torch.log_softmax(scores.float(), dim=-1)
        # A model may have more output ids than the n-gram's vocabulary (padding rows): they get P_nn only.
        if log_p_ngram.shape[-1] < scores.shape[-1]:
            pad = log_p_ngram.new_full((scores.shape[0], scores.shape[-1] - log_p_ngram.shape[-1]), -math.inf)
            log_p_ngram = torch.cat([log_p_ngram, pad], dim=-1)
        mixed = mix_log_probs(log_p_nn, log_p_ngram, self.weight)
        return mixed.masked_fill(torch.isneginf(scores), -math.inf).to(scores.dtype)
