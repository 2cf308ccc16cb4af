"""Do the training defaults learn? ``hf-nlm train`` with no flag but the files and a time budget, against a
Kneser-Ney 5-gram (Chen & Goodman 1998) built on the same files with the same tokenizer.

For each corpus (Penn Treebank, and State of the Union addresses as raw text) and each model (nplm, lbl,
hlbl, awd_lstm) the script runs, as a user would::

    hf-nlm train --model X --train-file T --validation-file V --max-time-s 300 --output-dir RUN

then fits the 5-gram with the tokenizer that run saved, scores the validation file with it, and asks the
trained model for beam continuations of three prompts (``hf-nlm generate RUN PROMPT --num-beams 5``, the
README's command). Two JSON lines per (corpus, model) on stdout::

    {"benchmark": "defaults", "case": "valid_ppl_vs_kn5", "corpus": "ptb", "model": "nplm", "value": 1.21,
     "unit": "x KN5 valid ppl", "target": 1.3, "valid_ppl": ..., "kn5_valid_ppl": ..., "continuations": [...],
     "unk_share": ..., ...}
    {"benchmark": "defaults", "case": "punctuation_only_continuations", "corpus": "ptb", "model": "nplm",
     "value": 0.0, "unit": "share of prompts", "target": 0, "num_prompts": 40, "beam5": ..., ...}

Targets: validation perplexity <= 1.3x the 5-gram's; the three continuations are three different texts
with under 10% ``<unk>``; no continuation of a held-out prompt is punctuation and the end of the text alone
(or nothing). The held-out prompts are the first 3 to 6 words of every n-th line of 10 words or more of the
validation file (which the model did not train on), continued by ``model.generate(ids)`` with nothing but
the prompt, so with the settings the run saved (:mod:`hf_nlm.generation`); ``beam5`` is the same share with
``num_beams=5``, and ``beam5_without_begin_suppress`` with ``num_beams=5, begin_suppress_tokens=None`` (the
saved settings less the one that keeps punctuation off the first step).

The State of the Union files are the most recent speeches before 2000 up to 900,000 words (train, one
paragraph per line) and the 2000-2009 speeches (validation), written as plain text files from the corpus
``hf-nlm download sotu`` fetches; Penn Treebank's are its own files.

    python benchmarks/defaults.py > benchmarks/results/defaults.jsonl

takes about 50 minutes on 2 cores (8 runs of 5 minutes, plus tokenizing, 5-grams and generation). ``--quick``
trains the NPLM and the AWD-LSTM for 10 seconds each on the first 40,000 training words of State of the Union
(the validation file cut to 20,000 words), one to two minutes in all.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from common import emit_json, log, machine

from hf_nlm.training.run_folder import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("nplm", "lbl", "hlbl", "awd_lstm")
PROMPTS = ("the president said", "in the last year", "we will")
SOTU_TRAIN_WORDS = 900_000
TARGET_RATIO = 1.3
TARGET_UNK_SHARE = 0.10
NUM_HELD_OUT_PROMPTS = 40
#: --quick: (training words, validation words), the models and corpora, the training budget
QUICK_WORDS = (40_000, 20_000)
QUICK_RUNS = {"models": ("nplm", "awd_lstm"), "corpora": ("sotu",), "max_time_s": "10"}


def corpus_files(name: str, folder: Path, words: tuple[int, int] | None = None) -> tuple[Path, Path]:
    """The (train, validation) plain-text files of corpus ``name``; with ``words``, cut to their first
    (training words, validation words), written into ``folder``."""
    from hf_nlm.data import load_ptb, load_sotu

    if name == "ptb":
        ptb = Path(os.environ.get("HF_NLM_DATA", Path.home() / ".cache" / "hf_nlm")) / "ptb"
        if not (ptb / "ptb.train.txt").is_file():
            load_ptb()  # says where to get it
        if words is None:
            return ptb / "ptb.train.txt", ptb / "ptb.valid.txt"
        lines = [(ptb / f"ptb.{split}.txt").read_text(encoding="utf-8").splitlines()
                 for split in ("train", "valid")]
    else:
        sotu = load_sotu()
        train, count = [], 0
        for text in reversed(sotu["train"]["text"]):  # speeches in chronological order: the latest first
            train.append(text)
            count += len(text.split())
            if count >= SOTU_TRAIN_WORDS:
                break
        lines = [list(reversed(train)), list(sotu["validation"]["text"])]
    if words is not None:
        lines = [first_words(split, n) for split, n in zip(lines, words, strict=True)]
    folder.mkdir(parents=True, exist_ok=True)
    files = folder / f"{name}.train.txt", folder / f"{name}.valid.txt"
    for file, split in zip(files, lines, strict=True):
        file.write_text("\n".join(split) + "\n", encoding="utf-8")
    return files


def first_words(lines: list[str], words: int) -> list[str]:
    """The first lines of ``lines`` that hold ``words`` words."""
    kept, count = [], 0
    for line in lines:
        if count >= words:
            break
        kept.append(line)
        count += len(line.split())
    return kept


def hf_nlm(*args: str, log_file: Path | None = None) -> str:
    """Run the ``hf-nlm`` command as a user would (offline); its stdout, its stderr into ``log_file``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-c", "import sys, hf_nlm_cli; sys.exit(hf_nlm_cli.main())", *args]
    with open(log_file or os.devnull, "w", encoding="utf-8") as err:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode:
        raise RuntimeError(f"hf-nlm {' '.join(args)} failed (exit {done.returncode}); see {log_file}")
    return done.stdout


