"""Does the attention work? The attention seq2seq against the same model without attention on a task
that needs it: reverse a sequence of 10-30 random symbols (a synthetic check).

Without attention the decoder must recall the whole source from the encoder's final state; with it
the decoder reads the source position it needs at each step (Bahdanau et al. 2015; Luong et al. 2015).
Both models have the same sizes and the same training (Adam, equal epochs): the named recipes
``reversal-attention`` and ``reversal-none`` of ``story_seq2seq``, run by ``hf_nlm.training.train`` on the
pairs this script writes as CSV files (``source``, ``target``) into ``--output-dir``; BLEU (sacreBLEU, the
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
from pathlib import Path

import torch
from common import add_training_arguments, emit_json, log, machine, run_context, start_run, write_report
from datasets import Dataset, DatasetDict

from hf_nlm.evaluation import evaluate_bleu
from hf_nlm.training import RunSpec, train

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


#: The recipe of each row, by its attention.
RECIPES = {"general": "reversal-attention", "none": "reversal-none"}


def write_pairs(data: DatasetDict, folder: Path) -> dict[str, str]:
    """Each split of ``data`` as a CSV file of ``source`` and ``target`` columns in ``folder``: the split
    files a seq2seq recipe trains on. Returns the ``train_file`` / ``validation_file`` / ``test_file``
    settings."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, rows in data.items():
        path = folder / f"{split}.csv"
        rows.select_columns(["source", "target"]).to_csv(str(path), index=False)
        files[f"{split}_file"] = str(path)
    return files


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer examples and epochs (about a minute)")
    parser.add_argument("--train-size", type=int, default=None,
                        help="training sequences (default 20,000; quick 4,000)")
    parser.add_argument("--symbols", type=int, default=30, help="distinct symbols")
    parser.add_argument("--min-length", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=30)
    parser.add_argument("--hidden-size", type=int, default=None,
                        help="embedding and LSTM units (the recipes': 128)")
    parser.add_argument("--attention", default="general", help="the attention of the model with attention")
    parser.add_argument("--learning-rate", type=float, default=None, help="Adam's rate (the recipes': 3e-3)")
    parser.add_argument("--batch-size", type=int, default=None, help="pairs per batch (the recipes': 64)")
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
    files = write_pairs(data, out / f"data_story_reverse{suffix}")
    settings = {name: value for name, value in (("learning_rate", args.learning_rate),
                                                ("batch_size", args.batch_size)) if value is not None}
    if args.hidden_size is not None:
        settings.update(embedding_size=args.hidden_size, hidden_size=args.hidden_size)
    if args.time_budget:
        settings["max_time_s"] = args.time_budget
    context: dict = {}

    def run(attention: str) -> dict:
        recipe = RECIPES.get(attention, "reversal-attention")
        spec = RunSpec.from_recipe(
            recipe=recipe, output_dir=str(out / f"runs_story_reverse{suffix}" / attention),
            overwrite_output_dir=True, progress_bar=False, num_epochs=args.epochs, attention=attention,
            **files, **settings)
        start = time.perf_counter()
        result = train(spec)
        train_s = time.perf_counter() - start
        model, tokenizer, results = result.model, result.tokenizer, result.metrics
        model.eval()
        log(f"attention={attention} ({recipe}): {model.num_parameters():,} parameters")
        if not context:
            context.update(run_context(args, vocab_size=len(tokenizer),
                                       hidden_size=spec.model["hidden_size"]),
                           train_size=args.train_size, lengths=list(lengths), cpu=machine())
        bleu = evaluate_bleu(model, data["test"], tokenizer, batch_size=100,
                             max_new_tokens=args.max_length + 2)
        row = {"case": attention, "recipe": recipe, "value": round(bleu["score"], 2), "unit": "BLEU",
               "better": "higher", "validation_perplexity": round(results["validation"]["perplexity"], 3),
               "epochs": results["epochs_completed"], "train_time_s": round(train_s, 1),
               "num_parameters": model.num_parameters(), **context}
        if attention != "none":
            row["target"] = BLEU_TARGET
        emit_json(BENCHMARK, row)
        return row

    rows = [run(args.attention), run("none")]
    common = context
    gap = {"case": "attention_minus_none", "value": round(rows[0]["value"] - rows[1]["value"], 2),
           "unit": "BLEU", "better": "higher", **common}
    emit_json(BENCHMARK, gap)
    met = rows[0]["value"] >= BLEU_TARGET
    write_report(
        out / f"story_reverse{suffix}.md",
        f"Reversing {args.min_length}-{args.max_length} random symbols ({args.symbols} kinds), "
        f"{args.train_size:,} training sequences, LSTM {common['hidden_size']}, up to {args.epochs} epochs, "
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
