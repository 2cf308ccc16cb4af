"""Count-based n-gram language models over token-id streams: the baselines the neural LMs are measured
against.

- :class:`KneserNeyLM`: interpolated modified Kneser-Ney (Chen & Goodman 1998), any order.
- :class:`InterpolatedLM`: deleted interpolation / Jelinek-Mercer (Bengio et al.'s "interpolated trigram").
- :class:`ArpaLM`: a back-off model read from an ARPA file; :func:`write_arpa` writes one.

All share one API (:class:`~hf_nlm.ngram.base.NgramLM`): ``fit(ids)`` / ``from_ids``,
``log_prob(contexts, targets)``, ``log_probs(contexts)``, ``score_stream(ids)``,
``evaluate(split, tokenizer)`` (the keys of ``hf_nlm.evaluation.evaluate_lm``), ``save`` / ``load``.
Contexts are (N, order - 1) arrays of ids, OLDEST FIRST; probabilities are natural logs. The stream
conventions are those of ``hf_nlm.data.lm``: every token is a target once and the context before the
first one is ``<eos>`` (``bos_id``), so n-gram and neural perplexities count the same targets.

Example::

    from hf_nlm.ngram import KneserNeyLM
    lm = KneserNeyLM.from_texts(ds["train"]["text"], tokenizer, order=5)
    lm.evaluate(ds["test"], tokenizer)["perplexity"]
    lm.to_arpa("kn5.arpa", vocab=tokenizer)
"""

from .arpa import read_arpa, write_arpa
from .arpa_lm import ArpaLM
from .base import BackoffLM, NgramLM
from .counts import NgramCounts, count_ngrams
from .interpolated import InterpolatedLM
from .kneser_ney import KneserNeyLM, modified_kn_discounts
from .neural_interpolation import (
    NgramMixtureLogitsProcessor,
    evaluate_mixture,
    fit_mixture_weight,
    mix_log_probs,
)

__all__ = [
    "ArpaLM",
    "BackoffLM",
    "InterpolatedLM",
    "KneserNeyLM",
    "NgramCounts",
    "NgramLM",
    "NgramMixtureLogitsProcessor",
    "count_ngrams",
    "evaluate_mixture",
    "fit_mixture_weight",
    "mix_log_probs",
    "modified_kn_discounts",
    "read_arpa",
    "write_arpa",
]
