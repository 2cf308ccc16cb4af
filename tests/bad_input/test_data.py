"""A training run never destroys the user's data: it refuses an output folder holding a saved model, holds its
folder against a second run, says plainly when the folder cannot be written or the disk is full, never leaves
a half-written checkpoint, and skips a truncated one. Every refusal is one line and exit status 2."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hf_nlm.training import checkpoint as checkpoint_module
from hf_nlm.training.checkpoint import list_checkpoints, resolve_checkpoint
from hf_nlm.training.run_folder import LOCK_FILE
from hf_nlm_cli import main

TRAIN = ["train", "--no-progress-bar", "--no-eval-test", "--max-steps", "2", "--optimizer", "adam",
         "--learning-rate", "1e-3", "--context-size", "2", "--embedding-size", "8", "--hidden-size", "8",
         "--block-size", "8", "--batch-size", "2", "--num-epochs", "5"]


@pytest.fixture(scope="module")
def small_txt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("the cat sat on the mat\nthe dog sat on the log\na cat saw a dog\n" * 8, encoding="utf-8")
    return path


def train_args(small_txt: Path, output_dir: Path, *extra: str) -> list[str]:
    return [*TRAIN, "--train-file", str(small_txt), "--output-dir", str(output_dir), *extra]


@pytest.fixture(scope="module")
def two_checkpoints(small_txt, tmp_path_factory) -> Path:
    """A run folder with checkpoint-1 and checkpoint-2 (shared: copy it before changing it)."""
    out = tmp_path_factory.mktemp("two") / "run"
    assert main(train_args(small_txt, out, "--save-steps", "1")) == 0
    assert [p.name for p in list_checkpoints(out)] == ["checkpoint-1", "checkpoint-2"]
    return out


def refused(capsys, small_txt: Path, output_dir: Path, *extra: str) -> str:
    """stderr of an `hf-nlm train` that must refuse: exit status 2, no traceback, one `hf-nlm train: error:`
    line."""
    capsys.readouterr()
    try:
        code = main(train_args(small_txt, output_dir, *extra))
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert (code, "Traceback" in err, last.startswith("hf-nlm train: error: ")) == (2, False, True), err
    return last


def write_lock(folder: Path, pid: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
    return lock


# ----------------------------------------------------------------------------- no silent overwrite


def test_a_saved_model_is_not_overwritten(two_checkpoints, small_txt, tmp_path, capsys):
    saved = Path(shutil.copytree(two_checkpoints, tmp_path / "model"))
    shutil.rmtree(saved / "checkpoints")
    weights = (saved / "model.safetensors").read_bytes()
    err = refused(capsys, small_txt, saved)
    expected = (f"{saved} holds a finished run (its saved model: config.json, model.safetensors, "
                "results.json): to replace it, give --overwrite-output-dir; to continue it, --resume; or "
                "give another --output-dir")
    assert expected in err and "--no-overwrite" not in err, f"hf-nlm train into a finished run: {err}"
    assert (saved / "model.safetensors").read_bytes() == weights
    assert main(train_args(small_txt, saved, "--overwrite-output-dir")) == 0
    assert main(train_args(small_txt, saved, "--resume", "--max-steps", "3")) == 0  # resuming stays allowed
    assert json.loads((saved / "results.json").read_text())["global_step"] == 3


# ----------------------------------------------------------------------------- one run per folder


def test_a_folder_held_by_a_live_run_is_refused(small_txt, tmp_path, capsys):
    out = tmp_path / "run"
    live = os.getppid()  # a live process other than this one
    lock = write_lock(out, live)
    err = refused(capsys, small_txt, out)
    assert f"{out} is in use by another training run (process {live} on" in err and str(lock) in err
    assert json.loads(lock.read_text())["pid"] == live  # the holder's lock is left alone
    assert not (out / "config.json").exists()


def test_a_stale_lock_is_taken_over_and_the_lock_released(small_txt, tmp_path, capsys, caplog):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    out = tmp_path / "run"
    lock = write_lock(out, ended.pid)
    assert main(train_args(small_txt, out)) == 0
    assert f"left by process {ended.pid}" in caplog.text and "takes the folder over" in caplog.text
    assert not lock.exists()


@pytest.mark.parametrize("error, code", [(KeyboardInterrupt, 130), (RuntimeError("boom"), None)])
def test_the_lock_is_released_on_ctrl_c_and_errors(small_txt, tmp_path, monkeypatch, capsys, error, code):
    from hf_nlm.training import LMTrainer

    def stop(self):
        assert (self.output_dir / LOCK_FILE).exists()  # held while training
        raise error

    monkeypatch.setattr(LMTrainer, "_train", stop)
    out = tmp_path / "run"
    if code is None:
        with pytest.raises(RuntimeError, match="boom"):
            main(train_args(small_txt, out))
    else:
        assert main(train_args(small_txt, out)) == code
    assert not (out / LOCK_FILE).exists()


# ----------------------------------------------------------------------------- unusable folders, full disks


def test_an_output_folder_that_is_a_file(small_txt, tmp_path, capsys):
    path = tmp_path / "model.bin"
    path.write_text("not a folder")
    err = refused(capsys, small_txt, path)
    assert f"--output-dir {path} is not a folder: give --output-dir a folder path" in err
    err = refused(capsys, small_txt, path / "run")
    assert f"({path} is a file)" in err
    assert path.read_text() == "not a folder"


def test_a_read_only_output_folder(small_txt, tmp_path, monkeypatch, capsys):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    out = read_only / "run"
    if os.geteuid() == 0:  # root writes anywhere: make the folder refuse as a read-only one does
        mkdir = Path.mkdir

        def refuse(self, *args, **kwargs):
            if self == out:
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", refuse)
    try:
        err = refused(capsys, small_txt, out)
    finally:
        read_only.chmod(0o755)
    assert (f"cannot write into {out} (Permission denied): make it writable or pick another --output-dir"
            in err)


def test_a_full_disk_at_the_start(small_txt, tmp_path, monkeypatch, capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "run"
    err = refused(capsys, small_txt, out)
    assert f"the disk is full: cannot write into {out} (" in err and "free there" in err


def test_a_full_disk_mid_run_keeps_the_last_complete_checkpoint(small_txt, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    saved = checkpoint_module._torch_save
    calls = []

    def fill_the_disk(obj, path):
        calls.append(path)
        if "checkpoint-2" in str(path.parent):  # the second checkpoint: half of a file, then no space
            path.write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        saved(obj, path)

    monkeypatch.setattr(checkpoint_module, "_torch_save", fill_the_disk)
    err = refused(capsys, small_txt, out, "--save-steps", "1", "--max-steps", "3")
    first = out / "checkpoints" / "checkpoint-1"
    assert f"the disk is full: cannot write into {out} (" in err
    assert f"the last complete checkpoint is {first}: continue with --resume" in err
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["checkpoint-1"]  # no half-written checkpoint
    assert resolve_checkpoint("latest", out) == first
    assert not (out / LOCK_FILE).exists()
    monkeypatch.undo()
    assert main(train_args(small_txt, out, "--save-steps", "1", "--max-steps", "3", "--resume")) == 0
    assert json.loads((out / "results.json").read_text())["global_step"] == 3


# ----------------------------------------------------------------------------- truncated checkpoints


@pytest.mark.parametrize("name", ["optimizer.pt", "trainer_state.json"])
def test_a_truncated_checkpoint_is_skipped(two_checkpoints, small_txt, tmp_path, capsys, caplog, name):
    out = Path(shutil.copytree(two_checkpoints, tmp_path / "run"))
    newest, previous = out / "checkpoints" / "checkpoint-2", out / "checkpoints" / "checkpoint-1"
    damaged = newest / name
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    # Named on its own, the checkpoint is refused, with the previous one offered.
    err = refused(capsys, small_txt, out, "--resume", str(newest), "--max-steps", "3")
    assert f"{damaged} is truncated or corrupted" in err and f"--resume {previous}" in err
    # "The newest checkpoint" is the newest complete one, said so.
    assert main(train_args(small_txt, out, "--resume", "--max-steps", "3")) == 0
    assert f"{damaged} is truncated or corrupted" in caplog.text
    assert f"resuming from the previous complete checkpoint, {previous}" in caplog.text
    results = json.loads((out / "results.json").read_text())
    assert results["global_step"] == 3
