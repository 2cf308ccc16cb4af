"""The n-gram a run's model is mixed with (``TrainingConfig.ngram_mixture_order`` / ``_smoothing`` /
``_weight``): Bengio et al. 2003's Table 1 mixes MLP9 with the interpolated trigram, a = 0.5. The mixed
perplexity equals the mixture of the saved model's and an independently fitted trigram's per-token
probabilities; bad values are refused naming the field; the Table 1 recipes give the mixture and differ from
the unmixed row's recipe in the mixture only."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random

import numpy as np
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_nlm.evaluation import token_log_probs
from hf_nlm.models import MODEL_TYPES
from hf_nlm.ngram import InterpolatedLM, KneserNeyLM
from hf_nlm.training import RunSpec, TrainingConfig, train
from hf_nlm.training.arguments import add_train_arguments, spec_from_arguments
from hf_nlm.training.config import MIXTURE_DEFAULTS
from hf_nlm.training.published import FIGURES


def write_text(path, lines: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    text = [" ".join(rng.choices(words, k=7)) for _ in range(lines)]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return text


def split_files(tmp_path) -> dict[str, str]:
    for name, lines, seed in (("train", 80, 0), ("valid", 12, 1), ("test", 12, 2)):
        write_text(tmp_path / f"{name}.txt", lines, seed)
    return {"train_file": str(tmp_path / "train.txt"), "validation_file": str(tmp_path / "valid.txt"),
            "test_file": str(tmp_path / "test.txt")}


def tiny_spec(tmp_path, **settings) -> RunSpec:
    return RunSpec.from_recipe("nplm", output_dir=str(tmp_path / "run"), batch_size=2, block_size=8,
                               embedding_size=8, hidden_size=8, max_steps=20, progress_bar=False,
                               **split_files(tmp_path), **settings)


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_the_mixture_with_the_interpolated_trigram_at_one_half(tmp_path):
    """exp of the mean of -log(0.5 p_model + 0.5 p_trigram) over every token of each split, with p_model from
    the saved model and p_trigram from a deleted-interpolation trigram fitted here on the same files."""
    spec = tiny_spec(tmp_path, ngram_mixture=True, ngram_mixture_order=3,
                     ngram_mixture_smoothing="interpolated", ngram_mixture_weight=0.5)
    result = train(spec)
    run = tmp_path / "run"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    trigram = InterpolatedLM.from_texts(lines(tmp_path / "train.txt"), tokenizer, order=3,
                                        valid_texts=lines(tmp_path / "valid.txt"))
    expected = {}
    for split, name in (("validation", "valid"), ("test", "test")):
        ids, log_p, _ = token_log_probs(model, lines(tmp_path / f"{name}.txt"), tokenizer)
        p_model = np.exp(log_p.double().numpy())
        p_trigram = np.exp(trigram.stream_log_probs(ids.numpy()))
        assert p_model.shape == p_trigram.shape and p_model.size > 0
        expected[split] = math.exp(float(np.mean(-np.log(0.5 * p_model + 0.5 * p_trigram))))
    saved = json.loads((run / "results.json").read_text(encoding="utf-8"))
    for results in (result.metrics, saved):
        mixture = results["ngram_baseline"]["mixture"]
        assert mixture["model"] == "deleted-interpolation 3-gram"
        assert (mixture["order"], mixture["weight"], mixture["fitted"]) == (3, 0.5, False)
        for split, value in expected.items():
            assert mixture[split]["perplexity"] == pytest.approx(value, rel=1e-9)
        # The figures a recipe publishes read it.
        assert FIGURES["mixture_validation_perplexity"](results) == pytest.approx(expected["validation"])
        assert FIGURES["mixture_test_ratio_to_kn5"](results) == pytest.approx(
            expected["test"] / results["ngram_baseline"]["test"]["perplexity"])
    card = (run / "README.md").read_text(encoding="utf-8")
    assert "Mixed with a deleted-interpolation 3-gram" in card and "a = 0.500 fixed" in card


def test_a_kneser_ney_trigram_with_its_weight_fitted_on_validation(tmp_path):
    spec = tiny_spec(tmp_path, ngram_mixture=True, ngram_mixture_order=3)
    mixture = train(spec).metrics["ngram_baseline"]["mixture"]
    run = tmp_path / "run"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    kn3 = KneserNeyLM.from_texts(lines(tmp_path / "train.txt"), tokenizer, 3)
    ids, log_p, _ = token_log_probs(model, lines(tmp_path / "test.txt"), tokenizer)
    p_model, p_kn = np.exp(log_p.double().numpy()), np.exp(kn3.stream_log_probs(ids.numpy()))
    a = mixture["weight"]
    assert mixture["model"] == "Kneser-Ney 3-gram" and mixture["fitted"] and 0 < a < 1
    assert mixture["test"]["perplexity"] == pytest.approx(
        math.exp(float(np.mean(-np.log(a * p_model + (1 - a) * p_kn)))), rel=1e-9)


@pytest.mark.parametrize(("settings", "field"), [
    ({"ngram_mixture_order": 0}, "ngram_mixture_order"),
    ({"ngram_mixture_order": 2.5}, "ngram_mixture_order"),
    ({"ngram_mixture_smoothing": "witten_bell"}, "ngram_mixture_smoothing"),
    ({"ngram_mixture_weight": 1.5}, "ngram_mixture_weight"),
    ({"ngram_mixture_weight": -0.1}, "ngram_mixture_weight"),
    ({"ngram_mixture_weight": "half"}, "ngram_mixture_weight"),
])
def test_bad_mixture_settings_are_refused_naming_the_field(settings, field):
    # A value of the wrong kind is a TypeError, an out-of-range one a ValueError: both name the field.
    with pytest.raises((ValueError, TypeError), match=f"TrainingConfig.{field} "):
        TrainingConfig(output_dir="x", ngram_mixture=True, **settings)


@pytest.mark.parametrize("field", list(MIXTURE_DEFAULTS))
def test_a_mixture_setting_without_the_mixture_is_refused(field):
    value = {"ngram_mixture_order": 3, "ngram_mixture_smoothing": "interpolated", "ngram_mixture_weight": 0.5}
    with pytest.raises(ValueError, match=f"TrainingConfig.{field} applies to the n-gram mixture"):
        TrainingConfig(output_dir="x", **{field: value[field]})


def test_the_flags_set_the_mixture_and_no_mixture_drops_a_recipes_settings(tmp_path):
    files = split_files(tmp_path)
    parser = add_train_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--output-dir", str(tmp_path / "run"), "--train-file", files["train_file"],
                              "--validation-file", files["validation_file"], "--ngram-mixture",
                              "--ngram-mixture-order", "3", "--ngram-mixture-smoothing", "interpolated",
                              "--ngram-mixture-weight", "0.5"])
    training = spec_from_arguments(args).training
    assert (training.ngram_mixture, training.ngram_mixture_order, training.ngram_mixture_smoothing,
            training.ngram_mixture_weight) == (True, 3, "interpolated", 0.5)
    # A mixture recipe run without its mixture: the mixture's settings go with it.
    spec = RunSpec.from_recipe(recipe="brown-mlp10", output_dir=str(tmp_path / "run"), ngram_mixture=False)
    assert not spec.training.ngram_mixture
    assert {name: getattr(spec.training, name) for name in MIXTURE_DEFAULTS} == MIXTURE_DEFAULTS


@pytest.mark.parametrize(("unmixed", "mixed"), [("brown-mlp9", "brown-mlp10"),
                                                ("brown-mlp9-adam", "brown-mlp10-adam")])
def test_mlp10_is_mlp9_with_the_trigram_at_one_half(unmixed, mixed):
    """``benchmarks/brown_table.py`` reads MLP9's row from MLP10's run: the two recipes train alike."""
    one, other = (RunSpec.from_recipe(recipe=name, output_dir="x") for name in (unmixed, mixed))
    assert (one.model, one.tokenizer, one.data) == (other.model, other.tokenizer, other.data)
    assert dataclasses.replace(other.training, ngram_mixture=False, **MIXTURE_DEFAULTS) == one.training
    assert (other.training.ngram_mixture_order, other.training.ngram_mixture_smoothing,
            other.training.ngram_mixture_weight) == (3, "interpolated", 0.5)


#: The recipes behind no table: the model types' defaults and the papers' full-length settings.
OPEN_RECIPES = {"default", "sgd", "bengio2003", "merity2018"}
TABLE_RECIPES = [(t, name) for t, kind in MODEL_TYPES.items() for name in kind.recipes
                 if name not in OPEN_RECIPES]


@pytest.mark.parametrize(("model_type", "name"), TABLE_RECIPES, ids=[n for _, n in TABLE_RECIPES])
def test_the_table_recipes_are_work_budgets_on_their_corpus(model_type, name):
    recipe = MODEL_TYPES[model_type].recipe(name)
    assert "max_time_s" not in recipe.training and "max_time_within_epoch" not in recipe.training
    assert recipe.training.get("num_epochs", 0) >= 1 and "seed" in recipe.training
    if "corpus" in recipe.data:  # else the script behind the table writes the data (derived pairs)
        assert name == "demo" or name.startswith(recipe.data["corpus"] + "-")
    assert set(recipe.paper) <= set(FIGURES) and set(recipe.recorded) <= set(FIGURES)
    # A time is a recorded run's, and comes with its figures.
    assert recipe.time_s is None or recipe.recorded
