"""Settings ``hf-nlm train`` refuses before training (or ends with one line): a vocabulary that leaves most of
the training text unknown, a model too large for the memory, a folder as a split file, a changed setting on
``--resume``, a loss that turns non-finite; and text files with old Mac line ends, read line by line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from bad_input_helpers import cli_error

from hf_nlm.data import load_text_files
from hf_nlm_cli import main

TRAIN = ["train", "--no-progress-bar", "--no-eval-test", "--max-steps", "2", "--optimizer", "adam",
         "--learning-rate", "1e-3", "--context-size", "2", "--embedding-size", "4", "--hidden-size", "4",
         "--batch-size", "4", "--block-size", "8", "--logging-steps", "1"]


def error_line(argv: list[str], capsys) -> str:
    """The one error line of a command that must end with a usage error (exit 2) and no traceback."""
    return cli_error(argv, capsys).strip().splitlines()[-1]


def write_corpus(path: Path, lines: int = 60, seed: int = 0) -> Path:
    """A few hundred lines of words with a Zipf-like spread of frequencies."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(60)]
    path.write_text("".join(" ".join(rng.choice(words[: rng.randint(3, 60)]) for _ in range(12)) + "\n"
                            for _ in range(lines)))
    return path


@pytest.mark.parametrize("tokenizer", ["word", "numeracy"])
def test_a_vocabulary_leaving_most_tokens_unknown_is_refused(tmp_path, capsys, tokenizer):
    train = write_corpus(tmp_path / "train.txt")
    err = error_line([*TRAIN, "--train-file", str(train), "--output-dir", str(tmp_path / "run"),
                     "--tokenizer", tokenizer, "--min-frequency", "1000000000"], capsys)
    assert err.startswith("hf-nlm train: error: --min-frequency 1000000000 keeps 0 of the 56 distinct "
                          "training words")
    assert "720 of the 720 training tokens (100.0%) would be unknown, more than 50%" in err
    suggested = int(err.split("; --min-frequency ")[1].split()[0])
    main([*TRAIN, "--train-file", str(train), "--output-dir", str(tmp_path / "ok"), "--tokenizer", tokenizer,
          "--min-frequency", str(suggested)])  # the value the message suggests trains
    err = error_line([*TRAIN, "--train-file", str(train), "--output-dir", str(tmp_path / "run"),
                      "--vocab-size", "3"], capsys)
    assert "--vocab-size 3 keeps 1 of the 56 distinct training words" in err and "; --vocab-size " in err


def test_old_mac_line_ends_are_line_ends(tmp_path):
    for name, end in (("mac.txt", "\r"), ("dos.txt", "\r\n"), ("unix.txt", "\n")):
        (tmp_path / name).write_bytes(end.join(["a b", "", "c d"]).encode() + end.encode())
    for name in ("mac.txt", "dos.txt", "unix.txt"):
        assert load_text_files(train=tmp_path / name)["train"]["text"] == ["a b", "", "c d"]
    (tmp_path / "bad.txt").write_bytes(b"one\rtwo\r\xff three\r")
    with pytest.raises(ValueError, match="line 3"):
        load_text_files(train=tmp_path / "bad.txt")


def test_a_folder_as_train_file_is_named_with_its_files(tmp_path, capsys):
    folder = tmp_path / "texts"
    folder.mkdir()
    write_corpus(folder / "b.txt")
    write_corpus(folder / "a.txt")
    err = error_line([*TRAIN, "--train-file", str(folder), "--output-dir", str(tmp_path / "run")], capsys)
    assert err == (f"hf-nlm train: error: --train-file {folder} is a folder, not a file: give files "
                   "(the text files in it: a.txt b.txt)")


