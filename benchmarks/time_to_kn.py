"""How long the `make demo` NPLM trains before it reaches its Kneser-Ney 5-gram's validation perplexity.

Runs ``examples/demo.py`` (the demo itself: the ``demo`` recipe, its architecture, its Adam schedule over at
most 10 epochs with early stopping) on Brown and on PTB with ``--threads`` torch threads, reads the run's
``log.jsonl`` while it trains and records each validation point: the seconds of training so far (the run's
wall clock, its validations included), the validation perplexity, the threads and ``os.getloadavg()`` at
that moment (the machine may be shared). The 5-gram's perplexities are the demo's own table (fitted on the
same training split, same vocabulary, every token scored by both models).

Rows (one JSON line each on stdout, progress on stderr):

* ``<corpus>_validation_perplexity``: one per validation point;
* ``<corpus>_time_to_kn5``: the training time of the first validation point at or below the 5-gram's
  validation perplexity (null when no point reaches it), with the demo's test
  perplexities and its verdict line.

The picture (``--plot``, default ``docs/images/time_to_kn.png``): validation perplexity against training
time per corpus, the training perplexity of each 50 updates behind it, the 5-gram's validation perplexity as
a dashed line. ``--quick`` stops each corpus after 600 updates and writes the picture beside the runs;
``--replot`` draws the picture again from the runs an earlier call left in ``--output-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from common import add_run_arguments, emit_json, log

BENCHMARK = "time_to_kn"
ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("brown", "ptb")


def demo_table(stdout: str) -> dict[str, tuple[float, float]]:
    """The demo's perplexity table: model name -> (validation, test)."""
    rows = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"(NPLM|Kneser-Ney 5-gram) +([0-9.]+) +([0-9.]+)", line)
        if match:
            rows[match.group(1)] = (float(match.group(2)), float(match.group(3)))
    if len(rows) != 2:
        raise RuntimeError(f"the demo printed no perplexity table:\n{stdout[-2000:]}")
    return rows


