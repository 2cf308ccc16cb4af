"""Train a story generator on ROCStories (Yao et al. 2019): title -> storyline -> story, either approach.

* ``--approach lm``: one causal LM (AWD-LSTM) over "title <sep> k1 # k2 # ... <sep> story"; it serves
  both stages of ``hf-nlm story --model OUTPUT_DIR``. With ``--story-cloze FILE`` its Story Cloze
  accuracy is reported (the ending it gives the higher probability).
* ``--approach seq2seq --stage storyline|story``: the attention seq2seq (``story_seq2seq``) for one
  stage: title -> storyline, or "title <sep> storyline" -> story
  (``hf-nlm story --storyline-model A --story-model B``).

The data is licensed per user: ``--rocstories`` is the folder (or files) of the official CSVs
(https://cs.rochester.edu/nlp/rocstories/). Runs as a plain script, under ``accelerate launch`` or
``torchrun --nproc_per_node 2``; an interrupted run resumes with ``--resume``::

    python examples/train_story.py --rocstories data/rocstories --approach lm --output-dir runs/story-lm
    torchrun --nproc_per_node 2 examples/train_story.py --rocstories data/rocstories --approach seq2seq \
        --stage story --output-dir runs/story-s2s
"""

from __future__ import annotations

import argparse
import json
import os

from hf_nlm.data import load_rocstories, load_story_cloze
from hf_nlm.models import (
    AWDLSTMConfig,
    AWDLSTMForCausalLM,
    StorySeq2SeqConfig,
    StorySeq2SeqForConditionalGeneration,
)
from hf_nlm.story import story_pairs, storyline_pairs, write_story
from hf_nlm.story.storylines import storyline_lm_dataset
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm.training import TrainingConfig, train_lm


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rocstories", required=True, nargs="+", help="the ROCStories CSVs or their folder")
    parser.add_argument("--approach", choices=("lm", "seq2seq"), default="lm")
    parser.add_argument("--stage", choices=("storyline", "story"), default="story", help="seq2seq: which stage")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--vocab-size", type=int, default=15000, help="most frequent words kept")
    parser.add_argument("--embedding-size", type=int, default=400)
    parser.add_argument("--hidden-size", type=int, default=1150, help="LSTM units (seq2seq default: 512)")
    parser.add_argument("--attention", default="general", help="seq2seq: dot, general, additive, concat or none")
    parser.add_argument("--num-epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--max-time-s", type=float, default=None, help="stop before an epoch would end after this")
    parser.add_argument("--story-cloze", default=None, help="lm: a Story Cloze CSV to report accuracy on")
    parser.add_argument("--split-fractions", type=float, nargs=3, default=(0.9, 0.05, 0.05),
                        metavar=("TRAIN", "VALIDATION", "TEST"), help="story split by a hash of its id")
    parser.add_argument("--resume", action="store_true", help="continue the run in --output-dir")
    args = parser.parse_args(argv)
    rocstories = args.rocstories[0] if len(args.rocstories) == 1 else args.rocstories

    try:
        stories = load_rocstories(rocstories, split_fractions=tuple(args.split_fractions))
    except (ValueError, FileNotFoundError) as err:
        parser.error(str(err))
    if args.approach == "lm":
        data = storyline_lm_dataset(stories)
        texts = data["train"]["text"]
    else:
        data = (storyline_pairs if args.stage == "storyline" else story_pairs)(stories)
        texts = [f"{s} {t}" for s, t in zip(data["train"]["source"], data["train"]["target"], strict=True)]
    tokenizer = train_word_level_tokenizer(texts, max_vocab_size=args.vocab_size)
    ids = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id}
    if args.approach == "lm":
        model = AWDLSTMForCausalLM(AWDLSTMConfig(vocab_size=len(tokenizer), embedding_size=args.embedding_size,
                                                 hidden_size=args.hidden_size, pad_token_id=tokenizer.eos_token_id,
                                                 **ids))
    else:
        hidden = args.hidden_size if args.hidden_size != parser.get_default("hidden_size") else 512
        model = StorySeq2SeqForConditionalGeneration(StorySeq2SeqConfig(
            vocab_size=len(tokenizer), embedding_size=hidden, hidden_size=hidden, attention=args.attention,
            pad_token_id=tokenizer.pad_token_id, decoder_start_token_id=tokenizer.eos_token_id, **ids))
    config = TrainingConfig(
        output_dir=args.output_dir, overwrite_output_dir=not args.resume, resume_from_checkpoint="latest" if args.resume else None,
        num_epochs=args.num_epochs, batch_size=args.batch_size, optimizer="adam", learning_rate=args.learning_rate,
        lr_scheduler="constant", max_grad_norm=1.0, max_time_s=args.max_time_s, block_size=70,
    )
    results = train_lm(model, tokenizer, data, config, dataset_name="rocstories")
    if int(os.environ.get("RANK", "0")) != 0:
        return results
    model.eval()
    title = stories["test"][0]["title"]
    summary = {split: results[split]["perplexity"] for split in ("validation", "test") if split in results}
    if args.approach == "lm":
        summary["sample"] = write_story(title, model, tokenizer, num_beams=5)
        if args.story_cloze:
            from hf_nlm.evaluation import story_cloze_accuracy

            cloze = story_cloze_accuracy(model, tokenizer, load_story_cloze(args.story_cloze))
            summary["story_cloze_accuracy"] = cloze["accuracy"]
            summary["story_cloze_accuracy_length_normalized"] = cloze["accuracy_length_normalized"]
    print(json.dumps(summary))
    return results


if __name__ == "__main__":
    main()
