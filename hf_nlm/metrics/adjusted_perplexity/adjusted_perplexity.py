"""Perplexity and adjusted perplexity (APP) over words and numerals, as an ``evaluate.Metric``.

The input is one row per predicted token of the evaluated text, as in Spithourakis & Riedel (2018),
"Numeracy for Language Models": a token is a word or a numeral, and a closed-vocabulary model
encodes an out-of-vocabulary (OOV) target as ``<unk_word>`` or ``<unk_num>``. Per token:

* ``log_prob``: natural log of the model's probability of the target *as encoded*, i.e. of
  ``<unk_num>`` when the target is an unknown numeral;
* ``is_numeral``: 1 for a numeral, 0 for a word (sentence ends, ``<eos>``, are words);
* ``is_unknown``: 1 when the target was encoded as the unknown symbol of its class;
* ``token``: the ORIGINAL text of the target ("3.14159", not ``<unk_num>``), from which the
  distinct OOV types are counted.

Plain perplexity treats an UNK symbol as one more token, so a model that puts its mass on
``<unk_num>`` instead of on hard-to-predict numerals looks better than it is. Adjusted perplexity
(Ueberla 1994) splits the probability of each UNK symbol evenly among the distinct OOV types it
stands for in the evaluated text, counted separately for words (``U_w``) and numerals (``U_n``):

    APP = exp( -(1/N) * [ sum_t log p_t  -  K_w * log U_w  -  K_n * log U_n ] )

where ``N`` is the number of tokens and ``K_w`` / ``K_n`` the numbers of unknown word / numeral
tokens. Types are distinct ``token`` strings (normalise numerals beforehand if "3.10" and "3.1"
should be one type). As ``U >= 1`` whenever ``K > 0``, APP >= perplexity, with equality when
nothing is unknown or every unknown token of a class is the same type.

The same is reported over words only and over numerals only; the three are consistent:
``N * log ppl == N_w * log ppl_words + N_n * log ppl_numerals`` (likewise for APP). A class with
no tokens has ``None`` as its perplexities (JSON-safe, and never mistaken for a number).

The computation lives in :func:`adjusted_perplexity_report`, which the evaluation code can call on
arrays directly (without evaluate's Arrow cache); the metric's ``_compute`` calls it too.

This file is self-contained (it imports only ``math``, ``numpy``, ``datasets`` and ``evaluate``) so
that ``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import math

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """\
Perplexity and adjusted perplexity (APP) of a language model over words and numerals, from
per-token log-probabilities. APP divides the probability of each unknown symbol (<unk_word>,
<unk_num>) by the number of distinct out-of-vocabulary types it stands for in the evaluated text,
counted separately for words and numerals, so that no model gains by predicting UNK. Reported over
all tokens, words only and numerals only.
"""

_CITATION = """\
@inproceedings{spithourakis2018numeracy,
  title={Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers},
  author={Spithourakis, Georgios and Riedel, Sebastian},
  booktitle={Proceedings of the 56th Annual Meeting of the Association for Computational Linguistics},
  pages={2104--2115},
  year={2018}
}
@article{ueberla1994analysing,
  title={Analysing a simple language model: some general conclusions for language models for speech \
recognition},
  author={Ueberla, Joerg},
  journal={Computer Speech \\& Language},
  volume={8},
  number={2},
  pages={153--176},
  year={1994}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    log_prob (`list` of `float`): per token, the natural log of the model's probability of the target
        as encoded (of `<unk_word>` / `<unk_num>` for an unknown target). Must be finite and <= 0;
        with `allow_density` a numeral's value may be > 0.
    is_numeral (`list` of `int`): per token, 1 for a numeral, 0 for a word (bools are accepted).
    is_unknown (`list` of `int`): per token, 1 when the target is out of the vocabulary, i.e. was
        encoded as `<unk_word>` (a word) or `<unk_num>` (a numeral); 0 otherwise.
    token (`list` of `str`): per token, the original text of the target ("3.14159", never
        `<unk_num>`); distinct strings among the unknown tokens of a class are its OOV types.
    allow_density (`bool`, default False): a `compute` option accepting log_prob > 0 for numerals,
        for models that give numerals a continuous density (which can exceed 1). Words are
        discrete: their log_prob must be <= 0 regardless.
Returns:
    perplexity, perplexity_words, perplexity_numerals (`float` or `None`): exp(nll / count) over all
        tokens, words only, numerals only; `None` for a class with no tokens.
    adjusted_perplexity, adjusted_perplexity_words, adjusted_perplexity_numerals (`float` or `None`):
        the same with each unknown token's log-probability reduced by log(number of OOV types of
        its class); `None` for a class with no tokens.
    num_tokens, num_words, num_numerals (`int`): token counts.
    num_unknown_words, num_unknown_numerals (`int`): tokens encoded as `<unk_word>` / `<unk_num>`.
    num_oov_word_types, num_oov_numeral_types (`int`): distinct `token` strings among those.
    total_nll, total_nll_words, total_nll_numerals (`float`): -sum of log_prob, in nats.
    total_adjusted_nll, total_adjusted_nll_words, total_adjusted_nll_numerals (`float`): the same
        after the adjustment.
