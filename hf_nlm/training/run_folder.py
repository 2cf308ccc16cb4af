"""The output folder of a training run: a writable folder, held by one run at a time.

* :func:`prepare_output_dir`: the folder checked and claimed for a run: a run writes only its own files
  (:data:`RUN_OUTPUTS`) and refuses a folder where one of their names is taken by a file no run wrote; a fresh
  run refuses to replace another run's checkpoints or saved model unless told to;
* :func:`check_output_dir` creates the folder and makes sure files can be written in it;
* :func:`acquire_lock` writes ``.hf-nlm-train.lock`` (the holder's pid and host) and refuses a folder
  that a live run holds; a lock left by a process that has ended is taken over, with a message;
* :func:`output_dir_error` turns an ``OSError`` writing the folder (disk full, read-only, a file
  where a folder should be) into one :class:`RunFolderError` naming the folder and what to do;
* :func:`save_final_model` and :func:`write_results`: what a finished run leaves besides its checkpoints and
  log, the model with its tokenizer and generation config, the model card (``README.md``, written once, with
  the results), ``results.json`` and ``curves.png``.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import logging
import os
import shutil
import socket
import uuid
from pathlib import Path

from ..hub.model_card import RESULTS_NAME, write_model_card
from ..hub.push import RUN_FILE_PATTERNS
from .checkpoint import checkpoints_dir, list_checkpoints, quiet_progress_bars
from .run_log import plot_curves

logger = logging.getLogger(__name__)

LOCK_FILE = ".hf-nlm-train.lock"
#: Where a run keeps the best weights so far (by validation perplexity) while it trains.
BEST_MODEL_DIR = "best_model"
#: Written into a folder when a run claims it: the files of :data:`RUN_OUTPUTS`' names there are a run's.
RUN_MARKER = ".hf-nlm-run"
#: What a run (or ``hf-nlm build-tree``) writes at the top of its output_dir, as glob patterns: the model,
#: tokenizer, card, results and curves (what ``hf-nlm push`` uploads), the log, the checkpoints, the best
#: weights, build-tree's first stage, the lock and the marker.
RUN_OUTPUTS = (*RUN_FILE_PATTERNS, "log.jsonl", "checkpoints", BEST_MODEL_DIR, "random_tree", LOCK_FILE,
               RUN_MARKER)
_HELD: set[Path] = set()  # the locks this process holds
_DISK_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
# What a disk-full error says when a library wraps it (safetensors' Rust writer, torch's zip writer).
_DISK_FULL_TEXT = ("no space left on device", "storagefull", "os error 28", "unexpected pos")


class RunFolderError(ValueError):
    """The output folder cannot be used: another run holds it, it is not a writable folder, or its disk is
    full."""


def is_disk_full(err: BaseException | None) -> bool:
    """Is ``err`` (or an error it was raised from) a full disk or an exhausted quota?"""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _DISK_FULL_ERRNOS:
            return True
        if any(text in str(err).lower() for text in _DISK_FULL_TEXT):
            return True
        err = err.__cause__ or err.__context__
    return False


def _free_space(path: Path) -> str:
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    free = shutil.disk_usage(existing).free
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if free < 1024 or unit == "TB":
            return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
        free /= 1024
    return ""


def output_dir_error(path: str | os.PathLike, err: BaseException, after: str = "") -> RunFolderError:
    """One message for an error writing into the output folder ``path``; ``after`` is appended to a full
    disk's."""
    path = Path(path)
    if is_disk_full(err):
        return RunFolderError(f"the disk is full: cannot write into {path} ({_free_space(path)} free there); "
                              f"free some space{after or ''}")
    blocking = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        where = "" if blocking == path else f" ({blocking} is a file)"
        return RunFolderError(f"output_dir {path} is not a folder{where}: give --output-dir a folder path")
    if isinstance(err, OSError) and err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return RunFolderError(f"cannot write into {path} ({err.strerror}): make it writable or pick another "
                              "output_dir")
    return RunFolderError(f"cannot write into {path}: {err}")


