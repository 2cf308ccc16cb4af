"""Tests of the adjusted perplexity metric (hf_nlm/metrics/adjusted_perplexity), worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import evaluate
import numpy as np
import pytest

from hf_nlm.metrics import AdjustedPerplexity, adjusted_perplexity_report, load_metric, metric_path
from hf_nlm.metrics.adjusted_perplexity.adjusted_perplexity import (
    adjusted_perplexity_report as report_from_script,
)

# "the zyx ate 3.14159 42 qwv zyx <eos>": a word-level vocabulary without "zyx", "qwv" and "3.14159".
# The model's probability of each target as encoded (of <unk_word> / <unk_num> for the unknown ones).
TOKENS = ["the", "zyx", "ate", "3.14159", "42", "qwv", "zyx", "<eos>"]
PROBS = [0.5, 0.2, 0.25, 0.1, 0.5, 0.2, 0.4, 0.8]
IS_NUMERAL = [0, 0, 0, 1, 1, 0, 0, 0]
IS_UNKNOWN = [0, 1, 0, 1, 0, 1, 1, 0]
LOG_PROB = [math.log(p) for p in PROBS]
EXAMPLE = {"log_prob": LOG_PROB, "is_numeral": IS_NUMERAL, "is_unknown": IS_UNKNOWN, "token": TOKENS}


@pytest.fixture
def offline(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
        monkeypatch.setenv(var, "1")


def _random_example(rng: np.random.Generator, size: int) -> dict:
    """Random tokens from a small pool, so that OOV types repeat; some classes may be empty."""
    is_numeral = (rng.random(size) < rng.random()).astype(int)
    is_unknown = (rng.random(size) < rng.random()).astype(int)
    token = []
    for numeral, unknown in zip(is_numeral, is_unknown, strict=True):
        pool = rng.integers(0, 4)  # at most 4 OOV types per class
        if numeral:
            token.append(f"{pool}.5" if unknown else str(int(rng.integers(0, 10))))
        else:
            token.append(f"oov{pool}" if unknown else f"w{int(rng.integers(0, 10))}")
    log_prob = np.log(rng.uniform(1e-4, 1.0, size))
    return {"log_prob": log_prob, "is_numeral": is_numeral, "is_unknown": is_unknown, "token": token}


# ----- hand-worked values -------------------------------------------------------------------------


def test_adjusted_perplexity_equals_a_hand_computation():
    # Product of all probabilities: .5*.2*.25*.1*.5*.2*.4*.8 = 8e-5 over N = 8 tokens.
    # Words: 3 <unk_word> targets ("zyx", "qwv", "zyx") stand for 2 OOV word types -> each / 2.
    # Numerals: 1 <unk_num> target ("3.14159"), 1 OOV numeral type -> / 1.
    # Adjusted product: 8e-5 / 2**3 = 1e-5.
    result = adjusted_perplexity_report(**EXAMPLE)
    assert result["perplexity"] == pytest.approx(8e-5 ** (-1 / 8), rel=1e-12)
    assert result["adjusted_perplexity"] == pytest.approx(1e-5 ** (-1 / 8), rel=1e-12)
    assert result["adjusted_perplexity"] == pytest.approx(10 ** (5 / 8), rel=1e-12)
    # exp(-(sum log p - sum log n_type) / N), written out token by token.
    log_n_type = [0, math.log(2), 0, math.log(1), 0, math.log(2), math.log(2), 0]
    by_hand = math.exp(-(sum(LOG_PROB) - sum(log_n_type)) / 8)
    assert result["adjusted_perplexity"] == pytest.approx(by_hand, rel=1e-12)

    # Words: .5*.2*.25*.2*.4*.8 = 0.0016 over 6 words; adjusted 0.0016 / 8 = 0.0002.
    assert result["perplexity_words"] == pytest.approx(0.0016 ** (-1 / 6), rel=1e-12)
    assert result["adjusted_perplexity_words"] == pytest.approx(0.0002 ** (-1 / 6), rel=1e-12)
    # Numerals: .1*.5 = 0.05 over 2 numerals; one OOV type, so no adjustment.
    assert result["perplexity_numerals"] == pytest.approx(math.sqrt(20), rel=1e-12)
    assert result["adjusted_perplexity_numerals"] == pytest.approx(math.sqrt(20), rel=1e-12)

    counts = {key: result[key] for key in result if key.startswith("num_")}
    assert counts == {
        "num_tokens": 8,
        "num_words": 6,
        "num_numerals": 2,
        "num_unknown_words": 3,
        "num_unknown_numerals": 1,
        "num_oov_word_types": 2,
        "num_oov_numeral_types": 1,
    }
    assert result["total_nll"] == pytest.approx(-math.log(8e-5), rel=1e-12)
    assert result["total_nll_words"] == pytest.approx(-math.log(0.0016), rel=1e-12)
    assert result["total_nll_numerals"] == pytest.approx(-math.log(0.05), rel=1e-12)
    assert result["total_adjusted_nll"] == pytest.approx(-math.log(1e-5), rel=1e-12)
    assert result["total_adjusted_nll_words"] == pytest.approx(-math.log(0.0002), rel=1e-12)
    assert result["total_adjusted_nll_numerals"] == pytest.approx(-math.log(0.05), rel=1e-12)


def test_unknown_numerals_are_divided_by_their_own_type_count():
    # Two <unk_num> targets of two types, one <unk_word>: numerals / 2 each, the word / 1.
    result = adjusted_perplexity_report(
        log_prob=np.log([0.5, 0.2, 0.2, 0.5]),
        is_numeral=[0, 1, 1, 0],
        is_unknown=[1, 1, 1, 0],
        token=["zyx", "3.14159", "2.71828", "<eos>"],
    )
    assert result["num_oov_word_types"] == 1 and result["num_oov_numeral_types"] == 2
    assert result["perplexity"] == pytest.approx((0.5 * 0.2 * 0.2 * 0.5) ** (-1 / 4), rel=1e-12)
    assert result["adjusted_perplexity"] == pytest.approx((0.5 * 0.1 * 0.1 * 0.5) ** (-1 / 4), rel=1e-12)
    assert result["adjusted_perplexity_numerals"] == pytest.approx(10.0, rel=1e-12)  # (.1 * .1) ** -1/2
    assert result["adjusted_perplexity_words"] == result["perplexity_words"] == pytest.approx(2.0)


def test_the_metric_gives_the_report_of_the_plain_function():
    metric_result = AdjustedPerplexity(keep_in_memory=True).compute(**EXAMPLE)
    assert metric_result == pytest.approx(adjusted_perplexity_report(**EXAMPLE), rel=1e-12)
    assert report_from_script is adjusted_perplexity_report
    assert set(metric_result) == {
        "perplexity", "perplexity_words", "perplexity_numerals",
        "adjusted_perplexity", "adjusted_perplexity_words", "adjusted_perplexity_numerals",
        "num_tokens", "num_words", "num_numerals", "num_unknown_words", "num_unknown_numerals",
        "num_oov_word_types", "num_oov_numeral_types",
        "total_nll", "total_nll_words", "total_nll_numerals",
        "total_adjusted_nll", "total_adjusted_nll_words", "total_adjusted_nll_numerals",
    }  # fmt: skip


# ----- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("adjusted", [False, True])
def test_word_and_numeral_perplexities_combine_to_the_total(adjusted):
    prefix = "adjusted_perplexity" if adjusted else "perplexity"
    rng = np.random.default_rng(0)
    for _ in range(50):
        result = adjusted_perplexity_report(**_random_example(rng, int(rng.integers(1, 40))))
        log_parts = [
            result["num_words"] * math.log(result[f"{prefix}_words"]) if result["num_words"] else 0.0,
            result["num_numerals"] * math.log(result[f"{prefix}_numerals"])
            if result["num_numerals"]
            else 0.0,
        ]
        combined = math.exp(sum(log_parts) / result["num_tokens"])
        assert combined == pytest.approx(result[prefix], rel=1e-9)
    # The hand example, explicitly: exp((6 log ppl_w + 2 log ppl_n) / 8) == ppl.
    result = adjusted_perplexity_report(**EXAMPLE)
    combined = math.exp(
        (6 * math.log(result[f"{prefix}_words"]) + 2 * math.log(result[f"{prefix}_numerals"])) / 8
    )
    assert combined == pytest.approx(result[prefix], rel=1e-12)


def test_adjusted_perplexity_is_perplexity_when_nothing_is_unknown():
    known = dict(EXAMPLE, is_unknown=[0] * len(TOKENS))
    result = adjusted_perplexity_report(**known)
    for suffix in ("", "_words", "_numerals"):
        assert result[f"adjusted_perplexity{suffix}"] == result[f"perplexity{suffix}"]
    assert result["num_oov_word_types"] == result["num_oov_numeral_types"] == 0
    assert result["perplexity"] == pytest.approx(8e-5 ** (-1 / 8), rel=1e-12)
    # Also when every unknown target of a class is one and the same type (divided by 1).
    same_type = dict(EXAMPLE, token=["the", "zyx", "ate", "3.14159", "42", "zyx", "zyx", "<eos>"])
    result = adjusted_perplexity_report(**same_type)
    assert result["adjusted_perplexity"] == result["perplexity"]
    assert result["num_oov_word_types"] == 1 and result["num_unknown_words"] == 3


def test_adjusted_perplexity_is_never_below_perplexity():
    rng = np.random.default_rng(1)
    strictly_above = 0
    for _ in range(200):
        result = adjusted_perplexity_report(**_random_example(rng, int(rng.integers(1, 30))))
        for suffix in ("", "_words", "_numerals"):
            ppl, app = result[f"perplexity{suffix}"], result[f"adjusted_perplexity{suffix}"]
            assert (ppl is None) == (app is None)
            if ppl is not None:
                assert app >= ppl
        strictly_above += result["adjusted_perplexity"] > result["perplexity"] * (1 + 1e-9)
    assert strictly_above > 50  # the property is not vacuous


def test_a_class_without_tokens_has_none_perplexities():
    words_only = adjusted_perplexity_report(
        log_prob=[-1.0, -1.0], is_numeral=[0, 0], is_unknown=[1, 0], token=["zyx", "<eos>"]
    )
    assert words_only["perplexity_numerals"] is None and words_only["adjusted_perplexity_numerals"] is None
    assert words_only["num_numerals"] == 0 and words_only["total_nll_numerals"] == 0.0
    assert words_only["perplexity"] == words_only["perplexity_words"] == pytest.approx(math.e)
    numerals_only = adjusted_perplexity_report(log_prob=[-2.0], is_numeral=[1], is_unknown=[0], token=["42"])
    assert numerals_only["perplexity_words"] is None and numerals_only["adjusted_perplexity_words"] is None
    assert numerals_only["perplexity_numerals"] == pytest.approx(math.exp(2.0))


# ----- batching and loading -----------------------------------------------------------------------


def test_oov_types_are_counted_over_all_batches():
    # "zyx" is unknown in the first and the last piece: counted once, as in the whole text.
    metric = AdjustedPerplexity(keep_in_memory=True)
    for piece in (slice(0, 3), slice(3, 5), slice(5, 8)):
        metric.add_batch(**{key: values[piece] for key, values in EXAMPLE.items()})
    batched = metric.compute()
    assert batched == pytest.approx(AdjustedPerplexity(keep_in_memory=True).compute(**EXAMPLE), rel=1e-12)
    assert batched["num_oov_word_types"] == 2
    assert batched["adjusted_perplexity"] == pytest.approx(10 ** (5 / 8), rel=1e-12)
    # Token by token with `add`, from numpy values and bools.
    metric = AdjustedPerplexity(keep_in_memory=True)
    for log_prob, numeral, unknown, token in zip(*EXAMPLE.values(), strict=True):
        metric.add(
            log_prob=np.float32(log_prob), is_numeral=bool(numeral), is_unknown=np.int64(unknown), token=token
        )
    assert metric.compute() == pytest.approx(batched, rel=1e-6)  # float32 log-probabilities


def test_batches_from_tensors():
    torch = pytest.importorskip("torch")
    metric = AdjustedPerplexity(keep_in_memory=True)
    metric.add_batch(
        log_prob=torch.tensor(LOG_PROB[:4], dtype=torch.float64),
        is_numeral=torch.tensor(IS_NUMERAL[:4]),
        is_unknown=torch.tensor(IS_UNKNOWN[:4], dtype=torch.bool),
        token=TOKENS[:4],
    )
    result = metric.compute(
        log_prob=torch.tensor(LOG_PROB[4:], dtype=torch.float64),
        is_numeral=torch.tensor(IS_NUMERAL[4:]),
        is_unknown=torch.tensor(IS_UNKNOWN[4:]),
        token=np.array(TOKENS[4:]),
    )
    assert result["adjusted_perplexity"] == pytest.approx(10 ** (5 / 8), rel=1e-12)


def test_loading_with_evaluate_and_load_metric_offline(offline):
    assert Path(metric_path("adjusted_perplexity")).parent.name == "adjusted_perplexity"
    expected = adjusted_perplexity_report(**EXAMPLE)
    by_path = evaluate.load(metric_path("adjusted_perplexity"), keep_in_memory=True)
    by_folder = evaluate.load(str(Path(metric_path("adjusted_perplexity")).parent), keep_in_memory=True)
    by_name = load_metric("adjusted_perplexity", keep_in_memory=True)
    for metric in (by_path, by_folder, by_name):
        assert isinstance(metric, evaluate.Metric)
        assert type(metric).__name__ == "AdjustedPerplexity"
        metric.add_batch(**{key: values[:5] for key, values in EXAMPLE.items()})
        metric.add_batch(**{key: values[5:] for key, values in EXAMPLE.items()})
        assert metric.compute() == pytest.approx(expected, rel=1e-12)


# ----- bad input ----------------------------------------------------------------------------------


def _with(**changes) -> dict:
    return dict(EXAMPLE, **changes)


@pytest.mark.parametrize(
    "inputs, message",
    [
        (_with(log_prob=[float("nan")] + LOG_PROB[1:]), r"log_prob must be finite, got nan for token 0"),
        (_with(log_prob=LOG_PROB[:2] + [-math.inf] + LOG_PROB[3:]), r"finite, got -inf for token 2"),
        (
            _with(log_prob=LOG_PROB[:-1] + [0.5]),
            r"log_prob must be <= 0 .* got 0.5 for token 7: were negative",
        ),
        (_with(log_prob=LOG_PROB[:-1]), r"one entry per token, got lengths log_prob=7, is_numeral=8"),
        (_with(token=TOKENS + ["extra"]), r"token=9"),
        (
            _with(is_numeral=[0, 0, 0, 2, 1, 0, 0, 0]),
            r"is_numeral must be 0 or 1 per token, got 2 for token 3",
        ),
        (
            _with(is_unknown=[0, -1, 0, 1, 0, 1, 1, 0]),
            r"is_unknown must be 0 or 1 per token, got -1 for token 1",
        ),
        (_with(is_unknown=[0, 0.5, 0, 1, 0, 1, 1, 0]), r"is_unknown must be 0 or 1 .* got 0.5"),
        (_with(is_numeral=["no"] * 8), r"is_numeral must be 0 or 1 per token"),
        (_with(token=TOKENS[:3] + ["<unk_num>"] + TOKENS[4:]), r"token 3 is unknown .* ORIGINAL text"),
        (_with(token=["the", "<UNK>"] + TOKENS[2:]), r"token 1 is unknown .* an unknown symbol"),
        (_with(token=["the", ""] + TOKENS[2:]), r"token 1 is unknown but its text is empty"),
        (_with(token=TOKENS[:-1] + [None]), r"token must hold the original text .* got None .* token 7"),
        (_with(token="the zyx ate"), r"single string"),
        (
            _with(is_unknown=[0, 1, 0, 1, 0, 1, 0, 0]),
            r"the word 'zyx' is marked unknown for some tokens and known",
        ),
        (_with(log_prob=[[-1.0]] * 8), r"one log_prob per token, got an array of shape \(8, 1\)"),
        (_with(token=None), r"missing: token"),
        ({"log_prob": [], "is_numeral": [], "is_unknown": [], "token": []}, r"(zero tokens|empty batch)"),
    ],
)
def test_bad_input_is_a_clear_error(inputs, message):
    with pytest.raises(ValueError, match=message):
        adjusted_perplexity_report(**inputs)
    with pytest.raises(ValueError, match=message):
        AdjustedPerplexity(keep_in_memory=True).compute(**inputs)


def test_add_rejects_bad_values_where_they_are_added():
    metric = AdjustedPerplexity(keep_in_memory=True)
    with pytest.raises(ValueError, match="finite"):
        metric.add(log_prob=float("inf"), is_numeral=0, is_unknown=0, token="the")
    with pytest.raises(ValueError, match="missing: is_unknown"):
        metric.add(log_prob=-1.0, is_numeral=0, token="the")
    with pytest.raises(ValueError, match="token must be the original text"):
        metric.add(log_prob=-1.0, is_numeral=0, is_unknown=0, token=["the"])
    with pytest.raises(ValueError, match="empty batch"):
        metric.add_batch(log_prob=[], is_numeral=[], is_unknown=[], token=[])


def test_positive_log_prob_is_allowed_for_numeral_densities_only():
    density = _with(log_prob=LOG_PROB[:3] + [1.5] + LOG_PROB[4:])  # token 3 is a numeral
    with pytest.raises(ValueError, match=r"got 1.5 for token 3: .*allow_density=True"):
        AdjustedPerplexity(keep_in_memory=True).compute(**density)
    result = AdjustedPerplexity(keep_in_memory=True).compute(**density, allow_density=True)
    assert result["total_nll_numerals"] == pytest.approx(-1.5 - math.log(0.5))
    assert result["perplexity_numerals"] == pytest.approx(math.exp((-1.5 - math.log(0.5)) / 2))
    assert adjusted_perplexity_report(**density, allow_density=True) == pytest.approx(result)
    # A word's probability is at most 1 even for a model with numeral densities.
    word_positive = _with(log_prob=[0.25] + LOG_PROB[1:])
    with pytest.raises(ValueError, match=r"<= 0 for words, got 0.25 for token 0"):
        adjusted_perplexity_report(**word_positive, allow_density=True)
    # log p = 0 (p = 1) is not positive.
    assert adjusted_perplexity_report(**_with(log_prob=[0.0] * 8))["perplexity"] == 1.0


def test_compute_without_data_is_a_clear_error():
    with pytest.raises(ValueError, match="adjusted perplexity has no data"):
        AdjustedPerplexity(keep_in_memory=True).compute()


def test_huge_nll_gives_infinite_perplexity_instead_of_overflow():
    result = adjusted_perplexity_report(log_prob=[-1e6], is_numeral=[1], is_unknown=[0], token=["42"])
    assert result["perplexity"] == result["perplexity_numerals"] == math.inf
    assert result["total_nll"] == 1e6
