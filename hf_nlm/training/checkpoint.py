"""Checkpoints of a training run, written atomically.

A checkpoint is a folder ``<output_dir>/checkpoints/checkpoint-<global step>/`` holding

* the model (``save_pretrained``: ``config.json``, ``model.safetensors``, generation config),
* the tokenizer files,
* ``optimizer.pt`` and ``scheduler.pt`` (state dicts of plain tensors and numbers),
* ``rng_state.pt`` (torch's CPU and CUDA generators, for dropout masks),
* ``training_tensors.safetensors`` (when there are any): the NT-ASGD averaged weights and a
  recurrent model's state carried across batches, so that a resumed run continues exactly,
* ``trainer_state.json``: where training stands (epoch, step in epoch, global step, best
  validation perplexity, patience counter, ...) and the ``TrainingConfig``.

It is first written into a hidden temporary folder next to its final place and then renamed, so a
folder named ``checkpoint-*`` is always complete, even if the run is killed while saving.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ..modeling_utils import check_checkpoint_model_type, from_pretrained_complete
from ..saved_run import quiet_progress_bars

logger = logging.getLogger(__name__)
TRAINER_STATE = "trainer_state.json"
TRAINING_TENSORS = "training_tensors.safetensors"
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def checkpoints_dir(output_dir: str | os.PathLike) -> Path:
    return Path(output_dir) / "checkpoints"


def list_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoint folders of a run, oldest (fewest updates) first."""
    root = checkpoints_dir(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if p.is_dir() and (m := _CHECKPOINT_RE.match(p.name))]
    return [p for _, p in sorted(found)]


#: The files of a checkpoint besides the model's (which its loader names when one is missing), and what each
#: holds.
CHECKPOINT_FILES = {TRAINER_STATE: "where training stands", "optimizer.pt": "the optimizer's state",
                    "scheduler.pt": "the learning-rate schedule's state"}


def checkpoint_problem(folder: str | os.PathLike) -> str | None:
    """What makes the checkpoint in ``folder`` unreadable (a missing, truncated or corrupted file, named), or
    None.

    Looks for the files of :data:`CHECKPOINT_FILES`, then reads the trainer state (a JSON object), the
    optimizer, scheduler and RNG states (``torch.load(weights_only=True)``: plain tensors and numbers, nothing
    unpickled beyond them) and the safetensors headers; the model's files are left to its loader, which names
    one that is missing."""
    folder = Path(folder)
    for name, what in CHECKPOINT_FILES.items():
        if not (folder / name).is_file():
            return f"{folder / name} is missing (a checkpoint keeps {what} there)"
    checks = [(folder / TRAINER_STATE, _trainer_state_object)]
    checks += [(p, lambda p: torch.load(p, map_location="cpu", weights_only=True))
               for p in sorted(folder.glob("*.pt"))]
    checks += [(p, _safetensors_keys) for p in sorted(folder.glob("*.safetensors"))]
    for path, read in checks:
        if not path.is_file():
            continue
        try:
            read(path)
        except Exception as err:  # whatever a cut-off file makes the reader raise
            reason = (str(err).splitlines() or [type(err).__name__])[0].split(". ")[0]  # torch's runs on
            return f"{path} is truncated or corrupted ({reason})"
    return None


def _trainer_state_object(path: Path) -> dict:
    state = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(state, dict):
        raise ValueError(f"expected a JSON object, got {type(state).__name__}")
    return state


def _safetensors_keys(path: Path) -> list[str]:
    with safe_open(path, "pt") as f:
        return list(f.keys())


def _newest_complete(found: list[Path]) -> Path:
    """The newest of ``found`` (oldest first) whose files all read; a skipped one is reported."""
    problems = []
    for folder in reversed(found):
        problem = checkpoint_problem(folder)
        if problem is None:
            if problems:
                logger.warning(f"{problems[0]}; resuming from the previous complete checkpoint, {folder}")
            return folder
        problems.append(problem)
    raise ValueError(f"no complete checkpoint to resume from: {'; '.join(problems)}")


