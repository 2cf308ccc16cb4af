"""examples/demo.py (`make demo`): the epochs its time budget allows and the line that says whether the NPLM
beats the Kneser-Ney 5-gram."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
import torch

import hf_nlm

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> dict:
    return runpy.run_path(str(SCRIPT))


def tiny_model() -> hf_nlm.NPLMForCausalLM:
    torch.manual_seed(0)
    return hf_nlm.NPLMForCausalLM(hf_nlm.NPLMConfig(vocab_size=50, context_size=2, embedding_size=4,
                                                    hidden_size=8, direct_connections=False))


def test_the_budget_gives_whole_epochs_and_leaves_the_model_alone(demo):
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train, validation = ["a b c d"] * 200, ["a b"] * 50  # 1,000 and 150 words with <eos>
    epochs_in_budget = demo["epochs_in_budget"]
    short, epoch_s = epochs_in_budget(model, train, validation, 1e-6, 2, 8, 4, repeats=3)
    assert short == 1 and epoch_s > 0  # at least one epoch, however short the budget
    # A budget of 10,000 estimated epochs fits 9,000 of them (10% is kept back), to the timing's noise.
    many, _ = epochs_in_budget(model, train, validation, 10_000 * epoch_s, 2, 8, 4, repeats=3)
    assert 900 <= many <= 90_000
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_verdict_names_the_winner_the_ratio_and_the_time(demo):
    results = {"epochs_completed": 5, "global_step": 8160, "stop_reason": "num_epochs"}
    table = {"NPLM": {"validation": 150.0, "test": 140.0},
             "Kneser-Ney 5-gram": {"validation": 160.0, "test": 150.0}}
    line = demo["verdict"](table, results, 541.6, 2)
    assert line.startswith("the NPLM beats the Kneser-Ney 5-gram: test perplexity 140.00 vs 150.00 (0.933x; "
                           "validation 0.938x) after 542 s of training (5 whole epoch(s), 8,160 updates")
    assert line.endswith("stopped by num_epochs, 2 threads)")
    table["NPLM"]["test"] = 151.0
    line = demo["verdict"](table, results, 541.6, 2)
    assert line.startswith("the NPLM does not beat the Kneser-Ney 5-gram")


def test_the_training_time_is_the_clock_at_the_last_validation(demo, tmp_path):
    records = [{"type": "step", "elapsed_s": 10.0}, {"type": "epoch", "elapsed_s": 50.0},
               {"type": "step", "elapsed_s": 60.0}, {"type": "eval", "elapsed_s": 75.5},
               {"type": "step", "elapsed_s": 80.0}]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert demo["training_seconds"](tmp_path) == 75.5
