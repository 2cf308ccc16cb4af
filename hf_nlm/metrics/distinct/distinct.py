"""Distinct-n (Li et al. 2016) of generated texts, as an ``evaluate.Metric`` that works offline.

Distinct-n measures diversity: the number of distinct n-grams divided by the total number of
n-grams. Li et al. ("A Diversity-Promoting Objective Function for Neural Conversation Models",
NAACL 2016, sec. 5) compute it over all generated responses together; that corpus-level value is
``distinct_<n>``. Some story papers average a per-text ratio instead; that is ``distinct_<n>_per_text``
(the mean over texts that have at least one n-gram). Both are given because they differ a lot: a
model that repeats the same story has a high per-text but a low corpus-level distinct-n.

Texts are split on whitespace (give already tokenized text, or choose ``lowercase``); n-grams do
not cross text boundaries. When no text has an n-gram (all shorter than n), the ratio is 0/0 and
reported as NaN.

This file is self-contained (it imports only ``math``, ``datasets`` and ``evaluate``) so that
``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import math

import datasets
import evaluate

_DESCRIPTION = """\
Distinct-n (Li et al. 2016): distinct n-grams / total n-grams over all predictions (corpus level),
and the same ratio averaged over predictions (per text), for n = 1 .. max_order.
"""

_CITATION = """\
@inproceedings{li2016diversity,
  title={A Diversity-Promoting Objective Function for Neural Conversation Models},
  author={Li, Jiwei and Galley, Michel and Brockett, Chris and Gao, Jianfeng and Dolan, Bill},
  booktitle={Proceedings of NAACL-HLT},
  pages={110--119},
  year={2016}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated texts; tokens are separated by whitespace.
    max_order (`int`, default 2): report n = 1 .. max_order.
    lowercase (`bool`, default False): compare lowercased tokens.
Returns:
    distinct_<n> (`float`): distinct n-grams / n-grams, over all predictions together (NaN if none).
    distinct_<n>_per_text (`float`): mean over predictions with at least one n-gram of that ratio.
    unique_<n>, total_<n> (`int`): distinct and total n-grams over all predictions.
    num_texts (`int`): number of predictions.
Examples:
    >>> distinct = Distinct()
    >>> result = distinct.compute(predictions=["a a b", "a b"])
    >>> result["distinct_1"], result["distinct_2"]
    (0.4, 0.6666666666666666)
"""


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order (none when there are fewer than n tokens)."""
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


class Distinct(evaluate.Metric):
    """Distinct-n, corpus level and per text (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string")}),
            reference_urls=["https://aclanthology.org/N16-1014/"],
        )

    def add_batch(self, *, predictions=None, **kwargs) -> None:
        """Add texts; overridden so that an empty batch fails with a clear message."""
        if predictions is not None and len(predictions) == 0:
            raise ValueError("distinct got an empty list of predictions: give at least one text")
        super().add_batch(predictions=predictions, **kwargs)

    def compute(self, *, predictions=None, **kwargs) -> dict | None:
        """Distinct-n of everything added; overridden to fail clearly when nothing was added."""
        if predictions is None and self.writer is None:
            raise ValueError("distinct has no texts: add some (`add`, `add_batch`) or pass predictions=")
        return super().compute(predictions=predictions, **kwargs)

    def _compute(self, predictions, max_order: int = 2, lowercase: bool = False) -> dict:
        if len(predictions) == 0:
            raise ValueError("distinct-n is undefined over zero texts: no prediction was given")
        if max_order < 1:
            raise ValueError(f"max_order must be >= 1, got {max_order}")
        texts = [(text.lower() if lowercase else text).split() for text in predictions]
        result: dict[str, float | int] = {}
        for n in range(1, max_order + 1):
            corpus: set[tuple[str, ...]] = set()
            total = 0
            per_text = []
            for tokens in texts:
                grams = ngrams(tokens, n)
                corpus.update(grams)
                total += len(grams)
                if grams:
                    per_text.append(len(set(grams)) / len(grams))
            result[f"distinct_{n}"] = len(corpus) / total if total else math.nan
            result[f"distinct_{n}_per_text"] = sum(per_text) / len(per_text) if per_text else math.nan
            result[f"unique_{n}"] = len(corpus)
            result[f"total_{n}"] = total
        result["num_texts"] = len(texts)
        return result
