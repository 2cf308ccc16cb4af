"""One epoch of Bengio et al.'s MLP1 on Brown with autograd's ``cross_entropy`` and with the fused
softmax loss.

Both sides train the same MLP1 (n = 5, h = 50, m = 60, direct connections; JMLR 2003, Table 1) from the
same initial weights on the same batches with the recipe of ``brown_table.py``'s MLP1 row, ``brown-mlp1``
(plain SGD, eps_0 = 1e-3 per example, 512 targets per update, weight decay 1e-4, its vocabulary and seed):
the model and trainer are built from the recipe's spec as ``hf_nlm.training.train`` builds them, for one
epoch of the 800k training targets, then score the 200k validation targets. They differ only in the output
layer's loss:

* ``cross_entropy``: ``F.cross_entropy(F.linear(z, W, b), t)`` left to autograd, the plain PyTorch loss
  (patched in by this script for the measurement);
* ``fused``: :func:`hf_nlm.heads.softmax.softmax_nll`, the library's loss.

The sides alternate (``--reps``) and each side's median is reported. The machine's fp32 limit on this
step's matrix products (``train_throughput.matmul_limit``) is measured before and after every epoch, and the
fraction of it that the fused epoch's training reaches is reported against the mean of the two. Since the
machine may be shared, the same fraction is also measured in short alternating rounds (``--rounds``): 30
training steps of the fused MLP1, then the limit, each round's fraction from its own pair, the median kept.
The bf16 limit (AMX / AVX512-BF16 where the CPU has them) is reported beside the fp32 one. Every line
records ``os.getloadavg()``.

Prints one JSON line per figure on stdout; ``--quick`` runs a slice of Brown (seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from common import add_run_arguments, emit_json, log, machine, start_run
from train_throughput import matmul_limit, step_matmuls

from hf_nlm.data import first_lines
from hf_nlm.heads import SoftmaxHead
from hf_nlm.heads.base import Targets
from hf_nlm.training import LMTrainer, RunSpec
from hf_nlm.training.run import build_model, train_tokenizer

BENCHMARK = "brown_epoch"
#: The recipe whose run an epoch here is: brown_table.py's MLP1 row.
RECIPE = "brown-mlp1"
# The reference epoch time: one MLP1 epoch on Brown timed at about 13 minutes on this project's shared 2-core
# CPU machine, the figure the fused loss's epoch is measured against (target: 3x faster).
REFERENCE_EPOCH_S = 13 * 60


def cross_entropy_nll(head: SoftmaxHead, hidden: torch.Tensor, targets) -> torch.Tensor:
    """The full-softmax loss left to autograd: ``F.cross_entropy`` over the full scores."""
    target = Targets.of(targets).ids
    scores = head.forward(hidden)
    return F.cross_entropy(scores.reshape(-1, head.vocab_size), target.reshape(-1),
                           reduction="none").view(target.shape)


@contextlib.contextmanager
def loss_path(name: str):
    """Run the block with ``SoftmaxHead.nll`` as the library has it (``fused``) or as autograd's
    ``cross_entropy``."""
    fused = SoftmaxHead.nll
    if name == "cross_entropy":
        SoftmaxHead.nll = cross_entropy_nll
    try:
        yield
    finally:
        SoftmaxHead.nll = fused


def one_epoch(spec: RunSpec, corpus, tokenizer, output_dir: str) -> dict:
    """Train a fresh MLP1 for one epoch, then validate; the seconds of each and the validation
    perplexity."""
    trainer = new_trainer(spec, corpus, tokenizer, output_dir)
    start = time.perf_counter()
    trainer.train_epoch()
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    valid_loss = trainer.validation_loss()
    valid_s = time.perf_counter() - start
    return {"train_s": train_s, "valid_s": valid_s, "epoch_s": train_s + valid_s,
            "valid_ppl": math.exp(valid_loss), "train_tokens": trainer.state.train_tokens}


def recipe_spec(output_dir: str) -> RunSpec:
    """The ``brown-mlp1`` recipe's spec for one epoch, logging nothing, without the n-gram baseline."""
    return RunSpec.from_recipe(recipe=RECIPE, output_dir=output_dir, overwrite_output_dir=True, num_epochs=1,
                               logging_steps=10**9, progress_bar=False, ngram_baseline=False)


