"""The `hf-nlm` command: end-to-end training on text files, evaluate, generate, and clean errors."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch

from hf_nlm_cli import main


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest and immune to a busy machine
    yield
    torch.set_num_threads(threads)


def write_corpus(folder: Path) -> dict[str, Path]:
    rng = random.Random(0)
    subjects, verbs, objects = ["the cat", "a dog", "the bird"], ["sat on", "saw"], ["the mat", "a log"]
    files = {}
    for split, n in [("train", 80), ("valid", 12), ("test", 12)]:
        lines = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}" for _ in range(n)]
        files[split] = folder / f"{split}.txt"
        files[split].write_text("\n".join(lines) + "\n")
    return files


TINY = ["--context-size", "2", "--embedding-size", "8", "--hidden-size", "8", "--block-size", "8",
        "--batch-size", "4", "--learning-rate", "0.5", "--no-progress-bar",
        "--early-stopping-patience", "none"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    files = write_corpus(folder)
    out = folder / "run"
    status = main(["train", "--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
                   "--test-file", str(files["test"]), "--output-dir", str(out), "--num-epochs", "2", *TINY])
    assert status == 0
    return out, files


def test_train_writes_a_loadable_model(trained):
    out, _ = trained
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "README.md", "results.json", "log.jsonl", "curves.png"):
        assert (out / name).is_file(), name
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_nlm  # noqa: F401

    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "nplm" and model.config.context_size == 2
    assert model.config.vocab_size == len(tokenizer)
    results = json.loads((out / "results.json").read_text())
    assert results["stop_reason"] == "num_epochs" and results["epochs_completed"] == 2
    assert results["test"]["perplexity"] < len(tokenizer)  # learnt something
    assert "perplexity" in (out / "README.md").read_text()


def test_evaluate_and_generate(trained, capsys):
    out, files = trained
    capsys.readouterr()
    assert main(["evaluate", str(out), "--test-file", str(files["test"])]) == 0
    result = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "results.json").read_text())["test"]
    assert result["split"] == "test"
    assert result["perplexity"] == pytest.approx(saved["perplexity"], rel=1e-5)
    assert main(["generate", str(out), "the cat", "a", "--num-beams", "3", "--max-new-tokens", "4",
                 "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["prompt"] for r in lines] == ["the cat", "a"]
    assert all(len(r["generations"]) == 1 for r in lines)


def test_resume_continues_a_run(tmp_path, capsys):
    files = write_corpus(tmp_path)
    args = ["train", "--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
            "--output-dir", str(tmp_path / "run"), "--num-epochs", "2", *TINY]
    assert main([*args, "--max-steps", "5"]) == 0
    assert json.loads((tmp_path / "run" / "results.json").read_text())["global_step"] == 5
    # A budget the run has already spent is refused in the command line's words.
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--resume", "--max-time-s", "0.001"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "error: --max-time-s 0.001 is spent: the run has trained for" in err
    assert re.search(r"for 0\.001 s more, resume with --max-time-s=\d+\.\d\n", err), err
    assert main([*args, "--resume"]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["stop_reason"] == "num_epochs" and results["global_step"] > 5


def expect_usage_error(argv: list[str], capsys, message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_bad_input_exits_2_with_a_message(tmp_path, capsys):
    files = write_corpus(tmp_path)
    base = ["train", "--output-dir", str(tmp_path / "out")]
    with_files = [*base, "--train-file", str(files["train"])]
    expect_usage_error([*base, "--corpus", "wikipedia"], capsys, "invalid choice: 'wikipedia'")
    expect_usage_error([*base], capsys, "give --corpus")
    expect_usage_error([*base, "--train-file", str(tmp_path / "missing.txt")], capsys, "missing.txt")
    expect_usage_error([*with_files, "--learning-rate", "-1"], capsys,
                       "--learning-rate must be a positive number")
    expect_usage_error([*with_files, "--learning-rate", "fast"], capsys, "invalid float value")
    expect_usage_error([*with_files, "--optimizer", "rmsprop"], capsys, "invalid choice: 'rmsprop'")
    expect_usage_error([*with_files, "--context-size", "0"], capsys, "--context-size (n - 1) must be >= 1")
    expect_usage_error([*with_files, "--tokenizer", "bpe"], capsys, "needs --vocab-size")
    expect_usage_error([*with_files, "--block-size", "0"], capsys, "--block-size must be >= 1")
    expect_usage_error([*with_files, "--max-steps", "0"], capsys, "--max-steps must be >= 1")
    expect_usage_error(["train"], capsys, "--output-dir")
    expect_usage_error(["evaluate", str(tmp_path / "nowhere"), "--test-file", str(files["test"])], capsys,
                       f"{tmp_path / 'nowhere'} does not exist")
    expect_usage_error(["generate", str(tmp_path), "hi", "--max-new-tokens", "0"], capsys,
                       "--max-new-tokens must be >= 1")


def test_a_mistyped_command_lists_every_command(capsys):
    from hf_nlm_cli import COMMANDS

    with pytest.raises(SystemExit) as exit_info:
        main(["genrate", "runs/x", "the"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    choices = err.split("(choose from ", 1)[-1]
    missing = [name for name in COMMANDS if f"'{name}'" not in choices]
    assert "invalid choice: 'genrate'" in err and not missing, \
        f"hf-nlm genrate: the choices leave out {missing}: {err}"


def test_resume_from_another_model_type_exits_2(tmp_path, capsys):
    files = write_corpus(tmp_path)
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-7"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 3, "config": {}}))
    for name in ("optimizer.pt", "scheduler.pt"):  # a complete checkpoint, as transformers' Trainer writes
        torch.save({}, checkpoint / name)
    expect_usage_error(["train", "--train-file", str(files["train"]), "--output-dir", str(tmp_path / "run"),
                        "--resume"], capsys, "model_type='gpt2'")


def test_resume_without_a_checkpoint_names_the_flag(tmp_path, capsys):
    files = write_corpus(tmp_path)
    expect_usage_error(["train", "--train-file", str(files["train"]), "--output-dir", str(tmp_path / "run"),
                        "--resume"], capsys,
                       f"--resume found nothing to resume: {tmp_path / 'run' / 'checkpoints'} holds no")


def test_download_is_delegated(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["download", "--help"])
    assert exit_info.value.code == 0
    assert "brown" in capsys.readouterr().out
    assert main(["download", "not-a-corpus"]) != 0  # checked before any network access


def test_every_command_describes_itself_in_its_help(capsys):
    """`hf-nlm NAME --help` opens with what the command does: its handler's docstring, plain text."""
    import inspect

    from hf_nlm_cli import COMMANDS, SEPARATE_COMMANDS, command_functions

    for name in COMMANDS:
        if name in SEPARATE_COMMANDS:
            continue
        description = inspect.getdoc(command_functions()[name][1])
        assert description and "``" not in description and ":func:" not in description, name
        with pytest.raises(SystemExit) as exit_info:
            main([name, "--help"])
        assert exit_info.value.code == 0
        shown = " ".join(capsys.readouterr().out.split())
        assert " ".join(description.split()) in shown.replace("- ", "-"), name
