"""Bengio et al. (2003), Table 1 on the Brown corpus, reproduced side by side with the paper.

Rows, each trained and evaluated by this library on the paper's split (first 800,000 words train, next
200,000 validation, the rest test):

* MLP1, MLP3, MLP5, MLP7, MLP9: NPLMs with the paper's (n, h, m, direct) settings, trained with one or
  both recipes (``--recipes``):

  - ``paper``: plain SGD, learning rate eps_t = eps_0 / (1 + r t), weight decay 1e-4 on the weights,
    early stopping on validation perplexity;
  - ``adam``: what a user would pick today for the same architecture: AdamW (lr ``--adam-lr``, no weight
    decay), constant (``--adam-schedule linear``: decayed to 0 over ``--adam-epochs``), optional dropout
    ``--dropout`` on the output layer's input z (``NPLMConfig.dropout``), early stopping on validation
    perplexity, the best epoch kept;
* MLP10: MLP9 interpolated with the deleted-interpolation trigram, weight 0.5 (the paper's "mix");
* the n-gram rows: interpolated (Jelinek-Mercer) trigram, Kneser-Ney 3-, 4-, 5-gram.

Vocabulary: ``--vocab paper`` (default) keeps words seen at least 4 times in the whole corpus, the rule
that gives the paper's |V| = 16,383 on its copy (16,691 ids here, with <unk> and <eos>); ``--vocab
train`` counts the training split only. Every token is predicted, sentence ends (<eos>) and <unk>
included, as in ``hf_nlm.evaluation.evaluate_lm``, so our perplexities are not on exactly the paper's
footing: the paper's are the reference points, not targets to hit digit for digit.

Learning rate: the paper updates after every example with eps_0 = 1e-3. We average the loss over
batches of B targets, so eps_0 = 1e-3 x B gives the same step per example (``--lr-per-example``).

``--resume`` continues each MLP row from the last checkpoint of an earlier run with the same
``--output-dir`` (its time budget then counts from the resumed point), so a table can be built across runs.

Prints one JSON line per row on stdout (progress on stderr) and writes ``brown_table.md`` and
``brown_table.json`` into ``--output-dir``. ``--quick`` trains on a slice of the data for a minute or two.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import add_training_arguments, emit_json, log, run_context, start_training_run, write_report
from datasets import DatasetDict

import hf_nlm
from hf_nlm.data import load_brown
from hf_nlm.ngram import InterpolatedLM, KneserNeyLM, evaluate_mixture
from hf_nlm.tokenization import train_word_level_tokenizer, word_counts
from hf_nlm.training import TrainingConfig, train_lm

BENCHMARK = "brown_table"

# name: (n, h, m, direct connections, paper test perplexity). Bengio et al. 2003, Table 1.
MLP_ROWS = {
    "MLP1": (5, 50, 60, True, 268),
    "MLP3": (5, 0, 60, True, 310),
    "MLP5": (5, 50, 30, True, 279),
    "MLP7": (3, 50, 30, True, 293),
    "MLP9": (5, 100, 30, False, 276),
}
MIX_ROWS = {"MLP10": ("MLP9", 252)}  # MLP9 + interpolated trigram, weight 0.5
RECIPES = ("paper", "adam")
NGRAM_ROWS = {"Del. Int. (trigram)": ("interpolated", 3, 336), "Kneser-Ney 3-gram": ("kn", 3, 323),
              "Kneser-Ney 4-gram": ("kn", 4, 321), "Kneser-Ney 5-gram": ("kn", 5, 321)}


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def paper_vocabulary(corpus: DatasetDict, min_frequency: int = 4):
    """Words seen >= min_frequency times in the whole corpus (all splits), as the paper's |V| suggests."""
    all_text = [t for split in corpus.values() for t in split["text"]]
    return train_word_level_tokenizer(all_text, min_frequency=min_frequency)