def new_trainer(spec: RunSpec, corpus, tokenizer, output_dir: str) -> LMTrainer:
    """A fresh MLP1 (the recipe's seed) and the recipe's trainer, built as ``hf_nlm.training.train`` builds
    them: this script times the training loop itself, so it drives the trainer."""
    spec = spec.replace(output_dir=output_dir)
    model = build_model(spec, tokenizer, corpus["train"]["text"])
    return LMTrainer(model, tokenizer, corpus, spec.training, dataset_name=spec.data.name,
                     run_spec=spec.to_dict())


def loadavg() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def step_rounds(spec: RunSpec, corpus, tokenizer, args, output_dir: str, products,
                flops_per_token: float) -> list[dict]:
    """``args.rounds`` rounds of (``args.round_steps`` fused training steps, the fp32 limit): each round's
    FLOP/s of the steps over the limit measured right after them."""
    trainer = new_trainer(spec, corpus, tokenizer, output_dir)
    trainer.model.train()
    batches = trainer.batches.epoch(0, 0)
    for batch, n_global, lr_scale in [next(batches) for _ in range(3)]:  # warm-up
        trainer.training_step(batch, n_global, lr_scale)
    rounds = []
    for _ in range(args.rounds):
        work = [next(batches) for _ in range(args.round_steps)]
        load = loadavg()
        start = time.perf_counter()
        for batch, n_global, lr_scale in work:
            trainer.training_step(batch, n_global, lr_scale)
        seconds = time.perf_counter() - start
        tokens = sum(n for _, n, _ in work)
        limit = matmul_limit(products, torch.float32, reps=3)
        rounds.append({"fraction": tokens / seconds * flops_per_token / 1e9 / limit, "limit": limit,
                       "tokens_per_s": tokens / seconds, "loadavg": load})
    return rounds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a slice of Brown: seconds")
    parser.add_argument("--reps", type=int, default=1, help="epochs per side, alternating (default 1)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating rounds of training steps and the limit (default 9, quick 3)")
    parser.add_argument("--round-steps", type=int, default=30, help="training steps per round")
    parser.add_argument("--no-epochs", action="store_true", help="the alternating rounds only")
    parser.add_argument("--sides", nargs="+", choices=["cross_entropy", "fused"],
                        default=["cross_entropy", "fused"], help="the epochs' loss paths (default both)")
    add_run_arguments(parser, output_dir=False)
    args = parser.parse_args(argv)
    start_run(args, BENCHMARK)
    spec = recipe_spec(tempfile.gettempdir())
    corpus = spec.data.load()
    # The recipe's vocabulary, from the whole training split, before any --quick cut.
    spec, tokenizer = train_tokenizer(spec, corpus["train"]["text"])
    if args.quick:
        corpus = first_lines(corpus, train_lines=1500, eval_lines=300)
    batch_tokens = spec.training.batch_size * spec.training.block_size
    model = spec.model
    context = {"vocab_size": len(tokenizer), "batch_tokens": batch_tokens, "recipe": RECIPE,
               "reps": args.reps, "quick": args.quick, "threads": torch.get_num_threads(), "cpu": machine(),
               "model": "NPLM MLP1 n=5 m=60 h=50 direct, SGD eps_0 1e-3 per example"}
    products = step_matmuls(batch_tokens, len(tokenizer), model["context_size"], model["embedding_size"],
                            model["hidden_size"])
    flops_per_token = sum(2 * M * K * N for M, K, N in products) / batch_tokens
    rounds = args.rounds or (3 if args.quick else 9)
    args.rounds = rounds
    with tempfile.TemporaryDirectory() as out:
        log(f"{rounds} rounds of {args.round_steps} fused training steps and the fp32 limit, alternating")
        measured = step_rounds(spec, corpus, tokenizer, args, f"{out}/rounds", products, flops_per_token)
        fractions = [r["fraction"] for r in measured]
        emit_json(BENCHMARK, {"case": "fused_steps_fraction_of_fp32_limit",
                              "value": round(statistics.median(fractions), 3), "unit": "x",
                              "better": "higher", "target": 0.85, "rounds": [round(f, 3) for f in fractions],
                              "limit_gflops": [round(r["limit"], 1) for r in measured],
                              "tokens_per_s": [round(r["tokens_per_s"], 1) for r in measured],
                              "loadavg": [r["loadavg"] for r in measured], "round_steps": args.round_steps,
                              **context})
        for dtype in (torch.float32, torch.bfloat16):
            emit_json(BENCHMARK, {"case": f"matmul_limit_{str(dtype).split('.')[-1]}",
                                  "value": round(matmul_limit(products, dtype, reps=7), 1), "unit": "GFLOP/s",
                                  "better": "higher", "loadavg": loadavg(),
                                  "cpu_capability": torch.backends.cpu.get_cpu_capability(), **context})
        if args.no_epochs:
            return
        sides: dict[str, list[dict]] = {name: [] for name in args.sides}
        for rep in range(args.reps):
            for name in (list(sides) if rep % 2 == 0 else list(sides)[::-1]):
                load = loadavg()
                limits = [matmul_limit(products, torch.float32, reps=3)]
                with loss_path(name):
                    result = one_epoch(spec, corpus, tokenizer, f"{out}/{name}")
                limits.append(matmul_limit(products, torch.float32, reps=3))
                result["limit"] = statistics.mean(limits)
                sides[name].append(result)
                log(f"rep {rep + 1} {name}: train {result['train_s']:.1f} s, "
                    f"validation {result['valid_s']:.1f} s, valid ppl {result['valid_ppl']:.2f}, "
                    f"fp32 limit {limits[0]:.1f} / {limits[1]:.1f} GFLOP/s, load {load} / {loadavg()}")

    median = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
              for name, runs in sides.items()}
    context["loadavg"] = loadavg()
    for name, m in median.items():
        emit_json(BENCHMARK, {"case": f"epoch_s_{name}", "value": round(m["epoch_s"], 1), "unit": "s",
                              "better": "lower", "train_s": round(m["train_s"], 1),
                              "valid_s": round(m["valid_s"], 1),
                              "train_tokens_per_s": round(m["train_tokens"] / m["train_s"], 1),
                              "valid_ppl": round(m["valid_ppl"], 3), **context})
    after = median.get("fused")
    if after is None:
        return
    if not args.quick:
        emit_json(BENCHMARK, {"case": "epoch_speedup_vs_reference",
                              "value": round(REFERENCE_EPOCH_S / after["epoch_s"], 3), "unit": "x",
                              "better": "higher", "target": 3.0, "reference_epoch_s": REFERENCE_EPOCH_S,
                              "note": "against the 13-minute reference epoch, measured on a shared machine",
                              **context})
    achieved = after["train_tokens"] / after["train_s"] * flops_per_token / 1e9
    emit_json(BENCHMARK, {"case": "fused_epoch_fraction_of_fp32_limit",
                          "value": round(achieved / after["limit"], 3), "unit": "x", "better": "higher",
                          "target": 0.85, "achieved_gflops": round(achieved, 1),
                          "limit_gflops": round(after["limit"], 1),
                          "note": "limit: the mean of its measurements just before and after the epoch",
                          **context})
    before = median.get("cross_entropy")
    if before is None:
        return
    emit_json(BENCHMARK, {"case": "epoch_speedup", "value": round(before["epoch_s"] / after["epoch_s"], 3),
                          "unit": "x", "better": "higher", "target": 3.0,
                          "note": "side by side in this run, same machine", **context})
    emit_json(BENCHMARK, {"case": "valid_ppl_ratio",
                          "value": round(after["valid_ppl"] / before["valid_ppl"], 5), "unit": "x",
                          "target": "within 0.1% of 1", **context})


if __name__ == "__main__":
    main()
