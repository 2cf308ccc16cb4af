"""Does the attention work? The attention seq2seq against the same model without attention on a task
that needs it: reverse a sequence of 10-30 random symbols (a synthetic check).

Without attention the decoder must recall the whole source from the encoder's final state; with it
the decoder reads the source position it needs at each step (Bahdanau et al. 2015; Luong et al. 2015).
Both models have the same sizes and the same training (Adam, equal epochs); BLEU (sacreBLEU, the
package's ``bleu`` metric) of greedy decoding on held-out sequences. Target: attention BLEU >= 95 and
clearly above the no-attention model's. One JSON line per result on stdout, a Markdown table in
``--output-dir``.

    python benchmarks/story_reverse.py --threads 1            # the recorded run
    python benchmarks/story_reverse.py --quick               # about a minute
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch
from common import add_training_arguments, emit_json, log, machine, run_context, start_run, write_report
from datasets import Dataset, DatasetDict

from hf_nlm.evaluation import evaluate_bleu
from hf_nlm.models import StorySeq2SeqConfig, StorySeq2SeqForConditionalGeneration
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm

BENCHMARK = "story_reverse"
BLEU_TARGET = 95.0


def reversal_pairs(n: int, symbols: int, min_len: int, max_len: int, seed: int) -> Dataset:
    """``n`` random sequences of ``min_len``..``max_len`` symbols ``s0``..``s{symbols-1}`` and their
    reversals."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(n):
        seq = [f"s{rng.randrange(symbols)}" for _ in range(rng.randint(min_len, max_len))]
        sources.append(" ".join(seq))
        targets.append(" ".join(reversed(seq)))
    return Dataset.from_dict({"source": sources, "target": targets})


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer examples and epochs (about a minute)")
    parser.add_argument("--train-size", type=int, default=None,
                        help="training sequences (default 20,000; quick 4,000)")
    parser.add_argument("--symbols", type=int, default=30, help="distinct symbols")
    parser.add_argument("--min-length", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=30)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--attention", default="general", help="the attention of the model with attention")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    add_training_arguments(parser, epochs=0, time_budget=0.0)
    args = parser.parse_args(argv)
    out = start_run(args, BENCHMARK)
    suffix = "_quick" if args.quick else ""
    args.train_size = args.train_size or (4000 if args.quick else 20000)
    args.epochs = args.epochs or (3 if args.quick else 12)
    lengths = (args.min_length, args.max_length)
    data = DatasetDict(
        train=reversal_pairs(args.train_size, args.symbols, *lengths, seed=0),
        validation=reversal_pairs(300, args.symbols, *lengths, seed=1),
        test=reversal_pairs(500, args.symbols, *lengths, seed=2),
    )
    tokenizer = train_word_level_tokenizer(data["train"]["source"])
    common = {**run_context(args, vocab_size=len(tokenizer), hidden_size=args.hidden_size),
              "train_size": args.train_size, "lengths": list(lengths), "cpu": machine()}

    def run(attention: str) -> dict:
        torch.manual_seed(0)
        config = StorySeq2SeqConfig(
            vocab_size=len(tokenizer), embedding_size=args.hidden_size, hidden_size=args.hidden_size,
            attention=attention, dropout=0.0, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
            decoder_start_token_id=tokenizer.eos_token_id,
        )
        model = StorySeq2SeqForConditionalGeneration(config)
        training = TrainingConfig(
            output_dir=str(out / f"runs_story_reverse{suffix}" / attention), overwrite_output_dir=True,
            batch_size=args.batch_size, eval_batch_size=100, num_epochs=args.epochs, optimizer="adam",
            learning_rate=args.learning_rate, lr_scheduler="constant", max_grad_norm=1.0,
            max_time_s=args.time_budget or None, logging_steps=100, save_total_limit=1, progress_bar=False,
            eval_test=False,
        )
        log(f"attention={attention}: {model.num_parameters():,} parameters")
        start = time.perf_counter()
        results = train_lm(model, tokenizer, data, training, dataset_name="reversal")
        train_s = time.perf_counter() - start
        bleu = evaluate_bleu(model, data["test"], tokenizer, batch_size=100,
                             max_new_tokens=args.max_length + 2)
        row = {"case": attention, "value": round(bleu["score"], 2), "unit": "BLEU", "better": "higher",
               "validation_perplexity": round(results["validation"]["perplexity"], 3),
               "epochs": results["epochs_completed"], "train_time_s": round(train_s, 1),
               "num_parameters": model.num_parameters(), **common}
        if attention != "none":
            row["target"] = BLEU_TARGET
        emit_json(BENCHMARK, row)
        return row

    rows = [run(args.attention), run("none")]
    gap = {"case": "attention_minus_none", "value": round(rows[0]["value"] - rows[1]["value"], 2),
           "unit": "BLEU", "better": "higher", **common}
    emit_json(BENCHMARK, gap)
    met = rows[0]["value"] >= BLEU_TARGET
    write_report(
        out / f"story_reverse{suffix}.md",
        f"Reversing {args.min_length}-{args.max_length} random symbols ({args.symbols} kinds), "
        f"{args.train_size:,} training sequences, LSTM {args.hidden_size}, up to {args.epochs} epochs, "
        f"greedy decoding, on {machine()} ({torch.get_num_threads()} threads)",
        (["attention", "test BLEU", "validation perplexity", "epochs", "train time"],
         [[r["case"], r["value"], r["validation_perplexity"], r["epochs"], f"{r['train_time_s']:.0f} s"]
          for r in rows]),
        notes=[f"attention BLEU >= {BLEU_TARGET}: {'met' if met else 'MISSED'}; "
               f"attention - none: {gap['value']} BLEU"],
        quick="fewer examples and epochs" if args.quick else None,
    )
    (out / f"story_reverse{suffix}.json").write_text(json.dumps({"rows": rows, "gap": gap}, indent=1))
    return rows


if __name__ == "__main__":
    main()
