"""Score a saved language model on one split of a corpus with the metrics shipped in hf_nlm.metrics.

Runs as a plain script, under `accelerate launch`, or with several processes under torchrun:

    python examples/evaluate_lm.py runs/ptb --corpus ptb --split test
    python examples/evaluate_lm.py runs/toy --test-file test.txt --bleu-prefix-words 3 --output toy_test.json
    torchrun --nproc_per_node 2 examples/evaluate_lm.py runs/toy --test-file test.txt
    accelerate launch examples/evaluate_lm.py runs/ptb --corpus ptb --split validation

The model is a folder written by `save_pretrained` (a training run's output directory) or a Hub id.

Perplexity: the split is read as one stream, every line followed by `<eos>` and every token predicted
once from its full context (as `hf_nlm.evaluation.evaluate_lm` reads it). With P processes each scores
its share of the blocks (feed-forward models) or of the stream's columns (recurrent models), and the
summed NLL and token counts are added up over the processes before the `perplexity` module turns them
into perplexities, so P processes give the numbers one process gives (up to float rounding). A recurrent
model's exact perplexity reads the stream as one column with the state never reset (the default, as in a
training run's results.json), which leaves nothing for a second process to do; `--batch-size B` reads B
columns, split across the processes, each column starting from a fresh state (faster, approximate).

BLEU (`--bleu-prefix-words K`): for each line of the split with more than K words, the model continues
its first K words (after `<eos>`, as a sentence start) by beam search (`--num-beams`, at most
`--max-new-tokens` tokens, stopping at `<eos>`), and the `bleu` module (sacreBLEU corpus BLEU, 13a
tokenization) scores the continuations against the rest of the lines. The lines are split across
processes and the continuations gathered, so this too does not depend on the number of processes.

The JSON written to --output (default: <model folder>/eval_<split>.json, or ./eval_<split>.json for a Hub
id) and printed uses the result format of `evaluate_lm` and of a training run's results.json, the split's
scores under the split's name, plus what was evaluated:

    {
      "<split>": {"perplexity": ..., "word_perplexity": ..., "loss": ..., "nll_per_token": ...,
                  "bits_per_token": ..., "total_nll": ..., "num_tokens": ..., "nll_per_word": ...,
                  "num_words": ..., "num_unk": ...,
                  "bleu": {"score": ..., "counts": [...], "totals": [...], "precisions": [...], "bp": ...,
                           "sys_len": ..., "ref_len": ..., "num_segments": ..., "prefix_words": K,
                           "num_beams": ..., "max_new_tokens": ...}},      # only with --bleu-prefix-words
      "model": "<folder or Hub id>", "corpus": "ptb" | "brown" | "sotu" | "text" | "csv",
      "data_files": [...],                                                  # text/csv corpora only
      "split": "<split>", "num_processes": P, "block_size": ..., "batch_size": ..., "exact": true | false
    }

`perplexity` is per token, `word_perplexity` per whitespace word including sentence ends (comparable
across tokenizations); `exact` is false only for a recurrent model read as several columns. Bad input
(a missing model folder, an unknown split, ...) prints the reason and exits with status 2.
Arguments: `--help`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import torch

from hf_nlm.training.arguments import FILE_CORPORA, add_data_arguments, data_spec_from_arguments

# An id on the Hub: "name" or "owner/name".
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# The batch size of a feed-forward model's evaluation (it does not change its numbers).
DEFAULT_BLOCKS_PER_BATCH = 32


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a saved model folder (save_pretrained) or a Hub id")
    add_data_arguments(parser)
    parser.add_argument("--split", default="test", help="the split to score (default: test)")
    parser.add_argument("--block-size", type=int, default=256,
                        help="targets per block, or positions per chunk for a recurrent model (default: 256)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"blocks per batch (default: {DEFAULT_BLOCKS_PER_BATCH}), or stream columns for "
                             "a recurrent model (default: 1, the exact perplexity)")
    parser.add_argument("--output", default=None,
                        help="the JSON file to write (default: <model folder>/eval_<split>.json, or "
                             "./eval_<split>.json for a Hub id)")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even where CUDA is available")
    bleu = parser.add_argument_group("BLEU of continuations")
    bleu.add_argument("--bleu-prefix-words", type=int, default=None, metavar="K",
                      help="also score BLEU: continue each line's first K words, compare with the rest of "
                           "the line")
    bleu.add_argument("--num-beams", type=int, default=4, help="beam width of the continuations (default: 4)")
    bleu.add_argument("--max-new-tokens", type=int, default=20,
                      help="longest continuation in tokens (default: 20)")
    bleu.add_argument("--max-lines", type=int, default=None,
                      help="continue only the first N eligible lines (default: all)")
    return parser


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for flag in ("block_size", "batch_size", "bleu_prefix_words", "num_beams", "max_new_tokens", "max_lines"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1, got {value}")


def load_model(parser: argparse.ArgumentParser, name: str):
    """Model and tokenizer from a saved folder or a Hub id; exits with status 2 if there is neither."""
    path = Path(name).expanduser()
    if path.exists() and not (path / "config.json").is_file():
        parser.error(f"{name} is not a saved model folder (no config.json)")
    if not path.exists() and not _HUB_ID.fullmatch(name):
        parser.error(f"no such model folder: {name}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_nlm  # noqa: F401  (registers the model types with the Auto classes)

    where = path if path.exists() else name
    try:
        return AutoModelForCausalLM.from_pretrained(where), AutoTokenizer.from_pretrained(where)
    except (OSError, ValueError) as err:
        origin = "" if path.exists() else " (no such folder here; tried it as a Hub id)"
        parser.error(f"cannot load the model {name}{origin}: {err}")


def make_accelerator(cpu: bool):
    """An ``Accelerator``; several processes without CUDA need ``cpu=True`` for accelerate to set up the
    (gloo) process group (see ``hf_nlm.training.trainer.make_accelerator``)."""
    from accelerate import Accelerator

    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return Accelerator(cpu=cpu or (several and not torch.cuda.is_available()))


def score_perplexity(model, tokenizer, texts, block_size: int, batch_size: int | None,
                     accelerator) -> tuple[dict, dict]:
    """``evaluate_lm``'s result for ``texts``, each process scoring its share; and the settings used."""
    from hf_nlm.data.batching import batching_for
    from hf_nlm.evaluation import perplexity_report, score_split

    batching = batching_for(model, tokenizer, block_size)
    exact_size = batching.exact_batch_size(batch_size or DEFAULT_BLOCKS_PER_BATCH)
    batch_size = batch_size or exact_size
    stream, stats = batching.encode(texts)
    show = accelerator.is_main_process and sys.stderr.isatty()
    total, count = score_split(batching, model, stream, batch_size, accelerator.device,
                               accelerator.num_processes, accelerator.process_index,
                               desc="perplexity" if show else None)
    if accelerator.num_processes > 1:
        sums = torch.tensor([total, count], dtype=torch.float64, device=accelerator.device)
        total, count = accelerator.reduce(sums, reduction="sum").tolist()
        count = round(count)
    if count != stats["num_tokens"]:
        raise RuntimeError(f"scored {count} targets but the split has {stats['num_tokens']} tokens")
    settings = {"block_size": block_size, "batch_size": batch_size, "exact": batch_size == exact_size}
    return perplexity_report(total, count, stats["num_words"], stats["num_unk"]), settings


