"""Story Cloze Test accuracy (Mostafazadeh et al. 2016), as an ``evaluate.Metric`` that works offline;
:func:`hf_nlm.evaluation.story_cloze_accuracy` scores the endings with a causal LM.

The test gives the first four sentences of a story and two endings; a system is right when it
picks the right ending. The classic zero-shot evaluation of a language model: score each ending
by its log-probability given the context, ``log p(ending | s1..s4) = sum_t log p(e_t | s1..s4,
e_<t)``, and pick the higher (as in Radford et al. 2018 and later LM papers). Because the sum
favours short endings, the length-normalised score (the mean log-probability per ending token) is
reported too.

The metric itself only compares given scores: ``predictions`` holds one score per ending (any
number of endings), ``references`` the 0-based index of the right one (``label`` of
:func:`hf_nlm.data.load_story_cloze`). The highest score wins; a tie goes to the first ending
(``num_ties`` counts them, so that a degenerate scorer cannot hide).

The script imports only ``numpy``, ``datasets`` and ``evaluate``, so
``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """\
Story Cloze Test accuracy (Mostafazadeh et al. 2016): the fraction of examples whose highest-scored
ending is the right one, from per-ending scores (e.g. log-probabilities under a language model).
"""

_CITATION = """\
@inproceedings{mostafazadeh2016corpus,
  title={A Corpus and Cloze Evaluation for Deeper Understanding of Commonsense Stories},
  author={Mostafazadeh, Nasrin and Chambers, Nathanael and He, Xiaodong and Parikh, Devi and Batra, Dhruv
          and Vanderwende, Lucy and Kohli, Pushmeet and Allen, James},
  booktitle={Proceedings of NAACL-HLT},
  pages={839--849},
  year={2016}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): one score per ending for each example (higher is better),
        the same number of endings (at least 2) for every example; no NaN.
    references (`list` of `int`): the 0-based index of the right ending of each example.
Returns:
    accuracy (`float`): fraction of examples whose highest score is the right ending's.
    num_examples (`int`), num_correct (`int`).
    num_ties (`int`): examples whose highest score is shared by several endings (the first one is picked).
Examples:
    >>> cloze = StoryCloze()
    >>> cloze.compute(predictions=[[-3.0, -5.0], [-2.0, -1.0]], references=[0, 0])["accuracy"]
    0.5
"""


def _check(predictions, references) -> None:
    if len(predictions) == 0:
        raise ValueError("story_cloze got an empty list of predictions: give at least one example")
    if references is not None and len(predictions) != len(references):
        raise ValueError(f"story_cloze got {len(predictions)} predictions but {len(references)} references")


class StoryCloze(evaluate.Metric):
    """Accuracy of picking the highest-scored ending (see the module docstring)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Sequence(datasets.Value("float64")),
                 "references": datasets.Value("int64")}
            ),
            reference_urls=["https://aclanthology.org/N16-1098/", "https://cs.rochester.edu/nlp/rocstories/"],
        )

    def add_batch(self, *, predictions=None, references=None, **kwargs) -> None:
        """Add examples; overridden so that an empty or mismatched batch fails with a clear message."""
        if predictions is not None and references is not None:
            _check(predictions, references)
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs) -> dict | None:
        """Accuracy of everything added; overridden to fail clearly when nothing was added."""
        if predictions is None and references is None and self.writer is None:
            raise ValueError("story_cloze has no examples: add some (`add`, `add_batch`) or pass "
                             "predictions=")
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(self, predictions, references) -> dict:
        _check(predictions, references)
        widths = {len(scores) for scores in predictions}
        if len(widths) != 1 or min(widths) < 2:
            raise ValueError(f"story_cloze: every example needs the same number (>= 2) of ending scores, "
                             f"got {sorted(widths)}")
        scores = np.asarray(predictions, dtype=np.float64)
        if np.isnan(scores).any():
            first = int(np.flatnonzero(np.isnan(scores).any(axis=1))[0])
            raise ValueError(f"story_cloze: example {first} has a NaN score")
        labels = np.asarray(references, dtype=np.int64)
        if ((labels < 0) | (labels >= scores.shape[1])).any():
            first = int(np.flatnonzero((labels < 0) | (labels >= scores.shape[1]))[0])
            raise ValueError(
                f"story_cloze: reference {first} is {labels[first]}, expected a 0-based ending index in "
                f"0..{scores.shape[1] - 1} (AnswerRightEnding - 1)"
            )
        best = scores.max(axis=1, keepdims=True)
        correct = int((scores.argmax(axis=1) == labels).sum())
        return {
            "accuracy": correct / len(labels),
            "num_examples": len(labels),
            "num_correct": correct,
            "num_ties": int(((scores == best).sum(axis=1) > 1).sum()),
        }

