"""Numerals scored chunk by chunk (Spithourakis & Riedel 2018's number prediction and numeral cost split):
the figures do not depend on the chunk, no call scores more numerals than the chunk, and a chunk that
cannot fit is refused before anything is allocated."""

from __future__ import annotations

import pytest
from numeral_test_cases import ALL_AT_ONCE, STRATEGIES, TEXTS, numeracy_model, numeracy_tokenizer, record_rows

HELD_OUT = ["in 1995 the surplus was 3.5 billion dollars , up 12 % .",
            "the budget fell 9 % to 1,250 million in 1990 .", "we spent 7 billion on 12 programs in 1991 ."]
NUM_NUMERALS = 9  # in HELD_OUT
#: The float32 model's matrix products may round the last bit differently for a different number of rows.
FLOAT32 = 1e-6


@pytest.fixture(scope="module")
def tokenizer():
    return numeracy_tokenizer()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_predictions_and_cost_breakdown_do_not_depend_on_the_chunk(tokenizer, strategy):
    from hf_nlm.evaluation import numeral_cost_breakdown
    from hf_nlm.evaluation.number_prediction import evaluate_number_prediction, predict_numbers

    model = numeracy_model(tokenizer, strategy)
    whole = predict_numbers(model, tokenizer, HELD_OUT, "mean", block_size=5, numeral_chunk_size=ALL_AT_ONCE)
    assert len(whole) == NUM_NUMERALS
    costs = numeral_cost_breakdown(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=ALL_AT_ONCE)
    for chunk in (1, 3):
        for statistic in ("mean", "median", "mode"):
            expected = whole if statistic == "mean" else predict_numbers(
                model, tokenizer, HELD_OUT, statistic, block_size=5, numeral_chunk_size=ALL_AT_ONCE)
            got = predict_numbers(model, tokenizer, HELD_OUT, statistic, block_size=5,
                                  numeral_chunk_size=chunk)
            assert [(p["index"], p["value"]) for p in got] == [(p["index"], p["value"]) for p in expected]
            assert got == [pytest.approx(p, rel=FLOAT32) for p in expected], (statistic, chunk)
        chunked = numeral_cost_breakdown(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=chunk)
        assert chunked == pytest.approx(costs, rel=FLOAT32)
    report = evaluate_number_prediction(model, tokenizer, HELD_OUT, TEXTS, "median", block_size=5,
                                        numeral_chunk_size=3)
    expected = evaluate_number_prediction(model, tokenizer, HELD_OUT, TEXTS, "median", block_size=5,
                                          numeral_chunk_size=ALL_AT_ONCE)
    assert report.pop("statistic") == expected.pop("statistic") == "median"
    assert report == pytest.approx(expected, rel=FLOAT32)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_call_scores_more_numerals_than_the_chunk(tokenizer, strategy, monkeypatch):
    """Fails if a (numerals x candidates) tensor of the whole split is built."""
    from hf_nlm.evaluation import numeral_cost_breakdown
    from hf_nlm.evaluation.number_prediction import predict_numbers

    model = numeracy_model(tokenizer, strategy)
    rows = record_rows(monkeypatch, model.lm_head)
    predictions = predict_numbers(model, tokenizer, HELD_OUT, "median", block_size=5, numeral_chunk_size=3)
    assert len(predictions) == NUM_NUMERALS > 3
    assert rows and max(rows) <= 3, rows
    rows.clear()
    numeral_cost_breakdown(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=3)
    assert rows and max(rows) <= 3, rows


@pytest.mark.parametrize("strategy", ["drnn", "combination"])
def test_the_adjusted_perplexity_scores_numerals_batch_by_batch(tokenizer, strategy, monkeypatch):
    """evaluate_lm (APP) scores each numeral by its own digits or value, a batch at a time: the d-RNN's
    full-vocabulary scoring (its trie over every digit string) never runs on the split at once."""
    from hf_nlm.evaluation import evaluate_lm
    from hf_nlm.heads.numeral.densities.digit_rnn import DigitRNN

    model = numeracy_model(tokenizer, strategy)
    all_strings: list[int] = []
    own_digits: list[int] = []

    def recording(fn, rows):
        def wrapped(self, hidden, *args):
            rows.append(hidden.reshape(-1, hidden.shape[-1]).shape[0])
            return fn(self, hidden, *args)
        return wrapped

    monkeypatch.setattr(DigitRNN, "log_prob_of_strings", recording(DigitRNN.log_prob_of_strings, all_strings))
    monkeypatch.setattr(DigitRNN, "log_prob", recording(DigitRNN.log_prob, own_digits))
    evaluate_lm(model, HELD_OUT, tokenizer, block_size=5, batch_size=1)
    assert own_digits and max(own_digits) <= 5 and max(all_strings, default=0) <= 5


