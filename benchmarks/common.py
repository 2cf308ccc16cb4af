"""What the benchmark scripts share: progress on stderr, one JSON line per result on stdout, and the
``--threads`` / ``--output-dir`` arguments. The scripts run as ``python benchmarks/<name>.py``, which
puts this folder on ``sys.path``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def log(message: str) -> None:
    """Progress for the reader, on stderr: stdout carries only the JSON results."""
    print(message, file=sys.stderr, flush=True)


def emit_json(benchmark: str, row: dict) -> None:
    """One result as one JSON line on stdout, tagged with the benchmark's name."""
    print(json.dumps({"benchmark": benchmark, **row}), flush=True)


def add_run_arguments(parser: argparse.ArgumentParser, output_dir: bool = True) -> None:
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    if output_dir:
        parser.add_argument("--output-dir", default="benchmarks/results", help="where tables and runs go")


def start_run(args: argparse.Namespace) -> Path | None:
    """Apply ``--threads``; create and return ``--output-dir`` (None for scripts without one)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(args, "output_dir", None) is None:
        return None
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out
