"""NPLM training throughput: hf_nlm's training loop against a minimal hand-written PyTorch loop.

Both sides train Bengio et al.'s MLP1 (n = 5, m = 60, h = 50, direct connections; JMLR 2003) on a
synthetic Zipf token stream with |V| ~ 16k, with plain SGD, on the same blocks in the same order,
for the same number of updates. Ours is ``LMTrainer.train_epoch`` (DataLoader, progress bar,
logging, the non-finite check: everything of a real epoch except validation and checkpointing);
the reference is nn.Embedding + Linear + tanh + cross_entropy written inline. A third side, "bare",
runs our model (a copy with the same weights) in a four-line loop: ours vs bare is the cost of the
training loop alone, ours vs reference that of the whole library (model + loop) against plain
PyTorch. The repetitions rotate the order of the sides, and each side's median is reported.

Then the machine's limit: the GFLOP/s torch reaches here, in fp32 and in bf16, on the matrix
products one step of this NPLM makes (forward, and the two backward products, of the hidden and the output
layer, at this batch; each in the faster of its two layouts), and the FLOP/s our training loop achieves as a
fraction of the fp32 figure.

Prints one JSON object per line on stdout (progress on stderr):
    {"benchmark": "train_throughput", "case": "nplm_overhead", "value": <reference tokens/s / ours>, ...}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from common import log
from datasets import Dataset, DatasetDict
from torch import nn

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import LMTrainer, TrainingConfig

BENCHMARK = "train_throughput"


def zipf_texts(vocab_size: int, num_tokens: int, seed: int, line_length: int = 20) -> list[str]:
    """Lines of words w0..w{V-1} drawn with p(rank k) ~ 1/k."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab_size + 1)
    ids = rng.choice(vocab_size, size=num_tokens, p=p / p.sum())
    words = np.array([f"w{i}" for i in range(vocab_size)])[ids]
    lines = [" ".join(words[i : i + line_length]) for i in range(0, num_tokens, line_length)]
    return lines


