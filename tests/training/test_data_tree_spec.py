"""Mnih & Hinton's (2008, sec. 4) data-built word tree as part of a run's specification: ``RunSpec``'s
``tree_mode`` / ``tree_eps`` / ``first_stage_epochs`` train through ``train(spec)`` in two stages, read back
from the run folder, come from a named recipe, and refuse what does not fit, naming the flag."""

from __future__ import annotations

import json
import random

import pytest
from transformers import AutoModelForCausalLM

from hf_nlm.models import MODEL_TYPES
from hf_nlm.models.registry import TrainingRecipe
from hf_nlm.training import RunSpec, train
from hf_nlm.trees import WordTree

TINY = {"context_size": 2, "embedding_size": 6, "block_size": 8, "batch_size": 4, "optimizer": "adam",
        "learning_rate": 0.05, "lr_scheduler": "constant", "progress_bar": False,
        "early_stopping_patience": None, "num_epochs": 2, "min_frequency": 1}


def split_files(folder) -> dict[str, str]:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    files = {}
    for split, lines in (("train", 80), ("validation", 10), ("test", 10)):
        path = folder / f"{split}.txt"
        path.write_text("\n".join(" ".join(rng.choices(words, k=8)) for _ in range(lines)) + "\n")
        files[f"{split}_file"] = str(path)
    return files


def test_a_data_built_tree_trains_through_train_and_reads_back(tmp_path):
    out = tmp_path / "run"
    spec = RunSpec.from_recipe("hlbl", output_dir=str(out), tree_mode="adaptive", tree_eps=0.2,
                               first_stage_epochs=1, max_steps=4, **TINY, **split_files(tmp_path))
    assert RunSpec.from_dict(json.loads(spec.to_json())) == spec
    result = train(spec)
    metrics = result.metrics
    # The final model's figures, with the tree and the first stage beside them.
    assert metrics["global_step"] == 4 and metrics["test"]["perplexity"] > 1
    assert metrics["tree"]["mode"] == "adaptive" and metrics["tree"]["eps"] == 0.2
    assert metrics["tree"]["build_s"] >= 0 and metrics["tree"]["vocab_size"] == len(result.tokenizer)
    first = metrics["random_tree"]
    assert first["epochs_completed"] <= 1 and first["test"]["perplexity"] > 1
    saved = json.loads((out / "results.json").read_text())
    assert saved["tree"] == metrics["tree"] and saved["random_tree"] == metrics["random_tree"]
    # Step 1's run folder, the data-built tree, and the final model on that tree.
    tree = WordTree.load(out / "word_tree.json")
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.tree() == tree.renumbered_breadth_first() == result.model.tree()
    assert AutoModelForCausalLM.from_pretrained(out / "random_tree").tree() != model.tree()
    # Each folder reads back as the spec of its run: the final one with its data-built tree.
    again = RunSpec.from_run_folder(out)
    assert (again.tree_mode, again.tree_eps, again.first_stage_epochs) == ("adaptive", 0.2, 1)
    assert again.data_sha256 == result.spec.data_sha256
    stage1 = RunSpec.from_run_folder(out / "random_tree")
    assert (stage1.tree, stage1.tree_mode, stage1.training.num_epochs) == ("random", None, 1)


def test_a_recipe_gives_the_data_built_tree_and_a_given_tree_replaces_it(tmp_path):
    files = split_files(tmp_path)
    spec = RunSpec.from_recipe(recipe="brown-hlbl-adaptive-eps0.25", output_dir=str(tmp_path / "r"), **files)
    assert (spec.tree, spec.tree_mode, spec.tree_eps) == (None, "adaptive", 0.25)
    assert {"tree_mode", "tree_eps"} <= spec.recipe_values and "--tree-eps 0.25" in spec.recipe_line()
    huffman = RunSpec.from_recipe(recipe="brown-hlbl-adaptive-eps0.25", output_dir=str(tmp_path / "r"),
                                  tree="huffman", **files)
    assert (huffman.tree, huffman.tree_mode, huffman.tree_eps) == ("huffman", None, 0.0)
    balanced = RunSpec.from_recipe(recipe="brown-hlbl-adaptive-eps0.25", output_dir=str(tmp_path / "r"),
                                   tree_mode="balanced", **files)
    assert (balanced.tree_mode, balanced.tree_eps) == ("balanced", 0.0)
    for name in ("brown-lbl-softmax", "brown-hlbl-random", "brown-hlbl-huffman", "brown-hlbl-balanced",
                 "brown-hlbl-adaptive", "brown-hlbl-adaptive-eps0.25"):
        recipe = RunSpec.from_recipe(recipe=name, output_dir=str(tmp_path / "r"))
        assert recipe.data.corpus == "brown" and recipe.training.max_time_s is None
        assert recipe.training.num_epochs == 8 and recipe.training.seed == 0


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"tree_mode": "kmeans"}, "--tree-mode kmeans: choose from adaptive, balanced"),
        ({"tree_mode": "adaptive", "tree_eps": 0.5}, r"--tree-eps must lie in \[0, 0.5\), got 0.5"),
        ({"tree_mode": "adaptive", "tree_eps": -0.1}, r"--tree-eps must lie in \[0, 0.5\)"),
        ({"tree_mode": "adaptive", "tree_eps": float("nan")}, r"--tree-eps must lie in \[0, 0.5\)"),
        ({"tree_mode": "balanced", "tree_eps": 0.1}, "--tree-eps applies to --tree-mode adaptive only"),
        ({"tree_eps": 0.1}, "--tree-eps applies to a data-built tree only: give --tree-mode"),
        ({"first_stage_epochs": 2}, "--first-stage-epochs applies to a data-built tree only"),
        ({"tree_mode": "adaptive", "first_stage_epochs": 0}, "--first-stage-epochs must be an integer >= 1"),
        ({"tree_mode": "adaptive", "tree": "huffman"}, "on a random tree: drop --tree huffman"),
        ({"tree_mode": "adaptive", "tree_file": "tree.json"}, "on a random tree: drop --tree-file"),
        ({"tree_mode": "adaptive", "init_from": "runs/x"}, "--init-from starts from a saved model"),
    ],
)
def test_bad_data_tree_settings_are_refused_naming_the_flag(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        RunSpec.from_recipe("hlbl", output_dir=str(tmp_path / "r"), train_file=str(tmp_path / "t.txt"),
                            **settings)


def test_a_data_built_tree_needs_a_tree_head(tmp_path):
    spec = RunSpec.from_recipe("lbl", output_dir=str(tmp_path / "run"), tree_mode="adaptive", max_steps=1,
                               **TINY, **split_files(tmp_path))
    with pytest.raises(ValueError, match="--tree-mode adaptive builds the word tree of a tree head"):
        train(spec)
    assert not (tmp_path / "run" / "random_tree").exists()


def test_a_recipe_refuses_an_unknown_tree_setting():
    with pytest.raises(ValueError, match="TrainingRecipe.tree: unknown settings .'tree_file'."):
        TrainingRecipe("x", tree={"tree_file": "t.json"})
    assert all(set(recipe.tree) <= {"tree", "tree_seed", "tree_mode", "tree_eps", "first_stage_epochs"}
               for kind in MODEL_TYPES.values() for recipe in kind.recipes.values())
