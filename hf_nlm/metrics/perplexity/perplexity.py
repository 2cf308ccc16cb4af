"""Perplexity from summed negative log-likelihoods and token counts, as an ``evaluate.Metric``.

Unlike the Hub's ``perplexity`` measurement, this metric never runs a model: the evaluation loop
already has the loss, so it adds, per batch, the *summed* NLL (in nats) and the number of tokens
it was summed over. The corpus perplexity is then

    perplexity = exp( sum_batches nll / sum_batches num_tokens )

which is the per-token geometric mean that LM papers report (Bengio et al. 2003; Merity et al.
2018). Averaging per-batch perplexities instead would be wrong whenever batches differ in size.

When a tokenizer splits words into pieces (BPE, WordPiece), papers compare models by *word*
perplexity: the same total NLL divided by the number of words of the original text,
``exp(sum nll / sum num_words)``, which is independent of the tokenization.

This file is self-contained (it imports only ``math``, ``numpy``, ``datasets`` and ``evaluate``) so
that ``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import math

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """\
Corpus perplexity from summed negative log-likelihoods (natural log) and token counts, added one
batch (or one sentence) at a time. Optionally also word-level perplexity from word counts, which
makes subword models comparable with word-level ones.
"""

_CITATION = """\
@article{jelinek1977perplexity,
  title={Perplexity -- a measure of the difficulty of speech recognition tasks},
  author={Jelinek, Fred and Mercer, Robert L. and Bahl, Lalit R. and Baker, James K.},
  journal={The Journal of the Acoustical Society of America},
  volume={62},
  number={S1},
  pages={S63},
  year={1977}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    nll (`list` of `float`): summed negative log-likelihood, in nats, of each batch (or sentence).
        Must be finite and, unless `allow_negative_nll`, >= 0: a discrete model's -log p is never
        negative, so a negative value is a bug (log-probabilities passed instead of their negation).
    num_tokens (`list` of `int`): number of predicted tokens each `nll` was summed over (>= 0).
    num_words (`list` of `int`, optional): number of words of the text each `nll` covers (>= 0).
        Give it for every batch or for none.
    allow_negative_nll (`bool`, default False): a `compute` option accepting negative `nll`, for models
        with a continuous density (e.g. of numerals), which can exceed 1.
Returns:
    perplexity (`float`): exp(total_nll / num_tokens).
    nll_per_token (`float`): total_nll / num_tokens, in nats (the usual cross-entropy loss).
    bits_per_token (`float`): nll_per_token / ln 2.
    total_nll (`float`): sum of all `nll`, in nats.
    num_tokens (`int`): sum of all `num_tokens`.
    word_perplexity (`float`): exp(total_nll / num_words); only when `num_words` was given.
    nll_per_word (`float`): total_nll / num_words, in nats; only when `num_words` was given.
    num_words (`int`): sum of all `num_words`; only when `num_words` was given.
Examples:
    >>> metric = Perplexity()
    >>> metric.add(nll=6.0, num_tokens=3)
    >>> metric.add(nll=2.0, num_tokens=1)
    >>> round(metric.compute()["perplexity"], 4)  # exp(8 / 4)
    7.3891
"""

# Arrow columns cannot hold a missing integer cheaply in every datasets version, so a batch added
# without `num_words` stores this value instead; real counts are checked to be >= 0.
_NO_WORD_COUNT = -1


def _exp(x: float) -> float:
    """``math.exp`` that returns ``inf`` instead of raising OverflowError (an untrained model can
    have a per-token NLL above 709 nats only in pathological cases, but it should not crash)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _nll_list(nll) -> list[float]:
    """``nll`` (a list, numpy array or CPU tensor) as a list of finite floats, or a ValueError."""
    values = np.asarray(nll, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"expected one nll value per batch, got an array of shape {values.shape}")
    if not np.all(np.isfinite(values)):
        bad = values[~np.isfinite(values)][0]
        raise ValueError(
            f"nll must be finite, got {bad} (a diverged model or a masked position with -inf log-prob?)"
        )
    return values.tolist()


def _count_list(name: str, counts) -> list[int]:
    """``counts`` as a list of non-negative ints, or a ValueError naming the input ``name``."""
    values = np.asarray(counts)
    if values.ndim != 1:
        raise ValueError(f"expected one {name} value per batch, got an array of shape {values.shape}")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        as_float = values.astype(np.float64)  # accept 3.0 (a float count), reject 2.5
        if not np.all(np.isfinite(as_float) & (as_float == np.round(as_float))):
            raise ValueError(f"{name} must be whole numbers, got {list(counts)}")
    values = values.astype(np.int64)
    if np.any(values < 0):
        raise ValueError(f"{name} must be >= 0, got {int(values[values < 0][0])}")
    return values.tolist()


class Perplexity(evaluate.Metric):
    """Corpus perplexity from per-batch summed NLL and counts (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "nll": datasets.Value("float64"),
                    "num_tokens": datasets.Value("int64"),
                    "num_words": datasets.Value("int64"),
                }
            ),
            reference_urls=["https://www.jmlr.org/papers/v3/bengio03a.html"],
        )

    def add_batch(self, *, nll=None, num_tokens=None, num_words=None, **kwargs) -> None:
        """Add several batches at once: lists ``nll``, ``num_tokens`` and optionally ``num_words``.

        Overridden so that ``num_words`` can be left out (evaluate would otherwise require every
        feature) and so that bad values fail here, next to the code that produced them.
        """
        if nll is None or num_tokens is None:
            raise ValueError("perplexity needs both `nll` and `num_tokens`")
        nll = _nll_list(nll)
        if not nll:
            raise ValueError("perplexity got an empty list of batches: add at least one (nll, num_tokens)")
        num_tokens = _count_list("num_tokens", num_tokens)
        if num_words is None:
            num_words = [_NO_WORD_COUNT] * len(nll)
        else:
            num_words = _count_list("num_words", num_words)
        super().add_batch(nll=nll, num_tokens=num_tokens, num_words=num_words, **kwargs)

    def add(self, *, nll=None, num_tokens=None, num_words=None, **kwargs) -> None:
        """Add one batch: its summed ``nll`` (nats), ``num_tokens`` and optionally ``num_words``."""
        if nll is None or num_tokens is None:
            raise ValueError("perplexity needs both `nll` and `num_tokens`")
        (nll,) = _nll_list([nll])
        (num_tokens,) = _count_list("num_tokens", [num_tokens])
        if num_words is None:
            num_words = _NO_WORD_COUNT
        else:
            (num_words,) = _count_list("num_words", [num_words])
        super().add(nll=nll, num_tokens=num_tokens, num_words=num_words, **kwargs)

    def compute(self, *, nll=None, num_tokens=None, num_words=None, **kwargs) -> dict | None:
        """The corpus perplexity of everything added (plus ``nll`` / ``num_tokens`` given here).

        Overridden to fail clearly when nothing was added (evaluate would raise an AttributeError).
        """
        if nll is None and num_tokens is None and self.writer is None:
            raise ValueError("perplexity has no data: add batches (`add`, `add_batch`) or pass nll= and "
                             "num_tokens=")
        return super().compute(nll=nll, num_tokens=num_tokens, num_words=num_words, **kwargs)

    def _compute(self, nll, num_tokens, num_words, allow_negative_nll: bool = False) -> dict:
        # Checked again here: in a distributed evaluation other processes' data arrive only now.
        _nll_list(nll)
        if not allow_negative_nll and any(value < 0 for value in nll):
            first = next(i for i, value in enumerate(nll) if value < 0)
            raise ValueError(
                f"nll must be >= 0 (it is -log p, and p <= 1), got {nll[first]} for batch {first}: were "
                "log-probabilities passed instead of their negation? (allow_negative_nll=True accepts it "
                "for continuous densities)"
            )
        _count_list("num_tokens", num_tokens)
        total_nll = math.fsum(nll)  # exact summation: a corpus is many batches of similar size
        total_tokens = int(sum(num_tokens))
        if total_tokens == 0:
            raise ValueError("perplexity is undefined over zero tokens: no batch had num_tokens > 0")
        nll_per_token = total_nll / total_tokens
        result = {
            "perplexity": _exp(nll_per_token),
            "nll_per_token": nll_per_token,
            "bits_per_token": nll_per_token / math.log(2),
            "total_nll": total_nll,
            "num_tokens": total_tokens,
        }

        given = [w != _NO_WORD_COUNT for w in num_words]
        if any(given):
            if not all(given):
                raise ValueError(
                    f"num_words was given for {sum(given)} of {len(given)} batches; give it for all or none"
                )
            total_words = int(sum(num_words))
            if total_words == 0:
                raise ValueError("word perplexity is undefined over zero words: every num_words was 0")
            result["word_perplexity"] = _exp(total_nll / total_words)
            result["nll_per_word"] = total_nll / total_words
            result["num_words"] = total_words
        return result
