"""`make demo`: a Bengio NPLM trained on the Brown corpus for at most 10 minutes on 2 CPU cores, end to end.

1. Brown with Bengio et al.'s split (first 800,000 words train, next 200,000 validation, rest test),
   lowercased, words seen fewer than 4 times in the training split -> <unk>.
2. A word-level tokenizer with frequency-sorted ids.
3. An NPLM with the paper's MLP9 shape (n = 5, m = 30, h = 100, no direct connections) trained with Adam
   through hf_nlm's Accelerate loop for the whole epochs that fit the time budget (``--budget``, 600 s):
   a few timed updates first give the seconds per epoch, the learning rate decays linearly to 0 at the
   end of the last epoch, and the budget also stops training mid-epoch should the machine slow down.
4. Validation and test perplexity beside a Kneser-Ney 5-gram on the same split and vocabulary and the
   mixture of the two (the weight fitted on validation), as Bengio et al. report them (Table 1), and a
   line saying whether the NPLM beats the 5-gram and after how long.
5. Three prompts continued by beam search and by sampling, the settings printed.
6. The model folder (config, safetensors weights, tokenizer, generation config, model card, curves.png,
   and the 5-gram in kneser-ney-5gram/, which `hf-nlm app` shows beside the NPLM) is reloaded with
   AutoModelForCausalLM and generates the same continuations again.

Run `python examples/demo.py --help` for the knobs; `--epochs 1 --max-steps 50` is a smoke test.
`benchmarks/time_to_kn.py` runs this script on Brown and PTB and plots validation perplexity against
training time beside the 5-gram's.
"""

from __future__ import annotations

import argparse
import copy
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
from hf_nlm.training.run_folder import read_jsonl

BLOCK_SIZE = 64  # targets per block
EVAL_BATCH_SIZE = 64  # blocks per validation batch (TrainingConfig's default)
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


def epochs_in_budget(model, train_texts, validation_texts, budget_s: float, batch_size: int,
                     block_size: int, eval_batch_size: int, repeats: int = 20) -> tuple[int, float]:
    """How many whole epochs fit ``budget_s`` seconds, and the estimated seconds per epoch.

    Times ``repeats`` Adam updates of a copy of ``model`` on a random batch and as many validation
    batches (this machine's speed now; the model's own weights untouched); an epoch is one update per
    ``batch_size x block_size`` training words and a validation pass over ``validation_texts``. 10% of
    the budget is kept for the checkpoints and for a machine that slows down."""
    probe = copy.deepcopy(model).train()
    optimizer = torch.optim.Adam(probe.parameters())
    context = probe.config.order - 1

    def seconds_per_word(size: int, step) -> float:
        ids = torch.randint(probe.config.vocab_size, (size, block_size + context))
        for i in range(repeats + 3):  # 3 warm-up rounds: the allocator's first pages, the kernels' set-up
            if i == 3:
                start = time.perf_counter()
            step(ids)
        return (time.perf_counter() - start) / repeats / (size * block_size)

    def update(ids):
        probe(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def score(ids):
        probe(input_ids=ids, labels=ids)

    def words(texts) -> int:  # the word-level tokenizer splits at spaces; + 1 for each line's <eos>
        return sum(len(text.split()) + 1 for text in texts)

    train_s = seconds_per_word(batch_size, update) * words(train_texts)
    probe.eval()
    epoch_s = train_s + seconds_per_word(eval_batch_size, score) * words(validation_texts)
    return max(1, int(0.9 * budget_s / epoch_s)), epoch_s


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
    parser.add_argument("--corpus", choices=["brown", "ptb"], default="brown")
    parser.add_argument("--output-dir", default="demo-output/nplm-brown")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds of training (validation included): whole epochs that fit, then a stop")
    parser.add_argument("--epochs", type=int, default=None,
                        help="train this many epochs (still within --budget) instead of the ones that fit")
    parser.add_argument("--max-steps", type=int, default=None)
    # 8 blocks of 64 targets: on a 2-core CPU small batches are fastest per token (the |V|-wide
    # tensors stay below the allocator's fresh-page threshold) and give more updates per epoch.
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout on z (NPLMConfig.dropout; default 0, the paper's)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    start = time.time()

    corpus = load_brown() if args.corpus == "brown" else load_ptb()
    tokenizer = train_word_level_tokenizer(corpus["train"]["text"],
                                           min_frequency=4 if args.corpus == "brown" else 1)

    config = hf_nlm.NPLMConfig(
        vocab_size=len(tokenizer), context_size=4, embedding_size=30, hidden_size=100,
        direct_connections=False, dropout=args.dropout, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = hf_nlm.NPLMForCausalLM(config)
    # Saved with the model: what generate() does by default after a reload.
    model.generation_config.update(**BEAM, suppress_tokens=[tokenizer.unk_token_id])
    print(f"NPLM n={config.order} m={config.embedding_size} h={config.hidden_size}: "
          f"{model.num_parameters():,} parameters")

    epochs, epoch_s = epochs_in_budget(model, corpus["train"]["text"], corpus["validation"]["text"],
                                       args.budget, args.batch_size, BLOCK_SIZE, EVAL_BATCH_SIZE)
    epochs = args.epochs or epochs
    print(f"training budget {args.budget:.0f} s: {epochs} epoch(s) of about {epoch_s:.0f} s each "
          f"(timed on {torch.get_num_threads()} threads)")
    training = TrainingConfig(
        # The demo starts over each time it runs (`make demo` twice must work), replacing its own folder.
        output_dir=args.output_dir, overwrite_output_dir=True, num_epochs=epochs,
        max_time_s=args.budget, max_time_within_epoch=True,
        max_steps=args.max_steps, batch_size=args.batch_size,
        block_size=BLOCK_SIZE, optimizer="adam", learning_rate=args.learning_rate, lr_scheduler="linear",
        weight_decay=0.0, max_grad_norm=1.0, early_stopping_patience=1, logging_steps=50,
        eval_batch_size=EVAL_BATCH_SIZE,
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
    print(verdict(table, results, training_seconds(args.output_dir), torch.get_num_threads()))

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
