"""`make demo`: a small Bengio NPLM trained on the Brown corpus, end to end, in a few minutes on 2 CPU cores.

1. Brown with Bengio et al.'s split (first 800,000 words train, next 200,000 validation, rest test),
   lowercased, words seen fewer than 4 times in the training split -> <unk>.
2. A word-level tokenizer with frequency-sorted ids.
3. An NPLM (n = 5, m = 30, h = 60, no direct connections: a smaller, faster cousin of the paper's
   MLP5/MLP9) trained with Adam through hf_nlm's Accelerate loop, early stopping on validation.
4. Validation and test perplexity beside a Kneser-Ney 5-gram on the same split and vocabulary and the
   mixture of the two (the weight fitted on validation), as Bengio et al. report them (Table 1).
5. Three prompts continued by beam search and by sampling, the settings printed.
6. The model folder (config, safetensors weights, tokenizer, generation config, model card, curves.png,
   and the 5-gram in kneser-ney-5gram/, which `hf-nlm app` shows beside the NPLM) is reloaded with
   AutoModelForCausalLM and generates the same continuations again.

Run `python examples/demo.py --help` for the knobs; `--epochs 1 --max-steps 50` is a smoke test.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import hf_nlm
from hf_nlm.data import load_brown, load_ptb
from hf_nlm.data.registry import corpus_card
from hf_nlm.evaluation import token_log_probs
from hf_nlm.hub.model_card import write_model_card
from hf_nlm.ngram import KneserNeyLM
from hf_nlm.ngram.neural_interpolation import fit_mixture_weight, mix_log_probs
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm

PROMPTS = ["the president of the united states", "in the morning , she", "the church"]

# Beam search over a small n-gram-window model finds the frequent phrases ("and it is not to be ...") and
# loops through them: ask for at least 8 words, forbid repeating any trigram, and penalise every word
# already written, prompt included (repetition_penalty=2.0), so that each prompt is continued differently.
# <unk> stands for thousands of rare words, so it is the likeliest "word" after many contexts: never
# generate it.
BEAM = {"num_beams": 5, "max_new_tokens": 15, "min_new_tokens": 8, "no_repeat_ngram_size": 3,
        "repetition_penalty": 2.0, "do_sample": False}
# Sampling from the nucleus of the distribution (Holtzman et al. 2020), a little sharpened.
SAMPLE = {"do_sample": True, "num_beams": 1, "top_p": 0.9, "temperature": 0.8, "max_new_tokens": 15,
          "min_new_tokens": 8}


def continuations(model, tokenizer, prompts: list[str], settings: dict, seed: int = 0) -> dict[str, str]:
    out = {}
    for prompt in prompts:
        torch.manual_seed(seed)  # the same samples again after a reload
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), **settings)
        out[prompt] = tokenizer.decode(generated[0, ids.shape[1]:], skip_special_tokens=True).strip()
    return out


def comparison_table(model, tokenizer, corpus, kn) -> dict[str, dict[str, float]]:
    """Validation and test perplexity of the NPLM, the Kneser-Ney 5-gram ``kn`` fitted on the same training
    split with the same tokenizer, and their mixture a P_nplm + (1 - a) P_kn, a fitted on validation: each
    model scores every token of a split once, the mixture combines the two scores token by token."""
    scores = {}
    for split in ("validation", "test"):
        ids, log_p_nplm, _ = token_log_probs(model, corpus[split], tokenizer)
        scores[split] = (log_p_nplm.double().numpy(), kn.stream_log_probs(ids.numpy()))
    weight = fit_mixture_weight(*scores["validation"])

    def perplexity(log_p) -> float:
        return math.exp(-float(log_p.mean()))

    return {
        "NPLM": {split: perplexity(nplm) for split, (nplm, _) in scores.items()},
        "Kneser-Ney 5-gram": {split: perplexity(ngram) for split, (_, ngram) in scores.items()},
        f"mixture (a = {weight:.2f})": {split: perplexity(mix_log_probs(nplm, ngram, weight))
                                        for split, (nplm, ngram) in scores.items()},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["brown", "ptb"], default="brown")
    parser.add_argument("--output-dir", default="demo-output/nplm-brown")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=None)
    # 8 blocks of 64 targets: on a 2-core CPU small batches are fastest per token (the |V|-wide
    # tensors stay below the allocator's fresh-page threshold) and give more updates per epoch.
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    start = time.time()

    corpus = load_brown() if args.corpus == "brown" else load_ptb()
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"],
                                           min_frequency=4 if args.corpus == "brown" else 1)

    config = hf_nlm.NPLMConfig(
        vocab_size=len(tokenizer), context_size=4, embedding_size=30, hidden_size=60,
        direct_connections=False, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = hf_nlm.NPLMForCausalLM(config)
    # Saved with the model: what generate() does by default after a reload.
    model.generation_config.update(**BEAM, suppress_tokens=[tokenizer.unk_token_id])
    print(f"NPLM n={config.order} m={config.embedding_size} h={config.hidden_size}: "
          f"{model.num_parameters():,} parameters")

    training = TrainingConfig(
        # The demo starts over each time it runs (`make demo` twice must work), replacing its own folder.
        output_dir=args.output_dir, overwrite_output_dir=True, num_epochs=args.epochs,
        max_steps=args.max_steps, batch_size=args.batch_size,
        block_size=64, optimizer="adam", learning_rate=args.learning_rate, lr_scheduler="linear",
        weight_decay=0.0, max_grad_norm=1.0, early_stopping_patience=1, logging_steps=50,
    )
    results = train_lm(model, tokenizer, corpus, training, dataset_name=args.corpus)

    for split in ("validation", "test"):
        r = results[split]
        print(f"{split:>10} perplexity {r['perplexity']:8.2f}  "
              f"({r['num_tokens']:,} tokens, {r['num_unk']:,} <unk>)")
    model.eval()
    kn = KneserNeyLM.from_texts(corpus["train"]["text"], tokenizer, 5)
    # Beside the model, for `hf-nlm app`: its next-word tab shows the two side by side.
    kn.save(Path(args.output_dir) / "kneser-ney-5gram")
    table = comparison_table(model, tokenizer, corpus, kn)
    print(f"{'perplexity':<22}{'validation':>12}{'test':>10}")
    for name, row in table.items():
        print(f"{name:<22}{row['validation']:>12.2f}{row['test']:>10.2f}")

    samples = continuations(model, tokenizer, PROMPTS, {})  # the saved generation config: BEAM
    sampled = continuations(model, tokenizer, PROMPTS, SAMPLE)
    print("beam search (" + ", ".join(f"{k}={v}" for k, v in BEAM.items() if k != "do_sample")
          + ", <unk> suppressed):")
    for prompt, text in samples.items():
        print(f"  {prompt} -> {text}")
    print("sampling (" + ", ".join(f"{k}={v}" for k, v in SAMPLE.items() if k != "do_sample")
          + ", fixed random state):")
    for prompt, text in sampled.items():
        print(f"  {prompt} -> {text}")
    write_model_card(
        args.output_dir, model.config, dataset=corpus_card(args.corpus),
        num_parameters=model.num_parameters(), results={k: results[k] for k in ("validation", "test")},
        training=training.to_dict(), samples=samples,
    )

    reloaded = AutoModelForCausalLM.from_pretrained(args.output_dir)
    reloaded_tokenizer = AutoTokenizer.from_pretrained(args.output_dir)
    again = (continuations(reloaded, reloaded_tokenizer, PROMPTS, {}),
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
