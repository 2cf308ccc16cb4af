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
  the results), ``results.json`` and ``curves.png``;
* the run's log ``log.jsonl`` (:func:`append_jsonl`, :func:`read_jsonl`; :func:`truncate_log` for a resume)
  and the loss / perplexity curves drawn from it (:func:`curves_figure`, :func:`plot_curves`).
"""

from __future__ import annotations

import errno
import fnmatch
import importlib.metadata
import json
import logging
import math
import os
import platform
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

from ..data.registry import corpus_card
from ..hub.model_card import BASELINE_KEY, RESULTS_NAME, write_model_card, write_run_card
from ..hub.push import RUN_FILE_PATTERNS
from .checkpoint import checkpoints_dir, list_checkpoints, quiet_progress_bars

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
    saved = [name for name in ("config.json", "model.safetensors", "pytorch_model.bin", "results.json")
             if (output_dir / name).exists()]
    if saved:
        return f"a finished run (its saved model: {', '.join(saved)})"
    return "the checkpoints of an unfinished run" if list_checkpoints(output_dir) else None


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
            # Named as the library's settings; the command line writes them as its flags (--resume).
            raise RunFolderError(
                f"{output_dir} holds {held}: to replace it, give overwrite_output_dir; to continue it, "
                "resume_from_checkpoint; or give another output_dir"
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
    """The model card (``config``'s model type, the ``evaluations``, the corpus and training settings, the
    n-gram baseline of ``results``), ``results.json`` (``results``: what ``hf-nlm card`` needs to write the
    card again) and ``curves.png`` (from the run's ``log_path``)."""
    output_dir = Path(output_dir)
    write_model_card(output_dir, config, results=evaluations, dataset=dataset, training=training,
                     num_parameters=num_parameters, baseline=results.get(BASELINE_KEY))
    save_results_file(output_dir, results)
    plot_curves(log_path, output_dir / "curves.png", results=results)


#: The packages whose versions decide a run's numbers, recorded in its ``results.json``.
RECORDED_PACKAGES = ("hf-nlm", "torch", "transformers", "tokenizers", "datasets", "accelerate", "numpy")


def run_environment() -> dict:
    """Where a run's numbers were made, for its ``results.json``: the package versions, the torch threads (a
    thread count other than another machine's moves the last digits, :data:`~.config.THREAD_TOLERANCE`), the
    Python version and platform, and the git commit of hf_nlm's source when it is a checkout (None when
    installed from a package)."""
    import torch

    versions = {}
    for package in RECORDED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    source = Path(__file__).resolve().parents[2]
    commit = None
    if (source / ".git").exists():  # hf_nlm's own checkout, not a package inside another repository
        try:
            commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True,
                                    text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    return {"versions": versions, "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "platform": platform.platform(), "commit": commit}


def update_results(output_dir: str | os.PathLike, results: dict) -> None:
    """Write ``results`` as the run's ``results.json`` again, and its card from them, after a figure measured
    once the loop finished (the n-gram mixture)."""
    save_results_file(output_dir, results)
    write_run_card(output_dir, corpus_card=corpus_card)


def save_results_file(output_dir: str | os.PathLike, results: dict) -> None:
    """``results`` as the run's ``results.json`` (what ``hf-nlm card`` and ``load_run`` read back)."""
    with open(Path(output_dir) / RESULTS_NAME, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, sort_keys=True)


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
    return records


def truncate_log(path: str | os.PathLike, global_step: int) -> None:
    """Drop records written after ``global_step``: a resumed run redoes those steps and logs them again."""
    records = read_jsonl(path)
    if not records:
        return
    kept = [r for r in records if r.get("global_step", 0) <= global_step]
    tmp = Path(f"{path}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in kept:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, path)


# Each split keeps its colour in every panel and every run.
SPLIT_COLORS = {"train": "tab:blue", "validation": "tab:orange", "test": "tab:green"}

# A series with this many points or fewer gets its values written beside its markers.
_ANNOTATE_AT_MOST = 3


def _annotate(ax, xs, ys, color, fmt: str) -> None:
    if len(xs) <= _ANNOTATE_AT_MOST:
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(format(y, fmt), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8,
                        color=color)


def logging_windows(records: list[dict]) -> list[tuple[int, int, float]]:
    """The logging windows of a run's ``step`` records: ``(first update, last update, mean train loss)``.

    A window runs from the update after the previous ``step`` record (or the run's start) to its own
    update; its loss is the mean NLL per token over those updates, as the trainer logged it."""
    windows, previous = [], 0
    for r in records:
        if r.get("type") == "step":
            windows.append((previous + 1, r["global_step"], r["train_loss"]))
            previous = r["global_step"]
    return windows


def curves_figure(log_path: str | os.PathLike, results: dict | None = None):
    """The matplotlib Figure of :func:`plot_curves` (two axes: loss per update, perplexity per epoch),
    or None when the log holds nothing to draw. ``results`` (``results.json``'s dict) adds the test split."""
    records = read_jsonl(log_path)
    windows = logging_windows(records)
    epochs = [r for r in records if r.get("type") == "epoch"]
    # Validation at the end of a run stopped inside an epoch (x: the epochs done, a fraction).
    evals = [r for r in records if r.get("type") == "eval"]
    test = (results or {}).get("test") or {}
    if not windows and not epochs and not evals:
        return None

    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, safe on servers and under DDP
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    train, val_color, test_color = SPLIT_COLORS["train"], SPLIT_COLORS["validation"], SPLIT_COLORS["test"]
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(11, 4))
    if windows:
        # Each window's mean drawn at the window's centre, where a mean over those updates belongs.
        xs = [(first + last) / 2 for first, last, _ in windows]
        ax_loss.plot(xs, [loss for *_, loss in windows], "^--", lw=1, ms=6, mfc="white", color=train,
                     zorder=3, label="train, mean of each logging window")
    starts = [0] + [r["global_step"] for r in epochs[:-1]]
    if epochs:
        # An epoch's mean at the epoch's centre update too, so the two train curves are comparable.
        xs = [(start + 1 + r["global_step"]) / 2 for start, r in zip(starts, epochs, strict=True)]
        ys = [r["train_loss"] for r in epochs]
        ax_loss.plot(xs, ys, "o-", color=train, label="train, mean of each epoch")
        _annotate(ax_loss, xs, ys, train, ".3f")
        x_ep = [r["epoch"] + 1 for r in epochs]
        ppl = [math.exp(min(y, 50.0)) for y in ys]
        ax_ppl.plot(x_ep, ppl, "o-", color=train, label="train, mean of each epoch")
        _annotate(ax_ppl, x_ep, ppl, train, ".4g")
        val = [r for r in epochs if r.get("val_loss") is not None]
        if val:
            xs, ys = [r["global_step"] for r in val], [r["val_loss"] for r in val]
            ax_loss.plot(xs, ys, "s-", color=val_color, label="validation, at each epoch's end")
            _annotate(ax_loss, xs, ys, val_color, ".3f")
            xs, ys = [r["epoch"] + 1 for r in val], [r["val_ppl"] for r in val]
            ax_ppl.plot(xs, ys, "s-", color=val_color, label="validation, at each epoch's end")
            _annotate(ax_ppl, xs, ys, val_color, ".4g")
    if evals:
        for ax, x_key, y_key, fmt in ((ax_loss, "global_step", "val_loss", ".3f"),
                                      (ax_ppl, "epoch", "val_ppl", ".4g")):
            xs, ys = [r[x_key] for r in evals], [r[y_key] for r in evals]
            ax.plot(xs, ys, "D", color=val_color, label="validation, at the run's end")
            _annotate(ax, xs, ys, val_color, fmt)
    if test.get("loss") is not None:
        last = records[-1] if records else {}
        done = max([r["epoch"] + 1 for r in epochs] + [r["epoch"] for r in evals] + [0])
        for ax, x, y, fmt in ((ax_loss, last.get("global_step", 0), test["loss"], ".3f"),
                              (ax_ppl, done, math.exp(min(test["loss"], 50.0)), ".4g")):
            ax.plot([x], [y], "*", ms=11, color=test_color, label="test, final model")
            ax.annotate(format(y, fmt), (x, y), textcoords="offset points", xytext=(-6, -12), ha="right",
                        fontsize=8, color=test_color)
    ax_loss.set(xlabel="update", ylabel="NLL per token (nats)", title="loss")
    ax_ppl.set(xlabel="epoch", ylabel="perplexity", title="perplexity", yscale="log")
    ax_ppl.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:.6g}"))  # 15.4, not 1.54 x 10^1
    if ax_ppl.lines:
        low, high = ax_ppl.get_ylim()
        # Within a decade the ticks are minor ones: label them; over decades, the decades only.
        ax_ppl.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:.6g}") if high < 10 * low
                                         else NullFormatter())
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_curves(log_path: str | os.PathLike, out_path: str | os.PathLike,
                results: dict | None = None) -> str | None:
    """Draw the training loss (the mean of each logging window and of each epoch), validation and
    (with ``results``) test loss per update, and the perplexities per epoch, to a PNG; train, validation
    and test keep one colour each (:data:`SPLIT_COLORS`) in both panels and every run.

    Returns the file written, or None when the log holds nothing to draw.
    """
    fig = curves_figure(log_path, results)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return os.fspath(out_path)
