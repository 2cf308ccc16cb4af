"""What the benchmark scripts share: progress on stderr, one JSON line per result on stdout, the
``--threads`` / ``--seed`` / ``--output-dir`` / ``--epochs`` / ``--time-budget`` arguments, the
``--quick`` defaults, the start of a run (threads, output folder, the corpus cut under ``--quick``),
the context fields of every row and the Markdown report. The scripts run as
``python benchmarks/<name>.py``, which puts this folder on ``sys.path``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch
from datasets import DatasetDict

from hf_nlm.data import first_lines


def log(message: str) -> None:
    """Progress for the reader, on stderr: stdout carries only the JSON results."""
    print(message, file=sys.stderr, flush=True)


def emit_json(benchmark: str, row: dict) -> None:
    """One result as one JSON line on stdout, tagged with the benchmark's name."""
    print(json.dumps({"benchmark": benchmark, **row}), flush=True)


def time_rotated(fns: dict[str, Callable[[], object]], repeats: int,
                 warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each call of each function, ``repeats`` times after ``warmup`` calls; each repetition calls
    every function once, the order rotating from one repetition to the next, so that drifting load on a shared
    machine hits all of them alike."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(repeats):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def machine() -> str:
    """The CPU's name as the platform gives it (the architecture where it gives none)."""
    return platform.processor() or platform.machine()


def add_run_arguments(parser: argparse.ArgumentParser, output_dir: bool = True, seed: bool = False) -> None:
    """``--threads``; ``--seed`` (default 0) for the scripts that draw random inputs; ``--output-dir``
    for the scripts that write tables and runs."""
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    if seed:
        parser.add_argument("--seed", type=int, default=0)
    if output_dir:
        parser.add_argument("--output-dir", default="benchmarks/results", help="where tables and runs go")


def add_training_arguments(parser: argparse.ArgumentParser, epochs: int, time_budget: float,
                           per: str = "row") -> None:
    """``--epochs`` and ``--time-budget`` (seconds), each per ``per`` (a row of the table), of the
    scripts that train with early stopping; then ``add_run_arguments``."""
    parser.add_argument("--epochs", type=int, default=epochs,
                        help=f"maximum epochs per {per} (early stopping decides)")
    parser.add_argument("--time-budget", type=float, default=time_budget,
                        help=f"seconds per {per}: no epoch is started that would end after it")
    add_run_arguments(parser)


def quick_defaults(args: argparse.Namespace, **defaults: tuple[int, int]) -> None:
    """Fill in the options left unset: ``name=(default, quick)``, the second under ``--quick``."""
    for name, (default, quick) in defaults.items():
        setattr(args, name, getattr(args, name) or (quick if args.quick else default))


def start_run(args: argparse.Namespace, benchmark: str | None = None) -> Path | None:
    """Apply ``--threads``; log the machine for ``benchmark`` if named; create and return
    ``--output-dir`` (None for scripts without one)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if benchmark is not None:
        log(f"{benchmark} on {machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    if getattr(args, "output_dir", None) is None:
        return None
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def start_training_run(
    args: argparse.Namespace, load_corpus: Callable[[], DatasetDict], quick_lines: tuple[int, int]
) -> tuple[Path, str, DatasetDict]:
    """``start_run`` for the scripts that train on a corpus. Returns the output folder, the suffix of
    what they write there (``"_quick"`` under ``--quick``, else ``""``) and the corpus, under
    ``--quick`` cut to its first ``quick_lines`` = (training lines, lines of each other split)."""
    out = start_run(args)
    corpus = load_corpus()
    if not args.quick:
        return out, "", corpus
    train_lines, eval_lines = quick_lines
    return out, "_quick", first_lines(corpus, train_lines=train_lines, eval_lines=eval_lines)


def quick_split_files(corpus: DatasetDict, folder: Path, quick_lines: tuple[int, int]) -> dict[str, str]:
    """The first ``quick_lines`` = (training lines, lines of each other split) of ``corpus`` written to
    ``folder/<split>.txt``, as a spec's ``train_file`` / ``validation_file`` / ``test_file`` settings: the
    slice a recipe's ``--quick`` form trains on (a data setting given replaces the recipe's corpus)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, data in first_lines(corpus, *quick_lines).items():
        path = folder / f"{split}.txt"
        path.write_text("".join(line.rstrip("\n") + "\n" for line in data["text"]), encoding="utf-8")
        files[f"{split}_file"] = str(path)
    return files


def run_context(args: argparse.Namespace, **fields) -> dict:
    """The fields every row of a training script carries: its own, then ``quick`` and ``threads``."""
    return {**fields, "quick": args.quick, "threads": torch.get_num_threads()}


Table = tuple[Sequence[str], Iterable[Sequence[object]]]  # column names, then the cells of each row


def write_report(path: Path, title: str, *tables: Table, notes: Sequence[str] = (),
                 quick: str | None = None) -> None:
    """Write a Markdown report to ``path``: the title (then " -- QUICK MODE: <quick>" when ``quick`` is
    given, and a full stop), each table, then the lines of ``notes``, each part after a blank line."""
    lines = [title + (f" -- QUICK MODE: {quick}" if quick else "") + "."]
    for columns, rows in tables:
        lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    if notes:
        lines += ["", *notes]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")
