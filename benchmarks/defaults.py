"""Do the training defaults learn? Each row of the README's defaults table is a named recipe: a model type's
``default`` recipe on a corpus for a number of epochs (``hf_nlm.models.registry.defaults_table_recipes``),
run as a user would::

    hf-nlm train --recipe ptb-nplm-default --output-dir RUN

which trains through ``train(spec)`` and fits a Kneser-Ney 5-gram (Chen & Goodman 1998) on the same training
split with the tokenizer the run trained. The script then asks the trained model for beam continuations of
three prompts (``hf-nlm generate RUN PROMPT --num-beams 5``, the README's command). Two JSON lines per recipe
on stdout::

    {"benchmark": "defaults", "case": "valid_ppl_vs_kn5", "recipe": "ptb-nplm-default", "corpus": "ptb",
     "model": "nplm", "value": 1.21, "unit": "x KN5 valid ppl", "target": 1.3, "valid_ppl": ...,
     "kn5_valid_ppl": ..., "continuations": [...], "unk_share": ..., ...}
    {"benchmark": "defaults", "case": "punctuation_only_continuations", "recipe": "ptb-nplm-default", ...,
     "value": 0.0, "unit": "share of prompts", "target": 0, "num_prompts": 40, "beam5": ..., ...}

Targets: validation perplexity <= 1.3x the 5-gram's; the three continuations are three different texts
with under 10% ``<unk>``; no continuation of a held-out prompt is punctuation and the end of the text alone
(or nothing). The held-out prompts are the first 3 to 6 words of every n-th line of 10 words or more of the
validation split (which the model did not train on), continued by ``model.generate(ids)`` with nothing but
the prompt, so with the settings the run saved (:mod:`hf_nlm.generation`); ``beam5`` is the same share with
``num_beams=5``, and ``beam5_without_begin_suppress`` with ``num_beams=5, begin_suppress_tokens=None`` (the
saved settings less the one that keeps punctuation off the first step).

    python benchmarks/defaults.py > benchmarks/results/defaults.jsonl

runs the eight recipes (Penn Treebank and State of the Union, four model types). ``--quick`` runs the NPLM's
and the AWD-LSTM's State of the Union recipes for 20 updates each (``--max-steps 20``): a smoke test of the
script, whose numbers are not the table's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import emit_json, log, machine

from hf_nlm.saved_run import load_run
from hf_nlm.training.run_folder import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("nplm", "lbl", "hlbl", "awd_lstm")
CORPORA = ("ptb", "sotu")
PROMPTS = ("the president said", "in the last year", "we will")
TARGET_RATIO = 1.3
TARGET_UNK_SHARE = 0.10
NUM_HELD_OUT_PROMPTS = 40
#: --quick: the recipes and the updates each trains
QUICK_RUNS = {"models": ("nplm", "awd_lstm"), "corpora": ("sotu",), "max_steps": "20"}


def recipe_name(corpus: str, model: str) -> str:
    """The named recipe of a row of the table (:func:`hf_nlm.models.registry.defaults_table_recipes`)."""
    return f"{corpus}-{model.replace('_', '-')}-default"


def hf_nlm(*args: str, log_file: Path | None = None) -> str:
    """Run the ``hf-nlm`` command as a user would (offline); its stdout, its stderr into ``log_file``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-c", "import sys, hf_nlm_cli; sys.exit(hf_nlm_cli.main())", *args]
    with open(log_file or os.devnull, "w", encoding="utf-8") as err:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode:
        raise RuntimeError(f"hf-nlm {' '.join(args)} failed (exit {done.returncode}); see {log_file}")
    return done.stdout


def continuations(run: Path) -> list[str]:
    """The continuation of each prompt by ``hf-nlm generate RUN PROMPT --num-beams 5`` (which prints the
    prompt, then the continuation)."""
    return [hf_nlm("generate", str(run), prompt, "--num-beams", "5").strip().removeprefix(prompt).strip()
            for prompt in PROMPTS]


