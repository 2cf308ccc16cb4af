"""Evaluation metrics shipped inside the package, usable offline.

Each metric is an ``evaluate.Metric`` in its own self-contained script,
``hf_nlm/metrics/<name>/<name>.py``, the layout ``evaluate.load`` expects of a local module, so all of
these work without the Hub::

    from hf_nlm.metrics import Perplexity, load_metric
    ppl = load_metric("perplexity")                  # evaluate.load on the shipped script
    ppl = evaluate.load(hf_nlm.metrics.metric_path("perplexity"))   # the same, by hand
    ppl = Perplexity()                               # the class, imported normally

``adjusted_perplexity`` (perplexity and adjusted perplexity over words and numerals, Spithourakis &
Riedel 2018) also has a plain function, :func:`adjusted_perplexity_report`, for evaluation code that
has the per-token arrays at hand and does not need evaluate's Arrow cache. ``number_prediction`` (MAPE
and MdAPE of point predictions of numerals, with the "always the training mean / median" baselines,
Spithourakis & Riedel 2018) likewise has :func:`number_prediction_report`. For story generation:
``distinct`` (distinct-n, Li et al. 2016), ``repetition`` (within-story repetition, Welleck et al.
2020's seq-rep-n) and ``story_cloze`` (Story Cloze accuracy from per-ending scores;
:func:`hf_nlm.evaluation.story_cloze_accuracy` scores the endings with a causal LM).

:data:`AVAILABLE_METRICS` is read from the folders: a new metric is one folder with its script, nothing
else to edit. The metric folders have no ``__init__.py`` on purpose: they are scripts for ``evaluate.load``;
Python imports them here as namespace packages.
"""

from __future__ import annotations

from pathlib import Path

import evaluate

from hf_nlm.metrics.adjusted_perplexity.adjusted_perplexity import (
    AdjustedPerplexity,
    adjusted_perplexity_report,
)
from hf_nlm.metrics.bleu.bleu import Bleu
from hf_nlm.metrics.distinct.distinct import Distinct
from hf_nlm.metrics.number_prediction.number_prediction import (
    NumberPrediction,
    number_prediction_report,
)
from hf_nlm.metrics.perplexity.perplexity import Perplexity
from hf_nlm.metrics.repetition.repetition import Repetition
from hf_nlm.metrics.story_cloze.story_cloze import StoryCloze

_METRICS_DIR = Path(__file__).resolve().parent


def discover_metrics(directory: Path = _METRICS_DIR) -> tuple[str, ...]:
    """The names of the metrics shipped in ``directory``, sorted: every folder ``<name>`` that holds a
    script ``<name>/<name>.py``."""
    return tuple(sorted(path.parent.name for path in directory.glob("*/*.py")
                        if path.stem == path.parent.name))


#: Names accepted by :func:`load_metric` and :func:`metric_path`: the metric folders found here, so a new
#: metric is one folder ``hf_nlm/metrics/<name>/<name>.py``.
AVAILABLE_METRICS = discover_metrics()


def metric_path(name: str) -> str:
    """Absolute path of the script of the shipped metric ``name``, for ``evaluate.load``."""
    if name not in AVAILABLE_METRICS:
        raise ValueError(f"unknown metric {name!r}; hf_nlm ships {', '.join(AVAILABLE_METRICS)}")
    return str(_METRICS_DIR / name / f"{name}.py")


def load_metric(name: str, **kwargs) -> evaluate.EvaluationModule:
    """Load a shipped metric through ``evaluate.load`` by path, never touching the Hub.

    Going through ``evaluate.load`` (rather than instantiating the class) gives the instance the
    same module hash, cache location and distributed-evaluation behaviour as any evaluate metric.

    Args:
        name: one of :data:`AVAILABLE_METRICS`.
        **kwargs: passed to ``evaluate.load`` (e.g. ``keep_in_memory=True``, ``num_process``,
            ``process_id``, ``experiment_id``).
    """
    return evaluate.load(metric_path(name), **kwargs)


__all__ = [
    "AVAILABLE_METRICS",
    "AdjustedPerplexity",
    "Bleu",
    "Distinct",
    "NumberPrediction",
    "Perplexity",
    "Repetition",
    "StoryCloze",
    "adjusted_perplexity_report",
    "discover_metrics",
    "load_metric",
    "metric_path",
    "number_prediction_report",
]
