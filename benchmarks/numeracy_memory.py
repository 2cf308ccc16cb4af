"""Peak memory of scoring numerals: ``predict_numbers`` and ``numeral_cost_breakdown`` for each numeral
strategy of Spithourakis & Riedel ("Numeracy for Language Models", ACL 2018) at 1k, 10k and 100k test
numerals, on synthetic number-rich text, with the paper's small model (1 x 50 LSTM, vocabulary of about
5,000 words and numerals; untrained: memory does not depend on the weights).

Both functions score every numeral against every candidate (the vocabulary's numerals, the d-RNN's digit
strings, the mixture's intervals), ``--numeral-chunk-size`` numerals at a time, so their peak should stay
flat as the split grows: the target is at most 1.5x from 10k to 100k numerals and under 2 GB.

Each case runs in its own process (``--case``), which reports ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
at its end: the process's peak resident memory, the model, the text and the tokenizer included.
Prints one JSON object per result on stdout (progress on stderr), e.g.
{"benchmark": "numeracy_memory", "case": "predict_numbers", "strategy": "drnn", "num_numerals": 10000,
 "value": 612.3, "unit": "MB", "better": "lower", "target": 2000, ...}
and, where both 10k and 100k ran, {"case": "predict_numbers_growth", ..., "value": 1.1, "unit": "x",
 "target": 1.5}.

    python benchmarks/numeracy_memory.py --threads 1                  # the full table: 1k, 10k, 100k (long)
    python benchmarks/numeracy_memory.py --threads 1 --quick          # 1k numerals only: a few minutes
    python benchmarks/numeracy_memory.py --threads 1 --sizes 1000,10000
        # results/numeracy_memory_1k_10k.jsonl
    python benchmarks/numeracy_memory.py --threads 1 --sizes 10000,100000
        # results/numeracy_memory_10k_100k.jsonl

The baseline of every process (torch, the tokenizer, the text, the model) is ``peak_before_scoring_mb``;
what grows from 10k to 100k numerals besides the scoring is the encoded split (about 50 bytes of tensors a
token, encoded ``hf_nlm.data.lm.ENCODE_SLICE_LINES`` lines at a time) and what the functions return.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

BENCHMARK = "numeracy_memory"
STRATEGIES = ("softmax", "softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp")
FUNCTIONS = ("predict_numbers", "numeral_cost_breakdown")
TARGET_MB = 2000
TARGET_GROWTH = 1.5
NUMERALS_PER_LINE = 3
WORDS_PER_LINE = 17
TRAIN_LINES = 20_000


def numeral(rng: random.Random) -> str:
    """A year, a count, an amount with one decimal or a percentage with two."""
    kind = rng.random()
    if kind < 0.3:
        return str(rng.randint(1900, 2020))
    if kind < 0.6:
        return str(int(rng.paretovariate(1.0)))
    if kind < 0.85:
        return f"{rng.paretovariate(1.2) * 10:.1f}"
    return f"{rng.uniform(0, 100):.2f}"


def synthetic_lines(num_lines: int, seed: int) -> list[str]:
    """Number-rich lines: 17 words drawn from 6,000 (Zipf-like) and 3 numerals (:func:`numeral`), shuffled
    together. The same ``seed`` gives the same text."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(6_000)]
    weights = [1.0 / (i + 1) for i in range(len(words))]
    lines = []
    for _ in range(num_lines):
        tokens = rng.choices(words, weights, k=WORDS_PER_LINE)
        tokens += [numeral(rng) for _ in range(NUMERALS_PER_LINE)]
        rng.shuffle(tokens)
        lines.append(" ".join(tokens))
    return lines


def run_case(strategy: str, function: str, num_numerals: int, chunk: int, block_size: int, seed: int) -> dict:
    """One case in this process: build the tokenizer and the model, score the split, report the peak RSS."""
    import torch

    from hf_nlm.evaluation import numeral_cost_breakdown
    from hf_nlm.evaluation.number_prediction import predict_numbers
    from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
    from hf_nlm.tokenization import train_numeracy_tokenizer

    train = synthetic_lines(TRAIN_LINES, seed)
    test = synthetic_lines(-(-num_numerals // NUMERALS_PER_LINE), seed + 1)
    tokenizer = train_numeracy_tokenizer(train, max_vocab_size=5_000)
    torch.manual_seed(seed)
    config = NumeracyLMConfig(vocab_size=len(tokenizer), embedding_size=50, hidden_size=50,
                              num_hidden_layers=1, numeral_strategy=strategy,
                              numeral_vocab=tokenizer.numeral_vocab)
    model = NumeracyLMForCausalLM(config).eval()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if function == "predict_numbers":
        result = predict_numbers(model, tokenizer, test, "median", block_size=block_size,
                                 numeral_chunk_size=chunk)
        scored = len(result)
    else:
        scored = numeral_cost_breakdown(model, tokenizer, test, block_size=block_size,
                                        numeral_chunk_size=chunk)["num_numerals"]
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"case": function, "strategy": strategy, "num_numerals": scored, "value": round(peak / 1024, 1),
            "unit": "MB", "better": "lower", "target": TARGET_MB,
            "peak_before_scoring_mb": round(before / 1024, 1), "seconds": round(seconds, 2),
            "vocab_size": len(tokenizer), "numeral_vocab_size": len(tokenizer.numeral_vocab),
            "numeral_chunk_size": chunk, "block_size": block_size, "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=None, help="numerals in the test split, comma-separated "
                        "(default: 1000,10000,100000; --quick: 1000)")
    parser.add_argument("--quick", action="store_true", help="1k numerals only")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="numeral strategies, comma-separated")
    parser.add_argument("--functions", default=",".join(FUNCTIONS), help="what to measure, comma-separated")
    parser.add_argument("--numeral-chunk-size", type=int, default=256)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", nargs=3, metavar=("STRATEGY", "FUNCTION", "NUMERALS"), default=None,
                        help="run one case in this process and print its JSON line "
                             "(what the driver calls)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.case:
        strategy, function, size = args.case
        row = run_case(strategy, function, int(size), args.numeral_chunk_size, args.block_size, args.seed)
        print(json.dumps(row), flush=True)
        return

    from common import emit_json, log

    sizes = [int(s) for s in (args.sizes or ("1000" if args.quick else "1000,10000,100000")).split(",")]
    peaks: dict[tuple[str, str, int], float] = {}
    for function in args.functions.split(","):
        for strategy in args.strategies.split(","):
            for size in sizes:
                log(f"{function} {strategy} {size} numerals")
                command = ([sys.executable, __file__, "--case", strategy, function, str(size),
                            "--numeral-chunk-size", str(args.numeral_chunk_size),
                            "--block-size", str(args.block_size), "--seed", str(args.seed)]
                           + (["--threads", str(args.threads)] if args.threads else []))
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    log(done.stderr[-2000:])
                    emit_json(BENCHMARK, {"case": function, "strategy": strategy, "num_numerals": size,
                                          "error": f"exit status {done.returncode}"})
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                peaks[function, strategy, size] = row["value"]
                emit_json(BENCHMARK, row)
            if 10_000 in sizes and 100_000 in sizes and (function, strategy, 10_000) in peaks \
                    and (function, strategy, 100_000) in peaks:
                growth = peaks[function, strategy, 100_000] / peaks[function, strategy, 10_000]
                emit_json(BENCHMARK, {"case": f"{function}_growth", "strategy": strategy,
                                      "from_numerals": 10_000, "to_numerals": 100_000,
                                      "value": round(growth, 3), "unit": "x", "better": "lower",
                                      "target": TARGET_GROWTH})


if __name__ == "__main__":
    main()
