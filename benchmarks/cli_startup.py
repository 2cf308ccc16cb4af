"""Start-up time of the ``hf-nlm`` command: how long a help screen takes, with ``import hf_nlm`` for
reference.

Runs each command ``--runs`` times in a fresh interpreter (the ``hf_nlm_cli`` launcher, as the console
script does) and prints one JSON object per command on stdout: the median wall time and every run, e.g.
{"benchmark": "cli_startup", "case": "hf-nlm --help", "value": 0.31, "unit": "s", "better": "lower", ...}

``hf-nlm --help`` lists the commands without importing ``hf_nlm`` (target: under 1.5 s); a command's own
help builds its parser, whose flags come from the model and training configs, so it imports ``hf_nlm``
(torch and transformers: the ``import hf_nlm`` line is that floor).

    python benchmarks/cli_startup.py --runs 5 >> benchmarks/results/cli_startup.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = "import sys, hf_nlm_cli; sys.exit(hf_nlm_cli.main())"
CASES = {
    "hf-nlm --help": ["-c", LAUNCHER, "--help"],
    "hf-nlm download --help": ["-c", LAUNCHER, "download", "--help"],
    "hf-nlm train --help": ["-c", LAUNCHER, "train", "--help"],
    'python -c "import hf_nlm"': ["-c", "import hf_nlm"],
}
TARGETS = {"hf-nlm --help": 1.5}


def wall_time(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5,
                        help="runs per command; the median is reported (default: 5)")
    args = parser.parse_args(argv)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for case, command in CASES.items():
        times = [wall_time(command, env) for _ in range(args.runs)]
        print(json.dumps({"benchmark": "cli_startup", "case": case,
                          "value": round(statistics.median(times), 3), "unit": "s", "better": "lower",
                          "target": TARGETS.get(case), "runs": [round(t, 3) for t in times],
                          "python": sys.version.split()[0]}), flush=True)


if __name__ == "__main__":
    main()
