"""Entry point of the ``hf-nlm`` console script.

``hf-nlm`` and ``hf-nlm --help`` print the list of commands from :data:`COMMANDS` without importing
``hf_nlm`` (whose import registers the models with transformers and loads torch: seconds). Every other
command line is parsed by :func:`build_parser` (each command's arguments from its module in
:mod:`hf_nlm.cli`, :func:`command_functions`; its one-line help from :data:`COMMANDS`) and run by :func:`run`,
but ``hf-nlm app``, which goes to :func:`hf_nlm.app.main`. Nothing in ``hf_nlm`` imports this module: the
imports point one way.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping

PROG = "hf-nlm"
DESCRIPTION = "Classic neural language models on Hugging Face."

#: Every command of ``hf-nlm`` and its one-line help, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "train": "train a language model",
    "recipes": "list the training recipes: the paper's figure, the recorded one and the run's time",
    "build-tree": "HLBL with a data-built word tree (Mnih & Hinton 2008): train, build the tree, retrain",
    "evaluate": "perplexity of a saved model on a corpus split (JSON)",
    "predict-numbers": "predict every number of a split with a numeracy model (MAPE / MdAPE, JSON)",
    "check-numbers": "the most surprising numbers of a text under a numeracy model (a table, or JSON)",
    "generate": "continue prompts with a saved model",
    "story": "title -> storyline -> story with saved models (Yao et al. 2019)",
    "plot-attention": "draw a seq2seq model's attention while it generates (PNG)",
    "card": "(re)write the model card (README.md) of a run folder",
    "plot-numerals": "draw a numeracy model's numeral embeddings (PNG)",
    "push": "upload a run folder to the Hugging Face Hub",
    "download": "fetch the public corpora into $HF_NLM_DATA (see `hf-nlm download --help`)",
    "app": "explore saved models in a web page (Gradio; see `hf-nlm app --help`)",
}


#: The commands the launcher hands to a module above the command line's own (which it uses): ``hf-nlm app``.
SEPARATE_COMMANDS = ("app",)


class Parser(argparse.ArgumentParser):
    """The parser of ``hf-nlm`` and of each command (its subparsers are of this class too): a usage
    error prints where to find the options and ``PROG: error: MESSAGE``, not the whole usage block; exit
    status 2."""

    def error(self, message: str):
        # Where argparse puts the usage block: the error stays the last line (scripts read it there).
        self.exit(2, f"({self.prog} --help for the options)\n{self.prog}: error: {message}\n")


def command_parsers() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level parser and its (empty) subparsers action: the full parser fills in each command."""
    parser = Parser(prog=PROG, description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    return parser, sub


def top_level_parser() -> argparse.ArgumentParser:
    """The parser of ``hf-nlm [-h]`` alone: each command listed with its help, none of its arguments."""
    parser, sub = command_parsers()
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def command_functions() -> dict[str, tuple[Callable, Callable]]:
    """Each command's ``add_*_parser(subparsers, help_text)`` (returning its parser) and handler
    ``cmd_*(args)`` (imports ``hf_nlm``), whose docstring is the command's description in its ``--help``."""
    from hf_nlm.cli.download import add_download_parser, cmd_download
    from hf_nlm.cli.evaluate import (
        add_check_numbers_parser,
        add_evaluate_parser,
        add_predict_numbers_parser,
        cmd_check_numbers,
        cmd_evaluate,
        cmd_predict_numbers,
    )
    from hf_nlm.cli.generate import (
        add_generate_parser,
        add_plot_attention_parser,
        add_plot_numerals_parser,
        add_story_parser,
        cmd_generate,
        cmd_plot_attention,
        cmd_plot_numerals,
        cmd_story,
    )
    from hf_nlm.cli.hub import add_card_parser, add_push_parser, cmd_card, cmd_push
    from hf_nlm.cli.train import (
        add_build_tree_parser,
        add_recipes_parser,
        add_train_parser,
        cmd_build_tree,
        cmd_recipes,
        cmd_train,
    )

    return {
        "train": (add_train_parser, cmd_train),
        "recipes": (add_recipes_parser, cmd_recipes),
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
    functions = command_functions()
    for name, help_text in help_texts.items():
        if name in SEPARATE_COMMANDS:  # parsed by its own module (main hands it over): only a choice here
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        add_parser, handler = functions[name]
        command = add_parser(sub, help_text)
        command.description = inspect.getdoc(handler)  # shown by `hf-nlm NAME --help`, as typer does
        command.set_defaults(func=handler, parser=command)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full ``hf-nlm`` parser (imports ``hf_nlm``): ``command`` with its arguments, or every command of
    :data:`COMMANDS` when None or unknown (a command line parses with its own command's parser alone, which
    builds faster; a mistyped command is refused with every registered command as the choices)."""
    parser, sub = command_parsers()
    names = [command] if command in COMMANDS else list(COMMANDS)
    add_commands(sub, {name: COMMANDS[name] for name in names})
    return parser


#: The options that count something: each must be at least 1.
COUNT_OPTIONS = ("max_new_tokens", "num_beams", "num_return_sequences", "block_size", "batch_size",
                 "numeral_chunk_size", "top")


def run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Run the command line ``argv`` with ``parser`` (from :func:`build_parser`). Returns the exit status."""
    args = parser.parse_args(argv)
    args.argv = argv[1:]  # the command's own arguments, e.g. to print the --resume command
    for name in COUNT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, int) and value < 1:
            args.parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    return args.func(args)


def not_utf8(argv: list[str]) -> str | None:
    """What is wrong with the first argument of ``argv`` that is not UTF-8 text, naming it (``--file``, or the
    argument's own text for a positional one); None when all are. Python hands such bytes over as lone
    surrogates (``'caf\\udce9'``), which no tokenizer or file system call takes."""
    for i, arg in enumerate(argv):
        bad = [c for c in arg if "\udc80" <= c <= "\udcff"]  # each byte that did not decode
        if not bad:
            continue
        flag, _, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        if not flag and i > 0 and argv[i - 1].startswith("-") and argv[i - 1] != "--":
            flag = argv[i - 1]
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        where = f"{flag} '{shown}'" if flag else f"the argument '{shown}'"
        return (f"{where} is not UTF-8 text (byte 0x{ord(bad[0]) - 0xDC00:02x}): give it in UTF-8 (a "
                "terminal or file in another encoding, such as Latin-1, passes other bytes)")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run ``hf-nlm`` with ``argv`` (default: the command line). Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        top_level_parser().parse_args(argv[:1])  # prints the help (exit 0) or the missing command (exit 2)
    command = Parser(prog=f"{PROG} {argv[0]}")  # its usage error, before any module is imported
    problem = not_utf8(argv)
    if problem:
        command.error(problem)
    if argv[0] == "app":  # SEPARATE_COMMANDS: the page sits above the command line's modules, which it uses
        if importlib.util.find_spec("gradio") is None:
            command.error("the web page needs Gradio, which is not installed: pip install 'hf-nlm[app]'")
        from hf_nlm.app import main as serve

        return serve(argv[1:])
    return run(build_parser(argv[0]), argv)


if __name__ == "__main__":
    sys.exit(main())
