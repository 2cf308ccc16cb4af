"""No recipe rots: every named recipe of every model type resolves to a spec and trains through
``train(spec)`` in a quick form (its own settings, a small text instead of its corpus, three updates), and a
recipe that records figures gets a run whose results hold every one of them, so that ``--check`` reads
them."""

from __future__ import annotations

import csv
import math
import random

import pytest

from hf_nlm.models import MODEL_TYPES
from hf_nlm.training import RunSpec, train
from hf_nlm.training.published import run_figures

RECIPES = [(model_type, recipe) for model_type, kind in MODEL_TYPES.items() for recipe in kind.recipes]


def text(rng: random.Random, lines: int, numerals: bool) -> list[str]:
    words = [f"w{i}" for i in range(50)]
    return [" ".join(rng.choices(words, k=9) + ([str(rng.randint(1, 900))] if numerals else []))
            for _ in range(lines)]


def split_files(tmp_path, model_type: str) -> dict[str, str]:
    """A small train / validation / test split in the form the model type reads: lines of text, or CSV
    (source, target) pairs for an encoder-decoder model."""
    rng = random.Random(0)
    files = {}
    for split, lines in (("train", 120), ("validation", 20), ("test", 20)):
        rows = text(rng, lines, numerals=model_type == "numeracy_lm")
        if MODEL_TYPES[model_type].seq2seq_lm_class is not None:
            path = tmp_path / f"{split}.csv"
            with open(path, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["source", "target"])
                writer.writerows((" ".join(row.split()[:3]), row) for row in rows)
        else:
            path = tmp_path / f"{split}.txt"
            path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        files[f"{split}_file"] = str(path)
    return files


@pytest.mark.parametrize(("model_type", "recipe"), RECIPES, ids=[f"{t}-{r}" for t, r in RECIPES])
def test_every_recipe_trains_in_its_quick_form(model_type, recipe, tmp_path):
    chosen = MODEL_TYPES[model_type].recipe(recipe)
    # At least three epochs: on the small text an epoch of a recipe with large batches is one update.
    epochs = max(3, chosen.training.get("num_epochs", 3))
    spec = RunSpec.from_recipe(model_type, recipe, output_dir=str(tmp_path / "run"), max_steps=3,
                               num_epochs=epochs, progress_bar=False, min_frequency=1,
                               **split_files(tmp_path, model_type))
    for name, value in chosen.training.items():
        if name not in ("max_steps", "max_time_within_epoch", "num_epochs"):
            assert getattr(spec.training, name) == value, name
    result = train(spec)
    assert result.metrics["global_step"] == 3
    assert math.isfinite(result.metrics["validation"]["perplexity"])
    missing = set(chosen.recorded) - set(run_figures(result.metrics))
    assert not missing, f"recipe {recipe} records {sorted(missing)}, which its run does not report"
