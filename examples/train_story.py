"""Train a story generator on ROCStories (Yao et al. 2019): title -> storyline -> story, either approach.

* ``--approach lm``: one causal LM (AWD-LSTM, Merity et al. 2018) over
  "title <sep> k1 # k2 # ... <sep> story"; it serves both stages of ``hf-nlm story --model OUTPUT_DIR``.
  With ``--story-cloze FILE`` its Story Cloze accuracy is reported (the ending it gives the higher
  probability).
* ``--approach seq2seq --stage storyline|story``: the attention seq2seq (``story_seq2seq``) for one
  stage: title -> storyline, or "title <sep> storyline" -> story
  (``hf-nlm story --storyline-model A --story-model B``).

Presets (``--preset``) fix the model and training settings; each flag given explicitly overrides its
preset value.

* ``small`` (the default): for a few hundred stories on a couple of CPU cores, minutes. Words seen
  fewer than 2 times in the training split are ``<unk>`` (so ``<unk>`` is trained); LM: a 2-layer
  AWD-LSTM, embedding 64, hidden 128, dropouts 0.2 / 0.1 / 0.2, weight drop 0.2, embedding dropout 0.05;
  seq2seq: embedding = hidden = 64, dropout 0.1. Adam at 3e-3, batch 8 (LM: stream columns of 35-token
  blocks), at most 300 epochs and 150 s, early stopping after 5 epochs without a better validation
  perplexity; splits 70 / 15 / 15 % (a validation split of some 45 stories out of 300; the 8 fixture
  stories split 6 / 1 / 1).
* ``rocstories``: the real ROCStories (98,161 stories). Vocabulary of the 15,000 most frequent words;
  LM: the AWD-LSTM of Merity et al. (2018), 3 layers, embedding 400, hidden 1150, their WikiText-2
  dropouts; seq2seq: embedding = hidden = 512, dropout 0.2. Adam at 1e-3, batch 32 (LM: 70-token
  blocks), 20 epochs, no time budget, early stopping after 3 epochs without a better validation
  perplexity; splits 90 / 5 / 5 %.

Why a frequency cut-off: the weights kept are the best by validation perplexity. Without ``<unk>`` in
the training text, every held-out word outside the vocabulary is an untrained ``<unk>``, validation
perplexity rises from the first epochs on, and the weights kept are those of one of the first epochs: a
model close to unigram frequencies, whose most probable storyline and story repeat its most frequent
token ("# # # ...").

The sample story is beam search (5 beams) that never writes ``<unk>`` (decoding would drop it silently)
nor repeats a trigram (the most probable continuation of a small LM is a loop; Holtzman et al. 2020).

The data is licensed per user: ``--rocstories`` is the folder (or files) of the official CSVs
(https://cs.rochester.edu/nlp/rocstories/). Runs as a plain script, under ``accelerate launch`` or
``torchrun --nproc_per_node 2``; an interrupted run resumes with ``--resume``::

    python examples/train_story.py --rocstories data/rocstories --preset rocstories --output-dir runs/story-lm
    python examples/train_story.py --rocstories tests/fixtures/rocstories --output-dir runs/story-small
    torchrun --nproc_per_node 2 examples/train_story.py --rocstories data/rocstories --preset rocstories \
        --approach seq2seq --stage story --output-dir runs/story-s2s

The last line printed is a JSON object: validation and test perplexity, the parameter count, and for
the LM the sample story written for the first test title and the Story Cloze accuracy.
"""

from __future__ import annotations

import argparse
import json
import os

