"""The output folder keeps what the user put there; a resumed run (or one started from saved weights) gets
the checks of a fresh run, says what it trains with and how much of its time budget is left, and a damaged
checkpoint is one line naming its file; the training log's loss is the plain NLL whatever the objective
adds."""

from __future__ import annotations

import json
import logging
import math
import shutil

import pytest
import torch

from hf_nlm.training import RunSpec, load_run, run_folder, train
from hf_nlm.training import memory as training_memory
from hf_nlm.training.memory import check_training_memory
from hf_nlm.training.run_folder import RunFolderError, is_run_output, read_jsonl
from hf_nlm_cli import main

TINY = dict(context_size=2, embedding_size=4, hidden_size=4, block_size=4, batch_size=2, progress_bar=False)
WORDS = "the cat sat on the mat and a dog saw the red bird near the old tree".split()


def write_text(path, lines: int = 40, shift: int = 0) -> str:
    path.write_text("".join(" ".join(WORDS[(i + shift) % 7:] + WORDS[:(i + shift) % 7]) + "\n"
                            for i in range(lines)))
    return str(path)


def tiny_spec(tmp_path, out, **settings) -> RunSpec:
    text = write_text(tmp_path / "t.txt")
    return RunSpec.from_recipe("nplm", train_file=text, validation_file=text, output_dir=str(out),
                               **{**TINY, "max_steps": 2, **settings})


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A finished two-update NPLM run; copy it before changing it."""
    root = tmp_path_factory.mktemp("saved")
    train(tiny_spec(root, root / "run"))
    return root / "run"


@pytest.fixture
def run_copy(saved_run, tmp_path):
    shutil.copy(saved_run.parent / "t.txt", tmp_path / "t.txt")
    return shutil.copytree(saved_run, tmp_path / "run")


def resumed(run, **settings) -> RunSpec:
    return RunSpec.from_run_folder(run).resumed_with(output_dir=str(run), **settings)


# ----------------------------------------------------------------------------- the output folder


def test_a_run_writes_only_names_it_declares(saved_run):
    """Every entry a run leaves at the top of its folder is one of RUN_OUTPUTS: a new output file must be
    declared there, or a user's file of that name would be replaced without a word."""
    assert sorted(p.name for p in saved_run.iterdir() if not is_run_output(p.name)) == []
    assert not is_run_output("notes.txt") and not is_run_output("data")


@pytest.mark.parametrize("overwrite", [False, True])
def test_the_users_files_of_a_runs_names_are_refused_and_kept(tmp_path, overwrite):
    project = tmp_path / "my-project"
    project.mkdir()
    mine = {"README.md": b"# my project\n", "log.jsonl": b'{"mine": 1}\n'}
    for name, data in mine.items():
        (project / name).write_bytes(data)
    with pytest.raises(RunFolderError, match=r"my-project holds README.md, log.jsonl, which a training run "
                                             r"writes .* a run never replaces files it did not write"):
        train(tiny_spec(tmp_path, project, overwrite_output_dir=overwrite))
    assert {p.name: p.read_bytes() for p in project.iterdir()} == mine  # nothing written, nothing replaced


def test_the_cli_refuses_the_users_files_with_one_line(tmp_path, capsys):
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "README.md").write_text("mine")
    text = write_text(tmp_path / "t.txt")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--train-file", text, "--output-dir", str(project), "--max-steps", "1",
              "--no-progress-bar"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err and "holds README.md" in err
    assert (project / "README.md").read_text() == "mine"


