"""MAPE and MdAPE of point predictions of numerals, as an ``evaluate.Metric``.

Spithourakis & Riedel (2018), "Numeracy for Language Models", score a language model's numerals not
only by perplexity but also as a regression: at each numeral of the evaluated text the model makes a
point prediction of its value (e.g. the mean, median or mode of its distribution over numerals) and
the prediction is compared with the value actually written. The input is one row per numeral
position: ``predictions`` (the predicted value) and ``references`` (the true value), both floats.
With the absolute percentage error of position ``i``

    APE_i = |prediction_i - reference_i| / |reference_i|

the metric reports

    mape  = 100 * mean(APE_i)        (mean absolute percentage error)
    mdape = 100 * median(APE_i)      (median absolute percentage error; the mean of the two middle
                                      values for an even count)

Two scores of Berg-Kirkpatrick & Spokoyny (2020), "An Empirical Investigation of Contextualized Number
Prediction", which judge the order of magnitude rather than the ratio:

    logmae            = mean |log10 |prediction_i| - log10 |reference_i||   (over positions where neither
                                                                            is 0; the others are counted
                                                                            in ``num_logmae_left_out``)
    exponent_accuracy = share of positions whose prediction has the reference's sign and power of ten,
                        floor(log10 |v|) (0 matches only 0)

Given the training numerals (the ``train_values`` compute option), it also reports the paper's two
baselines, a "model" that always predicts the training mean and one that always predicts the training
median, scored on the same positions: ``mape_mean_baseline``, ``mdape_mean_baseline``,
``mape_median_baseline``, ``mdape_median_baseline`` (and ``logmae_*_baseline``,
``exponent_accuracy_*_baseline``), together with ``train_mean``, ``train_median`` and
``num_train_values``. Without ``train_values`` these keys are absent.

References equal to 0: the APE is undefined (a division by zero). Such positions are LEFT OUT of all
the ratios (the model's and the baselines'), and counted in ``num_zero_references``; ``num_numerals``
counts every position, so the scores are averages over ``num_numerals - num_zero_references``
positions. When every reference is 0 the scores are ``None`` (JSON-safe, never inf or NaN).

Errors (``ValueError``): a non-finite (NaN, inf) prediction, reference or training value, naming its
position; input that is not numbers, not one-dimensional, or of mismatched lengths; no numerals at
all; an empty ``train_values``; an APE or score that overflows float64 (a reference so close to 0, or
a prediction so far off, that the ratio exceeds ~1.8e308), naming the position.

Adding the data in pieces (``add``, ``add_batch``) gives exactly the result of one ``compute``: the
mean is an exact sum (``math.fsum``) and the median does not depend on the order.

The computation lives in :func:`number_prediction_report`, which evaluation code can call on arrays
directly (without evaluate's Arrow cache); the metric's ``_compute`` calls it too.

This file is self-contained (it imports only ``math``, ``numpy``, ``datasets`` and ``evaluate``) so
that ``evaluate.load("<path to this file or its folder>")`` works offline.
"""

from __future__ import annotations

import math
import numbers

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """\
Regression scores of point predictions of numerals: mean and median absolute percentage error
(MAPE, MdAPE, in percent), the mean absolute error of log10 magnitudes (LogMAE) and the share of
predictions of the right sign and power of ten (exponent accuracy), with the baselines "always predict \
the training mean" and "always predict
the training median" when the training values are given. Positions whose reference is 0 (APE
undefined) are left out of the ratios and counted.
"""