def prefix_and_rest(texts, prefix_words: int, max_lines: int | None = None) -> list[tuple[str, str]]:
    """(first ``prefix_words`` words, the rest) of each line with more than ``prefix_words`` words."""
    pairs = []
    for text in texts:
        words = text.split()
        if len(words) > prefix_words:
            pairs.append((" ".join(words[:prefix_words]), " ".join(words[prefix_words:])))
    return pairs[:max_lines]


@torch.no_grad()
def continue_lines(model, tokenizer, prefixes, num_beams: int, max_new_tokens: int, device) -> list[str]:
    """Beam-search continuation of each prefix, read after ``<eos>`` (a sentence start, as in the stream)."""
    model.eval()
    out = []
    for prefix in prefixes:
        ids = [tokenizer.eos_token_id, *tokenizer(prefix, add_special_tokens=False).input_ids]
        ids = torch.tensor([ids], device=device)
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=num_beams,
                                   do_sample=False, max_new_tokens=max_new_tokens,
                                   eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        out.append(tokenizer.decode(generated[0, ids.shape[1]:], skip_special_tokens=True).strip())
    return out


def score_bleu(model, tokenizer, pairs, num_beams: int, max_new_tokens: int, accelerator) -> dict | None:
    """Corpus BLEU of the continuations of ``pairs`` (each process continues a contiguous share);
    the result on the main process, None on the others."""
    from accelerate.utils import gather_object

    from hf_nlm.metrics import Bleu

    share = torch.tensor_split(torch.arange(len(pairs)), accelerator.num_processes)[accelerator.process_index]
    mine = continue_lines(model, tokenizer, [pairs[i][0] for i in share.tolist()], num_beams, max_new_tokens,
                          accelerator.device)
    predictions = gather_object([mine])  # one list per process, in process order: the lines in order
    if not accelerator.is_main_process:
        return None
    predictions = [text for part in predictions for text in part]
    result = Bleu(keep_in_memory=True).compute(predictions=predictions,
                                               references=[[rest] for _, rest in pairs])
    return {**result, "num_segments": len(pairs)}


def default_output(model: str, split: str) -> Path:
    folder = Path(model).expanduser()
    return (folder if folder.is_dir() else Path.cwd()) / f"eval_{split}.json"


def main(argv: list[str] | None = None) -> dict | None:
    """Evaluate, write the JSON; returns the results on the main process (None on the others)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    try:
        data = data_spec_from_arguments(args)
        corpus = data.name
        datasets = data.load()
    except (ValueError, OSError) as err:
        parser.error(str(err))
    if args.split not in datasets:
        parser.error(f"the corpus has no {args.split!r} split (it has {', '.join(datasets)})")
    texts = datasets[args.split]["text"]
    pairs = None
    if args.bleu_prefix_words is not None:
        pairs = prefix_and_rest(texts, args.bleu_prefix_words, args.max_lines)
        if not pairs:
            parser.error(f"no line of the {args.split} split has more than {args.bleu_prefix_words} words "
                         "to continue")
    model, tokenizer = load_model(parser, args.model)

    accelerator = make_accelerator(args.cpu)
    model.to(accelerator.device)
    try:
        scores, settings = score_perplexity(model, tokenizer, texts, args.block_size, args.batch_size,
                                            accelerator)
    except ValueError as err:  # e.g. an empty split
        parser.error(f"cannot score the {args.split} split: {err}")
    if pairs is not None:
        bleu = score_bleu(model, tokenizer, pairs, args.num_beams, args.max_new_tokens, accelerator)
        if bleu is not None:
            scores["bleu"] = {**bleu, "prefix_words": args.bleu_prefix_words, "num_beams": args.num_beams,
                              "max_new_tokens": args.max_new_tokens}
    if not accelerator.is_main_process:
        return None

    results = {args.split: scores, "model": args.model, "corpus": corpus}
    if corpus in FILE_CORPORA:
        results["data_files"] = list(getattr(data, f"{args.split}_file") or [])
    results.update(split=args.split, num_processes=accelerator.num_processes, **settings)
    output = Path(args.output) if args.output else default_output(args.model, args.split)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
