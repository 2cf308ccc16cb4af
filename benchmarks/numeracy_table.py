"""The numeracy LM's strategies side by side on State of the Union addresses (or any text corpus).

G. Spithourakis, S. Riedel, "Numeracy for Language Models: Evaluating and Improving their Ability to
Predict Numbers", ACL 2018, table 3: perplexity and adjusted perplexity (APP) over all tokens, words
only and numerals only, for each output strategy. Every row is ``NumeracyLMForCausalLM`` with the
paper's body (one LSTM layer of ``--hidden-size`` units, 50 in the paper, dropout 0.1, Adam 1e-3),
trained by ``hf_nlm.training.train_lm`` on the same numeracy tokenizer (top ``--vocab-size`` tokens,
words and numerals ranked together, punctuation cut off words) for the same number of epochs; only
``numeral_strategy`` differs.
Test figures are exact (the state carried over the whole split, batch 1).

Corpus: SOTU split by year as ``load_sotu`` does (train < 2000 <= validation < 2010 <= test), or
``--train-file/--validation-file/--test-file`` text files (one paragraph per line).

Prints one JSON line per strategy and per target check; writes ``numeracy_table[_quick].md`` /
``.json`` into ``--output-dir``. ``--quick``: a slice of the corpus, one epoch per row.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from common import (
    add_training_arguments,
    emit_json,
    log,
    machine,
    run_context,
    start_training_run,
    write_report,
)

from hf_nlm.data import load_sotu, load_text_files
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.models import NumeracyLMConfig, NumeracyLMForCausalLM
from hf_nlm.numeral_prediction import evaluate_number_prediction
from hf_nlm.tokenization import train_numeracy_tokenizer
from hf_nlm.training import TrainingConfig, train_lm

BENCHMARK = "numeracy_table"
STRATEGIES = ("softmax", "softmax_digits", "hsoftmax", "drnn", "mog", "combination")
FIGURES = (
    ("perplexity", "ppl"), ("perplexity_words", "ppl words"), ("perplexity_numerals", "ppl numerals"),
    ("adjusted_perplexity", "APP"), ("adjusted_perplexity_words", "APP words"),
    ("adjusted_perplexity_numerals", "APP numerals"),
)


#: Point prediction of every test numeral by the median of the model's distribution (sec. 4).
NUMBER_FIGURES = ("mape", "mdape", "mape_mean_baseline", "mdape_mean_baseline", "mape_median_baseline",
                  "mdape_median_baseline")


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def load_corpus(args):
    if args.train_file:
        return lambda: load_text_files(train=args.train_file, validation=args.validation_file, test=args.test_file)
    return load_sotu


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--quick", action="store_true", help="a slice of the corpus, one epoch per row")
    parser.add_argument("--vocab-size", type=int, default=5000, help="top-K tokens (paper: 1000 clinical, 5000 arXiv)")
    parser.add_argument("--hidden-size", type=int, default=50, help="LSTM units and embedding size (paper: 50)")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="Adam learning rate (paper: 1e-3)")
    parser.add_argument("--batch-size", type=int, default=32, help="stream columns")
    parser.add_argument("--bptt", type=int, default=50, help="BPTT length")
    for split in ("train", "validation", "test"):
        parser.add_argument(f"--{split}-file", nargs="+", default=None, help=f"{split} text files instead of SOTU")
    # Rows are compared at equal epochs (early stopping may end one sooner), not equal time: on a
    # shared machine a time budget would give each strategy a different amount of training.
    add_training_arguments(parser, epochs=3, time_budget=0.0)
    args = parser.parse_args(argv)
    out, suffix, corpus = start_training_run(args, load_corpus(args), quick_lines=(3000, 300))
    if args.quick:
        args.epochs = min(args.epochs, 1)
    tokenizer = train_numeracy_tokenizer(corpus["train"]["text"], max_vocab_size=args.vocab_size, split_punctuation=True)
    common = {**run_context(args, vocab_size=len(tokenizer), hidden_size=args.hidden_size),
              "corpus": "files" if args.train_file else "sotu", "cpu": machine(), "epochs_asked": args.epochs,
              "numerals_in_vocab": len(tokenizer.numeral_vocab) - 1}

    def run(strategy: str) -> dict:
        torch.manual_seed(0)
        config = NumeracyLMConfig(
            vocab_size=len(tokenizer), embedding_size=args.hidden_size, hidden_size=args.hidden_size,
            numeral_strategy=strategy, numeral_vocab=tokenizer.numeral_vocab,
            bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
        )
        model = NumeracyLMForCausalLM(config)
        training = TrainingConfig(
            output_dir=str(out / f"runs_numeracy{suffix}" / strategy), overwrite_output_dir=True,
            block_size=args.bptt, batch_size=args.batch_size, eval_batch_size=10, num_epochs=args.epochs,
            max_time_s=args.time_budget or None, optimizer="adam", learning_rate=args.learning_rate, lr_scheduler="constant",
            max_grad_norm=1.0, early_stopping_patience=2, logging_steps=200, save_total_limit=1,
            progress_bar=False, eval_test=False,
        )
        log(f"{strategy}: {model.num_parameters():,} parameters")
        start = time.perf_counter()
        results = train_lm(model, tokenizer, corpus, training, dataset_name="sotu")
        train_s = time.perf_counter() - start
        test = evaluate_lm(model, corpus["test"], tokenizer, block_size=args.bptt, batch_size=1)
        numbers = evaluate_number_prediction(model, tokenizer, corpus["test"], corpus["train"], statistic="median",
                                             block_size=args.bptt)
        row = {
            "case": strategy, "value": round(test["adjusted_perplexity_numerals"], 2), "unit": "APP numerals",
            "better": "lower", **{key: round(test[key], 2) for key, _ in FIGURES if test[key] is not None},
            **{key: test[key] for key in ("num_tokens", "num_numerals", "num_unknown_words", "num_unknown_numerals",
                                           "num_oov_word_types", "num_oov_numeral_types")},
            **{key: round(numbers[key], 2) for key in NUMBER_FIGURES if numbers.get(key) is not None},
            "train_time_s": round(train_s, 1), "epochs": results["epochs_completed"],
            "stop_reason": results["stop_reason"], "num_parameters": model.num_parameters(), **common,
        }
        emit(row)
        return row

    rows = [run(strategy) for strategy in args.strategies]
    checks = target_checks({r["case"]: r for r in rows}, common)
    for check in checks:
        emit(check)
    write_table(rows, checks, out / f"numeracy_table{suffix}.md", args, common)
    (out / f"numeracy_table{suffix}.json").write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    return rows


def target_checks(rows: dict[str, dict], common: dict) -> list[dict]:
    """Issue 12's targets: h-softmax numeral APP at least 10x below the softmax's, word APP within 5%."""
    if "softmax" not in rows or "hsoftmax" not in rows:
        return []
    soft, hier = rows["softmax"], rows["hsoftmax"]
    numeral_gain = soft["adjusted_perplexity_numerals"] / hier["adjusted_perplexity_numerals"]
    word_ratio = hier["adjusted_perplexity_words"] / soft["adjusted_perplexity_words"]
    return [
        {"case": "softmax_over_hsoftmax_numeral_app", "value": round(numeral_gain, 2), "unit": "x", "better": "higher",
         "target": 10.0, "met": numeral_gain >= 10.0, **common},
        {"case": "hsoftmax_over_softmax_word_app", "value": round(word_ratio, 4), "unit": "x", "better": "lower",
         "target": 1.05, "met": word_ratio <= 1.05, **common},
    ]


def write_table(rows: list[dict], checks: list[dict], path, args, common: dict) -> None:
    columns = ["strategy", "params", "epochs", "train time", *[label for _, label in FIGURES], "MAPE", "MdAPE"]
    cells = [[r["case"], f"{r['num_parameters']:,}", r["epochs"], f"{r['train_time_s']:.0f} s",
              *[f"{r[key]:,.2f}" if key in r else "-" for key, _ in (*FIGURES, ("mape", ""), ("mdape", ""))]]
             for r in rows]
    first = rows[0]
    notes = [
        f"Test split: {first['num_tokens']:,} tokens, {first['num_numerals']:,} numerals; {first['num_unknown_words']:,} "
        f"<unk_word> targets standing for {first['num_oov_word_types']:,} word types, {first['num_unknown_numerals']:,} "
        f"<unk_num> targets for {first['num_oov_numeral_types']:,} numeral types.",
        *([f"Point predictions by the median of each model's distribution; baselines: always the training mean "
           f"(MAPE {first['mape_mean_baseline']:,.2f}, MdAPE {first['mdape_mean_baseline']:,.2f}), always the "
           f"training median (MAPE {first['mape_median_baseline']:,.2f}, MdAPE {first['mdape_median_baseline']:,.2f})."]
          if "mape_mean_baseline" in first else []),
        *[f"{c['case']}: {c['value']} (target {'>=' if c['better'] == 'higher' else '<='} {c['target']}: "
          f"{'met' if c['met'] else 'MISSED'})" for c in checks],
    ]
    write_report(
        path,
        f"Numeracy LM strategies on {common['corpus'].upper()} test; {common['vocab_size']:,} tokens "
        f"({common['numerals_in_vocab']:,} numerals), LSTM {args.hidden_size}, up to {args.epochs} epochs per row "
        f"(Adam {args.learning_rate}, early stopping) on CPU ({common['threads']} threads)",
        (columns, cells), notes=notes, quick="a slice of the corpus, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
