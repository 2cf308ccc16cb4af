"""A run set beside the numbers its recipe publishes: the recorded figures are checked within the thread
tolerance, the paper's are shown; ``hf-nlm train --check`` refuses, before training, a recipe with no recorded
number and flags that would change what the recipe trains."""

from __future__ import annotations

import pytest

from hf_nlm.models.registry import TrainingRecipe
from hf_nlm.training import THREAD_TOLERANCE
from hf_nlm.training.published import check_run, check_table, run_figures
from hf_nlm_cli import main

RESULTS = {"validation": {"perplexity": 141.0}, "test": {"perplexity": 128.0},
           "ngram_baseline": {"validation": {"perplexity": 161.0}, "test": {"perplexity": 150.0},
                              "mixture": {"weight": 0.6, "test": {"perplexity": 118.0}}}}


def test_the_figures_are_read_from_the_results():
    assert run_figures(RESULTS) == {
        "validation_perplexity": 141.0, "test_perplexity": 128.0, "kn5_validation_perplexity": 161.0,
        "kn5_test_perplexity": 150.0, "test_ratio_to_kn5": 128.0 / 150.0, "mixture_test_perplexity": 118.0,
        "mixture_test_ratio_to_kn5": 118.0 / 150.0}
    assert run_figures({"validation": {"perplexity": 3.0}}) == {"validation_perplexity": 3.0}


def test_a_recorded_figure_is_checked_within_the_tolerance_and_the_papers_shown():
    recipe = TrainingRecipe("r", recorded={"test_perplexity": 128.0 * (1 + THREAD_TOLERANCE / 2),
                                           "kn5_test_perplexity": 150.0},
                            paper={"test_perplexity": 276.0, "test_ratio_to_kn5": 0.86})
    checks = check_run(recipe, RESULTS)
    assert [c.name for c in checks] == ["test_perplexity", "kn5_test_perplexity", "test_ratio_to_kn5"]
    assert all(c.ok for c in checks)
    table = check_table(checks)
    assert table.splitlines()[1].split() == ["test_perplexity", "276.00", "128.06", "128.00", "yes"]
    assert table.splitlines()[3].split() == ["test_ratio_to_kn5", "0.86", "-", "0.8533", "(not", "checked)"]
    assert table.endswith("the run reproduces the recorded numbers")

    far = TrainingRecipe("r", recorded={"test_perplexity": 128.0 * (1 + 2 * THREAD_TOLERANCE),
                                        "mixture_test_perplexity": 118.0})
    checks = check_run(far, RESULTS)
    assert [c.ok for c in checks] == [False, True]
    assert check_table(checks).endswith("does not reproduce the recorded test_perplexity")
    # A figure the run lacks is not reproduced.
    assert not check_run(far, {"test": {"perplexity": 128.0}})[1].ok


def test_a_recipe_without_recorded_numbers_has_nothing_to_check():
    with pytest.raises(ValueError, match="records no numbers"):
        check_run(TrainingRecipe("r"), RESULTS)
    with pytest.raises(ValueError, match="unknown figures"):
        check_run(TrainingRecipe("r", recorded={"bleu": 1.0}), RESULTS)


def test_the_command_refuses_before_training(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("a b c\n")
    with pytest.raises(SystemExit):
        main(["train", "--train-file", str(tmp_path / "t.txt"), "--output-dir", str(tmp_path / "a"),
              "--check"])
    assert "--check: recipe default of nplm records no numbers to check" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--recipe", "demo", "--output-dir", str(tmp_path / "b"), "--check", "--max-steps", "5",
              "--learning-rate", "0.1"])
    assert "--check reproduces recipe demo as recorded: drop --max-steps, --learning-rate" in (
        capsys.readouterr().err)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_hf_nlm_recipes_lists_every_recipe_with_its_figures_and_time(capsys):
    import json

    from hf_nlm.models import MODEL_TYPES
    from hf_nlm_cli import main

    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["recipe", "model", "corpus", "figure", "paper", "recorded", "time"]
    listed = {(line.split()[0], line.split()[1]) for line in lines[1:]}
    assert listed == {(r, t) for t, kind in MODEL_TYPES.items() for r in kind.recipes}
    demo = MODEL_TYPES["nplm"].recipe("demo")
    row = next(line.split() for line in lines if line.startswith("demo "))
    # The test perplexity is the figure shown: the paper's and the recorded, and the time in minutes.
    assert row[2:6] == ["brown", "test_perplexity", f"{demo.paper['test_perplexity']:g}",
                        f"{demo.recorded['test_perplexity']:g}"]
    assert row[6:] == [f"{demo.time_s / 60:.0f}", "min"]

    assert main(["recipes", "--model", "nplm", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["recipe"] for r in rows] == list(MODEL_TYPES["nplm"].recipes)
    by_name = {r["recipe"]: r for r in rows}
    assert by_name["demo"]["recorded_figures"] == dict(demo.recorded)
    assert by_name["demo"]["paper_figures"] == dict(demo.paper)
    assert by_name["default"]["figure"] is None and by_name["default"]["time_s"] is None


def test_hf_nlm_recipes_refuses_an_unknown_model_type(capsys):
    from hf_nlm_cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["recipes", "--model", "gpt2"])
    assert exit_info.value.code == 2
    assert "--model gpt2: choose from" in capsys.readouterr().err


def test_the_defaults_table_recipes_are_the_default_recipe_on_a_corpus_for_some_epochs():
    from hf_nlm.models import MODEL_TYPES

    for type_name in ("nplm", "lbl", "hlbl", "awd_lstm"):
        kind = MODEL_TYPES[type_name]
        default = kind.recipe("default")
        for corpus in ("ptb", "sotu"):
            row = kind.recipe(f"{corpus}-{type_name.replace('_', '-')}-default")
            assert dict(row.data) == {"corpus": corpus}
            assert row.training["num_epochs"] >= 1 and "max_time_s" not in row.training
            assert {k: v for k, v in row.training.items() if k not in ("num_epochs", "seed")} \
                == {k: v for k, v in default.training.items() if k != "max_time_within_epoch"}
            assert row.model == default.model and row.tokenizer == default.tokenizer
