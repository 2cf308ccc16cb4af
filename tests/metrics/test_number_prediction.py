"""Tests of the number-prediction metric (hf_nlm/metrics/number_prediction), worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import evaluate
import numpy as np
import pytest

from hf_nlm.metrics import (
    AVAILABLE_METRICS,
    NumberPrediction,
    load_metric,
    metric_path,
    number_prediction_report,
)
from hf_nlm.metrics.number_prediction.number_prediction import (
    number_prediction_report as report_from_script,
)

# Four numerals of a test text and a model's point predictions of them.
REFERENCES = [50.0, 4.0, 200.0, 10.0]
PREDICTIONS = [45.0, 5.0, 200.0, 13.0]
EXAMPLE = {"predictions": PREDICTIONS, "references": REFERENCES}
# Training numerals: mean (2 + 4 + 6 + 20) / 4 = 8, median (4 + 6) / 2 = 5.
TRAIN = [20.0, 2.0, 6.0, 4.0]


# Berg-Kirkpatrick & Spokoyny's scores of the example:
# |log10 pred - log10 ref| = log10 of 50/45, 5/4, 1, 13/10; every prediction has its reference's power of
# ten (45 and 50, 5 and 4, 200, 13 and 10).
LOG_SCORES = {
    "logmae": pytest.approx(math.log10(50 / 45 * 5 / 4 * 13 / 10) / 4, rel=1e-12),
    "num_logmae_left_out": 0,
    "exponent_accuracy": 1.0,
}


def test_magnitude_scores_count_signs_zeros_and_powers_of_ten():
    result = number_prediction_report([0.0, -30.0, 99.0, 0.5, 7.0], [0.0, 30.0, 100.0, 0.09, 0.0])
    # 0 matches 0; -30 is not 30; 99 (10^1) is not 100 (10^2); 0.5 and 0.09 are 10^-1 and 10^-2; 7 is not 0.
    assert result["exponent_accuracy"] == pytest.approx(0.2)
    # LogMAE over the positions with no 0: -30/30 (0), 99/100, 0.5/0.09.
    assert result["num_logmae_left_out"] == 2
    assert result["logmae"] == pytest.approx((0 + math.log10(100 / 99) + math.log10(0.5 / 0.09)) / 3,
                                             rel=1e-12)
    assert number_prediction_report([1.0], [0.0])["logmae"] is None


@pytest.fixture
def offline(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        monkeypatch.setenv(var, "1")


# ----- hand-worked values -------------------------------------------------------------------------


def test_mape_and_mdape_equal_a_hand_computation():
    # APE = |pred - ref| / |ref|: 5/50 = 0.10, 1/4 = 0.25, 0/200 = 0, 3/10 = 0.30.
    # MAPE  = 100 * (0.10 + 0.25 + 0 + 0.30) / 4 = 100 * 0.65 / 4 = 16.25
    # MdAPE = 100 * median(0, 0.10, 0.25, 0.30) = 100 * (0.10 + 0.25) / 2 = 17.5
    result = number_prediction_report(PREDICTIONS, REFERENCES)
    assert result == {
        "mape": pytest.approx(16.25, rel=1e-12),
        "mdape": pytest.approx(17.5, rel=1e-12),
        "num_numerals": 4,
        "num_zero_references": 0,
        **LOG_SCORES,
    }
    # No baseline keys without training values.
    assert not any("baseline" in key or key.startswith("train") for key in result)
    # An odd count: the middle value. APEs 0.10, 0.25, 0 -> median 0.10.
    odd = number_prediction_report(PREDICTIONS[:3], REFERENCES[:3])
    assert odd["mdape"] == pytest.approx(10.0, rel=1e-12)
    assert odd["mape"] == pytest.approx(100 * 0.35 / 3, rel=1e-12)


def test_baselines_equal_a_hand_computation():
    # Always 8 (training mean): |8-50|/50 = 0.84, |8-4|/4 = 1.00, |8-200|/200 = 0.96, |8-10|/10 = 0.20
    #   MAPE = 100 * 3.00 / 4 = 75;  MdAPE = 100 * (0.84 + 0.96) / 2 = 90
    # Always 5 (training median): 45/50 = 0.90, 1/4 = 0.25, 195/200 = 0.975, 5/10 = 0.50
    #   MAPE = 100 * 2.625 / 4 = 65.625;  MdAPE = 100 * (0.50 + 0.90) / 2 = 70
    result = number_prediction_report(PREDICTIONS, REFERENCES, train_values=TRAIN)
    assert result == {
        "mape": pytest.approx(16.25, rel=1e-12),
        "mdape": pytest.approx(17.5, rel=1e-12),
        "num_numerals": 4,
        "num_zero_references": 0,
        **LOG_SCORES,
        "mape_mean_baseline": pytest.approx(75.0, rel=1e-12),
        "mdape_mean_baseline": pytest.approx(90.0, rel=1e-12),
        "mape_median_baseline": pytest.approx(65.625, rel=1e-12),
        "mdape_median_baseline": pytest.approx(70.0, rel=1e-12),
        # Always 8: log10 of 50/8, 8/4, 200/8, 10/8; only 4 shares 8's power of ten (10^0).
        "logmae_mean_baseline": pytest.approx(math.log10(6.25 * 2 * 25 * 1.25) / 4, rel=1e-12),
        "exponent_accuracy_mean_baseline": 0.25,
        # Always 5: log10 of 10, 1.25, 40, 2, which add up to 3.
        "logmae_median_baseline": pytest.approx(0.75, rel=1e-12),
        "exponent_accuracy_median_baseline": 0.25,
        "train_mean": 8.0,
        "train_median": 5.0,
        "num_train_values": 4,
    }
    # The baselines are the metric of a constant prediction.
    for name, constant in (("mean", 8.0), ("median", 5.0)):
        constant_result = number_prediction_report([constant] * 4, REFERENCES)
        assert result[f"mape_{name}_baseline"] == constant_result["mape"]
        assert result[f"mdape_{name}_baseline"] == constant_result["mdape"]
    # An odd number of training values: the median is the middle one (2, 4, 6 -> 4; mean 4).
    odd = number_prediction_report(PREDICTIONS, REFERENCES, train_values=np.array([6, 2, 4]))
    assert odd["train_median"] == 4.0 and odd["train_mean"] == 4.0


def test_negative_references_use_their_magnitude():
    # |-5 - -4| / 4 = 0.25; |4 - -4| / 4 = 2 (the wrong sign costs 200%); |-1 - 2| / 2 = 1.5
    result = number_prediction_report([-5.0, 4.0, -1.0], [-4.0, -4.0, 2.0])
    assert result["mape"] == pytest.approx(100 * 3.75 / 3, rel=1e-12)
    assert result["mdape"] == pytest.approx(150.0, rel=1e-12)


def test_zero_references_are_left_out_of_the_ratios_and_counted():
    # Positions 1 and 3 have reference 0: their APE is undefined; the others are the example's.
    # APEs 5/50 = 0.10, 1/4 = 0.25, 3/10 = 0.30 -> MAPE 100 * 0.65 / 3, MdAPE 25.
    predictions = [45.0, 3.0, 5.0, 0.0, 13.0]
    references = [50.0, 0.0, 4.0, -0.0, 10.0]
    result = number_prediction_report(predictions, references, train_values=TRAIN)
    assert result["mape"] == pytest.approx(100 * 0.65 / 3, rel=1e-12)
    assert result["mdape"] == pytest.approx(25.0, rel=1e-12)
    assert result["num_numerals"] == 5
    assert result["num_zero_references"] == 2
    # Baselines over the same three positions: always 8 -> 0.84, 1.00, 0.20; always 5 -> 0.90, 0.25, 0.50.
    assert result["mape_mean_baseline"] == pytest.approx(100 * 2.04 / 3, rel=1e-12)
    assert result["mdape_mean_baseline"] == pytest.approx(84.0, rel=1e-12)
    assert result["mape_median_baseline"] == pytest.approx(100 * 1.65 / 3, rel=1e-12)
    assert result["mdape_median_baseline"] == pytest.approx(50.0, rel=1e-12)
    assert all(v is None or math.isfinite(v) for v in result.values())


def test_all_zero_references_give_none_scores():
    result = number_prediction_report([1.0, 0.0], [0.0, 0.0], train_values=[3.0])
    assert result == {
        "mape": None,
        "mdape": None,
        "num_numerals": 2,
        "num_zero_references": 2,
        "logmae": None,  # no position without a 0
        "num_logmae_left_out": 2,
        "exponent_accuracy": 0.5,  # 0 predicted for 0
        "mape_mean_baseline": None,
        "mdape_mean_baseline": None,
        "mape_median_baseline": None,
        "mdape_median_baseline": None,
        "logmae_mean_baseline": None,
        "exponent_accuracy_mean_baseline": 0.0,
        "logmae_median_baseline": None,
        "exponent_accuracy_median_baseline": 0.0,
        "train_mean": 3.0,
        "train_median": 3.0,
        "num_train_values": 1,
    }
    assert NumberPrediction(keep_in_memory=True).compute(predictions=[1.0], references=[0.0])["mape"] is None


# ----- the evaluate metric ------------------------------------------------------------------------


def test_the_metric_gives_the_report_of_the_plain_function():
    assert report_from_script is number_prediction_report
    expected = number_prediction_report(PREDICTIONS, REFERENCES, train_values=TRAIN)
    assert NumberPrediction(keep_in_memory=True).compute(**EXAMPLE, train_values=TRAIN) == expected
    assert NumberPrediction(keep_in_memory=True).compute(**EXAMPLE) == number_prediction_report(**EXAMPLE)


def test_batches_in_pieces_equal_one_compute():
    predictions = [45.0, 3.0, 5.0, 0.0, 13.0, 7.5, 1e6]
    references = [50.0, 0.0, 4.0, 0.0, 10.0, 0.1, 999.0]
    whole = NumberPrediction(keep_in_memory=True).compute(
        predictions=predictions, references=references, train_values=TRAIN
    )
    assert whole == number_prediction_report(predictions, references, train_values=TRAIN)
    metric = NumberPrediction(keep_in_memory=True)
    for piece in (slice(0, 2), slice(2, 3), slice(3, 7)):
        metric.add_batch(predictions=predictions[piece], references=references[piece])
    assert metric.compute(train_values=TRAIN) == whole  # exact: fsum and an order-free median
    # One position at a time with `add`, from numpy scalars and ints; the rest given to compute.
    metric = NumberPrediction(keep_in_memory=True)
    for prediction, reference in zip(predictions[:4], references[:4], strict=True):
        metric.add(prediction=np.float64(prediction), reference=int(reference))
    result = metric.compute(
        predictions=np.array(predictions[4:]), references=references[4:], train_values=np.array(TRAIN)
    )
    assert result == whole
    # evaluate empties the metric after compute: a second evaluation starts from scratch.
    assert metric.compute(**EXAMPLE) == number_prediction_report(**EXAMPLE)


def test_batches_from_tensors():
    torch = pytest.importorskip("torch")
    metric = NumberPrediction(keep_in_memory=True)
    metric.add_batch(predictions=torch.tensor(PREDICTIONS[:2]), references=torch.tensor([50, 4]))
    result = metric.compute(
        predictions=torch.tensor(PREDICTIONS[2:], dtype=torch.float64),
        references=torch.tensor(REFERENCES[2:]),
        train_values=torch.tensor(TRAIN),
    )
    assert result == pytest.approx(number_prediction_report(**EXAMPLE, train_values=TRAIN), rel=1e-12)


def test_loading_with_evaluate_and_load_metric_offline(offline):
    assert "number_prediction" in AVAILABLE_METRICS
    assert Path(metric_path("number_prediction")).parent.name == "number_prediction"
    expected = number_prediction_report(**EXAMPLE, train_values=TRAIN)
    by_path = evaluate.load(metric_path("number_prediction"), keep_in_memory=True)
    by_folder = evaluate.load(str(Path(metric_path("number_prediction")).parent), keep_in_memory=True)
    by_name = load_metric("number_prediction", keep_in_memory=True)
    for metric in (by_path, by_folder, by_name):
        assert isinstance(metric, evaluate.Metric)
        assert type(metric).__name__ == "NumberPrediction"
        metric.add_batch(predictions=PREDICTIONS[:1], references=REFERENCES[:1])
        metric.add_batch(predictions=PREDICTIONS[1:], references=REFERENCES[1:])
        assert metric.compute(train_values=TRAIN) == pytest.approx(expected, rel=1e-12)


# ----- bad input ----------------------------------------------------------------------------------


def _with(**changes) -> dict:
    return dict(EXAMPLE, **changes)


@pytest.mark.parametrize(
    "inputs, message",
    [
        (
            _with(predictions=[45.0, float("nan"), 200.0, 13.0]),
            r"predictions must be finite, got nan at position 1",
        ),
        (_with(references=[50.0, 4.0, 200.0, math.inf]), r"references must be finite, got inf at position 3"),
        (
            _with(predictions=[-math.inf] + PREDICTIONS[1:]),
            r"predictions must be finite, got -inf at position 0",
        ),
        (
            _with(references=REFERENCES[:3]),
            r"one entry per numeral position, got lengths predictions=4, references=3",
        ),
        (_with(predictions=PREDICTIONS + [1.0]), r"predictions=5, references=4"),
        (
            _with(predictions=[45.0, None, 200.0, 13.0]),
            r"predictions must be numbers, got None .* position 1",
        ),
        (
            _with(references=["50", "4", "200", "10"]),
            r"references must be numbers, got '50' \(str\) at position 0",
        ),
        (_with(references=[True, False, True, True]), r"references must be numbers, got True \(bool\)"),
        (_with(references=[50, 4, 200, 10**400]), r"references must be finite float64 values, .* position 3"),
        (_with(predictions="45 5 200 13"), r"predictions must be a list of numbers.* single string"),
        (
            _with(predictions=[[45.0]] * 4),
            r"one predictions value per position, got an array of shape \(4, 1\)",
        ),
        (_with(references=None), r"missing: references"),
        ({"predictions": [], "references": []}, r"(zero numerals|empty batch)"),
        (_with(train_values=[]), r"train_values is empty"),
        (_with(train_values=[1.0, float("nan")]), r"train_values must be finite, got nan at index 1"),
        (_with(train_values=["1"]), r"train_values must be numbers, got '1'"),
        (
            _with(references=[1e-300] + REFERENCES[1:], predictions=[1e10] + PREDICTIONS[1:]),
            r"overflows float64",
        ),
        (
            _with(references=[-1e308] + REFERENCES[1:], predictions=[1e308] + PREDICTIONS[1:]),
            r"error of the predictions at position 0 overflows",
        ),
        (
            _with(references=[1e-300] + REFERENCES[1:], train_values=[1e10]),
            r"training-mean baseline at position 0",
        ),
    ],
)
def test_bad_input_is_a_clear_error(inputs, message):
    with pytest.raises(ValueError, match=message):
        number_prediction_report(**inputs)
    with pytest.raises(ValueError, match=message):
        NumberPrediction(keep_in_memory=True).compute(**inputs)


def test_add_rejects_bad_values_where_they_are_added():
    metric = NumberPrediction(keep_in_memory=True)
    with pytest.raises(ValueError, match="predictions must be finite, got nan at position 0"):
        metric.add(prediction=float("nan"), reference=1.0)
    with pytest.raises(ValueError, match="missing: references"):
        metric.add(prediction=1.0)
    with pytest.raises(ValueError, match="references must be finite, got inf at position 2"):
        metric.add_batch(predictions=[1.0, 2.0, 3.0], references=[1.0, 2.0, math.inf])
    with pytest.raises(ValueError, match="empty batch"):
        metric.add_batch(predictions=[], references=[])
    with pytest.raises(ValueError, match="number prediction has no data"):
        NumberPrediction(keep_in_memory=True).compute()
    with pytest.raises(ValueError, match="number prediction has no data"):
        NumberPrediction(keep_in_memory=True).compute(train_values=TRAIN)


def test_huge_but_finite_values_do_not_overflow():
    # Medians and means of values near the float64 limit stay finite.
    result = number_prediction_report([1e308, 1e308], [1.7e308, 1.7e308], train_values=[1.7e308, 1.7e308])
    assert result["train_mean"] == pytest.approx(1.7e308) and result["train_median"] == pytest.approx(1.7e308)
    assert result["mape"] == pytest.approx(100 * 0.7 / 1.7)
    assert result["mape_mean_baseline"] == 0.0
    assert all(v is None or math.isfinite(v) for v in result.values())
