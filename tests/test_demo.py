"""examples/demo.py (`make demo`): the ``demo`` recipe it runs, the table it prints from the run's results and
the line that says whether the NPLM beats the Kneser-Ney 5-gram."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from hf_nlm.training import RunSpec

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> dict:
    return runpy.run_path(str(SCRIPT))


def test_the_demo_is_a_named_recipe_defined_by_work(demo):
    spec = RunSpec.from_recipe(recipe=demo["RECIPE"], output_dir="unused")
    assert spec.model_type == "nplm" and spec.data.corpus == "brown"
    # Work and a seed decide the run, not a clock: the same numbers on a busy machine.
    assert spec.training.max_time_s is None and spec.training.num_epochs == 10 and spec.training.seed == 0
    assert spec.training.ngram_baseline and spec.training.ngram_mixture
    shape = (spec.model["context_size"], spec.model["embedding_size"], spec.model["hidden_size"])
    assert shape == (4, 30, 100)
    assert spec.tokenizer.min_frequency == 4


def test_the_table_reads_the_runs_results(demo):
    results = {"validation": {"perplexity": 150.0}, "test": {"perplexity": 140.0},
               "ngram_baseline": {"validation": {"perplexity": 160.0}, "test": {"perplexity": 150.0},
                                  "mixture": {"weight": 0.6, "validation": {"perplexity": 130.0},
                                              "test": {"perplexity": 120.0}}}}
    assert demo["comparison_table"](results) == {
        "NPLM": {"validation": 150.0, "test": 140.0},
        "Kneser-Ney 5-gram": {"validation": 160.0, "test": 150.0},
        "mixture (a = 0.60)": {"validation": 130.0, "test": 120.0},
    }


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
