"""Training and evaluation throughput of the numeracy LM's six numeral strategies, side by side.

Spithourakis & Riedel ("Numeracy for Language Models", ACL 2018) put six output strategies on one body:
softmax, softmax with digit embeddings, the h-softmax, and the h-softmax with an open numeral branch (the
digit-RNN, the mixture of Gaussians and their combination). Every strategy here has the same body (the
paper's small one: 1 x 50 LSTM, embeddings of 50), the same tokenizer (about 5,000 words and numerals) and
the same batches, on synthetic number-rich text (15% numerals: years, counts, amounts, percentages).

* ``train``: tokens per second of a training step (forward, backward, Adam) on ``--batch-size`` stream
  columns x ``--bptt`` positions, the batches ``hf_nlm.training`` reads;
* ``evaluate``: tokens per second of ``hf_nlm.evaluation.scoring.stream_nll``, the validation pass of
  ``hf-nlm train`` and ``evaluate_lm`` (state carried over the split), on the same number of columns.

The strategies take turns within each repetition (the order rotates), and each one's median over the
repetitions is reported, so a slower or busier machine moves all of them alike. Target: every strategy
within 3x of the softmax's throughput, in training and in evaluation.

Prints one JSON object per result on stdout (progress on stderr):
    {"benchmark": "numeracy_throughput", "case": "train", "strategy": "drnn", "value": 15000,
     "unit": "tokens/s", ...}
    {"benchmark": "numeracy_throughput", "case": "train_slowdown", "strategy": "drnn", "value": 1.2,
     "unit": "x", "target": 3, ...}   (softmax tokens/s over this strategy's)

    python benchmarks/numeracy_throughput.py --threads 1           # results/numeracy_throughput.jsonl
    python benchmarks/numeracy_throughput.py --threads 1 --quick   # fewer steps, a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import add_run_arguments, emit_json, log, machine
from numeracy_memory import STRATEGIES, synthetic_lines

from hf_nlm.data.batching import StreamBatching
from hf_nlm.data.stream import bptt_chunks
from hf_nlm.evaluation.scoring import stream_nll
from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.tokenization import train_numeracy_tokenizer

BENCHMARK = "numeracy_throughput"
TARGET_SLOWDOWN = 3.0


def build_model(strategy: str, tokenizer, train_stream: dict, hidden_size: int,
                seed: int) -> NumeracyLMForCausalLM:
    """The paper's small body with ``strategy``'s head, prepared for training as ``train_lm`` does (the
    mixture's Gaussians fitted by EM on the training numerals)."""
    torch.manual_seed(seed)
    config = NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=hidden_size,
                              hidden_size=hidden_size, num_hidden_layers=1, numeral_strategy=strategy,
                              numeral_vocab=tokenizer.numeral_vocab)
    model = NumeracyLMForCausalLM(config)
    prepare = getattr(model.lm_head, "prepare_training", None)
    if prepare is not None:
        prepare(train_stream)
    return model


def time_training(model, optimizer, columns, chunks) -> tuple[float, int]:
    """Seconds and targets of one training step per chunk."""
    model.train()
    targets, start = 0, time.perf_counter()
    for begin, length in chunks:
        batch = columns.chunk(begin, length)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        targets += int((batch["shift_labels"] != -100).sum())
    return time.perf_counter() - start, targets


def time_evaluation(model, columns, bptt: int) -> tuple[float, int]:
    """Seconds and targets of the validation pass over ``columns``."""
    start = time.perf_counter()
    _, count = stream_nll(model, columns, bptt)
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="numeral strategies, comma-separated")
    parser.add_argument("--hidden-size", type=int, default=50,
                        help="LSTM units and embedding size (paper: 50)")
    parser.add_argument("--vocab-size", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, default=32,
                        help="stream columns, in training and evaluation")
    parser.add_argument("--bptt", type=int, default=50)
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per repetition (default 20; --quick 4)")
    parser.add_argument("--eval-tokens", type=int, default=None,
                        help="tokens of the evaluated split (default 32,000; --quick 8,000)")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions (default 5; --quick 2)")
    parser.add_argument("--quick", action="store_true")
    add_run_arguments(parser, output_dir=False, seed=True)
    args = parser.parse_args()
    steps = args.steps or (4 if args.quick else 20)
    eval_tokens = args.eval_tokens or (8_000 if args.quick else 32_000)
    repeats = args.repeats or (2 if args.quick else 5)
    if args.threads:
        torch.set_num_threads(args.threads)
    strategies = args.strategies.split(",")

    log("tokenizer and streams")
    train_lines = synthetic_lines(20_000, args.seed)
    tokenizer = train_numeracy_tokenizer(train_lines, max_vocab_size=args.vocab_size)
    batching = StreamBatching(tokenizer, args.bptt)
    train_stream, _ = batching.encode(train_lines)
    train_columns = batching.columns(train_stream, args.batch_size)
    chunks = bptt_chunks(train_columns.length, args.bptt)
    eval_lines = synthetic_lines(eval_tokens // 20 + 1, args.seed + 1)  # 20 tokens a line
    eval_columns = batching.columns(batching.encode(eval_lines)[0], args.batch_size)
    if len(chunks) < steps * repeats:
        raise SystemExit(f"the training stream has {len(chunks)} chunks; "
                         f"--steps x --repeats needs {steps * repeats}")

    models = {s: build_model(s, tokenizer, train_stream, args.hidden_size, args.seed) for s in strategies}
    optimizers = {s: torch.optim.Adam(m.parameters(), lr=1e-3) for s, m in models.items()}
    rates: dict[tuple[str, str], list[float]] = {(case, s): [] for case in ("train", "evaluate")
                                                 for s in strategies}
    for r in range(repeats):
        order = strategies[r % len(strategies):] + strategies[: r % len(strategies)]
        for strategy in order:
            seconds, count = time_training(models[strategy], optimizers[strategy], train_columns,
                                           chunks[r * steps:(r + 1) * steps])
            rates["train", strategy].append(count / seconds)
            seconds, count = time_evaluation(models[strategy], eval_columns, args.bptt)
            rates["evaluate", strategy].append(count / seconds)
            log(f"repeat {r + 1}/{repeats} {strategy}: train {rates['train', strategy][-1]:,.0f} tok/s, "
                f"evaluate {rates['evaluate', strategy][-1]:,.0f} tok/s")

    context = {"threads": torch.get_num_threads(), "hidden_size": args.hidden_size,
               "vocab_size": len(tokenizer), "numeral_vocab_size": len(tokenizer.numeral_vocab),
               "batch_size": args.batch_size, "bptt": args.bptt, "steps": steps,
               "eval_tokens": eval_columns.length * args.batch_size, "repeats": repeats,
               "quick": args.quick, "cpu": machine()}
    for case in ("train", "evaluate"):
        median = {s: statistics.median(rates[case, s]) for s in strategies}
        for strategy in strategies:
            emit_json(BENCHMARK, {"case": case, "strategy": strategy, "value": round(median[strategy]),
                                  "unit": "tokens/s", "better": "higher", **context})
        if "softmax" in median:
            for strategy in strategies:
                if strategy != "softmax":
                    emit_json(BENCHMARK, {"case": f"{case}_slowdown", "strategy": strategy,
                                          "value": round(median["softmax"] / median[strategy], 2),
                                          "unit": "x", "better": "lower", "target": TARGET_SLOWDOWN,
                                          **context})


if __name__ == "__main__":
    main()