#: The settings of each preset, per approach (``"lm"`` / ``"seq2seq"``), by flag name (dashes as underscores).
PRESETS = {
    "small": {
        "common": {"vocab_size": 15000, "min_frequency": 2, "learning_rate": 3e-3, "batch_size": 8,
                   "num_epochs": 300, "max_time_s": 150.0, "early_stopping_patience": 5,
                   "block_size": 35, "split_fractions": (0.7, 0.15, 0.15)},
        "lm": {"embedding_size": 64, "hidden_size": 128, "num_layers": 2, "dropout": 0.2,
               "dropout_hidden": 0.1, "dropout_input": 0.2, "dropout_embedding": 0.05, "weight_drop": 0.2},
        "seq2seq": {"embedding_size": 64, "hidden_size": 64, "num_layers": 1, "dropout": 0.1},
    },
    "rocstories": {
        "common": {"vocab_size": 15000, "min_frequency": 1, "learning_rate": 1e-3, "batch_size": 32,
                   "num_epochs": 20, "max_time_s": None, "early_stopping_patience": 3,
                   "block_size": 70, "split_fractions": (0.9, 0.05, 0.05)},
        "lm": {"embedding_size": 400, "hidden_size": 1150, "num_layers": 3, "dropout": 0.4,
               "dropout_hidden": 0.3, "dropout_input": 0.65, "dropout_embedding": 0.1, "weight_drop": 0.5},
        "seq2seq": {"embedding_size": 512, "hidden_size": 512, "num_layers": 1, "dropout": 0.2},
    },
}
DEFAULT_PRESET = "small"


def preset_values(preset: str, approach: str) -> dict:
    """The settings of ``preset`` for ``approach``: its common values and its per-approach ones."""
    return {**PRESETS[preset]["common"], **PRESETS[preset][approach]}


