"""The count baseline a run reports beside its model: a Kneser-Ney 5-gram (Chen & Goodman 1998's modified
Kneser-Ney, :class:`hf_nlm.ngram.KneserNeyLM`) fitted on the run's training split with the run's tokenizer and
scored on its validation split with the conventions of :func:`hf_nlm.evaluation.evaluate_lm` (every token and
each line's ``<eos>`` a target once), so its perplexity and the model's compare directly. Fitting it takes
seconds on a text of a million words; it tells a user whether the network has learnt more than counts do.

A run reports it where the two perplexities count the same events: a causal LM on word or subword tokens. A
numeracy LM's perplexity scores each numeral with its numeral head (and a numeracy tokenizer's ``<unk_num>``
stands for every unseen numeral), and an encoder-decoder model scores targets given sources, so neither gets
one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

#: The order of the baseline n-gram model.
BASELINE_ORDER = 5
#: What the run's account and ``results.json`` call it.
BASELINE_NAME = f"Kneser-Ney {BASELINE_ORDER}-gram"
#: ``results.json``'s key for it.
BASELINE_KEY = "ngram_baseline"
#: A model whose validation perplexity is this many times the baseline's has learnt less than the counts:
#: near the unigram distribution, its continuations repeat the commonest words ("the the the , the").
WEAK_RATIO = 2.0
#: Training tokens above which a run fits no baseline: counting 5-grams holds about three of them per training
#: token in memory (2.4M on Brown's 0.84M tokens), gigabytes beyond this.
MAX_BASELINE_TOKENS = 50_000_000


def baseline_skipped(model, tokenizer, datasets, num_tokens: int) -> str | None:
    """Why a run of ``model`` with ``tokenizer`` on ``datasets`` (``num_tokens`` training tokens) gets no
    n-gram baseline, or None (it gets one)."""
    if getattr(model.config, "is_encoder_decoder", False):
        return "an encoder-decoder model scores targets given their sources, which a 5-gram never sees"
    if getattr(tokenizer, "numeral_vocab", None) is not None:
        return ("a numeracy LM scores numerals with its numeral head (see its adjusted perplexity), not as "
                "the tokens a 5-gram counts")
    if "validation" not in datasets:
        return "the run has no validation split"
    if num_tokens > MAX_BASELINE_TOKENS:
        return (f"{num_tokens:,} training tokens are more than its {MAX_BASELINE_TOKENS:,} (its counts would "
                "take gigabytes)")
    return None


def fit_ngram_baseline(tokenizer, datasets) -> dict:
    """The baseline's figures: ``model``, ``order``, ``validation`` (:meth:`KneserNeyLM.evaluate`'s report on
    the validation split) and ``fit_s`` (seconds to fit and score it)."""
    from ..ngram import KneserNeyLM

    start = time.perf_counter()
    lm = KneserNeyLM.from_texts(datasets["train"]["text"], tokenizer, BASELINE_ORDER)
    validation = lm.evaluate(datasets["validation"], tokenizer)
    return {"model": BASELINE_NAME, "order": BASELINE_ORDER, "validation": validation,
            "fit_s": time.perf_counter() - start}


def comparison_line(results: dict) -> str:
    """``validation perplexity 155.6 (Kneser-Ney 5-gram on the same split: 142.0, ratio 1.10)`` from a run's
    ``results`` (its ``validation`` and :data:`BASELINE_KEY` entries)."""
    model_ppl = results["validation"]["perplexity"]
    baseline = results.get(BASELINE_KEY)
    if baseline is None:
        return f"validation perplexity {model_ppl:.1f}"
    line = (f"validation perplexity {model_ppl:.1f} ({baseline['model']} on the same split: "
            f"{baseline['validation']['perplexity']:.1f}, ratio {baseline['ratio']:.2f})")
    if baseline["ratio"] >= WEAK_RATIO:
        line += ("; the model has learnt less than the 5-gram's counts and its continuations will repeat the "
                 "commonest words: train it longer (--max-time-s) or with a recipe that converges sooner")
    return line


def add_baseline(results: dict, baseline: dict, output_dir: str | Path) -> dict:
    """``results`` with the baseline and the ratio of the model's validation perplexity to its, also written
    into ``output_dir``'s ``results.json``."""
    from ..hub.model_card import RESULTS_NAME

    ratio = results["validation"]["perplexity"] / baseline["validation"]["perplexity"]
    results = {**results, BASELINE_KEY: {**baseline, "ratio": ratio}}
    path = Path(output_dir) / RESULTS_NAME
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    return results
