"""LBL vs HLBL with random, balanced, Huffman and data-built trees on Brown
(Mnih & Hinton 2008, Table 1 style).

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008. Rows, each trained
with the same settings (Adam, same epochs / time budget) on Bengio et al.'s Brown split:

* ``LBL``: the log-bilinear model with the full softmax (one feature table R for context and next word);
* ``HLBL random``: the LBL body with a tree softmax over a random tree (step 1 of the paper's recipe);
* ``HLBL huffman``: a Huffman tree over training-set word frequencies (word2vec's choice);
* ``HLBL balanced``, ``HLBL adaptive``, ``HLBL adaptive(eps)``: the paper's data-built trees (sec. 4),
  from each word's average predicted vector r_hat under the random-tree model, split by recursive
  two-component EM with the BALANCED, ADAPTIVE and ADAPTIVE(eps) rules; each a fresh HLBL.

Then the paper's comparisons as ratios with their targets, measured in this run: adaptive / random
perplexity (target <= 0.9), best HLBL / LBL perplexity (target <= 1.1) and LBL / best-HLBL training time
(target >= 10).

Prints one JSON line per row on stdout (progress on stderr); writes ``hlbl_trees.md`` / ``.json`` into
``--output-dir``. ``--quick``: a slice of the data (6,000 training sentences, D <= 50), 3 short epochs, a
minute or two: far from converged, it checks the pipeline, not the paper's claims. Training time is the wall
time of ``train_lm`` (training plus its per-epoch validation), on this machine's CPU threads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import add_training_arguments, emit_json, log, run_context, start_training_run, write_report

from hf_nlm import HLBLConfig, HLBLForCausalLM, LBLConfig, LBLForCausalLM
from hf_nlm.data import load_brown
from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.heads import tree_config_fields
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm
from hf_nlm.training.tree_recipe import build_data_tree, tree_summary
from hf_nlm.trees import huffman_tree, random_tree

BENCHMARK = "hlbl_trees"


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)



def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a slice of the data, 3 short epochs: a minute or two")
    parser.add_argument("--min-frequency", type=int, default=4,
                        help="keep words seen this often in the training split (Bengio et al.: 4)")
    parser.add_argument("--context-size", type=int, default=5, help="n - 1 (default: 5)")
    parser.add_argument("--dim", type=int, default=100, help="D, the feature vector size (default: 100)")
    parser.add_argument("--diagonal-context", action="store_true", help="diagonal C_i")
    parser.add_argument("--batch-size", type=int, default=32, help="blocks per update")
    parser.add_argument("--block-size", type=int, default=64, help="targets per block")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--eps", type=float, default=0.25, help="eps of the ADAPTIVE(eps) tree")
    add_training_arguments(parser, epochs=10, time_budget=1800.0)
    args = parser.parse_args(argv)
    out, suffix, corpus = start_training_run(args, load_brown, quick_lines=(6000, 600))
    if args.quick:
        args.epochs, args.time_budget, args.batch_size = (3, min(args.time_budget, 45.0),
                                                          min(args.batch_size, 16))
        args.learning_rate = max(args.learning_rate, 3e-3)
        args.min_frequency = min(args.min_frequency, 2)
        args.dim = min(args.dim, 50)
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"], min_frequency=args.min_frequency)
    V = len(tokenizer)
    train_ids, _ = tokenize_corpus(corpus["train"]["text"], tokenizer)
    log(f"brown: {train_ids.numel():,} training tokens, |V| = {V:,}")
    common = run_context(args, vocab_size=V, dim=args.dim, context_size=args.context_size,
                         diagonal_context=args.diagonal_context)
    special = dict(bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None
                                else tokenizer.eos_token_id,
                   eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    body = dict(vocab_size=V, context_size=args.context_size, hidden_size=args.dim,
                diagonal_context=args.diagonal_context, **special)

    def train(case: str, model) -> tuple[dict, dict]:
        training = TrainingConfig(
            output_dir=str(out / f"runs_hlbl{suffix}" / case.replace(" ", "_")), overwrite_output_dir=True,
            num_epochs=args.epochs, max_time_s=args.time_budget, batch_size=args.batch_size,
            block_size=args.block_size, eval_batch_size=64, optimizer="adam",
            learning_rate=args.learning_rate, lr_scheduler="constant", weight_decay=args.weight_decay,
            early_stopping_patience=1, logging_steps=100, save_total_limit=1, progress_bar=False,
        )
        log(f"{case}: {model.num_parameters():,} parameters")
        start = time.perf_counter()
        results = train_lm(model, tokenizer, corpus, training, dataset_name="brown")
        seconds = time.perf_counter() - start
        row = {
            "case": case, "value": results["test"]["perplexity"], "unit": "ppl", "better": "lower",
            "valid_ppl": results["validation"]["perplexity"], "train_time_s": round(seconds, 1),
            "tokens_per_s": round(results["train_tokens"] / seconds, 1),
            "epochs": results["epochs_completed"], "stop_reason": results["stop_reason"],
            "num_parameters": model.num_parameters(), **common,
        }
        return row, results

    def hlbl(tree) -> HLBLForCausalLM:
        torch.manual_seed(0)
        return HLBLForCausalLM(HLBLConfig(**body, **tree_config_fields(tree)), tree=tree)

    rows: list[dict] = []

    counts = torch.bincount(train_ids, minlength=V).numpy()

    def report(row: dict, tree=None) -> None:
        if tree is not None:
            row.update({"tree_" + k: v for k, v in tree_summary(tree).items() if k != "vocab_size"})
            # Node evaluations per training token: what the tree costs (Huffman minimises it).
            row["tree_expected_code_length"] = round(tree.expected_code_length(counts), 3)
        rows.append(row)
        emit(row)

    torch.manual_seed(0)
    lbl = LBLForCausalLM(LBLConfig(**body))
    report(train("LBL", lbl)[0])

    first_tree = random_tree(V, seed=0)
    first = hlbl(first_tree)
    report(train("HLBL random", first)[0], first_tree)

    tree = huffman_tree(counts)
    report(train("HLBL huffman", hlbl(tree))[0], tree)

    # The paper's data-built trees, all from the random-tree model's predicted vectors.
    for case, mode, eps in [("HLBL balanced", "balanced", 0.0), ("HLBL adaptive", "adaptive", 0.0),
                            (f"HLBL adaptive({args.eps})", "adaptive", args.eps)]:
        start = time.perf_counter()
        tree = build_data_tree(first, corpus["train"]["text"], tokenizer, mode=mode, eps=eps,
                               block_size=args.block_size, batch_size=64)
        build_s = time.perf_counter() - start
        row, _ = train(case, hlbl(tree))
        row["tree_build_s"] = round(build_s, 1)
        report(row, tree)

    by_case = {r["case"]: r for r in rows}
    hlbls = [r for r in rows if r["case"].startswith("HLBL")]
    best = min(hlbls, key=lambda r: r["value"])
    ratios = [
        {"case": "adaptive_vs_random",
         "value": by_case["HLBL adaptive"]["value"] / by_case["HLBL random"]["value"],
         "unit": "x", "better": "lower", "target": 0.9},
        {"case": "best_hlbl_vs_lbl_ppl", "value": best["value"] / by_case["LBL"]["value"], "unit": "x",
         "better": "lower", "target": 1.1, "best_hlbl": best["case"]},
        {"case": "lbl_vs_best_hlbl_time",
         "value": by_case["LBL"]["train_time_s"] / max(best["train_time_s"], 1e-9),
         "unit": "x", "better": "higher", "target": 10, "best_hlbl": best["case"]},
        {"case": "hlbl_vs_lbl_tokens_per_s",
         "value": by_case["HLBL random"]["tokens_per_s"] / by_case["LBL"]["tokens_per_s"],
         "unit": "x", "better": "higher"},
    ]
    for r in ratios:
        r["value"] = round(r["value"], 3)
        emit({**r, **common})

    write_table(rows, ratios, out / f"hlbl_trees{suffix}.md", args)
    (out / f"hlbl_trees{suffix}.json").write_text(json.dumps({"rows": rows, "ratios": ratios}, indent=1))
    return rows


def write_table(rows: list[dict], ratios: list[dict], path: Path, args) -> None:
    r0 = rows[0]
    columns = ["model", "tree depth (max)", "code length per token", "words with 2+ codes", "params",
               "epochs", "train time", "tokens/s", "valid ppl", "test ppl"]
    cells = [
        [r["case"], r.get("tree_max_depth", ""),
         "" if "tree_expected_code_length" not in r else format(r["tree_expected_code_length"], ".2f"),
         r.get("tree_words_with_several_codes", ""), f"{r['num_parameters']:,}", r["epochs"],
         f"{r['train_time_s']:.0f} s", f"{r['tokens_per_s']:,.0f}", f"{r['valid_ppl']:.1f}",
         f"{r['value']:.1f}"]
        for r in rows
    ]
    write_report(
        path,
        f"Brown corpus (Bengio et al.'s split), |V| = {r0['vocab_size']:,}, D = {r0['dim']}, "
        f"n - 1 = {r0['context_size']}"
        + (", diagonal C_i" if r0["diagonal_context"] else ""),
        (columns, cells),
        (["ratio", "value", "target"], [[r["case"], r["value"], r.get("target", "")] for r in ratios]),
        quick="a slice of the data, 3 short epochs, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