def test_a_non_finite_loss_is_one_line_and_leaves_a_checkpoint(tmp_path, capsys):
    train = write_corpus(tmp_path / "train.txt")
    argv = [*TRAIN, "--train-file", str(train), "--output-dir", str(tmp_path / "run")]
    argv[argv.index("--learning-rate") + 1] = "1e37"
    err = error_line(argv, capsys)
    assert err.startswith("hf-nlm train: error: non-finite training loss (")
    assert "lower --learning-rate" in err
    checkpoints = sorted((tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints and (checkpoints[-1] / "trainer_state.json").is_file()
    assert f"saved in {checkpoints[-1]}" in err


@pytest.mark.parametrize("flags", [["--context-size", "100000"], ["--hidden-size", "10000000"]])
def test_a_model_too_large_for_the_memory_is_refused_before_building_it(tmp_path, capsys, monkeypatch, flags):
    from hf_nlm.training import memory

    monkeypatch.setattr(memory, "available_memory", lambda gpu: (2 * 10**9, "memory available"))
    train = write_corpus(tmp_path / "train.txt")
    err = error_line([*TRAIN, "--train-file", str(train), "--output-dir", str(tmp_path / "run"), *flags],
                     capsys)
    assert err.startswith("hf-nlm train: error: training this nplm needs about ")
    assert "more than the 2.0 GB of memory available; lower " in err and f"({flags[0]})" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_resume_refuses_changed_settings_and_keeps_the_runs(tmp_path, capsys):
    train, other = write_corpus(tmp_path / "train.txt"), write_corpus(tmp_path / "other.txt", seed=1)
    run = tmp_path / "run"
    first = [*TRAIN, "--train-file", str(train), "--output-dir", str(run), "--learning-rate", "0.003",
             "--min-frequency", "2"]
    assert main(first) == 0
    resume = ["train", "--no-progress-bar", "--output-dir", str(run), "--resume"]
    for changed, run_value in ((["--train-file", str(other)], str(train)),
                               (["--learning-rate", "0.5"], "0.003"), (["--hidden-size", "8"], "4"),
                               (["--min-frequency", "1"], "2")):
        err = error_line([*resume, *changed], capsys)
        assert f"{changed[0]} {changed[1]} (the run's: {run_value})" in err, err
        assert "Drop them to resume" in err
    # Without those flags the run's settings are kept (not the defaults); the length may change.
    capsys.readouterr()
    assert main([*resume, "--max-steps", "4", "--no-eval-test"]) == 0
    assert "changed: --max-steps 4 (the run's: 2)" in capsys.readouterr().err
    results = json.loads((run / "results.json").read_text())
    assert results["training_config"]["learning_rate"] == 0.003
    assert results["training_config"]["optimizer"] == "adam"
    assert results["global_step"] == 4
    assert results["run_spec"]["data"]["train_file"] == [str(train.resolve())]
    assert results["run_spec"]["tokenizer"]["min_frequency"] == 2
    assert json.loads((run / "config.json").read_text())["hidden_size"] == 4
    lrs = {json.loads(line).get("lr") for line in (run / "log.jsonl").read_text().splitlines()} - {None}
    assert max(lrs) <= 0.003


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("learning_rate", "fast", "TrainingConfig.learning_rate must be a number, got 'fast' (str)"),
    ("num_epochs", "3", "TrainingConfig.num_epochs must be a whole number, got '3' (str)"),
    ("batch_size", 2.5, "TrainingConfig.batch_size must be a whole number, got 2.5 (float)"),
    ("batch_size", True, "TrainingConfig.batch_size must be a whole number, got True (bool)"),
    ("max_steps", "10", "TrainingConfig.max_steps must be a whole number or None, got '10' (str)"),
    ("progress_bar", 1, "TrainingConfig.progress_bar must be True or False, got 1 (int)"),
])
def test_a_training_setting_of_the_wrong_kind_is_refused_by_name(tmp_path, field, value, expected):
    from hf_nlm.training import TrainingConfig

    with pytest.raises(TypeError) as err:
        TrainingConfig(output_dir=str(tmp_path), **{field: value})
    assert str(err.value) == expected


def test_numbers_of_other_integer_and_real_types_are_taken(tmp_path):
    import numpy as np

    from hf_nlm.training import TrainingConfig

    config = TrainingConfig(output_dir=str(tmp_path), max_steps=np.int64(3), learning_rate=1)
    assert config.max_steps == 3 and config.learning_rate == 1


def test_from_recipe_refuses_a_missing_split_file_by_its_python_name(tmp_path):
    from hf_nlm.training import RunSpec

    with pytest.raises(FileNotFoundError) as err:
        RunSpec.from_recipe("nplm", train_file=str(tmp_path / "nope.txt"), output_dir=str(tmp_path / "run"))
    assert str(err.value) == f"train_file {tmp_path / 'nope.txt'}: no such file"
    (tmp_path / "train.txt").write_text("a b c\n")
    with pytest.raises(FileNotFoundError) as err:
        RunSpec.from_recipe("nplm", train_file=str(tmp_path / "train.txt"), validation_file=str(tmp_path),
                            output_dir=str(tmp_path / "run"))
    assert str(err.value).startswith(f"validation_file {tmp_path} is a folder, not a file: give files")


def test_the_command_line_names_a_missing_split_file_by_its_flag(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--train-file", str(tmp_path / "nope.txt"), "--output-dir", str(tmp_path / "run")])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"hf-nlm train: error: --train-file {tmp_path / 'nope.txt'}: no such file")
