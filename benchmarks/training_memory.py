"""The training-memory estimate (``hf_nlm.training.memory``) against the memory real training steps take, for
every model type x head: the numeracy LM's seven numeral strategies (Spithourakis & Riedel 2018), the softmax,
split and tree heads of the NPLM and the LBL, the HLBL's tree, the AWD-LSTM's softmax and split, and the story
seq2seq model at both stages of Yao et al.'s (2019) plan-and-write (title -> storyline, title and storyline ->
story). Each at two settings: ``default`` (the model type's default recipe,
``MODEL_TYPES[t].recipes["default"]``: its model fields and ``TrainingConfig.for_model``, over a vocabulary of
10,000 words; the numeracy LM's recipe caps it at 5,000) and ``large`` (4x the hidden and embedding sizes and
4x the batch, the validation batch the same, over 40,000 words; shorter BPTT chunks for the recurrent models
and 2x the batch for the story stage, to stay under ~2.5 GB).

What is measured, in a fresh process per case (``--case``): the text (synthetic: words drawn by Zipf's law,
and for the numeracy LM three numerals a line: years, counts, amounts), the tokenizer, the batching and its
training batches and one validation batch are made first; then a warm-up step of a tiny model of the same type
and head (so that the one-time initialisation of PyTorch's kernels is not counted); a 32 MiB block is made and
freed (glibc then serves smaller blocks from its heap, as it does in a run that has read a corpus of some MB:
its mmap threshold follows the largest block freed); ``gc.collect()``, and the resident memory ``VmRSS`` is
read and the high-water mark ``VmHWM`` reset (``/proc/self/clear_refs``); then the model is built (seeded),
the optimizer made and the head prepared (a mixture's EM), three training steps run as
``LMTrainer.training_step`` runs them (forward with the labels, backward, clipping, the optimizer's step, the
recurrent state carried) and the validation batch is scored (``hf_nlm.evaluation.scoring.score_split``).
``measured_mb`` is ``VmHWM`` after that minus ``VmRSS`` before the model: the peak resident memory of
training. ``estimate_mb`` is ``estimate_training_memory`` for the same config and settings, run afterwards in
the same process; ``value`` = estimate / measured, ``target`` [0.8, 2.0]. Each case runs in ``--repeats``
processes (3; a case's peak moves by 15%, up to a quarter, from one process to the next with the allocator's
layout), and the row of the median peak is reported, the others' peaks in ``measured_mb_runs``.

Prints one JSON object per case on stdout (progress on stderr), e.g.
{"benchmark": "training_memory", "case": "numeracy_lm/drnn/default", "value": 1.1, "unit": "x",
 "better": "within target", "target": [0.8, 2.0], "estimate_mb": 120.3, "measured_mb": 109.8, ...}

    python benchmarks/training_memory.py --threads 1            # every case at both settings
    (results/training_memory.jsonl) python benchmarks/training_memory.py --threads 1 --quick    # a case per
    model type, default settings
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import random
import subprocess
import sys
import time

from numeracy_memory import numeral

BENCHMARK = "training_memory"
TARGET = (0.8, 2.0)


def cases() -> list[tuple[str, str]]:
    """(model type, head): every head a run builds (``run_heads``); the story seq2seq model's by its stage of
    plan-and-write instead, whose lengths differ."""
    from hf_nlm.models import MODEL_TYPES
    from hf_nlm.training.run import run_heads

    return [*((t, h) for t in MODEL_TYPES if MODEL_TYPES[t].seq2seq_lm_class is None for h in run_heads(t)),
            ("story_seq2seq", "storyline"), ("story_seq2seq", "story")]


QUICK_CASES = (("nplm", "softmax"), ("hlbl", "tree"), ("awd_lstm", "split"), ("numeracy_lm", "drnn"),
               ("story_seq2seq", "story"))
SETTINGS = ("default", "large")
VOCAB = {"default": 10_000, "large": 40_000}
#: (source, target) tokens of a pair, ``<eos>`` included: a ROCStories title -> storyline (5 keyword phrases
#: joined by " # "), and "title <sep> storyline" -> the five-sentence story.
PAIR_LENGTHS = {"storyline": (6, 12), "story": (20, 56)}
#: Training steps measured.
STEPS = 3


def settings(model_type: str, head: str, size: str) -> tuple[dict, dict, int]:
    """The config fields, TrainingConfig fields and vocabulary size of a case."""
    from hf_nlm.models import MODEL_TYPES
    from hf_nlm.training import TrainingConfig

    recipe = MODEL_TYPES[model_type].recipe()
    model = dict(recipe.model)
    training = {f: getattr(TrainingConfig.for_model(model_type, output_dir="-"), f)
                for f in ("batch_size", "block_size", "eval_batch_size", "optimizer", "momentum",
                          "weight_decay", "max_grad_norm", "learning_rate")}
    vocab = recipe.tokenizer.get("vocab_size") or VOCAB["default"]
    if model_type == "numeracy_lm":
        model["numeral_strategy"] = head
    elif model_type != "story_seq2seq":
        model["head"] = head
    if size == "large":
        config = MODEL_TYPES[model_type].config_class()
        for name in ("embedding_size", "hidden_size"):
            model[name] = 4 * model.get(name, getattr(config, name))
        # 4x the batch; to stay under ~2.5 GB, half the BPTT length of the recurrent models (a quarter for the
        # numeracy LM's 128-token default) and half that batch for the story stage's 56-token targets.
        training["batch_size"] *= 2 if head == "story" else 4
        training["eval_batch_size"] = training["batch_size"]
        training["block_size"] = {"awd_lstm": 35, "numeracy_lm": 32}.get(model_type, training["block_size"])
        vocab = VOCAB["large"]
    if head == "split":
        model["cutoffs"] = [vocab // 5, vocab // 2]
    if head == "tree":
        model["tie_word_embeddings"] = False  # node vectors are not word vectors (as hf-nlm train sets)
    if model_type == "story_seq2seq":
        training["max_source_length"], training["max_target_length"] = PAIR_LENGTHS[head]
    return model, training, vocab


def zipf_words(rng: random.Random, vocab: int, k: int) -> list[str]:
    """``k`` words of ``w0 .. w{vocab-1}`` drawn by Zipf's law (word i with weight 1 / (i + 1))."""
    return [f"w{i}" for i in rng.choices(range(vocab), cum_weights=_cumulative(vocab), k=k)]


