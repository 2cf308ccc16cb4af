"""``hf-nlm train`` and ``hf-nlm build-tree``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .arguments import add_build_tree_arguments, add_train_arguments, fail
from .recipes import (
    build_config,
    build_tokenizer,
    corpus_name,
    prepare_training,
    report_interrupt,
    resume_command,
    run_settings,
    say_recipe,
    training_config,
    training_corpus,
)


def add_train_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    return add_train_arguments(sub.add_parser("train", help=help_text, description="Train a language model."))


def add_build_tree_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    return add_build_tree_arguments(sub.add_parser(
        "build-tree", help=help_text,
        description="Mnih & Hinton's (2008) recipe: train an HLBL on a random tree, represent each word by its "
                    "average predicted vector, build a tree by recursive EM (--tree-mode, --eps), train a fresh "
                    "HLBL on it. Output: OUTPUT_DIR (final model), OUTPUT_DIR/random_tree (step 1), "
                    "OUTPUT_DIR/word_tree.json.",
    ))


def cmd_train(args: argparse.Namespace) -> int:
    from ..training import LMTrainer
    try:
        datasets, tokenizer, model, config = prepare_training(args)
        # Building the trainer checks the data against the batch settings (e.g. too few blocks).
        trainer = LMTrainer(model, tokenizer, datasets, config, dataset_name=corpus_name(args),
                            run_settings=run_settings(args))
    except (ValueError, TypeError, FileNotFoundError) as err:
        fail(args.parser, str(err))
    try:
        results = trainer.train()
    except KeyboardInterrupt:
        return report_interrupt(args.output_dir, resume_command(args.argv))
    except FloatingPointError as err:  # a non-finite loss: the trainer has saved the last good update
        fail(args.parser, f"{err}; lower --learning-rate (or set --max-grad-norm) and train again in another "
                          "--output-dir (or with --overwrite-output-dir)")
    except ValueError as err:  # another run holds the folder (RunFolderError), a full disk, a checkpoint that does not fit
        fail(args.parser, str(err))
    if results:
        print(json.dumps({k: results[k] for k in ("validation", "test", "best_val_ppl", "stop_reason") if k in results}))
    return 0


def cmd_build_tree(args: argparse.Namespace) -> int:
    """Mnih & Hinton's recipe: HLBL on a random tree -> data-built tree -> fresh HLBL on it."""
    from ..training.tree_recipe import train_with_data_tree
    from ..trees import check_tree_mode

    try:
        check_tree_mode(args.tree_mode, args.eps, flags=True)
    except ValueError as err:
        fail(args.parser, str(err))
    if args.first_stage_epochs is not None and args.first_stage_epochs < 1:
        fail(args.parser, f"--first-stage-epochs must be >= 1, got {args.first_stage_epochs}")
    try:
        config = training_config(args)
        datasets = training_corpus(args)
        say_recipe(args)
        tokenizer = build_tokenizer(args, datasets["train"]["text"])
        model_config = build_config(args, tokenizer)
        results = train_with_data_tree(
            model_config, tokenizer, datasets, config, mode=args.tree_mode, eps=args.eps,
            first_stage_epochs=args.first_stage_epochs, tree_seed=args.tree_seed, dataset_name=corpus_name(args),
        )
    except (ValueError, TypeError, FileNotFoundError, FloatingPointError) as err:
        fail(args.parser, str(err))
    except KeyboardInterrupt:
        from ..training.checkpoint import list_checkpoints

        out = Path(config.output_dir)  # the final stage's run, or step 1's under random_tree/
        code = report_interrupt(out if list_checkpoints(out) else out / "random_tree", None)
        print("build-tree does not resume a stage: run it again to start over", file=sys.stderr)
        return code
    keep = ("validation", "test", "best_val_ppl", "stop_reason", "elapsed_s")
    summary = {stage: {k: results[stage][k] for k in keep if k in results[stage]} for stage in ("random_tree", "data_tree")}
    print(json.dumps({**summary, "tree": results["tree"], "output_dir": config.output_dir}))
    return 0