Examples:
    >>> metric = AdjustedPerplexity()
    >>> metric.add_batch(
    ...     log_prob=[-1.0, -2.0, -2.0, -1.0],
    ...     is_numeral=[0, 1, 1, 0],
    ...     is_unknown=[0, 1, 1, 0],
    ...     token=["pi", "3.14159", "2.71828", "<eos>"],
    ... )
    >>> result = metric.compute()
    >>> round(result["perplexity"], 4)  # exp(6 / 4)
    4.4817
    >>> round(result["adjusted_perplexity"], 4)  # exp((6 + 2 * log 2) / 4): <unk_num> stands for 2 types
    6.3381
"""

#: Symbols that are the *encoded* form of an unknown target, not its original text: passing one as
#: `token` of an unknown target would count all unknown targets as a single OOV type.
_UNK_SYMBOLS = frozenset({"<unk>", "<unk_word>", "<unk_num>", "<unk_numeral>", "[unk]"})

_FEATURES = ("log_prob", "is_numeral", "is_unknown", "token")


def _exp(x: float) -> float:
    """``math.exp`` that returns ``inf`` instead of raising OverflowError."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log_prob_array(log_prob) -> np.ndarray:
    """``log_prob`` (list, numpy array or CPU tensor) as a 1-D float64 array of finite values."""
    values = np.asarray(log_prob, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"expected one log_prob per token, got an array of shape {values.shape}")
    if not np.all(np.isfinite(values)):
        index = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(
            f"log_prob must be finite, got {values[index]} for token {index} (a target the model gives "
            "probability 0, a masked position, or a diverged model?)"
        )
    return values


def _flag_array(name: str, flags) -> np.ndarray:
    """``flags`` as a 1-D int64 array of 0s and 1s (bools and 0.0/1.0 accepted), or a ValueError."""
    values = np.asarray(flags)
    if values.ndim != 1:
        raise ValueError(f"expected one {name} value per token, got an array of shape {values.shape}")
    if values.size and not (values.dtype == np.bool_ or np.issubdtype(values.dtype, np.number)):
        raise ValueError(f"{name} must be 0 or 1 per token, got values of type {values.dtype}")
    as_float = values.astype(np.float64)
    bad = ~((as_float == 0.0) | (as_float == 1.0))
    if np.any(bad):
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be 0 or 1 per token, got {values[index].item()!r} for token {index}")
    return as_float.astype(np.int64)


def _token_list(token) -> list[str]:
    """``token`` as a list of Python strings, or a ValueError."""
    if isinstance(token, str):
        raise ValueError("token must be a list of strings, one per token, got a single string")
    tokens = list(token)
    for index, text in enumerate(tokens):
        if not isinstance(text, str):
            raise ValueError(
                f"token must hold the original text of each target as a string, got {text!r} "
                f"({type(text).__name__}) for token {index}"
            )
    return [str(text) for text in tokens]


