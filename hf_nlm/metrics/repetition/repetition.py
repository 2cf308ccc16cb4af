"""Repetition within a story, as an ``evaluate.Metric`` that works offline.

The repetition rate of order n of one story is the fraction of its n-grams that repeat an n-gram
seen earlier in the same story:

    rep_n(story) = (number of n-grams - number of distinct n-grams) / number of n-grams
                 = 1 - |unique n-grams| / |n-grams|

which is ``seq-rep-n`` of Welleck et al. ("Neural Text Generation with Unlikelihood Training",
ICLR 2020, sec. 6.1), there computed per continuation and averaged. ``repetition_<n>`` is the same
average over stories (those with at least one n-gram); a model that loops ("she went home. she went
home. ...") scores near 1, a story without a repeated n-gram 0. Unlike distinct-n, repeats *across*
stories do not count: this is about degenerate loops inside one text.

Texts are split on whitespace; n-grams do not cross stories. When no story has an n-gram the
average is 0/0, reported as NaN.

This file is self-contained (it imports only ``math``, ``datasets`` and ``evaluate``) so that
``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import math

import datasets
import evaluate

_DESCRIPTION = """\
Repetition within a story (Welleck et al. 2020's seq-rep-n): per story, the fraction of its n-grams
that repeat an earlier n-gram of the same story; averaged over stories, for n = 1 .. max_order.
"""

_CITATION = """\
@inproceedings{welleck2020neural,
  title={Neural Text Generation With Unlikelihood Training},
  author={Welleck, Sean and Kulikov, Ilia and Roller, Stephen and Dinan, Emily and Cho, Kyunghyun and \
Weston, Jason},
  booktitle={International Conference on Learning Representations},
  year={2020}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated stories, one string each; tokens separated by whitespace.
    max_order (`int`, default 4): report n = 1 .. max_order.
    lowercase (`bool`, default False): compare lowercased tokens.
Returns:
    repetition_<n> (`float`): mean over stories with at least one n-gram of
        1 - distinct n-grams / n-grams (NaN if no story has an n-gram).
    repeated_<n>, total_<n> (`int`): repeated and total n-grams summed over stories.
    num_texts (`int`): number of stories.
Examples:
    >>> repetition = Repetition()
    >>> result = repetition.compute(predictions=["a b a b", "c d"], max_order=2)
    >>> result["repetition_1"], result["repetition_2"]
    (0.25, 0.16666666666666666)
"""


class Repetition(evaluate.Metric):
    """Within-story repetition rate (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string")}),
            reference_urls=["https://openreview.net/forum?id=SJeYe0NtvH"],
        )

    def add_batch(self, *, predictions=None, **kwargs) -> None:
        """Add stories; overridden so that an empty batch fails with a clear message."""
        if predictions is not None and len(predictions) == 0:
            raise ValueError("repetition got an empty list of predictions: give at least one story")
        super().add_batch(predictions=predictions, **kwargs)

    def compute(self, *, predictions=None, **kwargs) -> dict | None:
        """Repetition of everything added; overridden to fail clearly when nothing was added."""
        if predictions is None and self.writer is None:
            raise ValueError("repetition has no stories: add some (`add`, `add_batch`) or pass predictions=")
        return super().compute(predictions=predictions, **kwargs)

    def _compute(self, predictions, max_order: int = 4, lowercase: bool = False) -> dict:
        if len(predictions) == 0:
            raise ValueError("repetition is undefined over zero stories: no prediction was given")
        if max_order < 1:
            raise ValueError(f"max_order must be >= 1, got {max_order}")
        texts = [(text.lower() if lowercase else text).split() for text in predictions]
        result: dict[str, float | int] = {}
        for n in range(1, max_order + 1):
            rates = []
            repeated = total = 0
            for tokens in texts:
                grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
                if grams:
                    repeats = len(grams) - len(set(grams))
                    rates.append(repeats / len(grams))
                    repeated += repeats
                    total += len(grams)
            result[f"repetition_{n}"] = sum(rates) / len(rates) if rates else math.nan
            result[f"repeated_{n}"] = repeated
            result[f"total_{n}"] = total
        result["num_texts"] = len(texts)
        return result
