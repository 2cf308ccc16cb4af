"""The web demo's memory bound (``hf-nlm app``): peak resident memory above idle while the page answers the
largest question each tab allows (``hf_nlm.app.explore``'s limits), and how long it takes.

Serves one page over four runs: the ``make demo`` NPLM with its 5-gram (Continue, Next word, surprisal), and,
untrained at their default sizes over the NPLM's vocabulary (the weights' values change neither memory nor
time; an untrained story model writes to its length limit, the slowest case), a numeracy LM with a MoG head
(its density picture), an HLBL over a random tree, and a story seq2seq model serving both stages. A Gradio
client posts each question to the page on 127.0.0.1, one after another; the peak is the process's high-water
mark (``VmHWM``, reset before each question through ``/proc/self/clear_refs``) minus its resident memory
once the page is up. Prints one JSON line per question, e.g.
{"benchmark": "app_memory", "case": "continue: beam 10, 10 shown, 100 tokens, 2000-token prompt",
 "value": 41.2, "unit": "MiB", "seconds": 3.1, ...}

    make demo && python benchmarks/app_memory.py demo-output/nplm-brown >> benchmarks/results/app_memory.jsonl
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
from common import add_run_arguments, emit_json, log, machine

from hf_nlm import HLBLConfig, HLBLForCausalLM
from hf_nlm.app.browser import served
from hf_nlm.app.explore import MAX_PROMPT_TOKENS, MAX_TITLE_TOKENS, NUMBER_LIMITS, load_run, load_runs
from hf_nlm.app.page import build_app
from hf_nlm.models import (
    NumeracyLMConfig,
    NumeracyLMForCausalLM,
    StorySeq2SeqConfig,
    StorySeq2SeqForConditionalGeneration,
)
from hf_nlm.tokenization import train_numeracy_tokenizer, train_word_level_tokenizer
from hf_nlm.trees import random_tree

BENCHMARK = "app_memory"
#: The bound docs/app.md states, MiB above idle.
TARGET_MIB = 1024


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak() -> None:
    """Start the high-water mark VmHWM again from the current resident memory (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def words(tokenizer, count: int, seed: int) -> str:
    """``count`` words of ``tokenizer``'s vocabulary in random order: one token each."""
    vocab = [t for t in tokenizer.get_vocab() if t.isalpha()]
    rng = random.Random(seed)
    return " ".join(rng.choice(vocab) for _ in range(count))


def special(tok) -> dict:
    return {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id}


def save(model, tokenizer, folder: Path) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def side_runs(nplm, root: Path, quick: bool) -> list[Path]:
    """The numeracy, tree and story runs, untrained, over the NPLM's vocabulary."""
    vocab = [t for t in nplm.tokenizer.get_vocab() if t.isalpha()][: 2000 if quick else None]
    rng = random.Random(0)
    texts = [" ".join(rng.choice(vocab) for _ in range(12)) + f" {rng.randint(0, 5000)}" for _ in range(5000)]
    numbers = train_numeracy_tokenizer(texts + [" ".join(vocab)], max_vocab_size=len(vocab) + 1000)
    numeracy = NumeracyLMForCausalLM(NumeracyLMConfig(
        vocab_size=len(numbers), numeral_strategy="mog", numeral_vocab=numbers.numeral_vocab,
        bos_token_id=numbers.eos_token_id, eos_token_id=numbers.eos_token_id,
        pad_token_id=numbers.eos_token_id))
    tok = nplm.tokenizer
    tree = HLBLForCausalLM(HLBLConfig(vocab_size=len(tok), **special(tok)),
                           tree=random_tree(len(tok), seed=1))
    stories = train_word_level_tokenizer([" ".join(vocab), "<sep> #"])
    story = StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(
        vocab_size=len(stories), pad_token_id=stories.pad_token_id, bos_token_id=stories.eos_token_id,
        eos_token_id=stories.eos_token_id, decoder_start_token_id=stories.eos_token_id))
    return [save(m, t, root / name) for m, t, name in
            ((numeracy, numbers, "numeracy-mog"), (tree, tok, "hlbl"), (story, stories, "story"))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", default="demo-output/nplm-brown")
    parser.add_argument("--quick", action="store_true", help="a smaller numeracy vocabulary")
    add_run_arguments(parser, output_dir=False)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from gradio_client import Client

    torch.manual_seed(0)
    nplm = load_run(args.run_dir)
    with TemporaryDirectory(prefix="hf_nlm_app_memory_") as tmp:
        runs, problems = load_runs([args.run_dir, *side_runs(nplm, Path(tmp), args.quick)])
        assert not problems, problems
        lm, numeracy, tree, story = runs
        prompt = words(lm.tokenizer, MAX_PROMPT_TOKENS, 0)
        context = words(numeracy.tokenizer, MAX_PROMPT_TOKENS, 1)
        title = words(story.tokenizer, MAX_TITLE_TOKENS, 2)
        most = {name: high for name, (_, _, high, _) in NUMBER_LIMITS.items()}
        second = f"{lm.name} / {lm.ngram_name}" if lm.ngram else "(none)"
        cases = (
            (f"continue: beam {most['num_beams']}, {most['num_return_sequences']} shown, "
             f"{most['max_new_tokens']} tokens, {MAX_PROMPT_TOKENS}-token prompt", "/continue",
             [lm.name, prompt, "beam", most["num_beams"], most["num_return_sequences"],
              most["max_new_tokens"], 1.0, 0.9]),
            (f"continue: sample {most['num_return_sequences']}, {most['max_new_tokens']} tokens, "
             f"{MAX_PROMPT_TOKENS}-token prompt", "/continue",
             [lm.name, prompt, "sample", 1, most["num_return_sequences"], most["max_new_tokens"],
              most["temperature"], 1.0]),
            (f"next word: top {most['k']} beside the n-gram, {MAX_PROMPT_TOKENS}-token prompt", "/next_word",
             [lm.name, second, prompt, most["k"]]),
            (f"surprisal of a {MAX_PROMPT_TOKENS}-token text", "/surprisal", [lm.name, prompt]),
            (f"numeracy (MoG, density picture), {MAX_PROMPT_TOKENS}-token context", "/next_number",
             [numeracy.name, context]),
            (f"story: {MAX_TITLE_TOKENS}-token title, both stages and the attention picture", "/story",
             [story.name, story.name, title]),
            (f"tree path, {MAX_PROMPT_TOKENS}-token context", "/tree_path",
             [tree.name, words(tree.tokenizer, MAX_PROMPT_TOKENS, 3), words(tree.tokenizer, 1, 4)]),
        )
        common = {"cpu": machine(), "threads": torch.get_num_threads(), "quick": args.quick,
                  "target": TARGET_MIB}
        with served(build_app(runs, workdir=tmp)) as address:
            client = Client(address, verbose=False)
            client.predict(lm.name, "the", "greedy", 1, 1, 1, 1.0, 0.9, api_name="/continue")  # warm up
            idle = status_kib("VmRSS")
            log(f"idle: {idle / 1024:.0f} MiB resident")
            for case, endpoint, inputs in cases:
                reset_peak()
                start = time.perf_counter()
                answer = client.predict(*inputs, api_name=endpoint)
                seconds = time.perf_counter() - start
                if str(answer[-1]).startswith("**Error:**"):
                    raise SystemExit(f"{case}: the page refused it: {answer[-1]}")
                above = (status_kib("VmHWM") - idle) / 1024
                log(f"{case}: {above:.0f} MiB above idle, {seconds:.1f} s")
                emit_json(BENCHMARK, {"case": case, "value": round(above, 1), "unit": "MiB",
                                      "better": "lower", "met": above <= TARGET_MIB,
                                      "seconds": round(seconds, 2), "idle_mib": round(idle / 1024), **common})


if __name__ == "__main__":
    main()
