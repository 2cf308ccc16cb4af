"""AWD-LSTM on Penn Treebank next to a plain LSTM LM of the same size.

S. Merity, N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018.
Every row is a named recipe of ``hf_nlm.models.awd_lstm`` (``hf-nlm recipes`` lists them), run by
``train(RunSpec.from_recipe(recipe=NAME, output_dir=...))``, so ``hf-nlm train --recipe NAME`` trains the same
row. The rows share the paper's loop -- stateful truncated BPTT over 20 columns, SGD at lr 30 with gradient
clipping 0.25, weight decay 1.2e-6, tied embeddings, variable BPTT around 70 with the rate scaled by
length / 70 -- on a CPU-sized network (2 layers, embedding 200, hidden 400), and differ in regularisation and
epochs:

* ``ptb-awd-lstm``: the paper's PTB dropouts and weight drop x 0.25 (weight drop 0.125 on U, locked dropout
  0.1 on inputs, 0.0625 between layers, 0.1 on outputs, embedding dropout 0.025), no AR / TAR, NT-ASGD
  (n = 5);
* ``ptb-lstm``: the same network with every regulariser off and plain SGD;
* ``ptb-sweep-*`` (``--rows``): the regularisation sweep's rows (dropout scales 0.1, 0.25, 0.5; AR / TAR x 1,
  0.25, 0); ``merity2018`` is the paper's own 3 x 1150 network, meant for a GPU.

After training, each row is also scored with the neural cache pointer (Grave et al. 2017;
``hf_nlm.evaluation.neural_cache``), window ``--cache-window``, theta and lambda picked on validation from a
small grid, and its validation curve is kept (``curve``: ``[epochs trained, validation perplexity]`` after
each epoch, on 10 columns, as the training loop measures it). The validation and test perplexities are the
run's own final ones, with the state carried over the whole split, batch 1 (exact). ``--rows`` picks recipes,
``--parallel`` runs them as separate processes side by side. ``--quick``: one epoch of each recipe on a slice
of PTB.

Prints one JSON line per row and, for two rows or more, one for the ratio of the first's test perplexity to
the second's; writes ``ptb_awd[_quick].md`` / ``.json`` into ``--output-dir``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from common import (
    add_run_arguments,
    emit_json,
    log,
    machine,
    quick_split_files,
    run_context,
    start_run,
    write_report,
)

from hf_nlm.evaluation.neural_cache import evaluate_with_neural_cache
from hf_nlm.models import MODEL_TYPES
from hf_nlm.training import RunSpec, train

BENCHMARK = "ptb_awd"
#: The main table's rows: the AWD-LSTM, then the plain LSTM.
ROWS = ["ptb-awd-lstm", "ptb-lstm"]
RECIPES = [name for name in MODEL_TYPES["awd_lstm"].recipes if name != "default"]
QUICK_LINES = (4000, 400)
# (theta, lambda) tried on validation
CACHE_GRID = [(theta, lam) for theta in (0.3, 1.0) for lam in (0.1, 0.2)]
REGULARISERS = ("dropout", "dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop", "alpha",
                "beta")


def validation_curve(run_dir: Path) -> list[list[float]]:
    """``[epochs trained, validation perplexity]`` after each epoch and at a mid-epoch stop, from
    ``log.jsonl``."""
    records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [[round(r["epoch"] + (r["type"] == "epoch"), 2), round(r["val_ppl"], 2)]
            for r in records if r.get("type") in ("epoch", "eval") and r.get("val_ppl") is not None]


def cache_results(model, corpus, tokenizer, window: int) -> dict:
    """Test perplexity with the neural cache, theta and lambda chosen on validation from ``CACHE_GRID``."""
    valid = {(theta, lam): evaluate_with_neural_cache(model, corpus["validation"], tokenizer, window=window,
                                                      theta=theta, lambda_=lam)["perplexity"]
             for theta, lam in CACHE_GRID}
    theta, lam = min(valid, key=valid.get)
    test = evaluate_with_neural_cache(model, corpus["test"], tokenizer, window=window, theta=theta,
                                      lambda_=lam)
    return {"cache_test_ppl": round(test["perplexity"], 2), "cache_valid_ppl": round(valid[theta, lam], 2),
            "cache_window": window, "cache_theta": theta, "cache_lambda": lam}


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one epoch of each recipe on a slice of PTB")
    parser.add_argument("--rows", nargs="+", choices=RECIPES, default=ROWS,
                        help=f"recipes to run (default: {' '.join(ROWS)})")
    parser.add_argument("--cache-window", type=int, default=500,
                        help="neural cache window (AWD-LSTM on PTB: 500)")
    add_run_arguments(parser)
    parser.add_argument("--parallel", action="store_true",
                        help="run the rows side by side, one process and --threads threads each (default 1)")
    args = parser.parse_args(argv)
    if args.parallel:
        args.threads = args.threads or 1
        with ProcessPoolExecutor(len(args.rows), mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(run_row, args.rows, [args] * len(args.rows)))
    else:
        rows = [run_row(name, args) for name in args.rows]
    if len(rows) < 2:
        return rows
    out, suffix, common = Path(args.output_dir), "_quick" if args.quick else "", rows[0]["context"]
    ratio = {"case": f"{rows[0]['case']}_vs_{rows[1]['case']}_test_ppl",
             "value": round(rows[0]["value"] / rows[1]["value"], 3), "unit": "x", "better": "lower",
             "cache_ratio": round(rows[0]["cache_test_ppl"] / rows[1]["cache_test_ppl"], 3), **common}
    emit(ratio)
    write_table(rows, ratio, out / f"ptb_awd{suffix}.md", args, common)
    (out / f"ptb_awd{suffix}.json").write_text(json.dumps({"rows": rows, "ratio": ratio}, indent=1))
    return rows


def run_row(name: str, args: argparse.Namespace) -> dict:
    """Train and score the row of recipe ``name``; emit and return its JSON row."""
    out = start_run(args)
    suffix = "_quick" if args.quick else ""
    run_dir = out / f"runs_ptb_awd{suffix}" / name
    quick = {}
    if args.quick:
        corpus = RunSpec.from_recipe(recipe=name, output_dir=str(run_dir)).data.load()
        quick = {**quick_split_files(corpus, out / "ptb_quick_data" / name, QUICK_LINES), "num_epochs": 1}
    spec = RunSpec.from_recipe(recipe=name, output_dir=str(run_dir), overwrite_output_dir=True,
                               save_total_limit=1, progress_bar=False, **quick)
    log(f"{name}: training")
    start = time.perf_counter()
    result = train(spec)
    train_s = time.perf_counter() - start
    model, tokenizer, results = result.model, result.tokenizer, result.metrics
    corpus = spec.data.load()
    config = model.config
    regularisation = {k: getattr(config, k) for k in REGULARISERS}
    nt_asgd = spec.training.nt_asgd
    common = {**run_context(args, vocab_size=len(tokenizer)), "cpu": machine(),
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "parallel": args.parallel, "num_hidden_layers": config.num_hidden_layers,
              "embedding_size": config.embedding_size, "hidden_size": config.hidden_size}
    curve = validation_curve(run_dir)
    row = {
        "case": name, "model": "AWD-LSTM" if nt_asgd else "LSTM (plain)",
        "value": round(results["test"]["perplexity"], 2), "unit": "ppl", "better": "lower",
        "valid_ppl": round(results["validation"]["perplexity"], 2), "train_time_s": round(train_s, 1),
        "epochs": results["epochs_completed"], "stop_reason": results["stop_reason"],
        "averaging_since_step": results["averaging_since_step"], "global_step": results["global_step"],
        "tokens_per_s": round(results["train_tokens"] / train_s, 1),
        "num_parameters": model.num_parameters(), "regularisation": regularisation,
        "nonmono": spec.training.nonmono if nt_asgd else None,
        "curve": curve, **cache_results(model, corpus, tokenizer, args.cache_window), **common,
    }
    emit(row)
    return {**row, "context": common}


def write_table(rows: list[dict], ratio: dict, path: Path, args, common: dict) -> None:
    hardware = common["gpu"] or f"CPU ({common['threads']} threads)"
    columns = ["recipe", "model", "params", "epochs", "NT-ASGD averaging from update", "train time",
               "tokens/s", "valid ppl", "test ppl", "test ppl + neural cache (theta, lambda)",
               "validation ppl after (epochs: ppl)"]
    cells = [
        [r["case"], r["model"], f"{r['num_parameters']:,}", r["epochs"],
         "" if r["averaging_since_step"] is None else f"{r['averaging_since_step']:,}",
         f"{r['train_time_s']:.0f} s", f"{r['tokens_per_s']:,.0f}", f"{r['valid_ppl']:.1f}",
         f"{r['value']:.1f}", f"{r['cache_test_ppl']:.1f} ({r['cache_theta']}, {r['cache_lambda']})",
         ", ".join(f"{e:g}: {p}" for e, p in r["curve"])]
        for r in rows
    ]
    write_report(
        path,
        f"Penn Treebank (Mikolov's files), |V| = {common['vocab_size']:,}; "
        f"{common['num_hidden_layers']} layers, embedding {common['embedding_size']}, "
        f"hidden {common['hidden_size']}; on {hardware}",
        (columns, cells),
        notes=[f"{r['case']} regularisation: {r['regularisation']}, NT-ASGD nonmono {r['nonmono']}"
               for r in rows] + [
               f"{rows[0]['case']} / {rows[1]['case']} test perplexity: {ratio['value']} "
               f"(with the neural cache: {ratio['cache_ratio']})"],
        quick="a slice of PTB, one epoch per recipe" if args.quick else None,
    )


if __name__ == "__main__":
    main()