def held_out_prompts(lines: list[str], n: int = NUM_HELD_OUT_PROMPTS) -> list[str]:
    """The first 3 to 6 words (in turn) of every k-th line of 10 words or more of held-out ``lines``, ``n`` of
    them."""
    lines = [line for line in lines if len(line.split()) >= 10]
    step = max(len(lines) // n, 1)
    return [" ".join(line.split()[: 3 + i % 4]) for i, line in enumerate(lines[::step][:n])]


def punctuation_only_share(model, tokenizer, prompts: list[str],
                           **generate_kwargs) -> tuple[float, list[str]]:
    """The share of ``prompts`` whose continuation by ``model.generate(ids, **generate_kwargs)`` is
    punctuation (:func:`hf_nlm.generation.punctuation_token_ids`) and the end of the text alone, or nothing;
    and each continuation's text."""
    import torch

    from hf_nlm.generation import punctuation_token_ids
    from hf_nlm.tokenization.decoding import decode_generated

    punctuation, eos = set(punctuation_token_ids(tokenizer)), tokenizer.eos_token_id
    bad, texts = 0, []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            new = model.generate(ids, **generate_kwargs)[0, ids.shape[1]:].tolist()
        new = new[: new.index(eos)] if eos in new else new
        bad += all(token in punctuation for token in new)
        texts.append(decode_generated(tokenizer, torch.tensor(new, dtype=torch.long)))
    return bad / len(prompts), texts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=None, help="(default: ptb sotu)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=None, help="(default: all four)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{' and '.join(QUICK_RUNS['models'])} on "
                             f"{' and '.join(QUICK_RUNS['corpora'])}, {QUICK_RUNS['max_steps']} updates each")
    parser.add_argument("--output-dir", default="/tmp/hf_nlm_defaults",
                        help="the runs (not in git)")
    parser.add_argument("--reuse-runs", action="store_true",
                        help="score the runs already in --output-dir "
                             "(their results.json) instead of training again")
    args = parser.parse_args(argv)
    full = {"models": MODELS, "corpora": CORPORA}
    for name, default in (QUICK_RUNS if args.quick else full).items():
        setattr(args, name, getattr(args, name, None) or default)
    out = Path(args.output_dir) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    log(f"defaults on {machine()}, {os.cpu_count()} CPUs")
    from hf_nlm.training import RunSpec

    for corpus in args.corpora:
        for model in args.models:
            recipe = recipe_name(corpus, model)
            run = out / recipe
            start = time.perf_counter()
            if args.reuse_runs and (run / "results.json").is_file():
                results, wall = json.loads((run / "results.json").read_text()), None
            else:
                quick = ("--max-steps", args.max_steps) if args.quick else ()
                hf_nlm("train", "--recipe", recipe, "--output-dir", str(run), "--overwrite-output-dir",
                       *quick, log_file=out / f"{recipe}.log")
                results = json.loads((run / "results.json").read_text())
                wall = round(time.perf_counter() - start, 1)
            valid_ppl = results["validation"]["perplexity"]
            kn5 = results["ngram_baseline"]["validation"]["perplexity"]
            texts = continuations(run)
            words = [w for text in texts for w in text.split()]
            unk_share = sum(w in ("<unk>", "<unk_word>", "<unk_num>") for w in words) / max(len(words), 1)
            texts_ok = len(set(texts)) == len(texts) and all(texts) and unk_share < TARGET_UNK_SHARE
            log_rows = read_jsonl(run / "log.jsonl")
            # after an epoch, or where the updates ran out
            last_eval = [row for row in log_rows if "val_ppl" in row][-1]
            training = [row for row in log_rows if row.get("type") == "step"]
            emit_json("defaults", {
                "case": "valid_ppl_vs_kn5", "recipe": recipe, "corpus": corpus, "model": model,
                "value": round(valid_ppl / kn5, 3), "unit": "x KN5 valid ppl",
                "better": "lower", "target": TARGET_RATIO,
                "met": valid_ppl / kn5 <= TARGET_RATIO and texts_ok,
                "valid_ppl": round(valid_ppl, 2), "kn5_valid_ppl": round(kn5, 2),
                "prompts": list(PROMPTS), "continuations": texts, "distinct_continuations": len(set(texts)),
                "unk_share": round(unk_share, 3), "stop_reason": results.get("stop_reason"),
                "epochs": round(last_eval["epoch"] + (last_eval["type"] == "epoch"), 3),
                "global_step": last_eval["global_step"],
                "training_s": round(last_eval["elapsed_s"], 1),
                "tokens_per_s": round(training[-1]["tokens_per_s"], 1) if training else None,
                "train_command_wall_s": wall, "quick": args.quick,
                "cpu": machine(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
            })
            validation = RunSpec.from_recipe(recipe=recipe, output_dir=str(run)).data.load()["validation"]
            prompts = held_out_prompts(list(validation["text"]))
            lm = load_run(run)
            share, texts = punctuation_only_share(*lm, prompts)
            beam, _ = punctuation_only_share(*lm, prompts, num_beams=5)
            unsuppressed, _ = punctuation_only_share(*lm, prompts, num_beams=5, begin_suppress_tokens=None)
            emit_json("defaults", {
                "case": "punctuation_only_continuations", "corpus": corpus, "model": model,
                "value": round(share, 3), "unit": "share of prompts", "better": "lower", "target": 0,
                "met": share == 0,
                "beam5": round(beam, 3), "beam5_without_begin_suppress": round(unsuppressed, 3),
                "num_prompts": len(prompts),
                "examples": [f"{p} | {t}" for p, t in zip(prompts[:5], texts, strict=False)],
                "recipe": recipe, "quick": args.quick, "cpu": machine(),
                "cpus": os.cpu_count(),
            })


if __name__ == "__main__":
    main()