_CUMULATIVE: dict[int, list[float]] = {}


def _cumulative(vocab: int) -> list[float]:
    if vocab not in _CUMULATIVE:
        total, out = 0.0, []
        for i in range(vocab):
            total += 1.0 / (i + 1)
            out.append(total)
        _CUMULATIVE[vocab] = out
    return _CUMULATIVE[vocab]


def text_lines(vocab: int, num_tokens: int, numerals: bool, seed: int) -> list[str]:
    """Lines of 20 tokens: Zipf words, and for a numeracy model 3 numerals among them."""
    rng = random.Random(seed)
    lines = []
    for _ in range(-(-num_tokens // 20)):
        tokens = zipf_words(rng, vocab, 17 if numerals else 20)
        tokens += [numeral(rng) for _ in range(3)] if numerals else []
        rng.shuffle(tokens)
        lines.append(" ".join(tokens))
    return lines


def pairs(vocab: int, lengths: tuple[int, int], num_pairs: int, seed: int) -> dict[str, list[str]]:
    """(source, target) pairs of exactly ``lengths`` tokens with ``<eos>`` (one word fewer each)."""
    rng = random.Random(seed)
    return {"source": [" ".join(zipf_words(rng, vocab, lengths[0] - 1)) for _ in range(num_pairs)],
            "target": [" ".join(zipf_words(rng, vocab, lengths[1] - 1)) for _ in range(num_pairs)]}


def vm_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> None:
    """Reset ``VmHWM`` to the current resident memory (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def run_case(model_type: str, head: str, size: str, seed: int = 0) -> dict:
    """One case in this process (module docstring)."""
    import torch
    from datasets import Dataset

    from hf_nlm.data.batching import batching_for
    from hf_nlm.evaluation.scoring import score_split
    from hf_nlm.models import MODEL_TYPES
    from hf_nlm.tokenization import train_numeracy_tokenizer, train_word_level_tokenizer
    from hf_nlm.training import TrainingConfig
    from hf_nlm.training.memory import HEAP_BLOCK, estimate_training_memory
    from hf_nlm.training.optim import build_optimizer
    from hf_nlm.training.trainer import pair_format
    from hf_nlm.trees import random_tree

    model_fields, training_fields, vocab = settings(model_type, head, size)
    training = TrainingConfig(output_dir="-", **training_fields)
    model_type_ = MODEL_TYPES[model_type]
    numeracy = model_type == "numeracy_lm"
    B, T, E = training.batch_size, training.block_size, training.eval_batch_size
    if model_type == "story_seq2seq":
        lengths = PAIR_LENGTHS[head]
        num_pairs = max(30 * vocab // sum(lengths), (STEPS + 1) * B)
        train = Dataset.from_dict(pairs(vocab, lengths, num_pairs, seed))
        validation = Dataset.from_dict(pairs(vocab, lengths, E, seed + 1))
        texts = [f"{s} {t}" for s, t in zip(train["source"], train["target"], strict=True)]
    else:
        # Enough text for Zipf's law to reach most of the vocabulary, and for the steps' batches.
        train = text_lines(vocab, max(30 * vocab, 2 * (STEPS + 1) * B * T), numeracy, seed)
        validation = text_lines(vocab, E * T, numeracy, seed + 1)
        texts = train
    if numeracy:
        tokenizer = train_numeracy_tokenizer(texts, max_vocab_size=vocab)
    else:
        tokenizer = train_word_level_tokenizer(texts, max_vocab_size=vocab)

    def make_config(**overrides):
        fields = {**model_fields, **overrides}
        ids = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id,
               "pad_token_id": tokenizer.eos_token_id}
        if numeracy:
            fields["numeral_vocab"] = tokenizer.numeral_vocab
        if model_type == "story_seq2seq":
            ids["decoder_start_token_id"] = tokenizer.eos_token_id
        return model_type_.config_class(vocab_size=len(tokenizer), **ids, **fields)

    def make_model(config):
        tree = random_tree(config.vocab_size, seed=seed) if config.head == "tree" else None
        torch.manual_seed(seed)
        return model_type_.lm_class(config, tree=tree), tree

    # A tiny model of the same type and head: it gives the batching (which only its type decides) and a
    # warm-up step, so that PyTorch's one-time set-up is not measured.
    sizes = {f.name for f in dataclasses.fields(model_type_.config_class)} & {"embedding_size", "hidden_size"}
    warm, _ = make_model(make_config(**dict.fromkeys(sizes, 8)))
    batching = batching_for(warm, tokenizer, T, pairs=pair_format(training))
    stream, _ = batching.encode_split(train, "train")
    batches = batching.training_batches(stream, B, seed=seed)
    targets = batching.target_stream(stream)
    val_stream, _ = batching.encode_split(validation, "validation")

    def train_steps(model, steps: int) -> int:
        """Run the steps and the validation batch; return ``VmHWM`` (KiB) after the steps."""
        model.lm_head.prepare_training(targets)
        optimizer = build_optimizer(model, training)
        state, epoch = None, batches.epoch(0)
        model.train()
        for _ in range(steps):
            batch, _, _ = next(epoch)
            output = model(**batch, **batches.state_inputs(state))
            output.loss.backward()
            if training.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), training.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state = batches.state_after(output)
            del output
        after_steps = vm_kib("VmHWM")
        score_split(batching, model, val_stream, E)
        return after_steps

    train_steps(warm, 1)
    del warm
    # glibc raises its mmap threshold to the largest block freed (up to 32 MiB): a run that has read a corpus
    # of more than a few MB has it there, and so has this one, whatever its text.
    torch.ones(HEAP_BLOCK // 4)
    config = make_config()
    gc.collect()
    before = vm_kib("VmRSS")
    reset_peak()
    start = time.perf_counter()
    model, tree = make_model(config)
    after_steps = train_steps(model, STEPS)
    measured = (vm_kib("VmHWM") - before) * 1024
    seconds = time.perf_counter() - start
    del model
    gc.collect()

    start = time.perf_counter()
    estimate = estimate_training_memory(
        model_type_.lm_class, config, tree=tree, batch_size=B, block_size=T, optimizer=training.optimizer,
        momentum=training.momentum, weight_decay=training.weight_decay, max_grad_norm=training.max_grad_norm,
        eval_batch_size=E, max_source_length=training.max_source_length,
        max_target_length=training.max_target_length,
    )
    estimate_seconds = time.perf_counter() - start
    row = {
        "case": f"{model_type}/{head}/{size}", "model_type": model_type, "head": head, "setting": size,
        "value": round(estimate.total_bytes / measured, 3), "unit": "x", "better": "within target",
        "target": list(TARGET), "estimate_mb": round(estimate.total_bytes / 1e6, 1),
        "measured_mb": round(measured / 1e6, 1),
        "measured_training_mb": round((after_steps - before) * 1024 / 1e6, 1),
        "estimate_training_mb": round(estimate.training_bytes / 1e6, 1),
        "estimate_state_mb": round(estimate.state_bytes / 1e6, 1),
        "estimate_activation_mb": round(estimate.activation_bytes / 1e6, 1),
        "estimate_evaluation_mb": round(estimate.evaluation_bytes / 1e6, 1),
        "parameters": estimate.parameters, "vocab_size": len(tokenizer), "batch": estimate.batch,
        "eval_batch_size": E, "optimizer": training.optimizer,
        "config": {k: v for k, v in model_fields.items() if k != "numeral_vocab"},
        "estimate_seconds": round(estimate_seconds, 2), "steps_seconds": round(seconds, 2),
        "threads": torch.get_num_threads(),
    }
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one case per model type, default settings only")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each case's process")
    parser.add_argument("--case", default=None, help="MODEL_TYPE/HEAD/SETTING: run one case in this process")
    parser.add_argument("--only", default=None, help="run only the cases whose name contains this")
    parser.add_argument("--repeats", type=int, default=None,
                        help="processes per case, the median peak reported (default: 3, 1 with --quick)")
    args = parser.parse_args(argv)
    if args.case:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(run_case(*args.case.split("/"))), flush=True)
        return
    from common import emit_json, log

    args.repeats = args.repeats or (1 if args.quick else 3)

    todo = [(t, h, s) for s in (("default",) if args.quick else SETTINGS)
            for t, h in (QUICK_CASES if args.quick else cases())]
    for model_type, head, size in todo:
        name = f"{model_type}/{head}/{size}"
        if args.only and args.only not in name:
            continue
        log(f"{name} ...")
        runs = []
        for _ in range(args.repeats):
            done = subprocess.run([sys.executable, __file__, "--case", name, "--threads", str(args.threads)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                log(done.stderr[-3000:])
                raise SystemExit(f"{name} failed")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        # The run whose peak is the median of the repetitions (the allocator's layout varies from process to
        # process).
        row = sorted(runs, key=lambda r: r["measured_mb"])[len(runs) // 2]
        row["measured_mb_runs"] = [r["measured_mb"] for r in runs]
        emit_json(BENCHMARK, row)
        log(f"  estimate {row['estimate_mb']} MB, measured {row['measured_mb_runs']} MB: {row['value']}x")


if __name__ == "__main__":
    main()
