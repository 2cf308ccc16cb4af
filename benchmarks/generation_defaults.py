"""Which saved generation setting keeps a small model from answering a prompt with punctuation and the end
of the text? For each trained run and each candidate setting, the share of held-out prompts whose continuation
by ``model.generate`` is punctuation and the end of the text alone, or nothing (target 0), greedy and with 5
beams. The candidates chose what :func:`hf_nlm.generation.set_generation_defaults` saves
(docs/generation.md)::

    hf-nlm train --corpus brown --max-time-s 90 --output-dir runs/brown-nplm
    hf-nlm train --corpus brown --model awd_lstm --max-time-s 90 --output-dir runs/brown-awd_lstm
    python benchmarks/generation_defaults.py runs/brown-nplm runs/brown-awd_lstm --corpus brown

One JSON line per (run, search, candidate)::

    {"benchmark": "generation_defaults", "case": "min_new_tokens=3", "run": "runs/brown-nplm",
     "search": "beam5", "value": 0.075, "unit": "share of prompts", "better": "lower", "target": 0,
     "mean_new_tokens": 6.3, "differ_from_min_new_tokens_1": 18, ...}

Every candidate generates at most 20 new tokens, without sampling, with no repeated 3-gram and no ``<unk>``,
and adds its own setting: ``min_new_tokens`` of 1 (``<eos>`` refused at the first step), 3, 5 or 10; a
repetition penalty of 1.2; a length penalty of 2 (beam search only); or ``min_new_tokens=1`` with
``begin_suppress_tokens``, the punctuation tokens refused at the first step, all of them or all but the comma
(the saved setting). ``differ_from_min_new_tokens_1`` counts the continuations a candidate changes: its cost.
The prompts are the first 3 to 6 words of every k-th line of 10 words or more of the corpus's test split,
which the run neither trained nor validated on. ``--quick``: 20 prompts, greedy search only.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from common import emit_json, log, machine
from defaults import held_out_prompts, load_run, punctuation_only_share

from hf_nlm.generation import NO_REPEAT_NGRAM_SIZE

SEARCHES = {"greedy": {"num_beams": 1}, "beam5": {"num_beams": 5}}


def candidates(tokenizer) -> dict[str, dict]:
    """Each candidate's ``generate()`` settings, those every candidate shares included."""
    from hf_nlm.generation import first_step_suppressed_ids, punctuation_token_ids

    shared = {"do_sample": False, "max_new_tokens": 20, "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE,
              "suppress_tokens": [tokenizer.unk_token_id], "begin_suppress_tokens": None}
    added = {f"min_new_tokens={n}": {"min_new_tokens": n} for n in (1, 3, 5, 10)}
    added["repetition_penalty=1.2"] = {"min_new_tokens": 1, "repetition_penalty": 1.2}
    added["length_penalty=2.0"] = {"min_new_tokens": 1, "length_penalty": 2.0}
    added["begin_suppress_tokens=punctuation"] = {"min_new_tokens": 1,
                                                  "begin_suppress_tokens": punctuation_token_ids(tokenizer)}
    added["begin_suppress_tokens=punctuation but the comma"] = {
        "min_new_tokens": 1, "begin_suppress_tokens": first_step_suppressed_ids(tokenizer)}
    return {name: {**shared, **settings} for name, settings in added.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders of hf-nlm train")
    parser.add_argument("--corpus", choices=("brown", "ptb", "sotu"), required=True,
                        help="the corpus the runs trained on: prompts come from its test split")
    parser.add_argument("--quick", action="store_true", help="20 prompts, greedy search only")
    args = parser.parse_args(argv)
    from hf_nlm.data import load_brown, load_ptb, load_sotu

    test = {"brown": load_brown, "ptb": load_ptb, "sotu": load_sotu}[args.corpus]()["test"]["text"]
    prompts = held_out_prompts(test, 20 if args.quick else 40)
    log(f"generation_defaults on {machine()}, {len(prompts)} prompts of the {args.corpus} test split")
    for run in map(Path, args.runs):
        model, tokenizer = load_run(run)
        for search, search_settings in SEARCHES.items():
            if args.quick and search != "greedy":
                continue
            baseline = None
            for name, settings in candidates(tokenizer).items():
                if "length_penalty" in settings and search_settings["num_beams"] == 1:
                    continue  # a beam-search setting
                start = time.perf_counter()
                share, texts = punctuation_only_share(model, tokenizer, prompts, **settings,
                                                      **search_settings)
                baseline = baseline or texts  # the first candidate's: min_new_tokens=1 alone
                lengths = [len(tokenizer(text).input_ids) for text in texts]
                emit_json("generation_defaults", {
                    "case": name, "run": str(run), "model": model.config.model_type, "corpus": args.corpus,
                    "search": search, "value": round(share, 3), "unit": "share of prompts", "better": "lower",
                    "target": 0, "mean_new_tokens": round(sum(lengths) / len(lengths), 1),
                    "differ_from_min_new_tokens_1": sum(a != b for a, b in zip(texts, baseline, strict=True)),
                    "num_prompts": len(prompts),
                    "examples": [f"{p} | {t}" for p, t in zip(prompts[:6], texts, strict=False)],
                    "seconds": round(time.perf_counter() - start, 1), "quick": args.quick, "cpu": machine(),
                    "cpus": os.cpu_count(),
                })


if __name__ == "__main__":
    main()