def test_other_files_are_left_as_they_are_and_said(tmp_path, caplog):
    project = tmp_path / "my-project"
    (project / "data").mkdir(parents=True)
    (project / "notes.txt").write_bytes(b"keep me\x00")
    with caplog.at_level(logging.WARNING, logger=run_folder.__name__):
        train(tiny_spec(tmp_path, project))
    assert "holds files a run does not write (data, notes.txt)" in caplog.text
    assert (project / "notes.txt").read_bytes() == b"keep me\x00" and (project / "config.json").is_file()
    # The folder is a run's now: a run replacing it (told to) and one resuming it are not refused.
    train(tiny_spec(tmp_path, project, overwrite_output_dir=True))
    assert train(resumed(project, max_steps=3)).metrics["global_step"] == 3
    assert (project / "notes.txt").read_bytes() == b"keep me\x00"


def test_a_run_that_left_no_checkpoint_is_its_folders_run(tmp_path):
    """A run killed before its first checkpoint leaves its log: the next run in the folder takes it over."""
    out = tmp_path / "run"
    run_folder.prepare_output_dir(out, resuming=False, overwrite=False)
    (out / "log.jsonl").write_text('{"type": "step", "global_step": 1}\n')
    train(tiny_spec(tmp_path, out))
    assert all(r.get("type") != "step" or r["global_step"] <= 2 for r in read_jsonl(out / "log.jsonl"))


# ----------------------------------------------------------------------------- damaged checkpoints


def damage(run, what: str) -> str:
    """Damage the checkpoint of ``run`` in one way; returns the file named in the error."""
    (checkpoint,) = (run / "checkpoints").iterdir()
    state = checkpoint / "trainer_state.json"
    if what == "no optimizer.pt":
        (checkpoint / "optimizer.pt").unlink()
        return str(checkpoint / "optimizer.pt")
    if what == "wrong type":
        state.write_text(json.dumps({**json.loads(state.read_text()), "global_step": "many"}))
    elif what == "truncated":
        state.write_text(state.read_text()[:50])
    elif what == "garbage":
        state.write_bytes(bytes(range(256)))
    elif what == "not an object":
        state.write_text("[1, 2]")
    elif what == "another optimizer's state":
        torch.save({"state": {}, "param_groups": []}, checkpoint / "optimizer.pt")
        return str(checkpoint / "optimizer.pt")
    return str(state)


@pytest.mark.parametrize("what", ["no optimizer.pt", "wrong type", "truncated", "garbage", "not an object",
                                  "another optimizer's state"])
def test_a_damaged_checkpoint_is_one_error_naming_its_file(run_copy, capsys, what):
    named = damage(run_copy, what)
    with pytest.raises(ValueError) as info:  # reading the run's spec back, or resuming it
        train(resumed(run_copy, max_steps=3))
    assert named in str(info.value) and "\n" not in str(info.value)
    if what == "wrong type":
        assert "field 'global_step' must be int, got 'many'" in str(info.value)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--output-dir", str(run_copy), "--resume", "--max-steps", "3", "--no-progress-bar"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err and named in err


# ----------------------------------------------------------------------------- what a resumed run checks


def test_rewritten_data_is_refused_whichever_way_the_run_is_resumed(tmp_path):
    run_copy, text = tmp_path / "run", tmp_path / "t.txt"
    train(tiny_spec(tmp_path, run_copy))
    write_text(text, shift=3)  # the same path, other text
    for spec in (resumed(run_copy, max_steps=3),  # read back from the folder, as hf-nlm train --resume does
                 RunSpec.from_recipe("nplm", train_file=str(text), validation_file=str(text),
                                     output_dir=str(run_copy), resume_from_checkpoint="latest",
                                     **{**TINY, "max_steps": 3})):
        checkpoint = run_copy / "checkpoints" / "checkpoint-2"
        with pytest.raises(ValueError, match=rf"the data is not the run's: --train-file {text}; .* holds "
                                             rf"other text.*--init-from {checkpoint}"):
            train(spec)


