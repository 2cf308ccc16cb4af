"""Training recipes from the command line: ``--recipe`` names one, the run says which it used, a resumed run
keeps what it recorded, and a small text keeps every word. (How a spec resolves a recipe:
tests/training/test_run_spec.py.)"""

from __future__ import annotations

import json

import pytest

from hf_nlm.models import MODEL_TYPES
from hf_nlm_cli import main


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


def test_the_run_says_which_recipe_it_used_and_resume_keeps_it(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("the cat sat on the mat\na dog saw the cat\n" * 30)
    out = tmp_path / "run"
    tiny = ["--train-file", str(tmp_path / "t.txt"), "--output-dir", str(out), "--context-size", "2",
            "--embedding-size", "4", "--hidden-size", "4", "--block-size", "4", "--batch-size", "2",
            "--no-progress-bar"]
    assert main(["train", *tiny, "--recipe", "bengio2003", "--max-steps", "3", "--save-steps", "1"]) == 0
    err = capsys.readouterr().err
    assert "recipe bengio2003 of nplm (Bengio et al. 2003" in err and "--optimizer sgd" in err
    state = json.loads(next(out.glob("checkpoints/*/trainer_state.json")).read_text())
    assert (state["run_spec"]["recipe"] == "bengio2003"
            and state["run_spec"]["tokenizer"]["min_frequency"] == 4)
    # resumed without --recipe: the run's recipe and settings, not the default recipe's
    assert main(["train", *tiny, "--resume", "--max-steps", "4"]) == 0
    assert json.loads((out / "results.json").read_text())["global_step"] == 4
    last = max(out.glob("checkpoints/checkpoint-*/trainer_state.json"),
               key=lambda p: int(p.parent.name.split("-")[1]))
    state = json.loads(last.read_text())
    assert state["global_step"] == 4 and state["config"]["optimizer"] == "sgd"
    assert state["run_spec"]["recipe"] == "bengio2003"


def test_a_small_text_keeps_every_word_unless_the_cut_off_is_asked_for(tmp_path, capsys):
    words = "the cat sat on a mat with one dog and two red birds near old trees".split()
    (tmp_path / "t.txt").write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(4))
                                    + "rare\n")
    common = ["--train-file", str(tmp_path / "t.txt"), "--context-size", "2", "--embedding-size", "4",
              "--hidden-size", "4", "--block-size", "4", "--batch-size", "2", "--max-steps", "1",
              "--no-progress-bar"]
    # every word but one is seen 4 times: the recipe's cut-off of 2 leaves only "rare" out
    assert main(["train", *common, "--output-dir", str(tmp_path / "a")]) == 0
    assert "using --min-frequency 1" not in capsys.readouterr().err
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(40)) + "\n")  # every word seen once
    assert main(["train", *common, "--output-dir", str(tmp_path / "b")]) == 0
    assert "--min-frequency 2 (the recipe's) would leave most of this small text unknown; " \
           "using --min-frequency 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", *common, "--output-dir", str(tmp_path / "c"), "--min-frequency", "2"])
    assert "--min-frequency 2 keeps 0 of the 40 distinct training words" in capsys.readouterr().err


def test_the_documentation_lists_every_recipe():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    table = page[page.index("## Training recipes"):page.index("## A corpus the command line knows")]
    for name, model_type in MODEL_TYPES.items():
        for recipe in model_type.recipes:
            assert any(f"`{name}`" in row and f"| `{recipe}` |" in row
                       for row in table.splitlines()), (name, recipe)


def test_a_trained_model_generates_without_repeats_or_unknown_words(tmp_path, capsys):
    """The saved generation config forbids a repeated 3-gram and <unk>; the flags lift both. Checked on the
    generated ids, against the same model without the settings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_nlm.cli.generate import generation_settings

    lines = ["the cat sat on the mat", "a dog saw the cat", "the mat was red"] * 20 + ["zyx qqq"]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "t.txt"), "--output-dir", str(out),
                 "--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8",
                 "--batch-size", "2", "--max-steps", "30", "--no-progress-bar"]) == 0
    capsys.readouterr()
    model, tokenizer = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    unk = tokenizer.unk_token_id
    assert "zyx" not in tokenizer.get_vocab()  # seen once: <unk>, which is trained
    assert (model.generation_config.no_repeat_ngram_size == 3
            and model.generation_config.suppress_tokens == [unk])
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

    _, given = settings()
    assert given == {}  # every setting is the saved generation config's
    _, given = settings("--allow-unknown", "--no-repeat-ngram-size", "0")
    assert given["suppress_tokens"] is None and given["no_repeat_ngram_size"] == 0
    with pytest.raises(SystemExit):
        settings("--min-new-tokens", "30", "--max-new-tokens", "20")
    assert "--min-new-tokens must be between 0 and --max-new-tokens (20), got 30" in capsys.readouterr().err
