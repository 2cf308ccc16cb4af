"""AWD-LSTM on Penn Treebank next to a plain LSTM LM of the same size, under the same time budget.

S. Merity, N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018.
Both rows are ``AWDLSTMForCausalLM`` trained by ``hf_nlm.training.train_lm`` with the paper's loop --
stateful truncated BPTT over 20 columns (``--batch-size``), SGD with gradient clipping 0.25, weight
decay 1.2e-6, tied embeddings, variable BPTT around 70 with the rate scaled by length / 70 -- and
differ only in regularisation:

* ``AWD-LSTM``: the paper's PTB regularisers (weight drop 0.5 on U, locked dropout 0.4 on inputs,
  0.25 between layers, 0.4 on outputs, embedding dropout 0.1, AR 2, TAR 1) and NT-ASGD (n = 5);
* ``LSTM (plain)``: the same network with every regulariser off and plain SGD.

``--reg-scale s`` multiplies every dropout probability and the weight drop of the AWD-LSTM row by s,
``--ar-scale`` its AR and TAR weights: the paper's values are tuned for 3 x 1150 units and 500 epochs, and
a 2 x 400 network trained for 20 minutes underfits under them. ``--nonmono`` is NT-ASGD's trigger,
``--rows`` picks rows (``awd``, ``plain``) so that a sweep can run rows as separate processes side by side.

After training, each row is also scored with the neural cache pointer (Grave et al. 2017;
``hf_nlm.evaluation.neural_cache``), window ``--cache-window``, theta and lambda picked on validation from a
small grid, and its validation curve is kept (``curve``: ``[epochs trained, validation perplexity]`` after
each epoch and where the budget stopped it, on 10 columns, as the training loop measures it). A row stops when
its budget is spent, in the middle of an epoch if need be (``TrainingConfig.max_time_within_epoch``), so the
rows train for the same time; ``--whole-epochs`` is the older rule.

``--config cpu`` (default) is sized for a 2-core CPU: 2 layers, embedding 200, hidden 400, a fixed
time budget per row (``--time-budget``); ``--config paper`` is the paper's model (3 layers, 400 /
1150, lr 30, up to 500 epochs + NT-ASGD), meant for a GPU. ``--quick``: a slice of PTB, a minute per row.
The test (and validation) perplexities reported are recomputed after training with the state carried
over the whole split, batch 1 (exact; the per-epoch validation during training uses 10 columns).

Prints one JSON line per row and one for the ratio AWD / plain test perplexity; writes
``ptb_awd[_quick].md`` / ``.json`` into ``--output-dir``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from common import add_run_arguments, emit_json, log, machine, run_context, start_training_run, write_report

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.data import load_ptb
from hf_nlm.evaluation import evaluate_lm
from hf_nlm.evaluation.neural_cache import evaluate_with_neural_cache
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm

BENCHMARK = "ptb_awd"
SIZES = {
    "cpu": dict(num_hidden_layers=2, embedding_size=200, hidden_size=400),
    "paper": dict(num_hidden_layers=3, embedding_size=400, hidden_size=1150),
}
PTB_REGULARISATION = dict(dropout=0.4, dropout_hidden=0.25, dropout_input=0.4, dropout_embedding=0.1,
                          weight_drop=0.5, alpha=2.0, beta=1.0)
NO_REGULARISATION = {k: 0.0 for k in PTB_REGULARISATION}
ROWS = {"awd": "AWD-LSTM", "plain": "LSTM (plain)"}
# (theta, lambda) tried on validation
CACHE_GRID = [(theta, lam) for theta in (0.3, 1.0) for lam in (0.1, 0.2)]


def scaled(regularisation: dict, scale: float, ar_scale: float = 1.0) -> dict:
    """The dropout probabilities and the weight drop times ``scale``; AR (alpha) and TAR (beta) times
    ``ar_scale``."""
    return {k: round(v * (ar_scale if k in ("alpha", "beta") else scale), 4)
            for k, v in regularisation.items()}


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
    parser.add_argument("--config", choices=sorted(SIZES), default="cpu", help="model size (default: cpu)")
    parser.add_argument("--quick", action="store_true", help="a slice of PTB, about a minute per row")
    parser.add_argument("--time-budget", type=float, default=1200.0,
                        help="seconds per row, evaluations during training included (default: 1200); "
                             "a row stops in the middle of an epoch when it is spent "
                             "and validates where it stopped")
    parser.add_argument("--whole-epochs", action="store_true",
                        help="the older rule: start no epoch that would end after the budget "
                             "(rows then differ in training time by up to an epoch)")
    parser.add_argument("--epochs", type=int, default=500, help="maximum epochs per row (default: 500)")
    parser.add_argument("--learning-rate", type=float, default=30.0, help="SGD learning rate (paper: 30)")
    parser.add_argument("--batch-size", type=int, default=20, help="stream columns (paper, PTB: 20)")
    parser.add_argument("--bptt", type=int, default=70, help="mean BPTT length (paper: 70)")
    parser.add_argument("--reg-scale", type=float, default=1.0,
                        help="AWD row: dropouts and weight drop x this")
    parser.add_argument("--ar-scale", type=float, default=1.0,
                        help="AWD row: AR (alpha) and TAR (beta) x this")
    parser.add_argument("--nonmono", type=int, default=5,
                        help="AWD row: NT-ASGD's non-monotone interval (paper: 5)")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS), help="rows to run")
    parser.add_argument("--cache-window", type=int, default=500,
                        help="neural cache window (AWD-LSTM on PTB: 500)")
    add_run_arguments(parser)
    parser.add_argument("--parallel", action="store_true",
                        help="run the rows side by side, one process and --threads threads each (default 1)")
    args = parser.parse_args(argv)
    if args.quick:
        args.time_budget = min(args.time_budget, 60.0)
    if args.parallel:
        args.threads = args.threads or 1
        with ProcessPoolExecutor(len(args.rows), mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(run_row, args.rows, [args] * len(args.rows)))
    else:
        rows = [run_row(key, args) for key in args.rows]
    if len(rows) < 2:
        return rows
    out, suffix, common = Path(args.output_dir), "_quick" if args.quick else "", rows[0]["context"]
    ratio = {"case": "awd_vs_plain_test_ppl", "value": round(rows[0]["value"] / rows[1]["value"], 3),
             "unit": "x", "better": "lower",
             "cache_ratio": round(rows[0]["cache_test_ppl"] / rows[1]["cache_test_ppl"], 3), **common}
    emit(ratio)
    write_table(rows, ratio, out / f"ptb_awd{suffix}.md", args, common)
    (out / f"ptb_awd{suffix}.json").write_text(json.dumps({"rows": rows, "ratio": ratio}, indent=1))
    return rows


def run_row(key: str, args: argparse.Namespace) -> dict:
    """Train and score one row (``awd`` or ``plain``); emit and return its JSON row."""
    out, suffix, corpus = start_training_run(args, load_ptb, quick_lines=(4000, 400))
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"])  # PTB is already cut to 10k words
    special = dict(bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.eos_token_id)
    common = {**run_context(args, config=args.config, vocab_size=len(tokenizer)), "cpu": machine(),
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "time_budget_s": args.time_budget, "parallel": args.parallel, **SIZES[args.config]}
    case = ROWS[key]
    regularisation, nt_asgd = ((scaled(PTB_REGULARISATION, args.reg_scale, args.ar_scale), True)
                               if key == "awd" else (NO_REGULARISATION, False))
    run_dir = out / f"runs_ptb_awd{suffix}" / key
    torch.manual_seed(0)
    config = AWDLSTMConfig(vocab_size=len(tokenizer), **SIZES[args.config], **regularisation, **special)
    model = AWDLSTMForCausalLM(config)
    training = TrainingConfig(
        output_dir=str(run_dir), overwrite_output_dir=True,
        block_size=args.bptt, batch_size=args.batch_size, eval_batch_size=10, variable_bptt=True,
        num_epochs=args.epochs, max_time_s=args.time_budget, max_time_within_epoch=not args.whole_epochs,
        optimizer="sgd", learning_rate=args.learning_rate, lr_scheduler="constant", weight_decay=1.2e-6,
        max_grad_norm=0.25, nt_asgd=nt_asgd, nonmono=args.nonmono, early_stopping_patience=None,
        logging_steps=100, save_total_limit=1, progress_bar=False, eval_test=False,
    )
    log(f"{case}: {model.num_parameters():,} parameters")
    start = time.perf_counter()
    results = train_lm(model, tokenizer, corpus, training, dataset_name="ptb")
    train_s = time.perf_counter() - start
    exact = {split: evaluate_lm(model, corpus[split], tokenizer, block_size=args.bptt, batch_size=1)
             for split in ("validation", "test")}
    curve = validation_curve(run_dir)
    row = {
        "case": case, "value": round(exact["test"]["perplexity"], 2), "unit": "ppl", "better": "lower",
        "valid_ppl": round(exact["validation"]["perplexity"], 2), "train_time_s": round(train_s, 1),
        "epochs": curve[-1][0] if curve else 0, "stop_reason": results["stop_reason"],
        "averaging_since_step": results["averaging_since_step"], "global_step": results["global_step"],
        "tokens_per_s": round(results["train_tokens"] / train_s, 1),
        "num_parameters": model.num_parameters(), "regularisation": regularisation,
        "nonmono": args.nonmono if nt_asgd else None,
        "curve": curve, **cache_results(model, corpus, tokenizer, args.cache_window), **common,
    }
    emit(row)
    return {**row, "context": common}


def write_table(rows: list[dict], ratio: dict, path: Path, args, common: dict) -> None:
    hardware = common["gpu"] or f"CPU ({common['threads']} threads)"
    columns = ["model", "params", "epochs", "NT-ASGD averaging from update", "train time", "tokens/s",
               "valid ppl", "test ppl", "test ppl + neural cache (theta, lambda)",
               "validation ppl after (epochs: ppl)"]
    cells = [
        [r["case"], f"{r['num_parameters']:,}", r["epochs"],
         "" if r["averaging_since_step"] is None else f"{r['averaging_since_step']:,}",
         f"{r['train_time_s']:.0f} s", f"{r['tokens_per_s']:,.0f}", f"{r['valid_ppl']:.1f}",
         f"{r['value']:.1f}", f"{r['cache_test_ppl']:.1f} ({r['cache_theta']}, {r['cache_lambda']})",
         ", ".join(f"{e:g}: {p}" for e, p in r["curve"])]
        for r in rows
    ]
    write_report(
        path,
        f"Penn Treebank (Mikolov's files), |V| = {common['vocab_size']:,}; config {args.config}: "
        f"{common['num_hidden_layers']} layers, embedding {common['embedding_size']}, "
        f"hidden {common['hidden_size']}; {args.time_budget:.0f} s per row on {hardware}",
        (columns, cells),
        notes=[f"AWD-LSTM regularisation: {rows[0]['regularisation']}, NT-ASGD nonmono {rows[0]['nonmono']}",
               f"AWD-LSTM / plain LSTM test perplexity: {ratio['value']} "
               f"(with the neural cache: {ratio['cache_ratio']})"],
        quick="a slice of PTB, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