class ReferenceNPLM(nn.Module):
    """y = b + W x + U tanh(d + H x), written out; [U W] as one Linear over [tanh(d + H x); x]."""

    def __init__(self, vocab_size: int, context_size: int, m: int, h: int) -> None:
        super().__init__()
        self.n_1 = context_size
        self.C = nn.Embedding(vocab_size, m)
        self.H = nn.Linear(context_size * m, h)
        self.out = nn.Linear(h + context_size * m, vocab_size)

    def loss(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = self.n_1 + 1
        windows = input_ids.unfold(1, n, 1)  # (B, T, n): n-1 context tokens, then the target
        targets = labels[:, self.n_1 :]  # the label of each window's last token
        x = self.C(windows[..., :-1].flip(-1)).flatten(2)  # (B, T, (n-1) m), w_{t-1} first
        z = torch.cat([torch.tanh(self.H(x)), x], dim=-1)
        return F.cross_entropy(self.out(z).flatten(0, 1), targets.flatten(), ignore_index=-100)


def step_matmuls(batch_tokens: int, vocab_size: int, context_size: int, m: int,
                 h: int) -> list[tuple[int, int, int]]:
    """(M, K, N) of every matrix product of one NPLM training step with direct connections: for the hidden
    layer (x (B, (n-1) m) -> h) and the output layer ([tanh(.); x] (B, h + (n-1) m) -> |V|), the forward
    product and the two of the backward pass (the input's and the weight's gradients)."""
    B, d_in = batch_tokens, context_size * m
    products = []
    for k, n in ((d_in, h), (h + d_in, vocab_size)):
        products += [(B, k, n), (B, n, k), (k, B, n)]
    return products


def matmul_limit(products: list[tuple[int, int, int]], dtype: torch.dtype, reps: int) -> float:
    """GFLOP/s of ``products`` (2 M K N flops each) in ``dtype``: each product timed in both layouts MKL
    can be handed, A @ B and (B^T @ A^T)^T (the fused loss computes its scores the second way, and the
    speeds differ by up to 1.5x here), the faster one counted; the median of ``reps`` timings each."""
    total_s = 0.0
    for M, K, N in products:
        a, b = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype)
        at, bt = a.t().contiguous(), b.t().contiguous()
        best = math.inf
        for x, y in ((a, b), (bt, at)):
            times = []
            for rep in range(reps + 1):  # the first is a warm-up
                start = time.perf_counter()
                x @ y
                if rep:
                    times.append(time.perf_counter() - start)
            best = min(best, statistics.median(times))
        total_s += best
    return sum(2 * M * K * N for M, K, N in products) / total_s / 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a run of well under a minute")
    parser.add_argument("--vocab-size", type=int, default=16_000)
    parser.add_argument("--batch-size", type=int, default=8, help="blocks per update")
    parser.add_argument("--block-size", type=int, default=64, help="targets per block")
    parser.add_argument("--steps", type=int, default=None,
                        help="updates per repetition (default 30, quick 8)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per side (default 5, quick 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    args = parser.parse_args(argv)
    steps = args.steps or (8 if args.quick else 30)
    reps = args.reps or (3 if args.quick else 5)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    # One epoch of ours = `steps` updates: the training stream holds steps x batch blocks.
    n_1, m, h = 4, 60, 50
    line_length = 20
    num_tokens = (steps * args.batch_size * args.block_size * line_length
                  // (line_length + 1))  # + <eos> per line
    texts = zipf_texts(args.vocab_size, num_tokens, seed=0, line_length=line_length)
    # The vocabulary: every word w0..w{V-1} (one extra line holds each once), as a big corpus would give.
    tokenizer = train_word_level_tokenizer([*texts, " ".join(f"w{i}" for i in range(args.vocab_size))])
    datasets = DatasetDict({"train": Dataset.from_dict({"text": texts})})
    torch.manual_seed(0)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=n_1, embedding_size=m,
                                       hidden_size=h))

    with tempfile.TemporaryDirectory() as out:
        config = TrainingConfig(
            output_dir=out, block_size=args.block_size, batch_size=args.batch_size, num_epochs=10**6,
            optimizer="sgd", learning_rate=0.1, lr_scheduler="constant", weight_decay=0.0,
            early_stopping_patience=None, cpu=args.cpu,
        )
        trainer = LMTrainer(model, tokenizer, datasets, config)
        device = trainer.accelerator.device
        sampler = trainer.batches.sampler
        blocks = trainer.batches.data.blocks
        steps_per_epoch = sampler.steps_per_epoch

        torch.manual_seed(0)
        reference = ReferenceNPLM(len(tokenizer), n_1, m, h).to(device)
        ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        bare = NPLMForCausalLM(model.config).to(device)
        bare.load_state_dict(model.state_dict())
        bare.train()
        bare_optimizer = torch.optim.SGD(bare.parameters(), lr=0.1)

        def run_ours(epoch: int) -> tuple[float, int]:
            trainer.state.epoch, trainer.state.step_in_epoch = epoch, 0
            before = trainer.state.train_tokens
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            trainer.train_epoch()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - start, trainer.state.train_tokens - before

        def run_plain(epoch: int, step) -> tuple[float, int]:
            """One epoch of ``step(input_ids, labels)`` over the same batches as ours, no loop machinery."""
            order = sampler.order(epoch)
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            tokens = 0
            for k in range(steps_per_epoch):
                idx = order[k * args.batch_size : (k + 1) * args.batch_size]
                input_ids, labels = blocks["input_ids"][idx].to(device), blocks["labels"][idx].to(device)
                step(input_ids, labels)
                tokens += int((labels[:, 1:] != -100).sum())
            if device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - start, tokens

        def reference_step(input_ids, labels) -> None:
            reference.loss(input_ids, labels).backward()
            ref_optimizer.step()
            ref_optimizer.zero_grad(set_to_none=True)

        def bare_step(input_ids, labels) -> None:
            bare(input_ids=input_ids, labels=labels).loss.backward()
            bare_optimizer.step()
            bare_optimizer.zero_grad(set_to_none=True)

        def run_reference(epoch: int) -> tuple[float, int]:
            return run_plain(epoch, reference_step)

        def run_bare(epoch: int) -> tuple[float, int]:
            return run_plain(epoch, bare_step)

        log(f"|V| = {len(tokenizer)}, {steps_per_epoch} updates of {args.batch_size} x {args.block_size} "
            f"targets, {reps} repetitions per side, {torch.get_num_threads()} threads, {device}")
        run_ours(0), run_reference(0), run_bare(0)  # warm-up (allocator, first-call costs)
        ours, ref, bare_tps = [], [], []
        sides = [("ours", run_ours, ours), ("reference", run_reference, ref), ("bare", run_bare, bare_tps)]
        for rep in range(1, reps + 1):
            # Rotate which side goes first, so drifting machine load hits all alike.
            for name, run, results in sides[rep % 3 :] + sides[: rep % 3]:
                seconds, tokens = run(rep)
                results.append(tokens / seconds)
                log(f"rep {rep} {name}: {tokens / seconds:,.0f} tokens/s")

    ours_tps, ref_tps, bare_med = statistics.median(ours), statistics.median(ref), statistics.median(bare_tps)
    context = {
        "vocab_size": len(tokenizer),
        "batch_tokens": args.batch_size * args.block_size,
        "steps": steps_per_epoch,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "device": str(device),
        "model": "NPLM MLP1 n=5 m=60 h=50 direct",
    }
    for case, value in [("nplm_ours", ours_tps), ("nplm_reference", ref_tps), ("nplm_bare_loop", bare_med)]:
        print(json.dumps({"benchmark": BENCHMARK, "case": case, "value": round(value, 1), "unit": "tokens/s",
                          "better": "higher", **context}))
    print(json.dumps({"benchmark": BENCHMARK, "case": "nplm_overhead", "value": round(ref_tps / ours_tps, 4),
                      "unit": "x", "better": "lower", "target": 1.1, "ours_tokens_per_s": round(ours_tps, 1),
                      "reference_tokens_per_s": round(ref_tps, 1), **context}))
    print(json.dumps({"benchmark": BENCHMARK, "case": "loop_overhead", "value": round(bare_med / ours_tps, 4),
                      "unit": "x", "better": "lower", "target": 1.1, "ours_tokens_per_s": round(ours_tps, 1),
                      "bare_loop_tokens_per_s": round(bare_med, 1), **context}))

    if device.type != "cpu":
        return
    products = step_matmuls(args.batch_size * args.block_size, len(tokenizer), n_1, m, h)
    flops_per_token = sum(2 * M * K * N for M, K, N in products) / (args.batch_size * args.block_size)
    limits = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        limits[name] = matmul_limit(products, dtype, reps=max(reps, 5))
        print(json.dumps({"benchmark": BENCHMARK, "case": f"matmul_limit_{name}",
                          "value": round(limits[name], 1), "unit": "GFLOP/s", "better": "higher",
                          "products": products, **context}))
    achieved = ours_tps * flops_per_token / 1e9
    print(json.dumps({"benchmark": BENCHMARK, "case": "nplm_fraction_of_fp32_limit",
                      "value": round(achieved / limits["fp32"], 3),
                      "unit": "x", "better": "higher", "target": 0.5, "achieved_gflops": round(achieved, 1),
                      "flops_per_token": int(flops_per_token), **context}))


if __name__ == "__main__":
    main()
