"""`make demo`: the NPLM of the ``demo`` recipe trained on the Brown corpus by ``train(spec)``, end to end.

1. ``RunSpec.from_recipe(recipe="demo")``: Brown with Bengio et al.'s split (first 800,000 words train, next
   200,000 validation, rest test), lowercased, words seen fewer than 4 times in the training split -> <unk>;
   a word-level tokenizer; an NPLM with the paper's MLP9 shape (n = 5, m = 30, h = 100, no direct
   connections) trained with Adam for at most 10 epochs, the learning rate decaying linearly to 0, stopped
   when validation perplexity rises, random seed ``0``. The budget is work, not time: a busy or slow machine
   takes longer and prints the same numbers (``hf-nlm train --recipe demo`` runs the same spec).
2. ``train(spec)`` fits the Kneser-Ney 5-gram on the same split and vocabulary and the mixture of the two (the
   weight fitted on validation), as Bengio et al. report them (Table 1); the demo prints the three side by
   side and a line saying whether the NPLM beats the 5-gram.
3. Three prompts continued with the generation settings saved with the model (beam search with 5 beams, and
   sampling), the same again after the folder (config, safetensors weights, tokenizer, generation config,
   model card, curves.png, and the 5-gram in kneser-ney-5gram/, which `hf-nlm app` shows beside the NPLM) is
   reloaded with AutoModelForCausalLM.

Run `python examples/demo.py --help` for the knobs; `--max-steps 50` is a smoke test.
`benchmarks/time_to_kn.py` runs this script on Brown and PTB and plots validation perplexity against
training time beside the 5-gram's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_nlm.data import load_brown, load_ptb
from hf_nlm.evaluation import decode_generated
from hf_nlm.hub.model_card import BASELINE_KEY
from hf_nlm.ngram import KneserNeyLM
from hf_nlm.training import RunSpec, train
from hf_nlm.training.run_folder import read_jsonl

RECIPE = "demo"
PROMPTS = ["the president of the united states", "in the morning , she", "the church"]
# Beam search over the saved settings (no 3-gram twice, <unk> never written, a word or a comma first).
BEAM = {"num_beams": 5}
# Sampling from the nucleus of the distribution (Holtzman et al. 2020), a little sharpened.
SAMPLE = {"do_sample": True, "top_p": 0.9, "temperature": 0.8}


def continuations(model, tokenizer, prompts: list[str], settings: dict, seed: int = 0) -> dict[str, str]:
    """Each prompt's continuation with the model's saved generation settings and ``settings`` over them."""
    out = {}
    for index, prompt in enumerate(prompts):
        torch.manual_seed(seed + index)  # the same samples again after a reload, each prompt its own draws
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), **settings)
        out[prompt] = decode_generated(tokenizer, generated[0, ids.shape[1]:])
    return out


def comparison_table(results: dict) -> dict[str, dict[str, float]]:
    """Validation and test perplexity of the NPLM, the Kneser-Ney 5-gram the run fitted on the same training
    split with the same tokenizer, and their mixture (``results.json``'s figures)."""
    baseline = results[BASELINE_KEY]
    mixture = baseline["mixture"]
    splits = ("validation", "test")
    return {
        "NPLM": {split: results[split]["perplexity"] for split in splits},
        "Kneser-Ney 5-gram": {split: baseline[split]["perplexity"] for split in splits},
        f"mixture (a = {mixture['weight']:.2f})": {split: mixture[split]["perplexity"] for split in splits},
    }


def training_seconds(output_dir: str | Path) -> float:
    """Seconds the run trained, its validations included: the clock at its last validation in ``log.jsonl``
    (``results["elapsed_s"]`` also counts saving and scoring the final model)."""
    validated = [r for r in read_jsonl(Path(output_dir) / "log.jsonl") if r["type"] in ("epoch", "eval")]
    return validated[-1]["elapsed_s"]


def verdict(table: dict[str, dict[str, float]], results: dict, training_s: float, threads: int) -> str:
    """One line: does the NPLM beat the Kneser-Ney 5-gram on test, by how much, after how long."""
    nplm, kn = table["NPLM"], table["Kneser-Ney 5-gram"]
    ratio = nplm["test"] / kn["test"]
    outcome = "beats" if ratio < 1 else "does not beat"
    return (f"the NPLM {outcome} the Kneser-Ney 5-gram: test perplexity {nplm['test']:.2f} vs "
            f"{kn['test']:.2f} ({ratio:.3f}x; validation {nplm['validation'] / kn['validation']:.3f}x) after "
            f"{training_s:.0f} s of training ({results['epochs_completed']} whole epoch(s), "
            f"{results['global_step']:,} updates, stopped by {results['stop_reason']}, {threads} threads)")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["brown", "ptb"], default="brown",
                        help="the corpus (default: the recipe's, brown; ptb keeps its own 10k vocabulary)")
    parser.add_argument("--output-dir", default="demo-output/nplm-brown")
    parser.add_argument("--num-epochs", type=int, default=None,
                        help="at most this many epochs (the recipe's: 10)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many updates (a smoke test)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="dropout on z (the recipe's: 0, the paper's)")
    args = parser.parse_args(argv)
    start = time.time()

    # The demo starts over each time it runs (`make demo` twice must work), replacing its own folder.
    settings = {"output_dir": args.output_dir, "overwrite_output_dir": True}
    settings.update({name: value for name, value in (("num_epochs", args.num_epochs),
                                                     ("max_steps", args.max_steps),
                                                     ("dropout", args.dropout)) if value is not None})
    if args.corpus != "brown":
        settings.update(corpus=args.corpus, min_frequency=1)
    spec = RunSpec.from_recipe(recipe=RECIPE, **settings)
    run = train(spec)
    model, tokenizer, results = run.model.eval(), run.tokenizer, run.metrics

    for split in ("validation", "test"):
        r = results[split]
        print(f"{split:>10} perplexity {r['perplexity']:8.2f}  "
              f"({r['num_tokens']:,} tokens, {r['num_unk']:,} <unk>)")
    table = comparison_table(results)
    print(f"{'perplexity':<22}{'validation':>12}{'test':>10}")
    for name, row in table.items():
        print(f"{name:<22}{row['validation']:>12.2f}{row['test']:>10.2f}")
    print(verdict(table, results, training_seconds(args.output_dir), torch.get_num_threads()))
    # Beside the model, for `hf-nlm app`: its next-word tab shows the two side by side.
    corpus = load_brown() if args.corpus == "brown" else load_ptb()
    kn = KneserNeyLM.from_texts(corpus["train"]["text"], tokenizer, 5)
    kn.save(Path(args.output_dir) / "kneser-ney-5gram")

    samples = continuations(model, tokenizer, PROMPTS, BEAM)
    sampled = continuations(model, tokenizer, PROMPTS, SAMPLE)
    for title, settings_used, texts in (("beam search", BEAM, samples), ("sampling", SAMPLE, sampled)):
        print(f"{title} (the saved generation settings with "
              + ", ".join(f"{k}={v}" for k, v in settings_used.items()) + "):")
        for prompt, text in texts.items():
            print(f"  {prompt} -> {text}")

    reloaded = AutoModelForCausalLM.from_pretrained(args.output_dir)
    reloaded_tokenizer = AutoTokenizer.from_pretrained(args.output_dir)
    again = (continuations(reloaded, reloaded_tokenizer, PROMPTS, BEAM),
             continuations(reloaded, reloaded_tokenizer, PROMPTS, SAMPLE))
    same = again == (samples, sampled)
    print(f"reloaded {type(reloaded).__name__} from {args.output_dir}: same continuations = {same}")
    if not same:
        raise SystemExit(f"reloaded model generated differently: {json.dumps(again, indent=1)}")
    print(f"training curves: {args.output_dir}/curves.png")
    print(f"done in {time.time() - start:.0f} s; model folder: {args.output_dir}")
    return {**results, "comparison": table}


if __name__ == "__main__":
    main()