def sample_generation(tokenizer) -> dict:
    """``generate`` settings of the sample story: beam search (5 beams) that never writes ``<unk>`` and
    never repeats a trigram."""
    return {"num_beams": 5, "no_repeat_ngram_size": 3, "suppress_tokens": [tokenizer.unk_token_id]}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog="Presets (flag: small / rocstories, LM; seq2seq where it "
                                            "differs): " + _preset_table(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rocstories", required=True, nargs="+", help="the ROCStories CSVs or their folder")
    parser.add_argument("--approach", choices=("lm", "seq2seq"), default="lm")
    parser.add_argument("--stage", choices=("storyline", "story"), default="story",
                        help="seq2seq: which stage")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--preset", choices=tuple(PRESETS), default=DEFAULT_PRESET,
                        help="model and training settings (see below); explicit flags override them")
    parser.add_argument("--vocab-size", type=int, help="most frequent words kept")
    parser.add_argument("--min-frequency", type=int, help="words seen fewer times in training are <unk>")
    parser.add_argument("--embedding-size", type=int)
    parser.add_argument("--hidden-size", type=int, help="LSTM units")
    parser.add_argument("--num-layers", type=int, help="LM: LSTM layers")
    parser.add_argument("--dropout", type=float,
                        help="LM: dropout on the last layer's outputs; seq2seq: dropout")
    parser.add_argument("--dropout-hidden", type=float, help="LM: dropout between LSTM layers")
    parser.add_argument("--dropout-input", type=float, help="LM: dropout on the embedded inputs")
    parser.add_argument("--dropout-embedding", type=float, help="LM: embedding (word type) dropout")
    parser.add_argument("--weight-drop", type=float, help="LM: DropConnect on the hidden-to-hidden weights")
    parser.add_argument("--attention", default="general",
                        help="seq2seq: dot, general, additive, concat or none")
    parser.add_argument("--num-epochs", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--block-size", type=int, help="LM: tokens per training block (BPTT length)")
    parser.add_argument("--learning-rate", type=float, help="Adam's learning rate")
    parser.add_argument("--max-time-s", type=float,
                        help="stop before an epoch would end after this (0: no limit)")
    parser.add_argument("--early-stopping-patience", type=int,
                        help="stop after this many epochs without a better validation perplexity (0: never)")
    parser.add_argument("--story-cloze", default=None, help="lm: a Story Cloze CSV to report accuracy on")
    parser.add_argument("--split-fractions", type=float, nargs=3, metavar=("TRAIN", "VALIDATION", "TEST"),
                        help="story split by a hash of its id")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the model's initialisation and of training")
    parser.add_argument("--resume", action="store_true", help="continue the run in --output-dir")
    return parser


def _preset_table() -> str:
    rows = []
    for name in preset_values(DEFAULT_PRESET, "lm"):
        cells = []
        for preset in PRESETS:
            lm, s2s = preset_values(preset, "lm")[name], preset_values(preset, "seq2seq").get(name)
            cells.append(f"{lm}" if s2s is None or s2s == lm else f"{lm} (seq2seq {s2s})")
        rows.append(f"--{name.replace('_', '-')}: {' / '.join(cells)}")
    return "\n  " + "\n  ".join(rows)


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill each flag left unset with the value of ``args.preset`` for ``args.approach``; 0 for
    ``--max-time-s`` or ``--early-stopping-patience`` means no limit."""
    for name, value in preset_values(args.preset, args.approach).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    for name in ("max_time_s", "early_stopping_patience"):
        if getattr(args, name) == 0:
            setattr(args, name, None)
    args.split_fractions = tuple(args.split_fractions)
    return args


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = resolve(parser.parse_args(argv))

    import torch

    from hf_nlm.data import load_rocstories, load_story_cloze
    from hf_nlm.generation import set_generation_defaults
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
    from hf_nlm.training.memory import check_training_memory

    rocstories = args.rocstories[0] if len(args.rocstories) == 1 else args.rocstories
    try:
        stories = load_rocstories(rocstories, split_fractions=args.split_fractions)
    except (ValueError, FileNotFoundError) as err:
        parser.error(str(err))
    if args.approach == "lm":
        data = storyline_lm_dataset(stories)
        texts = data["train"]["text"]
    else:
        data = (storyline_pairs if args.stage == "storyline" else story_pairs)(stories)
        texts = [f"{s} {t}" for s, t in zip(data["train"]["source"], data["train"]["target"], strict=True)]
    tokenizer = train_word_level_tokenizer(texts, min_frequency=args.min_frequency,
                                           max_vocab_size=args.vocab_size)
    ids = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id}
    if args.approach == "lm":
        lm_class, model_config = AWDLSTMForCausalLM, AWDLSTMConfig(
            vocab_size=len(tokenizer), embedding_size=args.embedding_size, hidden_size=args.hidden_size,
            num_hidden_layers=args.num_layers, dropout=args.dropout, dropout_hidden=args.dropout_hidden,
            dropout_input=args.dropout_input, dropout_embedding=args.dropout_embedding,
            weight_drop=args.weight_drop, pad_token_id=tokenizer.eos_token_id, **ids)
    else:
        lm_class, model_config = StorySeq2SeqForConditionalGeneration, StorySeq2SeqConfig(
            vocab_size=len(tokenizer), embedding_size=args.embedding_size, hidden_size=args.hidden_size,
            encoder_layers=args.num_layers, decoder_layers=args.num_layers, attention=args.attention,
            dropout=args.dropout, pad_token_id=tokenizer.pad_token_id,
            decoder_start_token_id=tokenizer.eos_token_id, **ids)
    config = TrainingConfig(
        output_dir=args.output_dir, overwrite_output_dir=not args.resume,
        resume_from_checkpoint="latest" if args.resume else None, num_epochs=args.num_epochs,
        batch_size=args.batch_size, optimizer="adam", learning_rate=args.learning_rate,
        lr_scheduler="constant", max_grad_norm=1.0, max_time_s=args.max_time_s, block_size=args.block_size,
        early_stopping_patience=args.early_stopping_patience, seed=args.seed,
    )
    # As hf_nlm.training.train makes a model: the memory check first, then the seeded weights and the
    # generation defaults saved with them.
    try:
        check_training_memory(lm_class, model_config, training=config)
    except ValueError as err:
        parser.error(str(err))
    torch.manual_seed(args.seed)
    model = lm_class(model_config)
    set_generation_defaults(model, tokenizer)
    results = train_lm(model, tokenizer, data, config, dataset_name="rocstories")
    if int(os.environ.get("RANK", "0")) != 0:
        return results
    model.eval()
    summary = {split: results[split]["perplexity"] for split in ("validation", "test") if split in results}
    summary["preset"] = args.preset
    summary["num_parameters"] = sum(p.numel() for p in model.parameters())
    if args.approach == "lm":
        title = stories["test"][0]["title"]
        summary["sample"] = write_story(title, model, tokenizer, **sample_generation(tokenizer))
        if args.story_cloze:
            from hf_nlm.evaluation import story_cloze_accuracy

            cloze = story_cloze_accuracy(model, tokenizer, load_story_cloze(args.story_cloze))
            summary["story_cloze_accuracy"] = cloze["accuracy"]
            summary["story_cloze_accuracy_length_normalized"] = cloze["accuracy_length_normalized"]
            summary["story_cloze_examples"] = cloze["num_examples"]
    print(json.dumps(summary))
    results["summary"] = summary
    return results


if __name__ == "__main__":
    main()