_CITATION = """\
@inproceedings{spithourakis2018numeracy,
  title={Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers},
  author={Spithourakis, Georgios and Riedel, Sebastian},
  booktitle={Proceedings of the 56th Annual Meeting of the Association for Computational Linguistics},
  pages={2104--2115},
  year={2018}
}
@inproceedings{berg-kirkpatrick2020empirical,
  title={An Empirical Investigation of Contextualized Number Prediction},
  author={Berg-Kirkpatrick, Taylor and Spokoyny, Daniel},
  booktitle={Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing},
  pages={4754--4764},
  year={2020}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): per numeral position, the model's point prediction of its value.
        Must be finite.
    references (`list` of `float`): per numeral position, the true value. Must be finite; a position
        whose reference is 0 is left out of the ratios (and counted in `num_zero_references`).
    train_values (`list` of `float`, optional): a `compute` option, the values of the training
        numerals (finite, at least one); when given, the mean and median baselines are reported.
Returns:
    mape (`float` or `None`): 100 * mean over positions with a nonzero reference of
        |prediction - reference| / |reference|; `None` when every reference is 0.
    mdape (`float` or `None`): 100 * the median of the same ratios; `None` when every reference is 0.
    num_numerals (`int`): number of positions, zero references included.
    num_zero_references (`int`): positions whose reference is 0, left out of every ratio.
    logmae (`float` or `None`): mean over positions where neither value is 0 of
        |log10 |prediction| - log10 |reference||; `None` when there is no such position.
    num_logmae_left_out (`int`): positions left out of `logmae` (a 0 on either side).
    exponent_accuracy (`float`): share of positions whose prediction has the reference's sign and
        power of ten (floor(log10 |v|); 0 matches only 0).
    Only with `train_values`:
    mape_mean_baseline, mdape_mean_baseline (`float` or `None`): the same scores of always predicting
        `train_mean`.
    mape_median_baseline, mdape_median_baseline (`float` or `None`): the same scores of always
        predicting `train_median`.
    logmae_mean_baseline, exponent_accuracy_mean_baseline, logmae_median_baseline,
        exponent_accuracy_median_baseline: the magnitude scores of the two baselines.
    train_mean, train_median (`float`): mean and median of `train_values`.
    num_train_values (`int`): number of `train_values`.
Examples:
    >>> metric = NumberPrediction()
    >>> result = metric.compute(predictions=[45.0, 5.0, 200.0, 13.0], references=[50.0, 4.0, 200.0, 10.0])
    >>> round(result["mape"], 4)  # 100 * (0.1 + 0.25 + 0 + 0.3) / 4
    16.25
    >>> round(result["mdape"], 4)  # 100 * (0.1 + 0.25) / 2
    17.5
"""

_FEATURES = ("predictions", "references")


def _value_array(name: str, values, noun: str = "position") -> np.ndarray:
    """``values`` (list, numpy array or CPU tensor of numbers) as a 1-D float64 array of finite values.

    Bools and strings are refused: a numeral's value given as ``True`` or ``"3.5"`` is a bug upstream.
    """
    if values is None:
        raise ValueError(f"{name} is missing")
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a list of numbers, one per {noun}, got a single string")
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"expected one {name} value per {noun}, got an array of shape {array.shape}")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number):
        # Find the offending entry to name it (object arrays: None, strings, ints beyond float64).
        for index, value in enumerate(array.tolist()):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(
                    f"{name} must be numbers, got {value!r} ({type(value).__name__}) at {noun} {index}"
                )
            try:
                float(value)
            except OverflowError:
                raise ValueError(
                    f"{name} must be finite float64 values, got {value!r} at {noun} {index}, too large"
                ) from None
        array = np.asarray([float(value) for value in array.tolist()], dtype=np.float64)
    if np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got values of type {array.dtype}")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        index = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"{name} must be finite, got {array[index]} at {noun} {index}")
    return array