def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a slice of the data, one short epoch: minutes")
    parser.add_argument("--vocab", choices=["paper", "train"], default="paper")
    parser.add_argument("--rows", nargs="+", default=[*MLP_ROWS, *MIX_ROWS, *NGRAM_ROWS], help="rows to run")
    parser.add_argument("--batch-size", type=int, default=16, help="blocks per update")
    parser.add_argument("--block-size", type=int, default=64, help="targets per block")
    parser.add_argument("--lr-per-example", type=float, default=1e-3, help="the paper's eps_0")
    parser.add_argument("--lr-decay", type=float, default=1e-8, help="the paper's r")
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--mix-weight", type=float, default=0.5)
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES),
                        help="training recipes")
    parser.add_argument("--adam-lr", type=float, default=1e-3, help="adam recipe: AdamW's peak learning rate")
    parser.add_argument("--adam-epochs", type=int, default=4,
                        help="adam recipe: maximum epochs (early stopping decides)")
    parser.add_argument("--adam-schedule", choices=["constant", "linear"], default="constant",
                        help="adam recipe: learning-rate schedule")
    parser.add_argument("--dropout", type=float, default=0.0, help="adam recipe: NPLMConfig.dropout")
    parser.add_argument("--resume", action="store_true",
                        help="continue each MLP row from its last checkpoint")
    add_training_arguments(parser, epochs=20, time_budget=900.0, per="MLP row")
    args = parser.parse_args(argv)
    out, suffix, corpus = start_training_run(args, load_brown, quick_lines=(2500, 800))
    if args.quick:
        args.epochs, args.adam_epochs, args.time_budget = 1, 1, min(args.time_budget, 60.0)
    tokenizer = paper_vocabulary(corpus) if args.vocab == "paper" else train_word_level_tokenizer(
        corpus["train"]["text"], min_frequency=4)
    train_words = sum(word_counts(corpus["train"]["text"]).values())
    log(f"brown: {train_words:,} training words, |V| = {len(tokenizer):,} ({args.vocab} vocabulary)")
    common = run_context(args, vocab_size=len(tokenizer), vocab=args.vocab)

    rows: list[dict] = []
    models: dict[tuple[str, str], torch.nn.Module] = {}
    tokens_per_update = args.batch_size * args.block_size
    for recipe in args.recipes:
        for name, (n, h, m, direct, paper) in MLP_ROWS.items():
            needed_for_mix = any(base == name and mix in args.rows for mix, (base, _) in MIX_ROWS.items())
            if name not in args.rows and not needed_for_mix:
                continue
            torch.manual_seed(0)
            config = hf_nlm.NPLMConfig(
                vocab_size=len(tokenizer), context_size=n - 1, embedding_size=m, hidden_size=h,
                direct_connections=direct, dropout=args.dropout if recipe == "adam" else 0.0,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            model = hf_nlm.NPLMForCausalLM(config)
            if recipe == "paper":
                schedule = dict(optimizer="sgd", learning_rate=args.lr_per_example * tokens_per_update,
                                lr_scheduler="bengio", lr_decay=args.lr_decay, weight_decay=args.weight_decay,
                                num_epochs=args.epochs, early_stopping_patience=1)
            else:
                schedule = dict(optimizer="adamw", learning_rate=args.adam_lr,
                                lr_scheduler=args.adam_schedule, weight_decay=0.0,
                                num_epochs=args.adam_epochs, early_stopping_patience=1)
            run_dir = out / f"runs{suffix}" / (name if recipe == "paper" else f"{name}-{recipe}")
            resume = args.resume and (run_dir / "checkpoints").is_dir()
            training = TrainingConfig(
                output_dir=str(run_dir), overwrite_output_dir=not resume,
                resume_from_checkpoint="latest" if resume else None, max_time_s=args.time_budget,
                batch_size=args.batch_size, block_size=args.block_size, logging_steps=100,
                save_total_limit=1, **schedule,
            )
            log(f"{name} ({recipe} recipe): n={n} h={h} m={m} direct={direct}, "
                f"{model.num_parameters():,} parameters")
            start = time.perf_counter()
            results = train_lm(model, tokenizer, corpus, training, dataset_name="brown")
            seconds = time.perf_counter() - start
            models[name, recipe] = model
            row = {
                "case": name, "recipe": recipe, "value": results["test"]["perplexity"], "unit": "ppl",
                "better": "lower", "valid_ppl": results["validation"]["perplexity"], "paper_test_ppl": paper,
                "n": n, "h": h, "m": m, "direct": direct, "mix": False, "dropout": config.dropout,
                "num_parameters": model.num_parameters(), "train_time_s": round(seconds, 1),
                "epochs": results["epochs_completed"], "best_epoch": results.get("best_epoch"),
                "stop_reason": results["stop_reason"], "resumed": resume,
                **({"schedule": args.adam_schedule, "lr": args.adam_lr} if recipe == "adam" else {}),
                **common,
            }
            rows.append(row)
            emit(row)

    ngrams: dict[str, object] = {}
    for name, (kind, order, paper) in NGRAM_ROWS.items():
        needed_for_mix = kind == "interpolated" and any(mix in args.rows for mix in MIX_ROWS)
        if name not in args.rows and not needed_for_mix:
            continue
        start = time.perf_counter()
        if kind == "kn":
            lm = KneserNeyLM.from_texts(corpus["train"]["text"], tokenizer, order=order)
        else:
            lm = InterpolatedLM.from_texts(corpus["train"]["text"], tokenizer, order=order,
                                           valid_texts=corpus["validation"]["text"])
        seconds = time.perf_counter() - start
        ngrams[name] = lm
        if name not in args.rows:
            continue
        valid, test = lm.evaluate(corpus["validation"], tokenizer), lm.evaluate(corpus["test"], tokenizer)
        row = {"case": name, "value": test["perplexity"], "unit": "ppl", "better": "lower",
               "valid_ppl": valid["perplexity"], "paper_test_ppl": paper, "order": order,
               "train_time_s": round(seconds, 1), **common}
        rows.append(row)
        emit(row)

    for recipe in args.recipes:
        for name, (base, paper) in MIX_ROWS.items():
            if name not in args.rows:
                continue
            trigram = ngrams["Del. Int. (trigram)"]
            model = models[base, recipe]
            r_valid = evaluate_mixture(model, trigram, corpus["validation"], tokenizer,
                                       weight=args.mix_weight)
            r_test = evaluate_mixture(model, trigram, corpus["test"], tokenizer, weight=args.mix_weight)
            base_row = next(r for r in rows if r["case"] == base and r.get("recipe") == recipe)
            row = {"case": name, "recipe": recipe, "value": r_test["perplexity"], "unit": "ppl",
                   "better": "lower", "valid_ppl": r_valid["perplexity"], "paper_test_ppl": paper,
                   "mix": True, "mix_weight": args.mix_weight,
                   **{k: base_row[k]
                      for k in ("n", "h", "m", "direct", "num_parameters", "train_time_s", "epochs")},
                   **common}
            rows.append(row)
            emit(row)

    kn5 = next((r for r in rows if r["case"] == "Kneser-Ney 5-gram"), None)
    if kn5:
        for recipe in args.recipes:
            by_case = {r["case"]: r for r in rows if r.get("recipe") == recipe}
            for case, target, paper_ratio in [("MLP1", 1.0, 268 / 321), ("MLP10", 0.85, 252 / 321)]:
                if case in by_case:
                    emit({"case": f"{case}_vs_kn5", "recipe": recipe,
                          "value": by_case[case]["value"] / kn5["value"], "unit": "x", "better": "lower",
                          "target": target, "paper_ratio": round(paper_ratio, 3), **common})

    write_table(rows, out / f"brown_table{suffix}.md", args)
    (out / f"brown_table{suffix}.json").write_text(json.dumps(rows, indent=1))
    return rows


def write_table(rows: list[dict], path: Path, args) -> None:
    def cells(r: dict) -> list:
        def cell(key, fmt="{}"):
            return fmt.format(r[key]) if key in r else ""

        def yes_no(key):
            return "yes" if r.get(key) else ("no" if key in r else "")

        return [r["case"], cell("recipe"), cell("n") or cell("order"), cell("h"), cell("m"), yes_no("direct"),
                yes_no("mix"), cell("num_parameters", "{:,}"), cell("epochs"), f"{r['train_time_s']:.0f} s",
                f"{r['valid_ppl']:.1f}", f"{r['value']:.1f}", r["paper_test_ppl"]]

    columns = ["model", "recipe", "n", "h", "m", "direct", "mix", "params", "epochs", "train time",
               "valid ppl", "test ppl", "paper test ppl"]
    write_report(
        path, f"Brown corpus, Bengio et al.'s split, {args.vocab} vocabulary "
              f"(|V| = {rows[0]['vocab_size']:,} ids)",
        (columns, map(cells, rows)),
        quick="a slice of the data, one short epoch" if args.quick else None,
    )


if __name__ == "__main__":
    main()
