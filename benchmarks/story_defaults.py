"""The story example with its default (``small``) preset on the fixture stories: what a first run gives.

Runs ``examples/train_story.py --rocstories tests/fixtures/rocstories --story-cloze <the fixture's Story
Cloze file>`` with no other flag in a fresh interpreter and prints ONE JSON line on stdout: the wall time
of the whole command, the parameter count, the validation and test perplexity, the Story Cloze accuracy
with its item count, and the sample story (Yao et al. 2019's title -> storyline -> story, one AWD-LSTM of
Merity et al. 2018). The fixture holds 8 stories (6 / 1 / 1 by the preset's split) and 4 Story Cloze items,
so the accuracy moves in steps of 0.25.

    python benchmarks/story_defaults.py --threads 1 >> benchmarks/results/story_defaults.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import emit_json, log, machine

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "rocstories"
CLOZE = FIXTURES / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv"
BENCHMARK = "story_defaults"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the run (default: unset)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(ROOT / "examples" / "train_story.py"), "--rocstories", str(FIXTURES),
                   "--output-dir", out, "--story-cloze", str(CLOZE)]
        log(f"{BENCHMARK} on {machine()}: {' '.join(command[1:])}")
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"train_story.py exited with {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    emit_json(BENCHMARK, {
        "preset": summary["preset"], "wall_s": round(wall, 1), "num_parameters": summary["num_parameters"],
        "validation_perplexity": round(summary["validation"], 2), "test_perplexity": round(summary["test"], 2),
        "story_cloze_accuracy": summary["story_cloze_accuracy"], "story_cloze_examples": summary["story_cloze_examples"],
        "sample": summary["sample"], "machine": machine(), "threads": args.threads, "torch": torch.__version__,
    })


if __name__ == "__main__":
    main()