def check_output_dir(path: str | os.PathLike) -> None:
    """Create ``path`` (and its parents) and write a file in it; raises :class:`RunFolderError` if it
    cannot."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".hf-nlm-write-test-{uuid.uuid4().hex[:8]}"
        try:
            with open(probe, "wb") as f:
                f.write(b"\0")
                f.flush()
                os.fsync(f.fileno())
        finally:
            probe.unlink(missing_ok=True)
    except OSError as err:
        raise output_dir_error(path, err) from err


def _read_lock(lock: Path) -> dict | None:
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and isinstance(holder.get("pid"), int) else None


def _alive(holder: dict) -> bool:
    """Is the process that wrote the lock still running? (One on another host is taken to be.)"""
    pid = holder["pid"]
    if holder.get("host") != socket.gethostname() or os.name == "nt":
        return True
    if pid == os.getpid():
        return False  # this process holds no lock it has not released (see lock_holder)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # e.g. another user's process
    return True


def lock_holder(output_dir: str | os.PathLike) -> dict | None:
    """The live run holding ``output_dir`` (its lock's ``pid`` and ``host``), or None."""
    lock = Path(output_dir) / LOCK_FILE
    if lock in _HELD:
        return {"pid": os.getpid(), "host": socket.gethostname()}
    holder = _read_lock(lock)
    return holder if holder is not None and _alive(holder) else None


def _in_use(output_dir: Path, holder: dict) -> RunFolderError:
    lock = output_dir / LOCK_FILE
    return RunFolderError(
        f"{output_dir} is in use by another training run (process {holder['pid']} on {holder.get('host')}): "
        f"wait for it to end or pick another output_dir; if no run is using it, delete {lock}"
    )


def check_unlocked(output_dir: str | os.PathLike) -> None:
    """Raise :class:`RunFolderError` if a live run holds ``output_dir``."""
    holder = lock_holder(output_dir)
    if holder is not None:
        raise _in_use(Path(output_dir), holder)


def _create_exclusive(lock: Path, text: str) -> None:
    """Create ``lock`` holding ``text`` in one step (FileExistsError if it exists): a written temp file,
    hard-linked."""
    tmp = lock.with_name(f"{lock.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.write_text(text, encoding="utf-8")
    try:
        os.link(tmp, lock)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    finally:
        tmp.unlink(missing_ok=True)


def acquire_lock(output_dir: str | os.PathLike) -> Path:
    """Hold ``output_dir`` for this process: write its lock file, or raise :class:`RunFolderError` if a live
    run holds it. A lock left by a process that has ended is taken over. Returns the lock file for
    :func:`release_lock`."""
    output_dir = Path(output_dir)
    lock = output_dir / LOCK_FILE
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    for _ in range(5):
        if lock in _HELD:
            raise _in_use(output_dir, me)
        try:
            _create_exclusive(lock, json.dumps(me))
        except FileExistsError:
            holder = _read_lock(lock)
            if holder is not None and _alive(holder):
                raise _in_use(output_dir, holder) from None
            if lock.exists():
                who = f"process {holder['pid']} on {holder.get('host')}" if holder else "an unreadable lock"
                logger.warning(f"{lock} was left by {who}, which has ended; this run takes the folder over")
                lock.unlink(missing_ok=True)
            continue
        except OSError as err:
            raise output_dir_error(output_dir, err) from err
        _HELD.add(lock)
        return lock
    raise RunFolderError(f"could not take {lock}: other runs keep taking it")


def release_lock(lock: Path) -> None:
    """Remove a lock this process holds (not one another process has taken over since)."""
    _HELD.discard(lock)
    holder = _read_lock(lock)
    if holder is not None and holder["pid"] == os.getpid() and holder.get("host") == socket.gethostname():
        lock.unlink(missing_ok=True)


def previous_run(output_dir: Path) -> str | None:
    """What a fresh run in ``output_dir`` would overwrite: another run's checkpoints or a saved model (or
    None)."""
    if list_checkpoints(output_dir):
        return "checkpoints of a run"
    saved = [name for name in ("config.json", "model.safetensors", "pytorch_model.bin", "results.json")
             if (output_dir / name).exists()]
    return f"a saved model ({', '.join(saved)})" if saved else None


def is_run_output(name: str) -> bool:
    """Is ``name`` (an entry at the top of an output_dir) one a run writes (:data:`RUN_OUTPUTS`), or a
    temporary one of its atomic writes?"""
    if name.startswith(".") and (".tmp-" in name or ".old-" in name):
        return True  # a best_model/ being written or replaced (checkpoint.save_pretrained_atomic)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in RUN_OUTPUTS)


def foreign_files(output_dir: str | os.PathLike) -> tuple[list[str], list[str]]:
    """The entries of ``output_dir`` no run wrote, as ``(taken, others)``: ``taken`` have the names of files a
    run writes (:data:`RUN_OUTPUTS`), ``others`` not. In a folder a run has claimed (its
    :data:`RUN_MARKER`, or another run's checkpoints or saved model) the run-named ones are that run's, so
    ``taken`` is empty."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return [], []
    names = sorted(p.name for p in output_dir.iterdir())
    ours = [name for name in names if is_run_output(name)]
    others = [name for name in names if name not in ours]
    if (output_dir / RUN_MARKER).exists() or previous_run(output_dir):
        return [], others
    # A lock is a run's whatever the folder holds (a live run's is refused, a dead one's taken over).
    return [name for name in ours if name != LOCK_FILE], others


def _listed(names: list[str], at_most: int = 8) -> str:
    return ", ".join(names[:at_most]) + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


def prepare_output_dir(output_dir: str | os.PathLike, resuming: bool, overwrite: bool,
                       main_process: bool = True, wait_for_everyone=lambda: None) -> None:
    """Make ``output_dir`` ready for a run: a writable folder no live run holds, where the run writes only its
    own files (:data:`RUN_OUTPUTS`). A folder holding a file of one of their names that no run wrote
    (:func:`foreign_files`: the user's ``README.md``, ``log.jsonl``, ...) is refused, naming them, whatever
    ``overwrite`` says; other files are left as they are, and said. A fresh run (not ``resuming``) refuses a
    folder holding another run's checkpoints or a saved model, unless ``overwrite``, which deletes them.
    The folder is then marked as a run's (:data:`RUN_MARKER`). Several processes: each looks
    (``wait_for_everyone`` between) and the main one writes."""
    output_dir = Path(output_dir)
    if main_process:
        check_output_dir(output_dir)
        check_unlocked(output_dir)
    taken, others = foreign_files(output_dir)
    if taken:
        raise RunFolderError(
            f"{output_dir} holds {_listed(taken)}, which a training run writes (its model, tokenizer, card, "
            "log or results) but no run wrote there; a run never replaces files it did not write: move them, "
            "or pick another output_dir"
        )
    if others and main_process:
        logger.warning(f"{output_dir} holds files a run does not write ({_listed(others)}): the run writes "
                       "only its own files beside them and leaves these as they are")
    held = previous_run(output_dir)
    if held and not resuming:
        if not overwrite:
            raise RunFolderError(
                f"{output_dir} already holds {held}: resume it (resume_from_checkpoint / --resume), "
                "pick another output_dir, or set overwrite_output_dir (--overwrite-output-dir) to replace it"
            )
        wait_for_everyone()  # every process has looked before the main one deletes
        if main_process:
            shutil.rmtree(checkpoints_dir(output_dir), ignore_errors=True)
            shutil.rmtree(output_dir / BEST_MODEL_DIR, ignore_errors=True)
    if main_process:
        try:
            (output_dir / RUN_MARKER).write_text("written by hf_nlm.training: the files of a run's names "
                                                 "here are a training run's\n", encoding="utf-8")
        except OSError as err:
            raise output_dir_error(output_dir, err) from err


def save_final_model(output_dir: str | os.PathLike, model, tokenizer) -> None:
    """The trained model, its tokenizer and generation config in ``output_dir``; the card comes with the
    results (:func:`write_results`), so that a run that dies while evaluating still leaves its model."""
    with quiet_progress_bars():
        model.save_pretrained(output_dir, safe_serialization=True, model_card=False)
    tokenizer.save_pretrained(output_dir)


def write_results(output_dir: str | os.PathLike, config, results: dict, evaluations: dict,
                  dataset: str | None, training: dict, num_parameters: int,
                  log_path: str | os.PathLike) -> None:
    """The model card (``config``'s model type, the ``evaluations``, the corpus and training settings),
    ``results.json`` (``results``: what ``hf-nlm card`` needs to write the card again) and ``curves.png``
    (from the run's ``log_path``)."""
    output_dir = Path(output_dir)
    write_model_card(output_dir, config, results=evaluations, dataset=dataset, training=training,
                     num_parameters=num_parameters)
    with open(output_dir / RESULTS_NAME, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    plot_curves(log_path, output_dir / "curves.png", results=results)
