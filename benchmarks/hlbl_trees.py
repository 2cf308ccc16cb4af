"""LBL vs HLBL with random, Huffman and data-built trees on Brown (Mnih & Hinton 2008, Table 1 style).

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008. Each row is a named
recipe run through ``hf_nlm.training.train`` (``hf-nlm train --recipe NAME`` runs the same), every one with
the same settings (Adam, the same epochs and early stopping, random seed `0`) on Bengio et al.'s Brown split:

* ``LBL`` (``brown-lbl-softmax``): the log-bilinear model with the full softmax;
* ``HLBL random`` (``brown-hlbl-random``): the LBL body with a tree softmax over a random tree (step 1 of the
  paper's recipe);
* ``HLBL huffman`` (``brown-hlbl-huffman``): a Huffman tree over training-set word frequencies (word2vec's
  choice);
* ``HLBL balanced``, ``HLBL adaptive``, ``HLBL adaptive(0.25)`` (``brown-hlbl-balanced``,
  ``brown-hlbl-adaptive``, ``brown-hlbl-adaptive-eps0.25``): the paper's data-built trees (sec. 4), from each
  word's average predicted vector r_hat under a first HLBL on the random tree (trained as the random row),
  split by recursive two-component EM with the BALANCED, ADAPTIVE and ADAPTIVE(eps) rules; each a fresh HLBL.

Then the paper's comparisons as ratios with their targets, measured in this run: adaptive / random
perplexity (target <= 0.9), best HLBL / LBL perplexity (target <= 1.1) and LBL / best-HLBL training time
(target >= 10).

Prints one JSON line per row on stdout (progress on stderr); writes ``hlbl_trees.md`` / ``.json`` into
``--output-dir``. ``--quick``: the recipes on a slice of the data (6,000 training sentences, 600 of each other
split) for 3 epochs, a few minutes: far from converged, it checks the pipeline, not the paper's claims.
Training time is the run's ``elapsed_s`` (training plus its per-epoch validation; for a data-built tree, the
final model's), on this machine's CPU threads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from common import add_run_arguments, emit_json, log, run_context, start_run, write_report

from hf_nlm.data import first_lines
from hf_nlm.data.lm import tokenize_corpus
from hf_nlm.training import RunSpec, train
from hf_nlm.training.tree_recipe import tree_summary

BENCHMARK = "hlbl_trees"
#: The rows of the table: (case, named recipe).
ROWS = (
    ("LBL", "brown-lbl-softmax"),
    ("HLBL random", "brown-hlbl-random"),
    ("HLBL huffman", "brown-hlbl-huffman"),
    ("HLBL balanced", "brown-hlbl-balanced"),
    ("HLBL adaptive", "brown-hlbl-adaptive"),
    ("HLBL adaptive(0.25)", "brown-hlbl-adaptive-eps0.25"),
)
#: --quick: (training lines, lines of each other split) and the epochs of each row.
QUICK_LINES = (6000, 600)
QUICK_EPOCHS = 3


def emit(row: dict) -> None:
    emit_json(BENCHMARK, row)


def quick_data(folder: Path) -> dict:
    """The data settings of ``--quick``: the first lines of each split of the recipes' corpus, as text
    files in ``folder``."""
    corpus = RunSpec.from_recipe(recipe=ROWS[0][1], output_dir=str(folder)).data.load()
    cut = first_lines(corpus, train_lines=QUICK_LINES[0], eval_lines=QUICK_LINES[1])
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in ("train", "validation", "test"):
        path = folder / f"{split}.txt"
        path.write_text("\n".join(cut[split]["text"]) + "\n", encoding="utf-8")
        files[f"{split}_file"] = str(path)
    return {"corpus": "text", **files, "num_epochs": QUICK_EPOCHS}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"the recipes on a slice of the data for {QUICK_EPOCHS} epochs: a few minutes")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    out = start_run(args, BENCHMARK)
    suffix = "_quick" if args.quick else ""
    overrides = quick_data(out / f"runs_hlbl{suffix}" / "data") if args.quick else {}

    rows: list[dict] = []
    counts_of: dict[int, torch.Tensor] = {}  # training-set word counts, by the tokenizer's vocabulary

    for case, recipe in ROWS:
        spec = RunSpec.from_recipe(recipe=recipe, output_dir=str(out / f"runs_hlbl{suffix}" / recipe),
                                   overwrite_output_dir=True, progress_bar=False, save_total_limit=1,
                                   **overrides)
        log(f"{case}: hf-nlm train --recipe {recipe}")
        result = train(spec)
        m, model, tokenizer = result.metrics, result.model, result.tokenizer
        seconds = m["elapsed_s"]
        row = {
            "case": case, "recipe": recipe, "value": m["test"]["perplexity"], "unit": "ppl",
            "better": "lower",
            "valid_ppl": m["validation"]["perplexity"], "train_time_s": round(seconds, 1),
            "tokens_per_s": round(m["train_tokens"] / max(seconds, 1e-9), 1),
            "epochs": m["epochs_completed"], "stop_reason": m["stop_reason"],
            "num_parameters": m["num_parameters"],
            **run_context(args, vocab_size=len(tokenizer), dim=model.config.hidden_size,
                          context_size=model.config.context_size,
                          diagonal_context=model.config.diagonal_context),
        }
        if model.config.head == "tree":
            tree = model.tree()
            row.update({"tree_" + k: v for k, v in tree_summary(tree).items() if k != "vocab_size"})
            if len(tokenizer) not in counts_of:
                ids, _ = tokenize_corpus(result.spec.data.load()["train"]["text"], tokenizer)
                counts_of[len(tokenizer)] = torch.bincount(ids, minlength=len(tokenizer)).numpy()
            # Node evaluations per training token: what the tree costs (Huffman minimises it).
            row["tree_expected_code_length"] = round(tree.expected_code_length(counts_of[len(tokenizer)]), 3)
        if "tree" in m:  # a data-built tree: the seconds its vectors and EM took
            row["tree_build_s"] = round(m["tree"]["build_s"], 1)
        rows.append(row)
        emit(row)

    by_case = {r["case"]: r for r in rows}
    hlbls = [r for r in rows if r["case"].startswith("HLBL")]
    best = min(hlbls, key=lambda r: r["value"])
    common = {k: rows[0][k] for k in ("vocab_size", "dim", "context_size", "diagonal_context", "quick",
                                      "threads")}
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
    columns = ["model", "recipe", "tree depth (max)", "code length per token", "words with 2+ codes",
               "params", "epochs", "train time", "tokens/s", "valid ppl", "test ppl"]
    cells = [
        [r["case"], f"`{r['recipe']}`", r.get("tree_max_depth", ""),
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
        quick=f"a slice of the data, {QUICK_EPOCHS} epochs, far from converged" if args.quick else None,
    )


if __name__ == "__main__":
    main()
