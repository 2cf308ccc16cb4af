"""Point predictions of the numbers in a text (Spithourakis & Riedel, ACL 2018, sec. 4: a numeracy
LM's distribution over the next numeral, summarised by its mean, median or mode, and scored by MAPE
and MdAPE against the baselines "always the training mean / median").

For every numeral of the text the model reads what precedes it and predicts the number itself:

* ``mog`` (mixture of Gaussians) and ``dexp`` (discrete latent exponent): the density's mean, median or mode,
  and a central probability interval from its quantiles
  (:class:`~hf_nlm.heads.numeral.densities.gaussian_mixture.NumeralMixture`,
  :class:`~hf_nlm.heads.numeral.densities.discrete_exponent.NumeralExponentDensity`);
* every other head (``softmax``, ``softmax_digits``, ``hsoftmax``, ``drnn``, ``combination``): the model's
  distribution over the numerals of its vocabulary (``<unk_num>`` left out; the d-RNN's probabilities of those
  numerals), renormalised: its mean, weighted median or mode, and the interval between its quantiles. A closed
  vocabulary can only predict numbers it has seen.

The distributions are computed ``numeral_chunk_size`` numerals at a time (default 256): for every head but
``mog`` and ``dexp`` each numeral is scored against every numeral of the vocabulary (the d-RNN spells them
all), a (numerals x candidates) table whose memory follows the chunk, not the split; the figures do not depend
on the chunk.
"""

from __future__ import annotations

import torch

from ..data.batching import batching_for, split_texts
from ..heads.numeral import ValueBranch
from ..models.numeracy_lm.modeling_numeracy_lm import write_unknown_numerals
from ..tokenization.numerals import parse_numeral
from .numeracy import DEFAULT_NUMERAL_CHUNK_SIZE, check_numeral_chunk_size, numeral_chunks
from .scoring import split_log_probs

STATISTICS = ("mean", "median", "mode")


def predict_numbers(model, tokenizer, texts, statistic: str = "median", interval: float = 0.8,
                    block_size: int = 256, device=None,
                    numeral_chunk_size: int = DEFAULT_NUMERAL_CHUNK_SIZE) -> list[dict]:
    """One prediction per numeral of ``texts`` (a list of strings or a ``datasets`` split), in order.

    Returns dicts ``{"index": position in the token stream, "value": the true value, "prediction":
    the point estimate, "low", "high": the central ``interval`` of the predicted distribution}``.
    Each numeral is predicted from its full left context (recurrent models: the state carried over
    the whole text). ``numeral_chunk_size`` numerals are scored at once; a size below 1, or one whose
    tensors would not fit in the free memory, is refused before anything is allocated (``ValueError``
    naming ``--numeral-chunk-size`` and a size that fits).
    """
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    if not 0.0 < interval < 1.0:
        raise ValueError(f"interval is a probability mass in (0, 1), got {interval}")
    if getattr(tokenizer, "numeral_vocab", None) is None:
        raise ValueError("number prediction needs a numeracy tokenizer "
                         "(hf_nlm.tokenization.train_numeracy_tokenizer)")
    batching = batching_for(model, tokenizer, block_size)
    stream, _ = batching.encode(split_texts(texts))
    mask = stream["numeral_mask"].bool()
    positions = torch.nonzero(mask).squeeze(-1)
    chunk = check_numeral_chunk_size(numeral_chunk_size, len(positions), model.lm_head, device)
    density, numerals = numeral_estimator(model.lm_head, tokenizer)
    # Exact either way: blocks carry their full context; a recurrent model reads one column regardless.
    # Only the numerals' hidden states are kept.
    _, hidden = split_log_probs(batching, model, stream, 32, device, with_hidden=True, hidden_mask=mask)
    low_q, high_q = (1 - interval) / 2, (1 + interval) / 2
    # Written into one tensor allocated up front: small tensors kept between the chunks' large temporaries
    # would fragment the C heap, and the process would grow with the split.
    estimates = torch.zeros(hidden.shape[0], 3, dtype=torch.float64)
    with torch.no_grad():
        for rows in numeral_chunks(hidden.shape[0], chunk):
            point, low, high = numeral_estimates(model.lm_head, density, numerals, hidden[rows], statistic,
                                                 low_q, high_q)
            estimates[rows] = torch.stack([point, low, high], -1).cpu()
    # Python numbers via tolist(): iterating a tensor would make one tensor object per element of all
    # five at once (Tensor.__iter__ is unbind), several hundred bytes each, far more than the dicts.
    point, low, high = estimates.T.tolist()
    values = stream["numeral_value"][mask].tolist()
    return [
        {"index": i, "value": v, "prediction": p, "low": lo, "high": hi}
        for i, v, p, lo, hi in zip(positions.tolist(), values, point, low, high, strict=True)
    ]