def _validate(predictions, references) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as 1-D finite float64 arrays of the same length (possibly empty)."""
    missing = [name for name, value in zip(_FEATURES, (predictions, references), strict=True)
               if value is None]
    if missing:
        raise ValueError(
            f"number prediction needs predictions and references per numeral; missing: {', '.join(missing)}"
        )
    predictions = _value_array("predictions", predictions)
    references = _value_array("references", references)
    if len(predictions) != len(references):
        raise ValueError(
            "predictions and references must have one entry per numeral position, got lengths "
            f"predictions={len(predictions)}, references={len(references)}"
        )
    return predictions, references


def _midpoint(low: float, high: float) -> float:
    """(low + high) / 2 without overflowing when both are huge."""
    middle = (low + high) / 2
    return middle if math.isfinite(middle) else low / 2 + high / 2


def _median(values: np.ndarray) -> float:
    """Median of a non-empty 1-D array (mean of the two middle values for an even count)."""
    ordered = np.sort(values)
    half = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[half])
    return _midpoint(float(ordered[half - 1]), float(ordered[half]))


def _mean(values: np.ndarray) -> float:
    """Exact-sum mean of a non-empty 1-D array of finite values, without overflowing."""
    try:
        return math.fsum(values.tolist()) / len(values)
    except OverflowError:  # the sum exceeds float64; the mean may not
        try:
            return math.fsum((values / len(values)).tolist())
        except OverflowError:
            return math.inf


def _scores(predictions: np.ndarray, references: np.ndarray,
            scored_by: str) -> tuple[float | None, float | None]:
    """(MAPE, MdAPE) in percent over the positions with a nonzero reference; (None, None) if none."""
    nonzero = references != 0
    if not np.any(nonzero):
        return None, None
    positions = np.flatnonzero(nonzero)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ape = np.abs(predictions[positions] - references[positions]) / np.abs(references[positions])
    if not np.all(np.isfinite(ape)):
        bad = int(np.flatnonzero(~np.isfinite(ape))[0])
        index = int(positions[bad])
        raise ValueError(
            f"the absolute percentage error of {scored_by} at position {index} overflows float64 "
            f"(prediction {predictions[index]!r}, reference {references[index]!r})"
        )
    mape = 100 * _mean(ape)
    mdape = 100 * _median(ape)
    if not (math.isfinite(mape) and math.isfinite(mdape)):
        raise ValueError(
            f"the percentage errors of {scored_by} overflow float64 (relative errors above ~1.8e306)"
        )
    return mape, mdape


def _magnitude_scores(predictions: np.ndarray, references: np.ndarray) -> tuple[float | None, int, float]:
    """(LogMAE, positions left out of it, exponent accuracy) of Berg-Kirkpatrick & Spokoyny (2020)."""
    both = (predictions != 0) & (references != 0)
    with np.errstate(divide="ignore"):
        log_p, log_r = np.log10(np.abs(predictions)), np.log10(np.abs(references))
    logmae = _mean(np.abs(log_p[both] - log_r[both])) if np.any(both) else None
    # The class of a value: its sign and power of ten, or zero.
    def magnitude(values: np.ndarray, logs: np.ndarray) -> np.ndarray:
        return np.where(values == 0, 0, np.sign(values) * (np.floor(np.where(values == 0, 0, logs)) + 10_000))

    same = magnitude(predictions, log_p) == magnitude(references, log_r)
    return logmae, int(np.count_nonzero(~both)), float(np.mean(same))


def number_prediction_report(predictions, references, train_values=None) -> dict:
    """MAPE and MdAPE of point predictions of numerals (see the module docstring).

    Args:
        predictions: per numeral position, the predicted value (finite).
        references: per numeral position, the true value (finite; 0 is left out of the ratios).
        train_values: optional training numeral values (finite, non-empty); when given, the
            "always the training mean" and "always the training median" baselines are reported.

    Returns:
        The dict described in the metric's ``inputs_description``; scores over no nonzero
        reference are ``None``.

    Raises:
        ValueError: on empty, non-finite, non-numeric, non-1-D or mismatched-length input, an empty
            ``train_values``, or an error ratio beyond float64.
    """
    predictions, references = _validate(predictions, references)
    if len(predictions) == 0:
        raise ValueError("number prediction metrics are undefined over zero numerals: give at least one")
    mape, mdape = _scores(predictions, references, "the predictions")
    logmae, left_out, exponent_accuracy = _magnitude_scores(predictions, references)
    result = {
        "mape": mape,
        "mdape": mdape,
        "num_numerals": len(references),
        "num_zero_references": int(np.count_nonzero(references == 0)),
        "logmae": logmae,
        "num_logmae_left_out": left_out,
        "exponent_accuracy": exponent_accuracy,
    }
    if train_values is not None:
        train = _value_array("train_values", train_values, noun="index")
        if len(train) == 0:
            raise ValueError("train_values is empty: give the training numeral values, or leave it out")
        train_mean = _mean(train)
        train_median = _median(train)
        for name, constant in (("mean", train_mean), ("median", train_median)):
            baseline = np.full_like(references, constant)
            result[f"mape_{name}_baseline"], result[f"mdape_{name}_baseline"] = _scores(
                baseline, references, f"the training-{name} baseline"
            )
            logmae, _, exponent_accuracy = _magnitude_scores(baseline, references)
            result[f"logmae_{name}_baseline"], result[f"exponent_accuracy_{name}_baseline"] = (
                logmae, exponent_accuracy
            )
        result.update(train_mean=train_mean, train_median=train_median, num_train_values=len(train))
    return result


class NumberPrediction(evaluate.Metric):
    """MAPE and MdAPE of numeral point predictions, with training mean/median baselines."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
            reference_urls=["https://aclanthology.org/P18-1196/"],
        )

    def add_batch(self, *, predictions=None, references=None, **kwargs) -> None:
        """Add several numeral positions: lists (or arrays, tensors) ``predictions`` and ``references``.

        Overridden so that bad values fail here, next to the code that produced them, with a clear
        message naming the position within this batch.
        """
        predictions, references = _validate(predictions, references)
        if len(predictions) == 0:
            raise ValueError("number prediction got an empty batch: add at least one numeral position")
        super().add_batch(predictions=predictions.tolist(), references=references.tolist(), **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs) -> None:
        """Add one numeral position: its predicted value ``prediction`` and true value ``reference``."""
        values = [None if value is None else [value] for value in (prediction, reference)]
        predictions, references = _validate(*values)
        super().add(prediction=float(predictions[0]), reference=float(references[0]), **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs) -> dict | None:
        """The report over everything added (plus the positions given here).

        Overridden to fail clearly when nothing was added (evaluate would raise an AttributeError).
        """
        if predictions is None and references is None and self.writer is None:
            raise ValueError(
                "number prediction has no data: add numeral positions (`add`, `add_batch`) or pass "
                "predictions= and references="
            )
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(self, predictions, references, train_values=None) -> dict:
        # Validated again inside: in a distributed evaluation other processes' data arrive only now.
        return number_prediction_report(predictions, references, train_values=train_values)
