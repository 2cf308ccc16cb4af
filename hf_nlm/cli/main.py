"""The ``hf-nlm`` parser (:func:`build_parser`) and :func:`main`. The commands, in the order ``--help``
lists them, and their one-line help are those of the ``hf_nlm_cli`` launcher's table."""

from __future__ import annotations

import argparse
import sys

from hf_nlm_cli import COMMANDS, SEPARATE_COMMANDS, command_parsers

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


def build_parser() -> argparse.ArgumentParser:
    """The full ``hf-nlm`` parser: every command of ``hf_nlm_cli.COMMANDS`` with its arguments."""
    parser, sub = command_parsers()
    for name, help_text in COMMANDS.items():
        if name in SEPARATE_COMMANDS:  # the launcher hands them to their own module
            continue
        add_parser, handler = COMMAND_FUNCTIONS[name]
        command = add_parser(sub, help_text)
        command.set_defaults(func=handler, parser=command)
    return parser


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("max_new_tokens", "num_beams", "num_return_sequences", "block_size", "batch_size", "numeral_chunk_size",
                 "top"):
        value = getattr(args, name, None)
        if isinstance(value, int) and value < 1:
            fail(args.parser, f"--{name.replace('_', '-')} must be >= 1, got {value}")


def main(argv: list[str] | None = None) -> int:
    """Run ``hf-nlm`` with ``argv`` (default: the command line). Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv[1:]  # the command's own arguments, e.g. to print the --resume command
    _check_numbers(args)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
