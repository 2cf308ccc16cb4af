"""The storyline -> sentence step of story generation on real text: the keywords of a Brown sentence
in, the sentence out (ROCStories itself is licensed per user and not reachable here).

Each Brown sentence gets its top RAKE phrases in sentence order (``hf_nlm.story.storylines.
keyword_sentence_pairs``, the storyline extractor used for ROCStories) as the source. Systems, all
scored by corpus BLEU (sacreBLEU) on the first ``--test-size`` test pairs:

* ``keywords``: the keywords themselves, in order (baseline);
* ``retrieval``: the training sentence whose words best cover the keywords, by summed IDF of the
  shared words (baseline);
* ``seq2seq``: the attention seq2seq (``model_type="story_seq2seq"``);
* ``seq2seq_none``: the same model without attention (the decoder starts from the encoder's state);
* ``lm``: the LM approach, an AWD-LSTM trained on ``"keywords <sep> sentence"`` lines, continuing
  ``"keywords <sep>"``.

Target: the attention seq2seq beats both baselines and the no-attention seq2seq. The trained rows are named
recipes, run by ``hf_nlm.training.train`` on the data this script derives and writes into ``--output-dir``
(CSV ``source`` / ``target`` pairs, or ``keywords <sep> sentence`` lines): ``brown-keywords-seq2seq`` and
``brown-keywords-seq2seq-none`` of ``story_seq2seq``, ``brown-keywords-lm`` of ``awd_lstm``; each trains for
its epochs with early stopping (``--time-budget`` adds a time limit per row). One JSON line per result; a
Markdown table.

    python benchmarks/story_brown.py --threads 1     # the recorded run
    python benchmarks/story_brown.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter

import torch
from common import add_training_arguments, emit_json, log, machine, run_context, start_run, write_report
from datasets import Dataset, DatasetDict

from hf_nlm.data import load_brown
from hf_nlm.evaluation import decode_generated, generate_targets
from hf_nlm.metrics import Bleu
from hf_nlm.story.storylines import KEYWORD_SEP, SEP, keyword_sentence_pairs
from hf_nlm.training import RunSpec, train

BENCHMARK = "story_brown"


def bleu(predictions: list[str], references: list[str]) -> float:
    return Bleu().compute(predictions=predictions, references=[[r] for r in references])["score"]


def keyword_text(source: str) -> str:
    """The keywords as a sentence: the phrases in order, their separators dropped."""
    return " ".join(w for w in source.split() if w != KEYWORD_SEP)


def retrieve(train: Dataset, sources: list[str]) -> list[str]:
    """For each source, the training sentence with the largest summed IDF of the keyword words it
    contains (each word counted once; ties: the earlier sentence)."""
    targets = train["target"]
    documents = [set(t.split()) for t in targets]
    df = Counter(w for d in documents for w in d)
    idf = {w: math.log(len(documents) / n) for w, n in df.items()}
    postings: dict[str, list[int]] = {}
    for i, d in enumerate(documents):
        for w in d:
            postings.setdefault(w, []).append(i)
    out = []
    for source in sources:
        score: Counter = Counter()
        for w in set(keyword_text(source).split()):
            for i in postings.get(w, ()):
                score[i] += idf[w]
        best = min(score, key=lambda i: (-score[i], i)) if score else 0
        out.append(targets[best])
    return out


@torch.no_grad()
def lm_continuations(model, tokenizer, sources: list[str], max_new_tokens: int,
                     **generate_kwargs) -> list[str]:
    """The LM approach: continue ``"keywords <sep>"`` up to ``<eos>`` (one prompt at a time)."""
    model.eval()
    out = []
    for source in sources:
        ids = tokenizer(f"{source} {SEP}", return_tensors="pt", add_special_tokens=False).input_ids
        seq = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, **generate_kwargs)
        # As generate_targets decodes the seq2seq's output: special tokens dropped, <unk> kept.
        out.append(decode_generated(tokenizer, seq[0, ids.shape[1]:]).strip())
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a slice of Brown, one short epoch per model")
    parser.add_argument("--top-k", type=int, default=3, help="RAKE phrases per sentence")
    parser.add_argument("--max-length", type=int, default=40, help="target tokens kept (truncations counted)")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="most frequent words (the recipes': 10000)")
    parser.add_argument("--hidden-size", type=int, default=None,
                        help="embedding and LSTM units (the recipes': 256)")
    parser.add_argument("--test-size", type=int, default=None,
                        help="test pairs scored (default 1000; quick 100)")
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=None, help="the recipes': 64")
    parser.add_argument("--learning-rate", type=float, default=None, help="Adam's rate (the recipes': 2e-3)")
    parser.add_argument("--systems", nargs="+",
                        default=["keywords", "retrieval", "seq2seq", "seq2seq_none", "lm"])
    add_training_arguments(parser, epochs=None, time_budget=0.0)
    args = parser.parse_args(argv)
    out = start_run(args, BENCHMARK)
    suffix = "_quick" if args.quick else ""
    args.test_size = args.test_size or (100 if args.quick else 1000)
    brown = load_brown()
    if args.quick:
        brown = DatasetDict(train=brown["train"].select(range(3000)),
                            validation=brown["validation"].select(range(300)), test=brown["test"])
        args.epochs = 1
    pairs = DatasetDict({split: keyword_sentence_pairs(brown[split], top_k=args.top_k) for split in brown})
    pairs["test"] = pairs["test"].select(range(min(args.test_size, pairs["test"].num_rows)))
    lm_texts = DatasetDict({split: Dataset.from_dict({"text": [f"{s} {SEP} {t}" for s, t in
                                                               zip(pairs[split]["source"],
                                                                   pairs[split]["target"], strict=True)]})
                            for split in ("train", "validation")})
    sources, references = pairs["test"]["source"], pairs["test"]["target"]
    data = out / f"data_story_brown{suffix}"
    data.mkdir(parents=True, exist_ok=True)
    pair_files, text_files = {}, {"corpus": "text"}
    for split in ("train", "validation"):
        pair_files[f"{split}_file"] = str(data / f"{split}.csv")
        pairs[split].select_columns(["source", "target"]).to_csv(pair_files[f"{split}_file"], index=False)
        text_files[f"{split}_file"] = str(data / f"{split}.txt")
        (data / f"{split}.txt").write_text("".join(f"{text}\n" for text in lm_texts[split]["text"]),
                                           encoding="utf-8")
    settings = {name: getattr(args, name) for name in ("vocab_size", "batch_size", "learning_rate")
                if getattr(args, name) is not None}
    if args.hidden_size is not None:
        settings.update(embedding_size=args.hidden_size, hidden_size=args.hidden_size)
    if args.epochs is not None:
        settings["num_epochs"] = args.epochs
    if args.time_budget:
        settings["max_time_s"] = args.time_budget
    common = {**run_context(args), "train_pairs": pairs["train"].num_rows, "test_pairs": len(references),
              "top_k": args.top_k, "num_beams": args.num_beams, "cpu": machine()}
    generate = {"num_beams": args.num_beams, "length_penalty": 1.0}

    def trained(recipe: str, name: str, files: dict, **extra):
        spec = RunSpec.from_recipe(recipe=recipe, output_dir=str(out / f"runs_story_brown{suffix}" / name),
                                   overwrite_output_dir=True, progress_bar=False, **files, **settings,
                                   **extra)
        result = train(spec)
        result.model.eval()
        common.update(vocab_size=len(result.tokenizer), hidden_size=spec.model["hidden_size"])
        return result, {"recipe": recipe, "validation_perplexity": result.metrics["validation"]["perplexity"],
                        "epochs": result.metrics["epochs_completed"],
                        "num_parameters": result.model.num_parameters()}

    def seq2seq(recipe: str, name: str) -> tuple[list[str], dict]:
        result, row = trained(recipe, name, pair_files, max_target_length=args.max_length)
        texts = generate_targets(result.model, result.tokenizer, sources, batch_size=50,
                                 max_new_tokens=args.max_length, **generate)
        return texts, row

    def lm() -> tuple[list[str], dict]:
        result, row = trained("brown-keywords-lm", "lm", text_files)
        return lm_continuations(result.model, result.tokenizer, sources, args.max_length, **generate), row

    systems = {
        "keywords": lambda: ([keyword_text(s) for s in sources], {}),
        "retrieval": lambda: (retrieve(pairs["train"], sources), {}),
        "seq2seq": lambda: seq2seq("brown-keywords-seq2seq", "seq2seq_general"),
        "seq2seq_none": lambda: seq2seq("brown-keywords-seq2seq-none", "seq2seq_none"),
        "lm": lm,
    }
    rows, samples = [], {}
    for name in args.systems:
        log(f"{name} ...")
        start = time.perf_counter()
        texts, extra = systems[name]()
        row = {"case": name, "value": round(bleu(texts, references), 2), "unit": "BLEU", "better": "higher",
               **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in extra.items()},
               "time_s": round(time.perf_counter() - start, 1), **common}
        emit_json(BENCHMARK, row)
        rows.append(row)
        samples[name] = texts[:5]
    by = {r["case"]: r["value"] for r in rows}
    notes = []
    if {"seq2seq", "keywords", "retrieval", "seq2seq_none"} <= by.keys():
        met = by["seq2seq"] > max(by["keywords"], by["retrieval"], by["seq2seq_none"])
        check = {"case": "seq2seq_beats_baselines_and_no_attention", "value": met, "unit": "bool",
                 "better": "higher", **common}
        emit_json(BENCHMARK, check)
        notes.append(f"attention seq2seq above both baselines and the no-attention seq2seq: "
                     f"{'met' if met else 'MISSED'}")
    notes += ["", "First test examples (source => reference; each system's output):"]
    for i in range(min(3, len(sources))):
        notes.append(f"- `{sources[i]}` => {references[i]}")
        notes += [f"  - {name}: {samples[name][i]}" for name in samples]
    write_report(
        out / f"story_brown{suffix}.md",
        f"Keywords -> sentence on Brown: top-{args.top_k} RAKE phrases of each sentence, "
        f"{pairs['train'].num_rows:,} training pairs, BLEU on the first {len(references):,} test pairs, "
        f"beam {args.num_beams} (length penalty 1), LSTM {common.get('hidden_size', '-')}, the rows' recipes "
        f"({', '.join(r['recipe'] for r in rows if 'recipe' in r) or 'none trained'}) on {machine()} "
        f"({torch.get_num_threads()} threads)",
        (["system", "test BLEU", "validation perplexity", "epochs", "time"],
         [[r["case"], r["value"], r.get("validation_perplexity", ""), r.get("epochs", ""),
           f"{r['time_s']:.0f} s"]
          for r in rows]),
        notes=notes, quick="a slice of Brown" if args.quick else None,
    )
    (out / f"story_brown{suffix}.json").write_text(json.dumps({"rows": rows, "samples": samples}, indent=1))
    return rows


if __name__ == "__main__":
    main()