def kn5_valid_ppl(run: Path, train: Path, valid: Path) -> float:
    """Validation perplexity of a Kneser-Ney 5-gram on the run's tokenizer, every token and each line's <eos>
    counted, as the run's own validation perplexity counts them."""
    from transformers import AutoTokenizer

    from hf_nlm.ngram import KneserNeyLM
    from hf_nlm.ngram.counts import text_ids

    tokenizer = AutoTokenizer.from_pretrained(run)
    lines = train.read_text(encoding="utf-8").splitlines()
    kn = KneserNeyLM.from_texts(lines, tokenizer, 5)
    log_p = kn.stream_log_probs(text_ids(valid.read_text(encoding="utf-8").splitlines(), tokenizer))
    return math.exp(-float(log_p.mean()))


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


def load_run(run: Path):
    """The (model, tokenizer) a run saved, the model in evaluation mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)


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
    parser.add_argument("--corpora", nargs="+", choices=("ptb", "sotu"), default=None,
                        help="(default: ptb sotu)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=None, help="(default: all four)")
    parser.add_argument("--max-time-s", default=None,
                        help="the training budget given to hf-nlm train (default: 300)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{' and '.join(QUICK_RUNS['models'])} on {QUICK_WORDS[0]:,} words of "
                             f"{' and '.join(QUICK_RUNS['corpora'])}, {QUICK_RUNS['max_time_s']} s each")
    parser.add_argument("--output-dir", default="/tmp/hf_nlm_defaults",
                        help="runs and corpus files (not in git)")
    parser.add_argument("--reuse-runs", action="store_true",
                        help="score the runs already in --output-dir "
                             "(their results.json) instead of training again")
    args = parser.parse_args(argv)
    full = {"models": MODELS, "corpora": ("ptb", "sotu"), "max_time_s": "300"}
    for name, default in (QUICK_RUNS if args.quick else full).items():
        setattr(args, name, getattr(args, name) or default)
    out = Path(args.output_dir) / ("quick" if args.quick else "")
    log(f"defaults on {machine()}, {os.cpu_count()} CPUs")
    for corpus in args.corpora:
        train, valid = corpus_files(corpus, out / "data", QUICK_WORDS if args.quick else None)
        prompts = held_out_prompts(valid.read_text(encoding="utf-8").splitlines())
        for model in args.models:
            run = out / f"{corpus}-{model}"
            start = time.perf_counter()
            if args.reuse_runs and (run / "results.json").is_file():
                results, wall = json.loads((run / "results.json").read_text()), None
            else:
                results = json.loads(hf_nlm("train", "--model", model, "--train-file", str(train),
                                            "--validation-file", str(valid), "--max-time-s", args.max_time_s,
                                            "--output-dir", str(run), "--overwrite-output-dir",
                                            log_file=out / f"{corpus}-{model}.log"))
                wall = round(time.perf_counter() - start, 1)
            valid_ppl = results["validation"]["perplexity"]
            kn5 = kn5_valid_ppl(run, train, valid)
            texts = continuations(run)
            words = [w for text in texts for w in text.split()]
            unk_share = sum(w in ("<unk>", "<unk_word>", "<unk_num>") for w in words) / max(len(words), 1)
            texts_ok = len(set(texts)) == len(texts) and all(texts) and unk_share < TARGET_UNK_SHARE
            log_rows = read_jsonl(run / "log.jsonl")
            # after an epoch, or where the budget ran out
            last_eval = [row for row in log_rows if "val_ppl" in row][-1]
            training = [row for row in log_rows if row.get("type") == "step"]
            emit_json("defaults", {
                "case": "valid_ppl_vs_kn5", "corpus": corpus, "model": model,
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
                "train_command_wall_s": wall, "max_time_s": float(args.max_time_s), "quick": args.quick,
                "cpu": machine(), "cpus": os.cpu_count(),
            })
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
                "max_time_s": float(args.max_time_s), "quick": args.quick, "cpu": machine(),
                "cpus": os.cpu_count(),
            })


if __name__ == "__main__":
    main()
