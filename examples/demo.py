"""`make demo`: a small Bengio NPLM trained on the Brown corpus, end to end, in a few minutes on 2 CPU cores.

1. Brown with Bengio et al.'s split (first 800,000 words train, next 200,000 validation, rest test),
   lowercased, words seen fewer than 4 times in the training split -> <unk>.
2. A word-level tokenizer with frequency-sorted ids.
3. An NPLM (n = 5, m = 30, h = 60, no direct connections: a smaller, faster cousin of the paper's
   MLP5/MLP9) trained with Adam through hf_nlm's Accelerate loop, early stopping on validation.
4. Validation and test perplexity, three beam-search continuations of fixed prompts.
5. The model folder (config, safetensors weights, tokenizer, generation config, model card) is
   reloaded with AutoModelForCausalLM and generates the same continuations again.

Run `python examples/demo.py --help` for the knobs; `--epochs 1 --max-steps 50` is a smoke test.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import hf_nlm
from hf_nlm.data import load_brown, load_ptb
from hf_nlm.hub.model_card import write_model_card
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm

PROMPTS = ["the president of the united states", "in the morning , she", "the church"]


def continuations(model, tokenizer, prompts: list[str]) -> dict[str, str]:
    out = {}
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        generated = model.generate(ids, attention_mask=torch.ones_like(ids))
        out[prompt] = tokenizer.decode(generated[0, ids.shape[1]:], skip_special_tokens=True).strip()
    return out


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
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"], min_frequency=4 if args.corpus == "brown" else 1)
    print(f"{args.corpus}: " + ", ".join(f"{k} {len(v):,} lines" for k, v in corpus.items()) + f"; |V| = {len(tokenizer):,}")

    config = hf_nlm.NPLMConfig(
        vocab_size=len(tokenizer), context_size=4, embedding_size=30, hidden_size=60, direct_connections=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model = hf_nlm.NPLMForCausalLM(config)
    # Beam search prefers short hypotheses (". <eos>" is very likely) and, over an n-gram model, loops:
    # ask for at least 8 words and forbid repeating any trigram.
    # <unk> stands for thousands of rare words, so it is the likeliest "word" after many contexts:
    # never generate it.
    model.generation_config.update(
        num_beams=5, max_new_tokens=15, min_new_tokens=8, no_repeat_ngram_size=3, do_sample=False,
        suppress_tokens=[tokenizer.unk_token_id],
    )
    print(f"NPLM n={config.order} m={config.embedding_size} h={config.hidden_size}: {model.num_parameters():,} parameters")

    training = TrainingConfig(
        # The demo starts over each time it runs (`make demo` twice must work), replacing its own folder.
        output_dir=args.output_dir, overwrite_output_dir=True, num_epochs=args.epochs, max_steps=args.max_steps,
        batch_size=args.batch_size,
        block_size=64, optimizer="adam", learning_rate=args.learning_rate, lr_scheduler="linear",
        weight_decay=0.0, max_grad_norm=1.0, early_stopping_patience=1, logging_steps=50,
    )
    results = train_lm(model, tokenizer, corpus, training, dataset_name=args.corpus)

    for split in ("validation", "test"):
        r = results[split]
        print(f"{split:>10} perplexity {r['perplexity']:8.2f}  ({r['num_tokens']:,} tokens, {r['num_unk']:,} <unk>)")
    model.eval()
    samples = continuations(model, tokenizer, PROMPTS)
    print("beam search (5 beams):")
    for prompt, text in samples.items():
        print(f"  {prompt} -> {text}")
    write_model_card(
        args.output_dir, model.config, dataset=args.corpus, num_parameters=model.num_parameters(),
        results={k: results[k] for k in ("validation", "test")}, training=training.to_dict(), samples=samples,
    )

    reloaded = AutoModelForCausalLM.from_pretrained(args.output_dir)
    reloaded_tokenizer = AutoTokenizer.from_pretrained(args.output_dir)
    again = continuations(reloaded, reloaded_tokenizer, PROMPTS)
    same = again == samples
    print(f"reloaded {type(reloaded).__name__} from {args.output_dir}: same continuations = {same}")
    if not same:
        raise SystemExit(f"reloaded model generated differently: {json.dumps(again, indent=1)}")
    print(f"done in {time.time() - start:.0f} s; model folder: {args.output_dir}")
    return results


if __name__ == "__main__":
    main()
