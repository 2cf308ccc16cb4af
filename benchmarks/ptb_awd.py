"""AWD-LSTM on Penn Treebank next to a plain LSTM LM of the same size, under the same time budget.

S. Merity, N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018.
Both rows are ``AWDLSTMForCausalLM`` trained by ``hf_nlm.training.train_lm`` with the paper's loop --
stateful truncated BPTT over 20 columns (``--batch-size``), SGD with gradient clipping 0.25, weight
decay 1.2e-6, tied embeddings, variable BPTT around 70 with the rate scaled by length / 70 -- and
differ only in regularisation:

* ``AWD-LSTM``: the paper's PTB regularisers (weight drop 0.5 on U, locked dropout 0.4 on inputs,
  0.25 between layers, 0.4 on outputs, embedding dropout 0.1, AR 2, TAR 1) and NT-ASGD (n = 5);
* ``LSTM (plain)``: the same network with every regulariser off and plain SGD.

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
import time
from pathlib import Path

import torch
from common import add_run_arguments, emit_json, log, machine, run_context, start_training_run, write_report

from hf_nlm import AWDLSTMConfig, AWDLSTMForCausalLM
from hf_nlm.data import load_ptb
from hf_nlm.evaluation import evaluate_lm
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


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(SIZES), default="cpu", help="model size (default: cpu)")
    parser.add_argument("--quick", action="store_true", help="a slice of PTB, about a minute per row")
    parser.add_argument("--time-budget", type=float, default=1200.0,
                        help="seconds per row: no epoch is started that would end after it (default: 1200)")
    parser.add_argument("--epochs", type=int, default=500, help="maximum epochs per row (default: 500)")
    parser.add_argument("--learning-rate", type=float, default=30.0, help="SGD learning rate (paper: 30)")
    parser.add_argument("--batch-size", type=int, default=20, help="stream columns (paper, PTB: 20)")
    parser.add_argument("--bptt", type=int, default=70, help="mean BPTT length (paper: 70)")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    out, suffix, corpus = start_training_run(args, load_ptb, quick_lines=(4000, 400))
    if args.quick:
        args.time_budget = min(args.time_budget, 60.0)
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"])  # PTB is already cut to 10k words
    special = dict(bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.eos_token_id)
    common = {**run_context(args, config=args.config, vocab_size=len(tokenizer)), "cpu": machine(),
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "time_budget_s": args.time_budget, **SIZES[args.config]}

    def run(case: str, regularisation: dict, nt_asgd: bool) -> dict:
        torch.manual_seed(0)
        config = AWDLSTMConfig(vocab_size=len(tokenizer), **SIZES[args.config], **regularisation, **special)
        model = AWDLSTMForCausalLM(config)
        training = TrainingConfig(
            output_dir=str(out / f"runs_ptb_awd{suffix}" / case.split()[0].lower()), overwrite_output_dir=True,
            block_size=args.bptt, batch_size=args.batch_size, eval_batch_size=10, variable_bptt=True,
            num_epochs=args.epochs, max_time_s=args.time_budget, optimizer="sgd", learning_rate=args.learning_rate,
            lr_scheduler="constant", weight_decay=1.2e-6, max_grad_norm=0.25, nt_asgd=nt_asgd, nonmono=5,
            early_stopping_patience=None, logging_steps=100, save_total_limit=1, progress_bar=False, eval_test=False,
        )
        log(f"{case}: {model.num_parameters():,} parameters")
        start = time.perf_counter()
        results = train_lm(model, tokenizer, corpus, training, dataset_name="ptb")
        train_s = time.perf_counter() - start
        exact = {split: evaluate_lm(model, corpus[split], tokenizer, block_size=args.bptt, batch_size=1)
                 for split in ("validation", "test")}
        row = {
            "case": case, "value": round(exact["test"]["perplexity"], 2), "unit": "ppl", "better": "lower",
            "valid_ppl": round(exact["validation"]["perplexity"], 2), "train_time_s": round(train_s, 1),
            "epochs": results["epochs_completed"], "stop_reason": results["stop_reason"],
            "averaging_since_step": results["averaging_since_step"], "global_step": results["global_step"],
            "tokens_per_s": round(results["train_tokens"] / train_s, 1), "num_parameters": model.num_parameters(),
            **common,
        }
        emit(row)
        return row

    rows = [run("AWD-LSTM", PTB_REGULARISATION, nt_asgd=True), run("LSTM (plain)", NO_REGULARISATION, nt_asgd=False)]
    ratio = {"case": "awd_vs_plain_test_ppl", "value": round(rows[0]["value"] / rows[1]["value"], 3), "unit": "x",
             "better": "lower", **common}
    emit(ratio)
    write_table(rows, ratio, out / f"ptb_awd{suffix}.md", args, common)
    (out / f"ptb_awd{suffix}.json").write_text(json.dumps({"rows": rows, "ratio": ratio}, indent=1))
    return rows


def write_table(rows: list[dict], ratio: dict, path: Path, args, common: dict) -> None:
    hardware = common["gpu"] or f"CPU ({common['threads']} threads)"
    columns = ["model", "params", "epochs", "NT-ASGD averaging from update", "train time", "tokens/s", "valid ppl",
               "test ppl"]
    cells = [
        [r["case"], f"{r['num_parameters']:,}", r["epochs"],
         "" if r["averaging_since_step"] is None else f"{r['averaging_since_step']:,}", f"{r['train_time_s']:.0f} s",
         f"{r['tokens_per_s']:,.0f}", f"{r['valid_ppl']:.1f}", f"{r['value']:.1f}"]
        for r in rows
    ]
    write_report(
        path,
        f"Penn Treebank (Mikolov's files), |V| = {common['vocab_size']:,}; config {args.config}: "
        f"{common['num_hidden_layers']} layers, embedding {common['embedding_size']}, hidden {common['hidden_size']}; "
        f"{args.time_budget:.0f} s per row on {hardware}",
        (columns, cells),
        notes=[f"AWD-LSTM / plain LSTM test perplexity: {ratio['value']}"],
        quick="a slice of PTB, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