def test_saved_weights_on_a_text_their_vocabulary_does_not_cover_are_refused(run_copy, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("zebra quokka wombat numbat bilby dingo emu the\n" * 20)
    spec = RunSpec.from_recipe("nplm", train_file=str(other), output_dir=str(tmp_path / "new"),
                               init_from=str(run_copy), **{**TINY, "max_steps": 1})
    # 7 of the 9 tokens of each line (<eos> included) are unknown to the run's tokenizer: 77.8%
    with pytest.raises(ValueError, match=rf"the tokenizer of {run_copy} leaves 140 of the 180 training "
                                         r"tokens \(77.8%\) unknown, more than 50%"):
        train(spec)


def test_the_memory_check_runs_on_resume_without_counting_the_loaded_weights_twice(run_copy, monkeypatch):
    model = load_run(run_copy).model
    spec = resumed(run_copy, max_steps=3)
    estimate = training_memory._estimate(type(model), model.config, None, spec.training)
    held = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    # What is free besides the loaded weights is just short of the need without them.
    monkeypatch.setattr(training_memory, "available_memory",
                        lambda gpu: (estimate.total_bytes - held, "memory available"))
    assert check_training_memory(type(model), model.config, spec.training, loaded=model) is not None
    with pytest.raises(ValueError, match="training this nplm needs"):
        check_training_memory(type(model), model.config, spec.training)
    monkeypatch.setattr(training_memory, "available_memory", lambda gpu: (1000, "memory available"))
    with pytest.raises(ValueError, match=r"training this nplm needs .* counting the .* loaded weights hold"):
        train(spec)


def test_a_resumed_run_says_the_sizes_it_trains_with(run_copy, capsys):
    capsys.readouterr()
    train(resumed(run_copy, max_steps=3))
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("recipe default of nplm")]
    assert "instead of the recipe's: " in line
    assert "--embedding-size 4 (the recipe's: 100), --hidden-size 4 (the recipe's: 100)" in line


def test_a_resumed_run_says_its_time_left_or_refuses_a_spent_budget(run_copy, capsys):
    state = json.loads(next((run_copy / "checkpoints").iterdir()).joinpath("trainer_state.json").read_text())
    spent = state["elapsed_s"]
    with pytest.raises(ValueError, match=rf"TrainingConfig.max_time_s {spent / 2:g} is spent: the run has "
                                         rf"trained for {spent:,.1f} s already .*resume with max_time_s="
                                         rf"{spent * 1.5:.1f}"):
        train(resumed(run_copy, max_steps=3, max_time_s=spent / 2))
    capsys.readouterr()
    train(resumed(run_copy, max_steps=3, max_time_s=spent + 600))
    assert (f"time budget: {spent + 600:g} s for the whole run, which has trained for {spent:,.1f} s: "
            "600.0 s are left") in capsys.readouterr().err


# ----------------------------------------------------------------------------- the training log


def awd_first_step(tmp_path, name: str, **regularisers) -> dict:
    text = write_text(tmp_path / "t.txt")
    spec = RunSpec.from_recipe("awd_lstm", train_file=text, output_dir=str(tmp_path / name), embedding_size=4,
                               hidden_size=4, num_hidden_layers=1, block_size=4, batch_size=2, max_steps=1,
                               logging_steps=1, progress_bar=False, **regularisers)
    train(spec)
    (step,) = [r for r in read_jsonl(tmp_path / name / "log.jsonl") if r["type"] == "step"]
    return step


def test_the_logged_loss_is_the_plain_nll_and_the_objective_is_named(tmp_path):
    plain = awd_first_step(tmp_path, "plain", alpha=0.0, beta=0.0)
    regularised = awd_first_step(tmp_path, "ar-tar", alpha=2.0, beta=1.0)
    # The first update's NLL is computed before any weight changes: AR/TAR do not change it.
    assert regularised["train_loss"] == pytest.approx(plain["train_loss"], rel=1e-6)
    assert regularised["train_ppl"] == pytest.approx(math.exp(regularised["train_loss"]))
    assert regularised["train_objective"] > regularised["train_loss"]  # AR and TAR are not negative
    assert "train_objective" not in plain
