"""Training recipes: every setting no flag gives comes from the model type's recipe (``--recipe``, default its
``default`` one), flags win over it, a resumed run keeps what it recorded, and ``TrainingConfig.for_model``
gives the same training settings in Python."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hf_nlm.cli import main
from hf_nlm.cli.arguments import add_train_arguments
from hf_nlm.cli.recipes import training_config
from hf_nlm.models import MODEL_TYPES
from hf_nlm.models.registry import DEFAULT_RECIPE, TrainingRecipe
from hf_nlm.training import TrainingConfig


def parse(*argv: str):
    import argparse

    parser = add_train_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--output-dir", "out", *argv])
    args.parser, args.argv = parser, ["--output-dir", "out", *argv]
    return args


@pytest.mark.parametrize("model", sorted(MODEL_TYPES))
def test_every_model_type_has_a_default_recipe_of_valid_settings(model):
    model_type = MODEL_TYPES[model]
    assert DEFAULT_RECIPE in model_type.recipes
    fields = {f.name for f in dataclasses.fields(model_type.config_class)}
    for name, recipe in model_type.recipes.items():
        assert recipe.description, name
        assert set(recipe.model) <= fields, (name, set(recipe.model) - fields)
        TrainingConfig.for_model(model, recipe=name, output_dir="out", max_time_s=60)  # every value accepted
        model_type.config_class(**recipe.model)


def test_the_recipe_fills_what_no_flag_gives_and_flags_win():
    recipe = MODEL_TYPES["nplm"].recipes[DEFAULT_RECIPE]
    args = parse("--model", "nplm", "--learning-rate", "0.05", "--hidden-size", "7", "--min-frequency", "3")
    config = training_config(args)
    assert config.learning_rate == 0.05  # the flag
    assert config.optimizer == recipe.training["optimizer"]  # the recipe
    assert config.batch_size == recipe.training["batch_size"]
    assert args.hidden_size == 7 and args.embedding_size == recipe.model["embedding_size"]
    assert args.min_frequency == 3
    # a field no recipe value sets keeps TrainingConfig's default
    assert config.logging_steps == TrainingConfig.__dataclass_fields__["logging_steps"].default


def test_an_explicit_none_is_not_replaced_by_the_recipe():
    assert MODEL_TYPES["awd_lstm"].recipes[DEFAULT_RECIPE].training["max_grad_norm"] is not None
    config = training_config(parse("--model", "awd_lstm", "--max-grad-norm", "none"))
    assert config.max_grad_norm is None


def test_a_paper_recipe_is_selected_by_name():
    config = training_config(parse("--model", "nplm", "--recipe", "bengio2003"))
    assert (config.optimizer, config.learning_rate, config.lr_scheduler, config.weight_decay) == ("sgd", 0.1, "bengio", 1e-4)
    args = parse("--model", "awd_lstm", "--recipe", "merity2018")
    config = training_config(args)
    assert (config.optimizer, config.learning_rate, config.batch_size, config.nt_asgd) == ("sgd", 30.0, 20, True)
    assert args.embedding_size is None  # the paper's network: AWDLSTMConfig's own sizes
    assert (args.dropout, args.dropout_hidden, args.dropout_input) == (0.4, 0.25, 0.4)  # its Penn Treebank dropouts


def test_the_time_budget_rule_comes_with_a_budget_only():
    assert MODEL_TYPES["nplm"].recipes[DEFAULT_RECIPE].training["max_time_within_epoch"] is True
    assert training_config(parse("--model", "nplm")).max_time_within_epoch is False
    assert training_config(parse("--model", "nplm", "--max-time-s", "60")).max_time_within_epoch is True
    assert TrainingConfig.for_model("nplm", output_dir="o").max_time_within_epoch is False
    assert TrainingConfig.for_model("nplm", output_dir="o", max_time_s=9).max_time_within_epoch is True


def test_an_unknown_recipe_names_the_known_ones(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("a b c\n" * 20)
    code = None
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--train-file", str(tmp_path / "t.txt"), "--output-dir", str(tmp_path / "o"),
              "--model", "lbl", "--recipe", "bengio2003"])
    code = exit_.value.code
    assert code == 2
    err = capsys.readouterr().err
    assert "--recipe bengio2003 is not a recipe of --model lbl" in err and "default, sgd" in err


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


def test_the_run_says_which_recipe_it_used_and_resume_keeps_it(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("the cat sat on the mat\na dog saw the cat\n" * 30)
    out = tmp_path / "run"
    tiny = ["--train-file", str(tmp_path / "t.txt"), "--output-dir", str(out), "--context-size", "2",
            "--embedding-size", "4", "--hidden-size", "4", "--block-size", "4", "--batch-size", "2", "--no-progress-bar"]
    assert main(["train", *tiny, "--recipe", "bengio2003", "--max-steps", "3", "--save-steps", "1"]) == 0
    err = capsys.readouterr().err
    assert "recipe bengio2003 of nplm (Bengio et al. 2003" in err and "--optimizer sgd" in err
    state = json.loads(next(out.glob("checkpoints/*/trainer_state.json")).read_text())
    assert state["run_settings"]["recipe"] == "bengio2003" and state["run_settings"]["min_frequency"] == 4
    # resumed without --recipe: the run's recipe and settings, not the default recipe's
    assert main(["train", *tiny, "--resume", "--max-steps", "4"]) == 0
    assert json.loads((out / "results.json").read_text())["global_step"] == 4
    last = max(out.glob("checkpoints/checkpoint-*/trainer_state.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    state = json.loads(last.read_text())
    assert state["global_step"] == 4 and state["config"]["optimizer"] == "sgd"
    assert state["run_settings"]["recipe"] == "bengio2003"


def test_a_small_text_keeps_every_word_unless_the_cut_off_is_asked_for(tmp_path, capsys):
    words = "the cat sat on a mat with one dog and two red birds near old trees".split()
    (tmp_path / "t.txt").write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(4)) + "rare\n")
    common = ["--train-file", str(tmp_path / "t.txt"), "--context-size", "2", "--embedding-size", "4",
              "--hidden-size", "4", "--block-size", "4", "--batch-size", "2", "--max-steps", "1", "--no-progress-bar"]
    # every word but one is seen 4 times: the recipe's cut-off of 2 leaves only "rare" out
    assert main(["train", *common, "--output-dir", str(tmp_path / "a")]) == 0
    assert "using --min-frequency 1" not in capsys.readouterr().err
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(40)) + "\n")  # every word seen once
    assert main(["train", *common, "--output-dir", str(tmp_path / "b")]) == 0
    assert "--min-frequency 2 (the recipe's) would leave most of this small text unknown; using --min-frequency 1" \
        in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", *common, "--output-dir", str(tmp_path / "c"), "--min-frequency", "2"])
    assert "--min-frequency 2 keeps 0 of the 40 distinct training words" in capsys.readouterr().err


def test_the_documentation_lists_every_recipe():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    table = page[page.index("## Training recipes"):page.index("## A corpus the command line knows")]
    for name, model_type in MODEL_TYPES.items():
        for recipe in model_type.recipes:
            assert any(f"`{name}`" in row and f"| `{recipe}` |" in row for row in table.splitlines()), (name, recipe)


def test_a_trained_model_generates_without_repeats_or_unknown_words(tmp_path, capsys):
    """The saved generation config forbids a repeated 3-gram and <unk>; the flags lift both; --min-new-tokens
    keeps <eos> off the first step. Checked on the generated ids, against the same model without the settings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_nlm.cli.generate import generation_settings

    lines = ["the cat sat on the mat", "a dog saw the cat", "the mat was red"] * 20 + ["zyx qqq"]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "t.txt"), "--output-dir", str(out), "--context-size", "2",
                 "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8", "--batch-size", "2",
                 "--max-steps", "30", "--no-progress-bar"]) == 0
    capsys.readouterr()
    model, tokenizer = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    unk = tokenizer.unk_token_id
    assert "zyx" not in tokenizer.get_vocab()  # seen once: <unk>, which is trained
    assert model.generation_config.no_repeat_ngram_size == 3 and model.generation_config.suppress_tokens == [unk]
    ids = tokenizer("the cat", return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        model.lm_head.bias[unk] += 50.0  # <unk> the likeliest token everywhere
    new = model.generate(ids, num_beams=3, max_new_tokens=12)[0, ids.shape[1]:].tolist()
    assert unk not in new
    trigrams = [tuple(new[i:i + 3]) for i in range(len(new) - 2)]
    assert len(trigrams) == len(set(trigrams))
    lifted = model.generate(ids, num_beams=3, max_new_tokens=12, suppress_tokens=None, no_repeat_ngram_size=0)
    assert lifted[0, ids.shape[1]:].tolist() == [unk] * 12  # what the settings keep out

    def settings(*flags):
        import argparse

        from hf_nlm.cli.generate import add_generate_parser

        sub = argparse.ArgumentParser().add_subparsers()
        parser = add_generate_parser(sub, "")
        args = parser.parse_args([str(out), "x", *flags])
        args.parser = parser
        return args, generation_settings(args)

    args, given = settings()
    assert "suppress_tokens" not in given and "no_repeat_ngram_size" not in given and args.min_new_tokens == 1
    _, given = settings("--allow-unknown", "--no-repeat-ngram-size", "0")
    assert given["suppress_tokens"] is None and given["no_repeat_ngram_size"] == 0
    with pytest.raises(SystemExit):
        settings("--min-new-tokens", "30")
    assert "--min-new-tokens must be between 0 and --max-new-tokens (20), got 30" in capsys.readouterr().err
