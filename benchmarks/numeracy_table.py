"""The numeracy LM's strategies side by side on State of the Union addresses (or any text corpus).

G. Spithourakis, S. Riedel, "Numeracy for Language Models: Evaluating and Improving their Ability to
Predict Numbers", ACL 2018, table 3: perplexity and adjusted perplexity (APP) over all tokens, words
only and numerals only, for each output strategy. Every row is a named recipe of ``numeracy_lm``
(``sotu-softmax``, ``sotu-hsoftmax``, ..., ``drop-dexp``: ``hf_nlm.models.numeracy_lm.table_recipe``) run by
``hf_nlm.training.train(RunSpec.from_recipe(recipe=NAME, ...))``: the paper's body (one LSTM layer of 50
units, dropout 0.1, Adam 1e-3), the same numeracy tokenizer (top 5,000 tokens, words and numerals ranked
together, punctuation cut off words), the same epochs and seed; only ``numeral_strategy`` differs. A flag
given (``--hidden-size``, ``--epochs``, ...) changes that setting of every row's recipe; the recipe's data is
replaced by split files where the script derives them (``--quick``, ``--split speech``, ``--train-file``).
Test figures are exact (the state carried over the whole split, batch 1).

Corpus (``--corpus``): SOTU split by year as ``load_sotu`` does (train < 2000 <= validation < 2010 <= test);
with ``--split speech`` every 20th speech of the whole history goes to test (and another to validation),
so test and training come from the same eras; ``drop``, the DROP passages (Dua et al., NAACL 2019:
Wikipedia passages on NFL games and history, about 7% numerals; ``load_drop_passages``, split 0.8 / 0.1 /
0.1 by a hash of each passage); or ``--train-file/--validation-file/--test-file`` text files (one
paragraph per line). Besides the paper's six strategies, ``dexp`` (Berg-Kirkpatrick & Spokoyny, EMNLP
2020: a discrete latent exponent and a mantissa density), and besides MAPE / MdAPE their LogMAE and
exponent accuracy.

Besides the paper's figures, every row splits its numeral cost (``hf_nlm.evaluation.numeral_cost_breakdown``)
into -log p(numeral | h), the cost of saying that a numeral comes, and the rest, the cost of saying which
one; and lists its worst point predictions. Three context-free references are printed once per table:
the numeral class from training frequencies, a digit-RNN trained on the training numerals alone (no
context) and the EM mixture of Gaussians with training precision frequencies (no context).

Prints one JSON line per strategy and per target check; writes ``numeracy_table[_quick].md`` /
``.json`` into ``--output-dir``. ``--quick``: a slice of the corpus, one epoch per row.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

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
from datasets import DatasetDict, concatenate_datasets

from hf_nlm.data import load_drop_passages, load_sotu, load_text_files
from hf_nlm.data.batching import StreamBatching
from hf_nlm.evaluation import evaluate_lm, numeral_anomaly_auc, numeral_cost_breakdown, stream_token_texts
from hf_nlm.evaluation.number_prediction import predict_numbers
from hf_nlm.heads.numeral.densities.digit_rnn import DigitRNN
from hf_nlm.heads.numeral.densities.gaussian_mixture import NumeralMixture
from hf_nlm.metrics import number_prediction_report
from hf_nlm.models import NumeracyLMConfig
from hf_nlm.models.numeracy_lm import TABLE_STRATEGIES, table_recipe_name
from hf_nlm.training import RunSpec, train
from hf_nlm.training.run import load_run

BENCHMARK = "numeracy_table"
STRATEGIES = TABLE_STRATEGIES
FIGURES = (
    ("perplexity", "ppl"), ("perplexity_words", "ppl words"), ("perplexity_numerals", "ppl numerals"),
    ("adjusted_perplexity", "APP"), ("adjusted_perplexity_words", "APP words"),
    ("adjusted_perplexity_numerals", "APP numerals"),
)


#: Point prediction of every test numeral by the median of the model's distribution (sec. 4).
NUMBER_FIGURES = ("mape", "mdape", "mape_mean_baseline", "mdape_mean_baseline", "mape_median_baseline",
                  "mdape_median_baseline", "logmae", "exponent_accuracy", "logmae_median_baseline",
                  "exponent_accuracy_median_baseline")
#: Where the numeral cost goes (nats per test numeral; ``numeral_cost_breakdown``).
COST_FIGURES = (
    ("numeral_class_nll", "class"), ("numeral_branch_nll_adjusted", "which numeral (APP)"),
    ("numeral_branch_nll_known", "which: in vocabulary"), ("numeral_branch_nll_unknown", "which: outside"),
)
HIERARCHICAL = ("hsoftmax", "drnn", "mog", "combination", "dexp")
CLOSED = ("softmax", "softmax_digits", "hsoftmax")
#: The open strategies the paper expects below the closed ones on numeral APP.
OPEN = ("drnn", "combination")
#: ``--split speech``: speech i (in chronological order) goes to test when i % 20 == 19, validation when 9.
SPEECH_PERIOD, TEST_PHASE, VALIDATION_PHASE = 20, 19, 9


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def sotu_by_speech() -> DatasetDict:
    """SOTU with every 20th speech (the 20th, 40th, ... in chronological order) in test and every 20th
    from the 10th in validation, the rest in train: test and training share every era's way of writing
    numbers (the year split tests 2010s speeches on a model of 1790-1999 ones)."""
    corpus = load_sotu()
    everything = concatenate_datasets([corpus[name] for name in ("train", "validation", "test")])
    order = {fileid: i for i, fileid in enumerate(dict.fromkeys(everything["fileid"]))}
    phase = [order[f] % SPEECH_PERIOD for f in everything["fileid"]]
    pick = {"train": lambda k: k not in (TEST_PHASE, VALIDATION_PHASE),
            "validation": lambda k: k == VALIDATION_PHASE, "test": lambda k: k == TEST_PHASE}
    return DatasetDict({name: everything.select([i for i, k in enumerate(phase) if keep(k)])
                        for name, keep in pick.items()})


def load_corpus(args):
    if args.train_file:
        return lambda: load_text_files(train=args.train_file, validation=args.validation_file,
                                       test=args.test_file)
    if args.corpus == "drop":
        return load_drop_passages
    return sotu_by_speech if args.split == "speech" else load_sotu


def write_splits(corpus: DatasetDict, folder: Path) -> dict[str, str]:
    """Each split of ``corpus`` as a text file in ``folder``, one row (paragraph or passage) per line, a line
    break inside a row made a space: the split files a row's recipe trains on where the script derives the
    corpus (a slice, another split). Returns the ``train_file`` / ``validation_file`` / ``test_file``
    settings."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in ("train", "validation", "test"):
        path = folder / f"{split}.txt"
        path.write_text("".join(" ".join(text.split("\n")) + "\n" for text in corpus[split]["text"]),
                        encoding="utf-8")
        files[f"{split}_file"] = str(path)
    return files