@pytest.mark.parametrize("bad", [0, -1, 2.5, None])
def test_a_chunk_size_below_one_is_refused_naming_the_flag(tokenizer, bad):
    from hf_nlm.evaluation import numeral_cost_breakdown
    from hf_nlm.evaluation.number_prediction import predict_numbers

    model = numeracy_model(tokenizer, "hsoftmax")
    with pytest.raises(ValueError, match="--numeral-chunk-size"):
        predict_numbers(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=bad)
    with pytest.raises(ValueError, match="--numeral-chunk-size"):
        numeral_cost_breakdown(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=bad)


@pytest.mark.parametrize("strategy", ["drnn", "mog"])
def test_a_chunk_that_cannot_fit_is_refused_before_scoring_with_a_size_that_fits(tokenizer, strategy,
                                                                                   monkeypatch):
    import re

    from hf_nlm.evaluation import numeracy
    from hf_nlm.evaluation.number_prediction import predict_numbers

    model = numeracy_model(tokenizer, strategy)
    per_row = numeracy.numeral_row_bytes(model.lm_head)
    assert per_row > 32 * len(tokenizer)  # the open branch's own tables are counted
    monkeypatch.setattr(numeracy, "available_memory", lambda gpu: (8 * per_row, "memory available"))
    monkeypatch.setattr(model, "forward", lambda *a, **k: pytest.fail("scored although the chunk cannot fit"))
    with pytest.raises(ValueError, match="--numeral-chunk-size 4 ") as err:
        predict_numbers(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=ALL_AT_ONCE)
    fits = int(re.search(r"use --numeral-chunk-size (\d+)", str(err.value)).group(1))
    assert fits == 4 and "9 numerals at once" in str(err.value)
    with pytest.raises(ValueError, match="--numeral-chunk-size"):
        numeracy.numeral_cost_breakdown(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=9)
    monkeypatch.setattr(numeracy, "available_memory", lambda gpu: (per_row // 2, "memory available"))
    with pytest.raises(ValueError, match="no --numeral-chunk-size fits"):
        predict_numbers(model, tokenizer, HELD_OUT, block_size=5, numeral_chunk_size=1)
    monkeypatch.setattr(numeracy, "available_memory", lambda gpu: None)  # unreadable: not checked
    assert numeracy.check_numeral_chunk_size(ALL_AT_ONCE, 10, model.lm_head) == 10


def test_the_cli_flag_reaches_the_scoring_and_is_checked_first(tokenizer, tmp_path, monkeypatch, capsys):
    import json

    from hf_nlm.cli import evaluate as cli_evaluate
    from hf_nlm.evaluation import number_prediction
    from hf_nlm.evaluation.numeracy import DEFAULT_NUMERAL_CHUNK_SIZE
    from hf_nlm_cli import build_parser, main

    assert (build_parser().parse_args(["predict-numbers", str(tmp_path)]).numeral_chunk_size
            == DEFAULT_NUMERAL_CHUNK_SIZE)
    with pytest.raises(SystemExit):  # refused before the (missing) model is loaded
        main(["predict-numbers", str(tmp_path), "--numeral-chunk-size", "0"])
    assert "--numeral-chunk-size must be >= 1, got 0" in capsys.readouterr().err
    model = numeracy_model(tokenizer, "hsoftmax")
    monkeypatch.setattr(cli_evaluate, "_load_model_and_corpus",
                        lambda args: (model, tokenizer, {"test": HELD_OUT, "train": TEXTS}))
    chunks = []
    original = number_prediction.predict_numbers
    monkeypatch.setattr(number_prediction, "predict_numbers",
                        lambda *a, **k: chunks.append(k["numeral_chunk_size"]) or original(*a, **k))
    predictions = tmp_path / "predictions.jsonl"
    assert main(["predict-numbers", str(tmp_path), "--numeral-chunk-size", "3", "--block-size", "5",
                 "--predictions", str(predictions)]) == 0
    assert chunks == [3, 3] and len(predictions.read_text().splitlines()) == NUM_NUMERALS
    assert json.loads(capsys.readouterr().out)["num_numerals"] == NUM_NUMERALS
