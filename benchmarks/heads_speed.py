"""Training-step speed of the output heads: full softmax vs split vs tree vs torch's adaptive softmax.

For |V| in {10k, 50k, 200k}, Zipf-distributed targets, a fixed small body (one nn.Linear on random
inputs) and N tokens of width D, one training step = forward + backward of ``head.nll(...).mean()``
(no optimizer step). Every method runs once per repetition, alternating, and the median over
repetitions is reported. Also: the cost of exact full-vocabulary log-probabilities, tree vs softmax.

The tree head runs in three modes: a dense node gradient made fresh each step
(``zero_grad(set_to_none=True)``, as every other head here), a sparse one (``sparse=True``), and a
dense one kept between steps (``tree_kept``: ``zero_grad(set_to_none=False)``, the zeroing of its
num_nodes x D gradient counted in the step; the node gradient is added into it in place). The full
softmax is timed the first way, its cheapest. The body alone and the tree heads alone on its output
are timed in the same rotation: the ``head_*`` ratios set the full softmax's step less the body's
against a tree head's own step, the comparison of the heads' own work. With the body in (two
2048 x 256 x 256 products) the ratio cannot pass about 1,200x at |V| = 200k: the full softmax's three
products are that many times the body's.

Prints one JSON object per result on stdout (progress on stderr), e.g.
{"benchmark": "heads_speed", "case": "tree_vs_full", "vocab_size": 200000, "value": 61.3, "unit": "x",
 "better": "higher", "target": 20}

    python benchmarks/heads_speed.py            # a few minutes on 2 CPU cores
    python benchmarks/heads_speed.py --quick    # about a minute, same output shape

Notes on reading the numbers. Every dense |V| x D gradient (full softmax, split softmax, tree head
without ``sparse=True``) is a fresh allocation per step; glibc serves blocks over 32 MB with mmap,
so each step pays page faults for it (about 20 ms per 50 MB here). torch's adaptive softmax keeps
each cluster in its own, smaller matrix and can dodge that at 50k; the split softmax cannot (one
|V| x D matrix, so that it can be tied to the input embedding). Run with
``MALLOC_MMAP_THRESHOLD_=1000000000`` in the environment to compare the algorithms without the
allocator effect; the value is recorded in every line. On a machine shared with other jobs, use
``--threads 1``: multi-threaded kernels wait on descheduled threads and the timings scatter.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from common import add_run_arguments, emit_json, log, quick_defaults, start_run
from torch import nn

from hf_nlm.heads import SoftmaxHead, SplitSoftmaxHead, TreeSoftmaxHead
from hf_nlm.trees import balanced_tree, huffman_tree

# Cut-offs per vocabulary size; 200k uses the AWD-LSTM reference splits for |V| > 75k.
CUTOFFS = {10_000: [1_000, 4_000], 50_000: [2_800, 20_000], 200_000: [2_800, 20_000, 76_000]}


def emit(**fields) -> None:
    emit_json("heads_speed", fields)


def zipf_targets(vocab_size: int, n: int, generator: torch.Generator, s: float = 1.0) -> torch.Tensor:
    """n word ids with P(rank r) proportional to 1 / (r + 1)^s: frequent words have small ids."""
    p = 1.0 / torch.arange(1, vocab_size + 1, dtype=torch.float64) ** s
    return torch.multinomial(p / p.sum(), n, replacement=True, generator=generator)


def cutoffs_for(vocab_size: int) -> list[int]:
    if vocab_size in CUTOFFS:
        return CUTOFFS[vocab_size]
    return [c for c in (vocab_size // 20, vocab_size // 5) if 0 < c < vocab_size]


def time_alternating(fns: dict[str, Callable[[], None]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each function, the functions run in turn within each repetition."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def train_step(body: nn.Module | None, head: nn.Module | None, x: torch.Tensor, target: torch.Tensor,
               keep_grads: bool = False) -> Callable[[], None]:
    """One training step; the gradients start from None (``zero_grad(set_to_none=True)``), or with
    ``keep_grads`` are kept between steps and zeroed in place inside the step
    (``zero_grad(set_to_none=False)``, whose cost the step then counts). ``body`` None: the head alone,
    on the hidden vectors ``x`` (a leaf that takes a gradient, as the body's output would); ``head``
    None: the body alone."""
    if body is None:
        x = x.detach().requires_grad_()
        body = nn.Identity()
    params = [*body.parameters(), *([] if head is None else head.parameters()), x]

    def step() -> None:
        for p in params:
            if keep_grads and p.grad is not None:
                p.grad.zero_()
            else:
                p.grad = None
        h = body(x)
        if head is None:
            loss = h.sum()
        elif isinstance(head, nn.AdaptiveLogSoftmaxWithLoss):
            loss = -head(h, target).output.mean()
        else:
            loss = head.nll(h, target).mean()
        loss.backward()

    return step


def bench_vocab(vocab_size: int, args: argparse.Namespace, gen: torch.Generator) -> None:
    D, N = args.dim, args.tokens
    cutoffs = cutoffs_for(vocab_size)
    target = zipf_targets(vocab_size, N, gen)
    counts = 1.0 / np.arange(1, vocab_size + 1)  # the Zipf law the targets follow, for Huffman
    x = torch.randn(N, D, generator=gen)
    body = nn.Linear(D, D)
    log(f"|V|={vocab_size}: building trees and heads (cutoffs {cutoffs})")
    heads: dict[str, nn.Module] = {
        "full": SoftmaxHead(D, vocab_size),
        "split": SplitSoftmaxHead(D, vocab_size, cutoffs),
        "tree": TreeSoftmaxHead(D, balanced_tree(vocab_size)),
        "tree_huffman": TreeSoftmaxHead(D, huffman_tree(counts)),
        # The same balanced tree with a sparse gradient of the node vectors (for SGD-style optimizers).
        "tree_sparse": TreeSoftmaxHead(D, balanced_tree(vocab_size), sparse=True),
        # The same balanced tree, dense gradients kept between steps (below).
        "tree_kept": TreeSoftmaxHead(D, balanced_tree(vocab_size)),
        "adaptive_div1": nn.AdaptiveLogSoftmaxWithLoss(D, vocab_size, cutoffs, div_value=1.0),
        "adaptive_div4": nn.AdaptiveLogSoftmaxWithLoss(D, vocab_size, cutoffs, div_value=4.0),
    }
    steps = {name: train_step(body, head, x, target, keep_grads=name == "tree_kept")
             for name, head in heads.items()}
    # The body alone, and the tree heads alone on its output: the heads' own cost, which the ratios
    # against the full softmax are bounded by once the body's two D x D products dominate a tree step.
    steps["body"] = train_step(body, None, x, target)
    with torch.no_grad():
        hidden = body(x)
    for name in ("tree", "tree_sparse", "tree_kept"):
        steps[f"{name}_alone"] = train_step(None, heads[name], hidden, target, keep_grads=name == "tree_kept")
    log(f"|V|={vocab_size}: timing training steps, N={N} tokens, D={D}, {args.repeats} repetitions")
    sec = time_alternating(steps, args.repeats)
    context = {
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        "vocab_size": vocab_size,
        "tokens": N,
        "dim": D,
        "cutoffs": cutoffs,
        "threads": torch.get_num_threads(),
        "loadavg": [round(v, 2) for v in os.getloadavg()],
    }
    for name, s in sec.items():
        emit(
            case=f"train_{name}",
            value=round(N / s, 1),
            unit="tokens/s",
            better="higher",
            seconds=round(s, 5),
            **context,
        )
    def ratio(case: str, numerator: float, denominator: float, better: str, digits: int = 2, ctx=context,
              **extra):
        emit(case=case, value=round(numerator / denominator, digits), unit="x", better=better, **extra, **ctx)

    at_200k = vocab_size >= 200_000
    ratio("tree_vs_full", sec["full"], sec["tree"], "higher", tree="balanced",
          **({"target": 20} if at_200k else {}))
    ratio("huffman_tree_vs_full", sec["full"], sec["tree_huffman"], "higher", tree="huffman",
          **({"target": 20} if at_200k else {}))
    ratio("sparse_tree_vs_full", sec["full"], sec["tree_sparse"], "higher", tree="balanced")
    # Dense node gradient accumulated into the .grad kept from the step before, zeroed in the step (the
    # full softmax is timed as above, its dense |V| x D gradient fresh each step: its faster protocol).
    ratio("kept_dense_tree_vs_full", sec["full"], sec["tree_kept"], "higher", tree="balanced")
    # Head against head: the full softmax's step less the body's, against the tree heads timed alone.
    full_head = sec["full"] - sec["body"]
    ratio("head_tree_vs_full", full_head, sec["tree_alone"], "higher", tree="balanced",
          head_seconds=round(sec["tree_alone"], 5), body_seconds=round(sec["body"], 5))
    ratio("head_sparse_tree_vs_full", full_head, sec["tree_sparse_alone"], "higher", tree="balanced",
          head_seconds=round(sec["tree_sparse_alone"], 5), **({"target": 2000} if at_200k else {}))
    ratio("head_kept_dense_tree_vs_full", full_head, sec["tree_kept_alone"], "higher", tree="balanced",
          head_seconds=round(sec["tree_kept_alone"], 5), **({"target": 400} if at_200k else {}))
    # Split vs adaptive head to head: in the rotation above they follow the full softmax, whose
    # (N, |V|) tensors leave the allocator in a state that costs whichever head runs next; alone, the
    # two alternate with nothing else in between.
    pair = time_alternating({"split": steps["split"], "adaptive_div1": steps["adaptive_div1"]},
                            3 * args.repeats)
    ratio("split_vs_adaptive", pair["adaptive_div1"], pair["split"], "higher", 3, target=1.0, div_value=1.0,
          split_seconds=round(pair["split"], 5), adaptive_seconds=round(pair["adaptive_div1"], 5))
    ratio("split_vs_adaptive_in_rotation", sec["adaptive_div1"], sec["split"], "higher", 3, div_value=1.0)
    ratio("split_vs_adaptive_div4", sec["adaptive_div4"], sec["split"], "higher", 3, div_value=4.0)
    ratio("split_vs_full", sec["full"], sec["split"], "higher")

    # Exact full-vocabulary log-probabilities (evaluation / generate): tree vs softmax, no grad.
    n_eval = args.eval_tokens
    h = torch.randn(n_eval, D, generator=gen)
    with torch.no_grad():
        evals = {
            "full": lambda: heads["full"].log_probs(h),
            "tree": lambda: heads["tree"].log_probs(h),
            "tree_huffman": lambda: heads["tree_huffman"].log_probs(h),
            "split": lambda: heads["split"].log_probs(h),
        }
        log(f"|V|={vocab_size}: timing full log-probs, {n_eval} rows")
        sec = time_alternating(evals, args.repeats)
    ctx = {**context, "tokens": n_eval}
    ratio("tree_logprobs_vs_full", sec["tree"], sec["full"], "lower", 3, ctx, target=1.5, tree="balanced",
          seconds=round(sec["tree"], 5), full_seconds=round(sec["full"], 5))
    ratio("huffman_tree_logprobs_vs_full", sec["tree_huffman"], sec["full"], "lower", 3, ctx, target=1.5,
          tree="huffman", seconds=round(sec["tree_huffman"], 5))
    ratio("split_logprobs_vs_full", sec["split"], sec["full"], "lower", 3, ctx,
          seconds=round(sec["split"], 5))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer tokens and repetitions (about a minute)")
    ap.add_argument("--vocab-sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    ap.add_argument(
        "--tokens", type=int, default=None, help="tokens per training step (default 2048, quick 512)"
    )
    ap.add_argument(
        "--eval-tokens", type=int, default=None, help="rows for full log-probs (default 256, quick 64)"
    )
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=None, help="timed repetitions (default 5, quick 3)")
    add_run_arguments(ap, output_dir=False, seed=True)
    args = ap.parse_args(argv)
    quick_defaults(args, tokens=(2048, 512), eval_tokens=(256, 64), repeats=(5, 3))
    start_run(args, "heads_speed")
    gen = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    for V in args.vocab_sizes:
        bench_vocab(V, args, gen)
    log(f"done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
