"""``hf-nlm train`` and ``hf-nlm build-tree``: the flags into a :class:`~hf_nlm.training.RunSpec`, then the
library's :func:`~hf_nlm.training.train`. ``build-tree`` is ``train`` with a data-built word tree (Mnih &
Hinton 2008, sec. 4: ``--tree-mode``, default adaptive) and its JSON line names both stages."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..training.arguments import (
    add_build_tree_arguments,
    add_train_arguments,
    given_settings,
    spec_from_arguments,
)
from ..training.run import report_interrupt, resume_command
from .arguments import fail

#: What ``hf-nlm train`` prints of the results (one JSON line on stdout).
SUMMARY = ("validation", "test", "best_val_ppl", "stop_reason", "ngram_baseline")


#: What ``--check`` lets a run change of its recipe: where it writes and what it shows, not what it trains.
CHECK_ALLOWS = ("output_dir", "overwrite_output_dir", "progress_bar", "logging_steps", "save_steps",
                "save_total_limit", "corpus_path", "cpu")


def add_train_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    parser = add_train_arguments(sub.add_parser("train", help=help_text))
    parser.add_argument("--check", action="store_true",
                        help="with a --recipe behind a published number (demo, ...): run it and print the "
                             "paper's, the recorded and this run's figures; exit 1 when a recorded one is "
                             "not reproduced within hf_nlm.training.THREAD_TOLERANCE")
    return parser


def add_recipes_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    parser = sub.add_parser("recipes", help=help_text)
    parser.add_argument("--model", dest="model_type", default=None,
                        help="only this model type's recipes (default: every model type's)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object a recipe (every figure, the description) instead of a table")
    return parser


def cmd_recipes(args: argparse.Namespace) -> int:
    """List the training recipes: each one's model type and corpus, the figure it publishes with the paper's
    and the recorded value, and the recorded run's time on 2 quiet CPU cores. `hf-nlm train --recipe NAME`
    runs one; `--check` compares the run with the recorded figures."""
    from ..training.published import recipe_rows, recipes_table

    try:
        rows = recipe_rows(args.model_type)
    except ValueError as err:
        fail(args.parser, str(err))
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(recipes_table(rows))
    return 0


def add_build_tree_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    return add_build_tree_arguments(sub.add_parser("build-tree", help=help_text))


def cmd_train(args: argparse.Namespace) -> int:
    """Train a language model on a corpus (--corpus) or on text files (--train-file ...). OUTPUT_DIR gets the
    model, its tokenizer and generation config, checkpoints to resume from, results.json, the learning
    curves and a model card; the final perplexities are printed as one JSON line."""
    from ..training import train

    for flag, folder in (("--init-from", getattr(args, "init_from", None)), ("--resume", args.resume)):
        if folder not in (None, "latest") and not os.path.isdir(folder):
            fail(args.parser, f"{flag} {folder}: no such folder")
    spec = None
    try:
        spec = spec_from_arguments(args)
        recipe = check_recipe(args, spec)
        result = train(spec)
    except KeyboardInterrupt:
        if spec is not None and spec.tree_mode is not None and spec.training.resume_from_checkpoint is None:
            return report_tree_interrupt(Path(args.output_dir), resume_command(args.argv))
        return report_interrupt(args.output_dir, resume_command(args.argv))
    except FloatingPointError as err:  # a non-finite loss: the trainer has saved the last good update
        fail(args.parser, f"{err}; lower --learning-rate (or set --max-grad-norm) and train again in another "
                          "--output-dir (or with --overwrite-output-dir)")
    except (ValueError, TypeError, FileNotFoundError) as err:
        # Bad settings or data, another run holding the folder, a full disk, a checkpoint that does not fit.
        fail(args.parser, str(err))
    reproduced = True
    if recipe is not None:  # the table first: the JSON line stays the last line printed
        from ..training.published import check_run, check_table

        checks = check_run(recipe, result.metrics)
        print(check_table(checks))
        reproduced = all(c.ok for c in checks)
    if result.metrics:
        print(json.dumps({k: result.metrics[k] for k in SUMMARY if k in result.metrics}))
    return 0 if reproduced else 1


def check_recipe(args: argparse.Namespace, spec):
    """The recipe ``--check`` compares the run with (None without ``--check``); a ``ValueError`` before any
    training when the recipe records no numbers or a flag changes what it trains."""
    if not getattr(args, "check", False):
        return None
    from ..models import MODEL_TYPES
    from ..training.spec import option_flag

    recipe = MODEL_TYPES[spec.model_type].recipe(spec.recipe)
    if not recipe.recorded:
        raise ValueError(f"--check: recipe {spec.recipe} of {spec.model_type} records no numbers to check; "
                         "the recipes behind published numbers: see --recipe in --help")
    changed = [option_flag(name) for name in given_settings(args) if name not in (*CHECK_ALLOWS, "recipe",
                                                                                   "model_type")]
    if changed:
        raise ValueError(f"--check reproduces recipe {spec.recipe} as recorded: drop {', '.join(changed)}")
    return recipe


def report_tree_interrupt(out: Path, resume: str | None) -> int:
    """Ctrl-C in a run with a data-built tree: the final stage (checkpoints in ``out``) resumes with
    ``resume``, the first (in ``out/random_tree``) starts over."""
    from ..training.checkpoint import list_checkpoints

    if list_checkpoints(out):
        return report_interrupt(out, resume)
    code = report_interrupt(out / "random_tree", None)
    print("the first stage of a data-built tree (random_tree) does not resume: run the command again to "
          "start over", file=sys.stderr)
    return code


def cmd_build_tree(args: argparse.Namespace) -> int:
    """Mnih & Hinton's (2008) recipe: train an HLBL on a random tree, represent each word by its average
    predicted vector, build a tree by recursive EM (--tree-mode, --eps), train a fresh HLBL on it. Output:
    OUTPUT_DIR (final model), OUTPUT_DIR/random_tree (step 1), OUTPUT_DIR/word_tree.json. The same run as
    `hf-nlm train --model hlbl --tree-mode MODE --tree-eps EPS`."""
    from ..training import train
    from ..training.arguments import build_tree_mode, build_tree_spec_from_arguments
    from ..trees import check_tree_mode

    eps = getattr(args, "tree_eps", None)
    try:  # named as this command's flags
        check_tree_mode(build_tree_mode(args), 0.0 if eps is None else eps, flags=True)
    except ValueError as err:
        fail(args.parser, str(err))
    try:
        spec = build_tree_spec_from_arguments(args)
        result = train(spec)
    except (ValueError, TypeError, FileNotFoundError, FloatingPointError) as err:
        fail(args.parser, str(err))
    except KeyboardInterrupt:
        from ..training.checkpoint import list_checkpoints

        out = Path(args.output_dir)  # the final stage's run, or step 1's under random_tree/
        code = report_interrupt(out if list_checkpoints(out) else out / "random_tree", None)
        print("build-tree does not resume a stage: run it again to start over", file=sys.stderr)
        return code
    metrics = result.metrics
    keep = ("validation", "test", "best_val_ppl", "stop_reason", "elapsed_s")
    print(json.dumps({"random_tree": metrics.get("random_tree", {}),
                      "data_tree": {k: metrics[k] for k in keep if k in metrics},
                      "tree": metrics.get("tree"), "output_dir": spec.training.output_dir}))
    return 0