def numeral_estimator(head, tokenizer):
    """``(density, numerals)``: what :func:`numeral_estimates` summarises for ``head``, the density of a
    head whose one numeral branch is a density (``mog``, ``dexp``; ``numerals`` None), else its
    distribution over the vocabulary's numerals (``density`` None, ``numerals`` the
    :func:`_vocabulary_numerals` list)."""
    branch = getattr(head, "branch", None)
    density = branch.density if isinstance(branch, ValueBranch) else None  # a combination mixes more
    return density, (None if density is not None else _vocabulary_numerals(tokenizer))


def numeral_estimates(head, density, numerals, hidden, statistic: str, low_q: float, high_q: float,
                      log_probs: torch.Tensor | None = None):
    """Point estimate and ``low_q`` / ``high_q`` quantiles of the next numeral for each row of ``hidden``,
    from :func:`numeral_estimator`'s ``(density, numerals)``. ``log_probs``, the head's vocabulary-wide
    ``log_probs(hidden)`` if the caller has it already, is not computed again."""
    if density is not None:
        return (getattr(density, statistic)(hidden), density.quantile(hidden, low_q),
                density.quantile(hidden, high_q))
    return _vocabulary_estimates(head, numerals, hidden, statistic, low_q, high_q, log_probs)


def _vocabulary_numerals(tokenizer) -> list[tuple[float, int]]:
    """``(value, id)`` of the vocabulary's numerals (``<unk_num>`` left out), sorted by value."""
    numerals = [(parse_numeral(token), i) for token, i in tokenizer.numeral_vocab.items()]
    numerals = sorted((n.value, i) for n, i in numerals if n is not None)
    if not numerals:
        raise ValueError("the vocabulary holds no numeral to predict")
    return numerals


def _vocabulary_estimates(head, numerals, hidden, statistic: str, low_q: float, high_q: float,
                          log_probs: torch.Tensor | None = None):
    """Point estimate and quantiles of the model's distribution over its vocabulary's ``numerals`` (a
    :func:`_vocabulary_numerals` list) for each row of ``hidden``: one (rows x |V|) table, ``log_probs``
    (``head.log_probs(hidden)``) where the caller has it."""
    values = torch.tensor([v for v, _ in numerals], dtype=torch.float64, device=hidden.device)
    ids = torch.tensor([i for _, i in numerals], device=hidden.device)
    log_probs = head.log_probs(hidden) if log_probs is None else log_probs
    probs = torch.softmax(log_probs[:, ids].to(torch.float64), dim=-1)  # sorted by value
    cdf = probs.cumsum(-1)

    def quantile(q: float) -> torch.Tensor:  # the smallest value whose CDF reaches q
        return values[torch.searchsorted(cdf, torch.full((len(cdf), 1), q, dtype=cdf.dtype,
                                                         device=cdf.device))
                      .squeeze(-1).clamp(max=len(values) - 1)]

    # A sum per row (not a matrix product, whose blocking follows the number of rows): the same figures
    # whatever the chunk.
    point = {"mean": lambda: (probs * values).sum(-1), "median": lambda: quantile(0.5),
             "mode": lambda: values[probs.argmax(-1)]}[statistic]()
    return point, quantile(low_q), quantile(high_q)


def evaluate_number_prediction(model, tokenizer, texts, train_texts=None, statistic: str = "median",
                               block_size: int = 256, device=None,
                               numeral_chunk_size: int = DEFAULT_NUMERAL_CHUNK_SIZE) -> dict:
    """MAPE and MdAPE of :func:`predict_numbers` on ``texts`` (the ``number_prediction`` metric),
    with the baselines "always the training mean / median" when ``train_texts`` are given; the
    numerals scored ``numeral_chunk_size`` at a time."""
    from ..metrics import number_prediction_report

    predictions = predict_numbers(model, tokenizer, texts, statistic, block_size=block_size, device=device,
                                  numeral_chunk_size=numeral_chunk_size)
    if not predictions:
        raise ValueError("the text holds no numeral to predict")
    train_values = None
    if train_texts is not None:
        stream, _ = batching_for(model, tokenizer, block_size).encode(split_texts(train_texts))
        train_values = stream["numeral_value"][stream["numeral_mask"].bool()].tolist()
    report = number_prediction_report([p["prediction"] for p in predictions],
                                      [p["value"] for p in predictions], train_values=train_values)
    return {**report, "statistic": statistic}


__all__ = ["DEFAULT_NUMERAL_CHUNK_SIZE", "STATISTICS", "evaluate_number_prediction", "predict_numbers",
           "write_unknown_numerals"]