def _validate(log_prob, is_numeral, is_unknown, token):
    """Per-token inputs as arrays, checked for everything that does not depend on compute options."""
    missing = [
        name
        for name, value in zip(_FEATURES, (log_prob, is_numeral, is_unknown, token), strict=True)
        if value is None
    ]
    if missing:
        raise ValueError(
            f"adjusted perplexity needs {', '.join(_FEATURES)} per token; missing: {', '.join(missing)}"
        )
    log_prob = _log_prob_array(log_prob)
    is_numeral = _flag_array("is_numeral", is_numeral)
    is_unknown = _flag_array("is_unknown", is_unknown)
    token = _token_list(token)
    lengths = {
        "log_prob": len(log_prob),
        "is_numeral": len(is_numeral),
        "is_unknown": len(is_unknown),
        "token": len(token),
    }
    if len(set(lengths.values())) > 1:
        raise ValueError(
            "log_prob, is_numeral, is_unknown and token must have one entry per token, got lengths "
            + ", ".join(f"{name}={length}" for name, length in lengths.items())
        )
    for index in np.flatnonzero(is_unknown):
        text = token[index]
        if not text:
            raise ValueError(
                f"token {index} is unknown but its text is empty: give the original text of the target"
            )
        if text.strip().lower() in _UNK_SYMBOLS:
            raise ValueError(
                f"token {index} is unknown and its text is {text!r}, an unknown symbol: give the ORIGINAL "
                "text of the target (e.g. '3.14159', not '<unk_num>'), from which the distinct OOV types "
                "are counted"
            )
    return log_prob, is_numeral, is_unknown, token


def _class_report(log_prob: np.ndarray, unknown: np.ndarray, tokens: list[str], class_name: str) -> dict:
    """Counts and NLL sums of one class (words or numerals); ``tokens`` are that class's texts."""
    unknown_types = {text for text, flag in zip(tokens, unknown, strict=True) if flag}
    known_types = {text for text, flag in zip(tokens, unknown, strict=True) if not flag}
    both = sorted(unknown_types & known_types)
    if both:
        raise ValueError(
            f"the {class_name} {both[0]!r} is marked unknown for some tokens and known for others: a type "
            "is either in the model's vocabulary or not (were is_unknown flags computed from another "
            "vocabulary?)"
        )
    num_unknown = int(unknown.sum())
    num_types = len(unknown_types)
    nll = math.fsum((-log_prob).tolist())  # not -fsum(...): an empty class gives 0.0, not -0.0
    # Each unknown token's probability is divided by the number of OOV types of its class.
    adjusted_nll = nll + num_unknown * math.log(num_types) if num_unknown else nll
    return {
        "count": len(tokens),
        "num_unknown": num_unknown,
        "num_types": num_types,
        "nll": nll,
        "adjusted_nll": adjusted_nll,
    }


def _perplexity(nll: float, count: int) -> float | None:
    return _exp(nll / count) if count else None


def adjusted_perplexity_report(
    log_prob, is_numeral, is_unknown, token, *, allow_density: bool = False
) -> dict:
    """Perplexity and adjusted perplexity of per-token log-probabilities (see the module docstring).

    Args:
        log_prob: per token, natural log of the model's probability of the target as encoded.
        is_numeral: per token, 1 for a numeral, 0 for a word.
        is_unknown: per token, 1 when the target was encoded as ``<unk_word>`` / ``<unk_num>``.
        token: per token, the original text of the target (the OOV types are its distinct strings).
        allow_density: accept ``log_prob > 0`` for numerals (continuous densities).

    Returns:
        The dict described in the metric's ``inputs_description``; perplexities of a class with no
        tokens are ``None``.

    Raises:
        ValueError: on empty, non-finite, positive (words, or numerals without ``allow_density``),
            mismatched-length or non-0/1 input, or on unknown tokens given as UNK symbols.
    """
    log_prob, is_numeral, is_unknown, token = _validate(log_prob, is_numeral, is_unknown, token)
    if len(log_prob) == 0:
        raise ValueError("adjusted perplexity is undefined over zero tokens: give at least one token")
    positive = log_prob > 0
    if not allow_density:
        if np.any(positive):
            index = int(np.flatnonzero(positive)[0])
            raise ValueError(
                f"log_prob must be <= 0 (it is log p, and p <= 1), got {log_prob[index]} for token {index}: "
                "were negative log-likelihoods passed instead of log-probabilities? (allow_density=True "
                "accepts it for numerals given a continuous density)"
            )
    elif np.any(positive & (is_numeral == 0)):
        index = int(np.flatnonzero(positive & (is_numeral == 0))[0])
        raise ValueError(
            f"log_prob must be <= 0 for words, got {log_prob[index]} for token {index}: allow_density "
            "accepts a positive log-density for numerals only, a word's probability is at most 1"
        )

    numeral = is_numeral == 1
    words = _class_report(
        log_prob[~numeral],
        is_unknown[~numeral],
        [t for t, n in zip(token, numeral, strict=True) if not n],
        "word",
    )
    numerals = _class_report(
        log_prob[numeral],
        is_unknown[numeral],
        [t for t, n in zip(token, numeral, strict=True) if n],
        "numeral",
    )
    num_tokens = words["count"] + numerals["count"]
    total_nll = words["nll"] + numerals["nll"]
    total_adjusted_nll = words["adjusted_nll"] + numerals["adjusted_nll"]
    return {
        "perplexity": _perplexity(total_nll, num_tokens),
        "perplexity_words": _perplexity(words["nll"], words["count"]),
        "perplexity_numerals": _perplexity(numerals["nll"], numerals["count"]),
        "adjusted_perplexity": _perplexity(total_adjusted_nll, num_tokens),
        "adjusted_perplexity_words": _perplexity(words["adjusted_nll"], words["count"]),
        "adjusted_perplexity_numerals": _perplexity(numerals["adjusted_nll"], numerals["count"]),
        "num_tokens": num_tokens,
        "num_words": words["count"],
        "num_numerals": numerals["count"],
        "num_unknown_words": words["num_unknown"],
        "num_unknown_numerals": numerals["num_unknown"],
        "num_oov_word_types": words["num_types"],
        "num_oov_numeral_types": numerals["num_types"],
        "total_nll": total_nll,
        "total_nll_words": words["nll"],
        "total_nll_numerals": numerals["nll"],
        "total_adjusted_nll": total_adjusted_nll,
        "total_adjusted_nll_words": words["adjusted_nll"],
        "total_adjusted_nll_numerals": numerals["adjusted_nll"],
    }