def resolve_checkpoint(resume_from_checkpoint: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    """The folder ``resume_from_checkpoint`` names; ``"latest"`` (or a run's ``output_dir``) means the newest
    complete checkpoint in that run: a newer one with a truncated file is skipped, with a message."""
    if str(resume_from_checkpoint) == "latest":
        found = list_checkpoints(output_dir)
        if not found:
            raise FileNotFoundError(f"resume_from_checkpoint found nothing to resume: "
                                    f"{checkpoints_dir(output_dir)} holds no checkpoint (start the run "
                                    "afresh, without resuming)")
        return _newest_complete(found)
    path = Path(resume_from_checkpoint)
    if not path.is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint: {path} is not a folder")
    if not (path / TRAINER_STATE).is_file():
        # A run's output_dir: take its newest checkpoint.
        found = list_checkpoints(path)
        if found:
            return _newest_complete(found)
        raise FileNotFoundError(f"resume_from_checkpoint: {path} has no {TRAINER_STATE} "
                                "and no checkpoints/ folder")
    problem = checkpoint_problem(path)
    if problem is not None:
        older = [p for p in list_checkpoints(path.parent.parent) if p != path and _step(p) < _step(path)]
        offer = f"; resume from the previous checkpoint instead: --resume {older[-1]}" if older else ""
        raise ValueError(problem + offer)
    return path


def _step(folder: Path) -> int:
    m = _CHECKPOINT_RE.match(folder.name)
    return int(m.group(1)) if m else -1


def _replace_dir(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; an existing ``dst`` is moved aside first (rename cannot replace a non-empty
    folder)."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(dst, old)
    os.replace(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def save_pretrained_atomic(folder: str | os.PathLike, model, tokenizer=None, write_extra=None) -> Path:
    """``model.save_pretrained`` (and the tokenizer's) into ``folder`` via a temp folder + rename.

    ``write_extra(tmp_folder)`` may add more files before the rename. Returns ``folder``.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        with quiet_progress_bars():
            model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if write_extra is not None:
            write_extra(tmp)
        _replace_dir(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def save_checkpoint(
    folder: str | os.PathLike,
    model,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    scheduler,
    state: dict,
    rng_states: dict[int, dict] | None = None,
    tensors: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write a checkpoint into ``folder`` atomically (temp folder + rename). Returns ``folder``.

    ``model`` is the unwrapped model; ``rng_states`` maps a process index to its RNG state;
    ``tensors`` (averaged weights, a carried recurrent state) go into ``training_tensors.safetensors``.
    """

    def write_extra(tmp: Path) -> None:
        _torch_save(optimizer.state_dict(), tmp / "optimizer.pt")
        _torch_save(scheduler.state_dict(), tmp / "scheduler.pt")
        for index, rng in (rng_states or {}).items():
            _torch_save(rng, tmp / f"rng_state_{index}.pt")
        if tensors:
            save_file(tensors, tmp / TRAINING_TENSORS)
        with open(tmp / TRAINER_STATE, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=2, sort_keys=True)

    return save_pretrained_atomic(folder, model, tokenizer, write_extra)


def _torch_save(obj, path: Path) -> None:
    """``torch.save`` through memory, so that a full disk raises ``OSError(ENOSPC)`` (torch's own file writer
    reports it as "unexpected pos ...")."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def rotate_checkpoints(output_dir: str | os.PathLike, keep: int | None, protect: Path | None = None) -> None:
    """Delete all but the newest ``keep`` checkpoints (never ``protect``)."""
    if keep is None:
        return
    found = list_checkpoints(output_dir)
    for path in found[: max(0, len(found) - keep)]:
        if protect is None or path.resolve() != Path(protect).resolve():
            shutil.rmtree(path, ignore_errors=True)


def load_training_tensors(folder: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The ``tensors`` a checkpoint was saved with (empty if none)."""
    path = Path(folder) / TRAINING_TENSORS
    return load_file(path) if path.is_file() else {}


def read_trainer_state(folder: str | os.PathLike) -> dict:
    """``trainer_state.json`` of the checkpoint ``folder``, a JSON object (``ValueError`` naming the file
    otherwise)."""
    path = Path(folder) / TRAINER_STATE
    try:
        return _trainer_state_object(path)
    except (OSError, ValueError) as err:  # json's errors and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path}: cannot read the trainer state ({err})") from err


def load_torch_state(folder: str | os.PathLike, name: str, load_into) -> None:
    """``load_into(torch.load(folder / name))`` for a checkpoint's state file (``optimizer.pt``,
    ``scheduler.pt``): a file that is missing, unreadable or holds another optimizer's or schedule's state is
    a ``ValueError`` naming it and what it should hold."""
    path = Path(folder) / name
    what = CHECKPOINT_FILES.get(name, "a training state")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as err:
        raise ValueError(f"{path} is missing (a checkpoint keeps {what} there)") from err
    except Exception as err:  # whatever a damaged file makes torch's reader raise
        raise ValueError(f"{path} is truncated or corrupted: expected {what} saved with torch.save") from err
    try:
        load_into(state)
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as err:
        raise ValueError(f"{path} does not hold this run's {what.removeprefix('the ')} "
                         f"({type(err).__name__}: {err})") from err


def load_model_weights(folder: str | os.PathLike, model) -> None:
    """Load the weights saved in ``folder`` into ``model`` (in place), refusing another model type."""
    check_checkpoint_model_type(folder, model.config.model_type)
    with quiet_progress_bars():
        loaded = from_pretrained_complete(type(model), folder)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if missing or unexpected:
        raise ValueError(
            f"{folder}: the saved weights do not fit this model (missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}); was it trained with other hyperparameters?"
        )


def capture_rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
