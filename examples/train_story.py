"""Train a story generator on ROCStories (Yao et al. 2019): title -> storyline -> story, either approach.

* ``--approach lm``: one causal LM (AWD-LSTM, Merity et al. 2018) over
  "title <sep> k1 # k2 # ... <sep> story"; it serves both stages of ``hf-nlm story --model OUTPUT_DIR``.
  With ``--story-cloze FILE`` its Story Cloze accuracy is reported (the ending it gives the higher
  probability).
* ``--approach seq2seq --stage storyline|story``: the attention seq2seq (``story_seq2seq``) for one
  stage: title -> storyline, or "title <sep> storyline" -> story
  (``hf-nlm story --storyline-model A --story-model B``).

Each run is a named recipe run by ``hf_nlm.training.train`` (what ``hf-nlm train --recipe NAME`` runs):
``rocstories-lm`` (``awd_lstm``) for ``--approach lm``, ``rocstories-storyline`` and ``rocstories-story``
(``story_seq2seq``, the corpus read with ``--story-stage``) for the seq2seq stages. Presets (``--preset``)
fix the model and training settings; each flag given explicitly overrides its preset value.

* ``small`` (the default): for a few hundred stories on a couple of CPU cores, minutes. Words seen
  fewer than 2 times in the training split are ``<unk>`` (so ``<unk>`` is trained); LM: a 2-layer
  AWD-LSTM, embedding 64, hidden 128, dropouts 0.2 / 0.1 / 0.2, weight drop 0.2, embedding dropout 0.05;
  seq2seq: embedding = hidden = 64, dropout 0.1. Adam at 3e-3, batch 8 (LM: stream columns of 35-token
  blocks), at most 300 epochs and 150 s, early stopping after 5 epochs without a better validation
  perplexity; splits 70 / 15 / 15 % (a validation split of some 45 stories out of 300; the 8 fixture
  stories split 6 / 1 / 1).
* ``rocstories``: the real ROCStories (98,161 stories): the recipes' own settings. Vocabulary of the
  15,000 most frequent words;
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
import dataclasses
import json
import os
import sys
from pathlib import Path

from hf_nlm.models.awd_lstm import RECIPES as LM_RECIPES
from hf_nlm.models.registry import ROCSTORIES_SPLIT, ROCSTORIES_TOKENIZER, ROCSTORIES_TRAINING
from hf_nlm.models.story_seq2seq import ROCSTORIES_NETWORK

#: The recipe of each approach (and seq2seq stage).
RECIPES = {"lm": "rocstories-lm", "storyline": "rocstories-storyline", "story": "rocstories-story"}

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
    # The recipes' values (rocstories-lm, rocstories-storyline, rocstories-story), by this script's flags.
    "rocstories": {
        "common": {"vocab_size": ROCSTORIES_TOKENIZER["vocab_size"],
                   "min_frequency": ROCSTORIES_TOKENIZER["min_frequency"],
                   **{name: ROCSTORIES_TRAINING[name] for name in (
                       "learning_rate", "batch_size", "num_epochs", "early_stopping_patience", "block_size")},
                   "max_time_s": None, "split_fractions": ROCSTORIES_SPLIT},
        "lm": {("num_layers" if name == "num_hidden_layers" else name): value
               for name, value in LM_RECIPES["rocstories-lm"].model.items()},
        "seq2seq": {"embedding_size": ROCSTORIES_NETWORK["embedding_size"],
                    "hidden_size": ROCSTORIES_NETWORK["hidden_size"],
                    "num_layers": ROCSTORIES_NETWORK["encoder_layers"],
                    "dropout": ROCSTORIES_NETWORK["dropout"]},
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
    """Fill each flag left unset with the value of ``args.preset`` for ``args.approach`` (their names in
    ``args.from_preset``); 0 for ``--max-time-s`` or ``--early-stopping-patience`` means no limit."""
    args.from_preset = []
    for name, value in preset_values(args.preset, args.approach).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
            args.from_preset.append(name)
    for name in ("max_time_s", "early_stopping_patience"):
        if getattr(args, name) == 0:
            setattr(args, name, None)
    args.split_fractions = tuple(args.split_fractions)
    return args


#: This script's flags that are settings of the run under the same name.
SETTINGS = ("vocab_size", "min_frequency", "embedding_size", "hidden_size", "dropout", "num_epochs",
            "batch_size", "block_size", "learning_rate", "max_time_s", "early_stopping_patience",
            "split_fractions", "seed")
#: The causal LM's flags that the seq2seq model has not.
LM_ONLY = ("dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop")


def corpus_path(paths: list[str], output_dir: str) -> str:
    """The ``corpus_path`` of ``--rocstories``: its folder or file, or for several files a folder of links to
    them in the output folder."""
    if len(paths) == 1:
        return paths[0]
    folder = Path(output_dir) / "rocstories_files"
    folder.mkdir(parents=True, exist_ok=True)
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"--rocstories {path}: no such file")
        link = folder / path.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(path.resolve())
    return str(folder)


def run_spec(args: argparse.Namespace):
    """The :class:`~hf_nlm.training.RunSpec` of the resolved flags: the approach's recipe with every setting
    the flags (and the preset) give; with ``--resume``, the run saved in ``--output-dir``."""
    from hf_nlm.training import RunSpec

    if args.resume:
        stopping = {name: getattr(args, name)
                    for name in ("num_epochs", "max_time_s", "early_stopping_patience")}
        return RunSpec.from_run_folder(args.output_dir).resumed_with(output_dir=args.output_dir, **stopping)
    settings = {name: getattr(args, name) for name in SETTINGS}
    if args.approach == "lm":
        settings.update({name: getattr(args, name) for name in LM_ONLY}, num_hidden_layers=args.num_layers)
    else:
        settings.update(encoder_layers=args.num_layers, decoder_layers=args.num_layers,
                        attention=args.attention)
    recipe = RECIPES["lm" if args.approach == "lm" else args.stage]
    spec = RunSpec.from_recipe(recipe=recipe, corpus_path=corpus_path(args.rocstories, args.output_dir),
                               output_dir=args.output_dir, overwrite_output_dir=True, **settings)
    # A preset's frequency cut-off is a recipe's: on a text too small for it, every word is kept (and said).
    preset = {"min_frequency"} & set(getattr(args, "from_preset", ()))
    return dataclasses.replace(spec, recipe_values=spec.recipe_values | preset)


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = resolve(parser.parse_args(argv))

    from hf_nlm.data import load_rocstories, load_story_cloze
    from hf_nlm.story import write_story
    from hf_nlm.training import train
    from hf_nlm.training.run import report_interrupt, resume_command

    try:
        spec = run_spec(args)
        result = train(spec)
    except KeyboardInterrupt:
        resume = resume_command(argv if argv is not None else sys.argv[1:],
                                program=("python", "examples/train_story.py"))
        sys.exit(report_interrupt(args.output_dir, resume) if int(os.environ.get("RANK", "0")) == 0 else 130)
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    model, tokenizer, results = result.model, result.tokenizer, result.metrics
    if int(os.environ.get("RANK", "0")) != 0:
        return results
    model.eval()
    summary = {split: results[split]["perplexity"] for split in ("validation", "test") if split in results}
    summary["preset"] = args.preset
    summary["num_parameters"] = sum(p.numel() for p in model.parameters())
    if args.approach == "lm":
        data = result.spec.data
        title = load_rocstories(data.corpus_path, split_fractions=data.split_fractions)["test"][0]["title"]
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