class AdjustedPerplexity(evaluate.Metric):
    """Perplexity and adjusted perplexity over words and numerals (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "log_prob": datasets.Value("float64"),
                    "is_numeral": datasets.Value("int8"),
                    "is_unknown": datasets.Value("int8"),
                    "token": datasets.Value("string"),
                }
            ),
            reference_urls=["https://aclanthology.org/P18-1196/"],
        )

    def add_batch(self, *, log_prob=None, is_numeral=None, is_unknown=None, token=None, **kwargs) -> None:
        """Add several tokens: lists (or arrays) ``log_prob``, ``is_numeral``, ``is_unknown``, ``token``.

        Overridden so that bad values fail here, next to the code that produced them, with a clear
        message. The OOV types are counted at ``compute`` over everything added, not per batch.
        """
        log_prob, is_numeral, is_unknown, token = _validate(log_prob, is_numeral, is_unknown, token)
        if len(log_prob) == 0:
            raise ValueError("adjusted perplexity got an empty batch: add at least one token")
        super().add_batch(
            log_prob=log_prob.tolist(),
            is_numeral=is_numeral.tolist(),
            is_unknown=is_unknown.tolist(),
            token=token,
            **kwargs,
        )

    def add(self, *, log_prob=None, is_numeral=None, is_unknown=None, token=None, **kwargs) -> None:
        """Add one token: its ``log_prob``, ``is_numeral``, ``is_unknown`` and original text ``token``."""
        if isinstance(token, str):
            token = [token]
        elif token is not None:
            raise ValueError(f"token must be the original text of the target as a string, got {token!r}")
        values = [None if value is None else [value] for value in (log_prob, is_numeral, is_unknown)]
        log_prob, is_numeral, is_unknown, token = _validate(*values, token)
        super().add(
            log_prob=float(log_prob[0]),
            is_numeral=int(is_numeral[0]),
            is_unknown=int(is_unknown[0]),
            token=token[0],
            **kwargs,
        )

    def compute(
        self, *, log_prob=None, is_numeral=None, is_unknown=None, token=None, **kwargs
    ) -> dict | None:
        """The report over everything added (plus the tokens given here).

        Overridden to fail clearly when nothing was added (evaluate would raise an AttributeError).
        """
        inputs = (log_prob, is_numeral, is_unknown, token)
        if all(value is None for value in inputs) and self.writer is None:
            raise ValueError(
                "adjusted perplexity has no data: add tokens (`add`, `add_batch`) or pass log_prob=, "
                "is_numeral=, is_unknown= and token="
            )
        return super().compute(
            log_prob=log_prob, is_numeral=is_numeral, is_unknown=is_unknown, token=token, **kwargs
        )

    def _compute(self, log_prob, is_numeral, is_unknown, token, allow_density: bool = False) -> dict:
        # Validated again inside: in a distributed evaluation other processes' data arrive only now.
        return adjusted_perplexity_report(
            log_prob, is_numeral, is_unknown, token, allow_density=allow_density
        )
