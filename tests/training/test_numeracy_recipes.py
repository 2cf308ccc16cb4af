"""The numeracy tables' rows as named recipes (Spithourakis & Riedel 2018; Berg-Kirkpatrick & Spokoyny 2020's
``dexp``): one per strategy and corpus, each the table's settings with its strategy, trained for work (epochs,
a seed), never for a time; ``benchmarks/numeracy_table.py``'s flags change a setting of every row's recipe."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hf_nlm.models import MODEL_TYPES, model_type_of_recipe
from hf_nlm.models.numeracy_lm import TABLE_CORPORA, TABLE_STRATEGIES, table_recipe_name
from hf_nlm.training import RunSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("corpus", TABLE_CORPORA)
@pytest.mark.parametrize("strategy", TABLE_STRATEGIES)
def test_a_table_row_is_a_named_recipe(corpus, strategy):
    name = table_recipe_name(corpus, strategy)
    assert name == f"{corpus}-{strategy.replace('_', '-')}" and model_type_of_recipe(name) == "numeracy_lm"
    assert "max_time_s" not in MODEL_TYPES["numeracy_lm"].recipe(name).training
    spec = RunSpec.from_recipe(recipe=name, output_dir="runs/x")
    assert spec.data.corpus == corpus and spec.model["head"] == strategy
    assert (spec.model["embedding_size"], spec.model["hidden_size"]) == (50, 50)
    assert (spec.tokenizer.kind, spec.tokenizer.vocab_size, spec.tokenizer.split_punctuation) == (
        "numeracy", 5000, True)
    t = spec.training
    assert (t.optimizer, t.learning_rate, t.batch_size, t.block_size, t.seed, t.max_time_s) == (
        "adam", 1e-3, 32, 50, 0, None)
    assert t.num_epochs == TABLE_CORPORA[corpus] and t.early_stopping_patience == 2


def test_the_table_flags_override_the_recipes(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import numeracy_table

    flags = {"vocab_size": None, "hidden_size": 200, "learning_rate": None, "numeral_loss_weight": 5.0,
             "batch_size": None, "bptt": None, "epochs": 6, "mog_trainable": True, "time_budget": 0.0}
    settings = numeracy_table.recipe_overrides(argparse.Namespace(**flags))
    assert settings == {"embedding_size": 200, "hidden_size": 200, "numeral_loss_weight": 5.0,
                        "num_epochs": 6, "mog_trainable": True}
    spec = RunSpec.from_recipe(recipe="drop-combination", output_dir="runs/x", **settings)
    assert spec.model["mog_trainable"] and spec.model["hidden_size"] == 200 and spec.training.num_epochs == 6