def run_demo(corpus: str, max_steps: int | None, threads: int, output_dir: Path) -> tuple[list[dict], str]:
    """Run the demo on ``corpus``; return its validation points (each with the load when it was logged)
    and its stdout."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [sys.executable, str(ROOT / "examples" / "demo.py"), "--corpus", corpus, "--output-dir",
               str(output_dir), *(["--max-steps", str(max_steps)] if max_steps else [])]
    log_path = output_dir / "log.jsonl"
    log_path.unlink(missing_ok=True)
    points, read = [], 0
    with open(output_dir.parent / f"{corpus}.stderr", "w") as stderr, \
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True) as demo:
        # stdout is a few dozen lines: the pipe cannot fill before the run ends.
        while True:
            finished = demo.poll() is not None
            lines = log_path.read_text().splitlines() if log_path.exists() else []
            for line in lines[read:]:
                record = json.loads(line)
                if record["type"] in ("epoch", "eval") and record.get("val_ppl") is not None:
                    # An epoch record numbers its epoch from 0; an eval record gives the epochs done.
                    done = record["epoch"] + 1 if record["type"] == "epoch" else record["epoch"]
                    points.append({"epochs_trained": done, "elapsed_s": record["elapsed_s"],
                                   "val_ppl": record["val_ppl"], "loadavg": os.getloadavg()})
                    log(f"{corpus}: {record['elapsed_s']:.0f} s, "
                        f"validation perplexity {record['val_ppl']:.2f}")
            read = len(lines)
            if finished:
                break
            time.sleep(2)
        stdout = demo.stdout.read()
    (output_dir.parent / f"{corpus}.stdout").write_text(stdout)
    if demo.returncode:
        raise SystemExit(f"examples/demo.py --corpus {corpus} failed (exit {demo.returncode}); "
                         f"its stderr is in {output_dir.parent / f'{corpus}.stderr'}")
    return points, stdout


def curve(run: Path, kn_valid: float, threads: int, points: list[dict] | None = None) -> dict:
    """What the picture shows of the demo run in folder ``run``: its validation points (read from its
    ``log.jsonl`` unless given), the time of the first at or below ``kn_valid`` (None if none is), and
    the seconds and training perplexity (over the last ``logging_steps`` updates) of each step record."""
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    if points is None:
        points = [{"elapsed_s": r["elapsed_s"], "val_ppl": r["val_ppl"]} for r in records
                  if r["type"] in ("epoch", "eval") and r.get("val_ppl") is not None]
    reached = next((p for p in points if p["val_ppl"] <= kn_valid), None)
    steps = [r for r in records if r["type"] == "step"]
    return {"points": points, "kn5_valid": kn_valid, "threads": threads,
            "time_to_kn5": reached and reached["elapsed_s"],
            "training": ([r["elapsed_s"] for r in steps], [r["train_ppl"] for r in steps])}


def plot(curves: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4), squeeze=False)
    for ax, (corpus, run) in zip(axes[0], curves.items(), strict=True):
        times = [p["elapsed_s"] for p in run["points"]]
        ppls = [p["val_ppl"] for p in run["points"]]
        train_times, train_ppls = run["training"]
        ax.plot(train_times, train_ppls, color="tab:blue", alpha=0.35,
                label="NPLM training (last 50 updates)")
        ax.plot(times, ppls, "o-", color="tab:blue", label="NPLM validation (each epoch, and at the stop)")
        ax.axhline(run["kn5_valid"], color="black", linestyle="--",
                   label=f"Kneser-Ney 5-gram ({run['kn5_valid']:.1f})")
        if run["time_to_kn5"] is not None:
            ax.axvline(run["time_to_kn5"], color="tab:green", alpha=0.5,
                       label=f"reaches the 5-gram at {run['time_to_kn5']:.0f} s")
        ax.set_xlim(0, max(times) * 1.05)
        # The floor under every point drawn: the training curve dips below validation once it overfits.
        low = min([*ppls, *train_ppls, run["kn5_valid"]]) * 0.9
        # The first updates' training perplexity (thousands) is left off the top.
        ax.set_ylim(low, max([*ppls, run["kn5_valid"]]) * 2.5)
        ax.set_title(f"{corpus}: {run['threads']} threads")
        ax.set_xlabel("training time (s, validations included)")
        ax.set_ylabel("perplexity")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--plot", default=None, help="the picture (default docs/images/time_to_kn.png; "
                                                     "--quick: time_to_kn_quick.png in --output-dir)")
    parser.add_argument("--quick", action="store_true", help="600 updates per corpus")
    parser.add_argument("--replot", action="store_true",
                        help="train nothing, print nothing: draw the picture again from the runs (and "
                             "the demo's printed tables) in --output-dir")
    add_run_arguments(parser)
    parser.set_defaults(threads=2)
    args = parser.parse_args(argv)
    max_steps = 600 if args.quick else None
    suffix = "_quick" if args.quick else ""
    runs = Path(args.output_dir) / f"runs_time_to_kn{suffix}"
    plot_path = Path(args.plot or (Path(args.output_dir) / "time_to_kn_quick.png" if args.quick
                                   else ROOT / "docs" / "images" / "time_to_kn.png"))
    context = {"recipe": "demo", "max_steps": max_steps, "threads": args.threads, "quick": args.quick}

    rows, curves = [], {}
    if args.replot:
        for corpus in args.corpora:
            kn_valid = demo_table((runs / f"{corpus}.stdout").read_text())["Kneser-Ney 5-gram"][0]
            curves[corpus] = curve(runs / corpus, kn_valid, args.threads)
        plot(curves, plot_path)
        log(f"picture: {plot_path}")
        return rows
    for corpus in args.corpora:
        log(f"{BENCHMARK}: examples/demo.py --corpus {corpus}, {args.threads} threads")
        (runs / corpus).mkdir(parents=True, exist_ok=True)
        points, stdout = run_demo(corpus, max_steps, args.threads, runs / corpus)
        table = demo_table(stdout)
        kn_valid, kn_test = table["Kneser-Ney 5-gram"]
        curves[corpus] = curve(runs / corpus, kn_valid, args.threads, points)
        reached = curves[corpus]["time_to_kn5"]
        for p in points:
            rows.append({"case": f"{corpus}_validation_perplexity", "value": round(p["val_ppl"], 2),
                         "unit": "ppl", "better": "lower", "target": kn_valid,
                         "epochs_trained": round(p["epochs_trained"], 3),
                         "elapsed_s": round(p["elapsed_s"], 1), "loadavg": p["loadavg"], **context})
        verdict = next((line for line in stdout.splitlines() if line.startswith("the NPLM ")), None)
        rows.append({"case": f"{corpus}_time_to_kn5",
                     "value": reached and round(reached, 1), "unit": "s", "better": "lower",
                     "reached": reached is not None, "kn5_valid_ppl": kn_valid,
                     "kn5_test_ppl": kn_test, "nplm_valid_ppl": table["NPLM"][0],
                     "nplm_test_ppl": table["NPLM"][1], "verdict": verdict, "loadavg": os.getloadavg(),
                     **context})
        for row in rows[-len(points) - 1:]:
            emit_json(BENCHMARK, row)
    plot(curves, plot_path)
    log(f"picture: {plot_path}")
    return rows


if __name__ == "__main__":
    main()
