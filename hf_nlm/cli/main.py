"""The ``hf-nlm`` commands: each one's parser and handler (:data:`COMMAND_FUNCTIONS`), :func:`add_commands`
and :func:`run`. The console script ``hf_nlm_cli`` (outside the package, so that ``hf-nlm --help`` answers
without importing torch) holds the list of commands with their one-line help, builds the parser with
:func:`add_commands` and hands it to :func:`run`."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from .arguments import fail
from .download import add_download_parser, cmd_download
from .evaluate import (
    add_check_numbers_parser,
    add_evaluate_parser,
    add_predict_numbers_parser,
    cmd_check_numbers,
    cmd_evaluate,
    cmd_predict_numbers,
)
from .generate import (
    add_generate_parser,
    add_plot_attention_parser,
    add_plot_numerals_parser,
    add_story_parser,
    cmd_generate,
    cmd_plot_attention,
    cmd_plot_numerals,
    cmd_story,
)
from .hub import add_card_parser, add_push_parser, cmd_card, cmd_push
from .train import add_build_tree_parser, add_train_parser, cmd_build_tree, cmd_train

#: Each command's ``add_*_parser(subparsers, help_text)`` (returning its parser) and handler ``cmd_*(args)``.
COMMAND_FUNCTIONS = {
    "train": (add_train_parser, cmd_train),
    "build-tree": (add_build_tree_parser, cmd_build_tree),
    "evaluate": (add_evaluate_parser, cmd_evaluate),
    "predict-numbers": (add_predict_numbers_parser, cmd_predict_numbers),
    "check-numbers": (add_check_numbers_parser, cmd_check_numbers),
    "generate": (add_generate_parser, cmd_generate),
    "story": (add_story_parser, cmd_story),
    "plot-attention": (add_plot_attention_parser, cmd_plot_attention),
    "card": (add_card_parser, cmd_card),
    "plot-numerals": (add_plot_numerals_parser, cmd_plot_numerals),
    "push": (add_push_parser, cmd_push),
    "download": (add_download_parser, cmd_download),
}


def add_commands(sub: argparse._SubParsersAction, help_texts: Mapping[str, str]) -> None:
    """Add each command of ``help_texts`` (name -> its one-line help, in the order ``--help`` lists them) with
    its arguments to the subparsers ``sub``."""
    for name, help_text in help_texts.items():
        add_parser, handler = COMMAND_FUNCTIONS[name]
        command = add_parser(sub, help_text)
        command.set_defaults(func=handler, parser=command)


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("max_new_tokens", "num_beams", "num_return_sequences", "block_size", "batch_size",
                 "numeral_chunk_size", "top"):
        value = getattr(args, name, None)
        if isinstance(value, int) and value < 1:
            fail(args.parser, f"--{name.replace('_', '-')} must be >= 1, got {value}")


def run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Run the command line ``argv`` with ``parser`` (from :func:`add_commands`). Returns the exit status."""
    args = parser.parse_args(argv)
    args.argv = argv[1:]  # the command's own arguments, e.g. to print the --resume command
    _check_numbers(args)
    return args.func(args)
