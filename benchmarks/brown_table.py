"""Bengio et al. (2003), Table 1 on the Brown corpus, reproduced side by side with the paper.

Every MLP row is a named recipe of ``hf_nlm.models.nplm`` (``hf-nlm recipes`` lists them), run by
``train(RunSpec.from_recipe(recipe=NAME, output_dir=...))``, so ``hf-nlm train --recipe NAME`` trains the
same row. All train on the paper's split (first 800,000 words train, next 200,000 validation, the rest test)
with the words seen <= 3 times in the training split merged into ``<unk>``:

* MLP1, MLP3, MLP5, MLP7, MLP9 (``brown-mlp1`` ... ``brown-mlp9``): NPLMs with the paper's (n, h, m, direct)
  settings and the paper's SGD (eps_t = eps_0 / (1 + r t), eps_0 = 1e-3 per example, r = 1e-8, weight decay
  1e-4, early stopping on validation), for the epochs each recipe gives;
* MLP10 (``brown-mlp10``): MLP9 mixed with the deleted-interpolation trigram, a = 0.5 (the paper's "mix"),
  computed by ``train()`` (``TrainingConfig.ngram_mixture_order`` / ``_smoothing`` / ``_weight``);
* the adam table (``--tables adam``): MLP1, MLP9, MLP10 with AdamW at a constant 1e-3 (``brown-mlp1-adam``,
  ``brown-mlp9-adam``, ``brown-mlp10-adam``);
* the n-gram rows, which train nothing: interpolated (Jelinek-Mercer) trigram, Kneser-Ney 3-, 4-, 5-gram,
  fitted here with the library's n-gram code on the same split and tokenizer.

MLP10's recipe trains MLP9 with the same settings as MLP9's and then mixes it; when both rows are asked for,
the MLP9 row reads the model's own figures from that one run instead of training it twice. Every token is
predicted, sentence ends (<eos>) and <unk> included, as in ``hf_nlm.evaluation.evaluate_lm``, so our
perplexities are not on exactly the paper's footing: the paper's are the reference points, not targets.

``--resume`` continues each MLP row from the last checkpoint of an earlier run with the same ``--output-dir``.
Prints one JSON line per row on stdout (progress on stderr) and writes ``brown_table.md`` and
``brown_table.json`` into ``--output-dir``. ``--quick`` runs the recipes for one epoch on a slice of the data
(minutes).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import add_run_arguments, emit_json, log, quick_split_files, run_context, start_run, write_report

from hf_nlm.models import MODEL_TYPES
from hf_nlm.ngram import InterpolatedLM, KneserNeyLM
from hf_nlm.training import RunSpec, train
from hf_nlm.training.run import train_tokenizer

BENCHMARK = "brown_table"

#: Each table's rows and the recipe behind each.
TABLES = {
    "paper": {"MLP1": "brown-mlp1", "MLP3": "brown-mlp3", "MLP5": "brown-mlp5", "MLP7": "brown-mlp7",
              "MLP9": "brown-mlp9", "MLP10": "brown-mlp10"},
    "adam": {"MLP1": "brown-mlp1-adam", "MLP9": "brown-mlp9-adam", "MLP10": "brown-mlp10-adam"},
}
#: A recipe whose model another recipe's run trains with the same settings before mixing it with the trigram.
MIXED_IN = {"brown-mlp9": "brown-mlp10", "brown-mlp9-adam": "brown-mlp10-adam"}
#: name: (smoothing, order, paper test perplexity). Bengio et al. 2003, Table 1.
NGRAM_ROWS = {"Del. Int. (trigram)": ("interpolated", 3, 336), "Kneser-Ney 3-gram": ("kn", 3, 323),
              "Kneser-Ney 4-gram": ("kn", 4, 321), "Kneser-Ney 5-gram": ("kn", 5, 321)}
MLP_ROWS = list(TABLES["paper"])
QUICK_LINES = (2500, 800)


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def recipe_spec(name: str, out: Path, suffix: str, args, quick_files: dict) -> RunSpec:
    """The spec of recipe ``name``: its run folder under ``out``; under ``--quick`` one epoch on the slice."""
    run_dir = out / f"runs{suffix}" / name
    resume = args.resume and (run_dir / "checkpoints").is_dir()
    quick = {**quick_files, "num_epochs": 1} if args.quick else {}
    return RunSpec.from_recipe(recipe=name, output_dir=str(run_dir), overwrite_output_dir=not resume,
                               resume_from_checkpoint="latest" if resume else None, save_total_limit=1,
                               progress_bar=False, **quick)


def mlp_row(case: str, table: str, name: str, result, seconds: float, mixed: bool, common: dict) -> dict:
    """The JSON row of an MLP (``mixed``: the mixture's figures of an MLP10 run)."""
    metrics, model = result.metrics, result.model
    recipe = MODEL_TYPES["nplm"].recipe(name)
    config = model.config
    figures = metrics["ngram_baseline"]["mixture"] if mixed else metrics
    row = {"case": case, "recipe": table, "recipe_name": name, "value": figures["test"]["perplexity"],
           "unit": "ppl", "better": "lower", "valid_ppl": figures["validation"]["perplexity"],
           "paper_test_ppl": recipe.paper["mixture_test_perplexity" if mixed else "test_perplexity"],
           "n": config.context_size + 1, "h": config.hidden_size, "m": config.embedding_size,
           "direct": config.direct_connections, "mix": mixed, "dropout": config.dropout,
           "num_parameters": model.num_parameters(), "train_time_s": round(seconds, 1),
           "epochs": metrics["epochs_completed"], "best_epoch": metrics.get("best_epoch"),
           "stop_reason": metrics["stop_reason"], **common}
    if mixed:
        row["mix_weight"] = metrics["ngram_baseline"]["mixture"]["weight"]
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one epoch of each recipe on a slice of the data")
    parser.add_argument("--rows", nargs="+", default=[*MLP_ROWS, *NGRAM_ROWS], help="rows to run")
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES),
                        help="the tables whose MLP rows run: paper (the paper's SGD), adam")
    parser.add_argument("--resume", action="store_true",
                        help="continue each MLP row from its last checkpoint")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    out = start_run(args, BENCHMARK)
    suffix = "_quick" if args.quick else ""
    # The corpus and tokenizer every recipe of the table reads (they share both), for the n-gram rows.
    base = RunSpec.from_recipe(recipe="brown-mlp1", output_dir=str(out / f"runs{suffix}"))
    corpus = base.data.load()
    quick_files = quick_split_files(corpus, out / "brown_quick_data", QUICK_LINES) if args.quick else {}
    if args.quick:
        base = base.replace(corpus=None, **quick_files)
        corpus = base.data.load()
    _, tokenizer = train_tokenizer(base, corpus["train"]["text"])
    log(f"brown: {len(corpus['train']):,} training lines, |V| = {len(tokenizer):,}")
    common = run_context(args, vocab_size=len(tokenizer))

    rows: list[dict] = []
    for table in args.tables:
        recipes = {case: name for case, name in TABLES[table].items() if case in args.rows}
        asked = set(recipes.values())
        for case, name in recipes.items():
            if MIXED_IN.get(name) in asked:
                continue  # its row comes from the mixture's run
            log(f"{case} ({table}): recipe {name}")
            start = time.perf_counter()
            result = train(recipe_spec(name, out, suffix, args, quick_files))
            seconds = time.perf_counter() - start
            mixed = result.spec.training.ngram_mixture
            if mixed:
                included = next((c for c, n in recipes.items() if MIXED_IN.get(n) == name), None)
                if included is not None:  # the model before its mixture
                    rows.append(mlp_row(included, table, recipes[included], result, seconds, False, common))
                    emit(rows[-1])
            rows.append(mlp_row(case, table, name, result, seconds, mixed, common))
            emit(rows[-1])

    for name, (kind, order, paper) in NGRAM_ROWS.items():
        if name not in args.rows:
            continue
        start = time.perf_counter()
        if kind == "kn":
            lm = KneserNeyLM.from_texts(corpus["train"]["text"], tokenizer, order=order)
        else:
            lm = InterpolatedLM.from_texts(corpus["train"]["text"], tokenizer, order=order,
                                           valid_texts=corpus["validation"]["text"])
        seconds = time.perf_counter() - start
        valid, test = lm.evaluate(corpus["validation"], tokenizer), lm.evaluate(corpus["test"], tokenizer)
        row = {"case": name, "value": test["perplexity"], "unit": "ppl", "better": "lower",
               "valid_ppl": valid["perplexity"], "paper_test_ppl": paper, "order": order,
               "train_time_s": round(seconds, 1), **common}
        rows.append(row)
        emit(row)

    kn5 = next((r for r in rows if r["case"] == "Kneser-Ney 5-gram"), None)
    if kn5:
        for table in args.tables:
            by_case = {r["case"]: r for r in rows if r.get("recipe") == table}
            for case, target, paper_ratio in [("MLP1", 1.0, 268 / 321), ("MLP10", 0.85, 252 / 321)]:
                if case in by_case:
                    emit({"case": f"{case}_vs_kn5", "recipe": table,
                          "value": by_case[case]["value"] / kn5["value"], "unit": "x", "better": "lower",
                          "target": target, "paper_ratio": round(paper_ratio, 3), **common})

    if rows:
        write_table(rows, out / f"brown_table{suffix}.md", args)
        (out / f"brown_table{suffix}.json").write_text(json.dumps(rows, indent=1))
    return rows


def write_table(rows: list[dict], path: Path, args) -> None:
    def cells(r: dict) -> list:
        def cell(key, fmt="{}"):
            return fmt.format(r[key]) if key in r else ""

        def yes_no(key):
            return "yes" if r.get(key) else ("no" if key in r else "")

        return [r["case"], cell("recipe_name"), cell("n") or cell("order"), cell("h"), cell("m"),
                yes_no("direct"), yes_no("mix"), cell("num_parameters", "{:,}"), cell("epochs"),
                f"{r['train_time_s']:.0f} s", f"{r['valid_ppl']:.1f}", f"{r['value']:.1f}",
                r["paper_test_ppl"]]

    columns = ["model", "recipe", "n", "h", "m", "direct", "mix", "params", "epochs", "train time",
               "valid ppl", "test ppl", "paper test ppl"]
    write_report(
        path, f"Brown corpus, Bengio et al.'s split, words seen >= 4 times in the training split "
              f"(|V| = {rows[0]['vocab_size']:,} ids)",
        (columns, map(cells, rows)),
        quick="a slice of the data, one epoch per recipe" if args.quick else None,
    )


if __name__ == "__main__":
    main()