#: The settings each flag of this script gives every row's recipe, by flag destination.
OVERRIDES = {"vocab_size": "vocab_size", "hidden_size": ("embedding_size", "hidden_size"),
             "learning_rate": "learning_rate", "numeral_loss_weight": "numeral_loss_weight",
             "batch_size": "batch_size", "bptt": "block_size", "epochs": "num_epochs"}


def recipe_overrides(args) -> dict:
    """The recipe settings the flags given change (a flag left out keeps the recipe's value)."""
    settings = {}
    for dest, names in OVERRIDES.items():
        value = getattr(args, dest)
        if value is not None:
            settings.update(dict.fromkeys((names,) if isinstance(names, str) else names, value))
    if args.mog_trainable:
        settings["mog_trainable"] = True
    if args.time_budget:
        settings["max_time_s"] = args.time_budget
    return settings


def numerals_of(tokenizer, texts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Values (float64), precisions and digit rows of the numerals of ``texts``, and the number of tokens."""
    stream, _ = StreamBatching(tokenizer, 50).encode(list(texts))
    mask = stream["numeral_mask"].bool()
    return (stream["numeral_value"][mask].double(), stream["numeral_precision"][mask],
            stream["digit_ids"][mask], int(mask.numel()))


def context_free_references(tokenizer, corpus, num_components: int, steps: int = 4000) -> list[dict]:
    """Nats per test numeral of models that do not look at the context: the numeral class at its
    training frequency; the digit-RNN trained on the training numerals alone (Adam 1e-3, batches of 16,
    ``steps`` updates, h = 0); the EM mixture of Gaussians (log space, the LM's K) with the training
    precision frequencies, as the ``mog`` head is initialised. References for the rows' "class" and
    "which numeral" columns, not bounds: a model that reads the context can do better."""
    train_values, train_precisions, train_digits, train_tokens = numerals_of(tokenizer,
                                                                             corpus["train"]["text"])
    test_values, test_precisions, test_digits, _ = numerals_of(tokenizer, corpus["test"]["text"])
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    digits = DigitRNN(1, digit_embedding_size=50, digit_hidden_size=50)
    digits.init_weights(0.1)
    optimizer = torch.optim.Adam(digits.parameters(), lr=1e-3)
    for _ in range(steps):
        batch = train_digits[torch.randint(len(train_digits), (16,), generator=generator)]
        loss = -digits.log_prob(torch.zeros(16, 1), batch).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    mixture = NumeralMixture(1, num_components,
                             transform="log").initialize_from(train_values, train_precisions)
    with torch.no_grad():
        digit_nats = -float(digits.log_prob(torch.zeros(len(test_digits), 1), test_digits).mean())
        mog_nats = -float(mixture.log_prob(torch.zeros(len(test_values), 1), test_values,
                                           test_precisions).mean())
    return [
        {"case": "reference_class_unigram", "value": round(-math.log(len(train_values) / train_tokens), 3),
         "unit": "nats per test numeral", "better": "lower"},
        {"case": "reference_digit_rnn_no_context", "value": round(digit_nats, 3),
         "unit": "nats per test numeral", "better": "lower", "steps": steps},
        {"case": "reference_mog_no_context", "value": round(mog_nats, 3), "unit": "nats per test numeral",
         "better": "lower", "components": num_components},
    ]


def worst_predictions(predictions: list[dict], token_texts: list[str],
                      count: int = 3) -> tuple[float, list[dict]]:
    """The share of the MAPE that the worst 1% of ``predictions`` make (by absolute percentage error; a
    reference of 0 is left out, as the metric leaves it out), and the ``count`` worst, with five tokens
    of context."""
    scored = sorted(((abs(p["prediction"] - p["value"]) / abs(p["value"]), p)
                     for p in predictions if p["value"]),
                    key=lambda pair: pair[0], reverse=True)
    share = (sum(error for error, _ in scored[: max(1, len(scored) // 100)])
             / sum(error for error, _ in scored))
    return share, [{"context": " ".join(token_texts[max(0, p["index"] - 5): p["index"]]), "value": p["value"],
                    "prediction": float(f"{p['prediction']:.4g}")} for _, p in scored[:count]]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--quick", action="store_true", help="a slice of the corpus, one epoch per row")
    parser.add_argument("--corpus", choices=("sotu", "drop"), default="sotu",
                        help="State of the Union addresses, or the DROP passages (hf-nlm download drop)")
    parser.add_argument("--split", choices=("year", "speech"), default="year",
                        help="SOTU split: by year as load_sotu does, or every 20th speech to test")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="top-K tokens (the recipes': 5000; paper: 1000 clinical, 5000 arXiv)")
    parser.add_argument("--hidden-size", type=int, default=None,
                        help="LSTM units and embedding size (the recipes' and the paper's: 50)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="Adam learning rate (the recipes' and the paper's: 1e-3)")
    parser.add_argument("--numeral-loss-weight", type=float, default=None,
                        help="weight of a numeral target's NLL in the training loss (a word's is 1, the "
                             "recipes' numeral weight too)")
    parser.add_argument("--mog-trainable", action="store_true",
                        help="train the MoG's means and deviations after EM's start (mog, combination)")
    parser.add_argument("--batch-size", type=int, default=None, help="stream columns (the recipes': 32)")
    parser.add_argument("--bptt", type=int, default=None, help="BPTT length (the recipes': 50)")
    for split in ("train", "validation", "test"):
        parser.add_argument(f"--{split}-file", nargs="+", default=None,
                            help=f"{split} text files instead of SOTU")
    # Rows are compared at equal epochs (early stopping may end one sooner), not equal time: on a
    # shared machine a time budget would give each strategy a different amount of training.
    parser.add_argument("--saved-runs", action="store_true",
                        help="evaluate the models an earlier run of this command saved under --output-dir, "
                             "without training")
    add_training_arguments(parser, epochs=None, time_budget=0.0)
    args = parser.parse_args(argv)
    table_start = time.perf_counter()
    # A DROP passage is about ten SOTU paragraphs long.
    quick_lines = (300, 30) if args.corpus == "drop" else (3000, 300)
    out, suffix, corpus = start_training_run(args, load_corpus(args), quick_lines=quick_lines)
    if args.corpus == "drop":
        suffix = f"_drop{suffix}"
    elif args.split != "year":
        suffix = f"_{args.split}{suffix}"
    settings = recipe_overrides(args)
    if args.quick:
        settings["num_epochs"] = min(settings.get("num_epochs", 1), 1)
    # The recipe's corpus, or the split files of the data this script derives (rows evaluated on the same).
    if args.train_file:
        data = {f"{split}_file": getattr(args, f"{split}_file") for split in ("train", "validation", "test")
                if getattr(args, f"{split}_file")}
    elif args.quick or args.split != "year":
        data = {"corpus": "text", **write_splits(corpus, out / f"data_numeracy{suffix}")}
        corpus = load_text_files(train=data["train_file"], validation=data["validation_file"],
                                 test=data["test_file"])
    else:
        data = {}
    recipe_corpus = "drop" if args.corpus == "drop" else "sotu"
    context: dict = {}

    def describe(tokenizer, spec) -> None:
        """The fields every row carries, from the first row's tokenizer (each row trains the same one)."""
        context["common"] = {
            **run_context(args, vocab_size=len(tokenizer), hidden_size=spec.model["hidden_size"]),
            "corpus": "files" if args.train_file else args.corpus,
            "split": None if args.train_file or args.corpus != "sotu" else args.split,
            "cpu": machine(), "epochs_asked": spec.training.num_epochs,
            "numerals_in_vocab": len(tokenizer.numeral_vocab) - 1,
            "learning_rate": spec.training.learning_rate,
            "numeral_loss_weight": spec.model["numeral_loss_weight"],
            "mog_trainable": spec.model["mog_trainable"], "bptt": spec.training.block_size,
        }
        context["tokenizer"] = tokenizer
        context["train_values"] = numerals_of(tokenizer, corpus["train"]["text"])[0].tolist()
        context["token_texts"] = stream_token_texts(list(corpus["test"]["text"]), tokenizer)

    def run(strategy: str) -> dict:
        recipe = table_recipe_name(recipe_corpus, strategy)
        spec = RunSpec.from_recipe(recipe=recipe, output_dir=str(out / f"runs_numeracy{suffix}" / strategy),
                                   overwrite_output_dir=True, progress_bar=False, **data, **settings)
        if args.saved_runs:  # what an earlier run of this command trained and saved there
            model, tokenizer = load_run(spec.training.output_dir)
            results = json.loads((Path(spec.training.output_dir) / "results.json").read_text())
            train_s = results["elapsed_s"]
        else:
            start = time.perf_counter()
            result = train(spec)
            model, tokenizer, results = result.model, result.tokenizer, result.metrics
            train_s = time.perf_counter() - start
        model.eval()
        log(f"{recipe}: {model.num_parameters():,} parameters")
        if not context:
            describe(tokenizer, spec)
        common, bptt = context["common"], spec.training.block_size
        test = evaluate_lm(model, corpus["test"], tokenizer, block_size=bptt, batch_size=1)
        cost = numeral_cost_breakdown(model, tokenizer, corpus["test"], block_size=bptt)
        predictions = predict_numbers(model, tokenizer, corpus["test"], statistic="median", block_size=bptt)
        numbers = number_prediction_report([p["prediction"] for p in predictions],
                                           [p["value"] for p in predictions],
                                           train_values=context["train_values"])
        worst_share, worst = worst_predictions(predictions, context["token_texts"])
        anomaly = numeral_anomaly_auc(model, tokenizer, list(corpus["test"]["text"]), block_size=bptt)
        row = {
            "case": strategy, "recipe": recipe, "value": round(test["adjusted_perplexity_numerals"], 2),
            "unit": "APP numerals",
            "better": "lower", **{key: round(test[key], 2) for key, _ in FIGURES if test[key] is not None},
            **{key: test[key] for key in ("num_tokens", "num_numerals", "num_unknown_words",
                                           "num_unknown_numerals", "num_oov_word_types",
                                           "num_oov_numeral_types")},
            **{key: round(numbers[key], 4) for key in NUMBER_FIGURES if numbers.get(key) is not None},
            **{key: round(cost[key], 3) for key, _ in COST_FIGURES if cost[key] is not None},
            "mape_share_of_worst_1pct": round(worst_share, 3), "worst_predictions": worst,
            "anomaly_auc": round(anomaly["auc"], 4), "anomaly_pairs": anomaly["num_pairs"],
            **{f"anomaly_auc_{name}": round(c["auc"], 4) for name, c in anomaly["corruptions"].items()
               if c["auc"] is not None},
            "train_time_s": round(train_s, 1), "epochs": results["epochs_completed"],
            "stop_reason": results["stop_reason"], "num_parameters": model.num_parameters(), **common,
        }
        emit(row)
        return row

    rows = [run(strategy) for strategy in args.strategies]
    common = context["common"]
    references = [{**ref, **common} for ref in context_free_references(context["tokenizer"], corpus,
                                                                       NumeracyLMConfig().mog_components)]
    for ref in references:
        emit(ref)
    checks = target_checks({r["case"]: r for r in rows}, common)
    if args.quick:
        elapsed = time.perf_counter() - table_start
        checks.append({"case": "quick_table_time", "value": round(elapsed, 1), "unit": "s", "better": "lower",
                       "target": 900.0, "met": elapsed <= 900.0, "strategies": len(rows), **common})
    for check in checks:
        emit(check)
    write_table(rows, references, checks, out / f"numeracy_table{suffix}.md", args, common)
    (out / f"numeracy_table{suffix}.json").write_text(
        json.dumps({"rows": rows, "references": references, "checks": checks}, indent=1))
    return rows


def target_checks(rows: dict[str, dict], common: dict) -> list[dict]:
    """The targets among the rows present: every hierarchical strategy's numeral APP at least 10x below
    the softmax's; every strategy's word APP within 5% of the softmax's; the open d-RNN and combination
    below the best closed strategy on numeral APP; the combination's the lowest of all; the MoG's MAPE the
    lowest of all and below the always-the-training-median baseline's."""
    checks = []

    def check(case: str, value: float, better: str, target: float, met: bool) -> None:
        checks.append({"case": case, "value": value,
                       "unit": "x" if better == "higher" or "ratio" in case else "%",
                       "better": better, "target": target, "met": met, **common})

    app = {name: row["adjusted_perplexity_numerals"] for name, row in rows.items()}
    if "softmax" in app:
        for name in HIERARCHICAL:
            if name in app:
                gain = app["softmax"] / app[name]
                check(f"softmax_over_{name}_numeral_app", round(gain, 2), "higher", 10.0, gain >= 10.0)
    if "softmax" in rows:
        for name in rows:
            if name != "softmax":
                ratio = rows[name]["adjusted_perplexity_words"] / rows["softmax"]["adjusted_perplexity_words"]
                check(f"{name}_over_softmax_word_app_ratio", round(ratio, 4), "lower", 1.05, ratio <= 1.05)
    closed = [app[name] for name in CLOSED if name in app]
    for name in OPEN:
        if name in app and closed:
            ratio = app[name] / min(closed)
            check(f"{name}_over_best_closed_numeral_app_ratio", round(ratio, 3), "lower", 1.0, ratio < 1.0)
    if "combination" in app and len(app) > 1:
        best_other = min(value for name, value in app.items() if name != "combination")
        ratio = app["combination"] / best_other
        check("combination_over_best_other_numeral_app_ratio", round(ratio, 3), "lower", 1.0, ratio < 1.0)
    mape = {name: row["mape"] for name, row in rows.items() if "mape" in row}
    if "mog" in mape and len(mape) > 1:
        best_other = min(value for name, value in mape.items() if name != "mog")
        ratio = mape["mog"] / best_other
        check("mog_over_best_other_mape_ratio", round(ratio, 3), "lower", 1.0, ratio < 1.0)
        baseline = rows["mog"]["mape_median_baseline"]
        check("mog_over_median_baseline_mape_ratio", round(mape["mog"] / baseline, 3), "lower", 1.0,
              mape["mog"] < baseline)
    return checks


def write_table(rows: list[dict], references: list[dict], checks: list[dict], path, args,
                common: dict) -> None:
    columns = ["strategy", "params", "epochs", "train time", *[label for _, label in FIGURES], "MAPE",
               "MdAPE", "LogMAE", "exponent acc."]
    cells = [[r["case"], f"{r['num_parameters']:,}", r["epochs"], f"{r['train_time_s']:.0f} s",
              *[f"{r[key]:,.2f}" if key in r else "-" for key, _ in (*FIGURES, ("mape", ""), ("mdape", ""))],
              f"{r['logmae']:.3f}" if r.get("logmae") is not None else "-",
              f"{r['exponent_accuracy']:.3f}" if r.get("exponent_accuracy") is not None else "-"]
             for r in rows]
    cost_columns = ["strategy", *[f"{label} (nats)" for _, label in COST_FIGURES], "anomaly AUC",
                    "share of MAPE from the worst 1%", "worst prediction (context [true] -> predicted)"]
    cost_cells = [[r["case"], *[f"{r[key]:.3f}" if key in r else "-" for key, _ in COST_FIGURES],
                   f"{r['anomaly_auc']:.3f}" if "anomaly_auc" in r else "-",
                   f"{r['mape_share_of_worst_1pct']:.0%}",
                   "; ".join(f"{w['context']} [{w['value']:g}] -> {w['prediction']:g}"
                             for w in r["worst_predictions"][:1])]
                  for r in rows]
    first = rows[0]
    notes = [
        f"Test split: {first['num_tokens']:,} tokens, {first['num_numerals']:,} numerals; "
        f"{first['num_unknown_words']:,} <unk_word> targets standing for {first['num_oov_word_types']:,} "
        f"word types, {first['num_unknown_numerals']:,} <unk_num> targets for "
        f"{first['num_oov_numeral_types']:,} numeral types.",
        *([f"Point predictions by the median of each model's distribution; baselines: always the training "
           f"mean (MAPE {first['mape_mean_baseline']:,.2f}, MdAPE {first['mdape_mean_baseline']:,.2f}), "
           f"always the training median (MAPE {first['mape_median_baseline']:,.2f}, "
           f"MdAPE {first['mdape_median_baseline']:,.2f})."]
          if "mape_mean_baseline" in first else []),
        "Second table: nats per test numeral; -log p(numeral | h) (class) plus the rest (which numeral; "
        "<unk_num> charged log(OOV numeral types) as APP does) is log APP numerals. Anomaly AUC: one numeral "
        "per test line replaced by x10, /10, a digit swap or a random magnitude, the share of pairs where "
        "the corrupted number is more surprising (numeral_anomaly_auc; Berg-Kirkpatrick & Spokoyny 2020). "
        "Context-free references: "
        + ", ".join(f"{r['case'].removeprefix('reference_')} {r['value']:.3f}" for r in references)
        + " nats.",
        *[f"{c['case']}: {c['value']} (target {'>=' if c['better'] == 'higher' else '<='} {c['target']}: "
          f"{'met' if c['met'] else 'MISSED'})" for c in checks],
    ]
    split = f", split by {common['split']}" if common.get("split") else ""
    write_report(
        path,
        f"Numeracy LM strategies on {common['corpus'].upper()} test{split}; {common['vocab_size']:,} tokens "
        f"({common['numerals_in_vocab']:,} numerals), LSTM {common['hidden_size']}, up to "
        f"{common['epochs_asked']} epochs per row (Adam {common['learning_rate']}, early stopping; recipes "
        f"{', '.join(r['recipe'] for r in rows)}) on CPU ({common['threads']} threads)",
        (columns, cells), (cost_columns, cost_cells), notes=notes,
        quick="a slice of the corpus, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
