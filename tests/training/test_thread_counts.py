"""A run is defined by its work (updates, epochs, a seed), so the number of CPU threads changes how long it
takes, not what it prints: the same spec trained with 1, 2 and 4 torch threads (each in a fresh process, as
a user's machine would run it) gives the same validation perplexity within :data:`THREAD_TOLERANCE`.

Float sums are split across threads differently at different counts, so the last bits of a reduction can
differ; at 1 and 2 threads the CPU kernels here split no sum that matters and the runs agree to the bit, at 4
to about 5e-7 after 300 updates. The documented tolerance for published numbers is
:data:`hf_nlm.training.THREAD_TOLERANCE`."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from hf_nlm.training import THREAD_TOLERANCE

RUN = """
import json, sys
import torch
torch.set_num_threads(int(sys.argv[1]))
from hf_nlm.training import RunSpec, train
spec = RunSpec.from_recipe("nplm", train_file=sys.argv[2], validation_file=sys.argv[3],
                           output_dir=sys.argv[4], max_steps=40, batch_size=8, block_size=32,
                           progress_bar=False, ngram_baseline=False, seed=0)
perplexity = train(spec).metrics["validation"]["perplexity"]
print(json.dumps({"threads": torch.get_num_threads(), "perplexity": perplexity}))
"""


def write_text(path, lines: int, seed: int) -> str:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)]
    path.write_text("".join(" ".join(rng.choice(words[: rng.randint(5, 400)]) for _ in range(15)) + "\n"
                            for _ in range(lines)), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_the_same_run_at_1_2_and_4_threads_prints_the_same_perplexity(tmp_path):
    train_file = write_text(tmp_path / "train.txt", 400, 0)
    valid_file = write_text(tmp_path / "valid.txt", 60, 1)
    env = {**os.environ, "OMP_NUM_THREADS": "4"}
    results = {}
    for threads in (1, 2, 4):
        out = subprocess.run([sys.executable, "-c", RUN, str(threads), train_file, valid_file,
                              str(tmp_path / f"run{threads}")], capture_output=True, text=True, env=env,
                             check=True)
        found = json.loads(out.stdout.strip().splitlines()[-1])
        assert found["threads"] == threads
        results[threads] = found["perplexity"]
    assert results[2] == pytest.approx(results[1], rel=THREAD_TOLERANCE)
    assert results[4] == pytest.approx(results[1], rel=THREAD_TOLERANCE)
    # Trained: far below the 400-word uniform guess, so the agreement is between runs that learnt.
    assert results[1] < 0.8 * 400


def test_the_device_line_says_when_the_launcher_left_cores_unused(monkeypatch):
    """accelerate launch sets OMP_NUM_THREADS=1 on CPU: the run's device line says so and how to change it,
    and changes no thread count itself."""
    import torch

    from hf_nlm.training.trainer import device_line

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    line = device_line("cpu")
    assert line.startswith("device: cpu, 1 torch threads of the 2 cores it may use: "
                           "OMP_NUM_THREADS=1 is set"), line
    assert "OMP_NUM_THREADS=2 accelerate launch" in line and "torch.set_num_threads(2)" in line, line
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert device_line("cpu") == "device: cpu, 1 torch threads", "no OMP_NUM_THREADS: nothing to say"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert device_line("cuda:0") == "device: cuda:0, 1 torch threads", "a GPU run: the threads do not matter"
    assert device_line("cpu", 2) == "device: cpu x 2 processes, 1 torch threads", "2 processes share 2 cores"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert device_line("cpu") == "device: cpu, 2 torch threads", "every core used"
