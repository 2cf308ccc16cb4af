"""Entry point of the ``hf-nlm`` console script.

``hf-nlm`` and ``hf-nlm --help`` print the list of commands from :data:`COMMANDS` without importing
``hf_nlm`` (whose import registers the models with transformers and loads torch: seconds). Every other
command line is parsed by :func:`build_parser` (each command's arguments from :mod:`hf_nlm.cli.main`, its
one-line help from the same table) and run by :func:`hf_nlm.cli.main.run`, but ``hf-nlm app``, which goes to
:func:`hf_nlm.app.main`. Nothing in ``hf_nlm`` imports this module: the imports point one way.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

PROG = "hf-nlm"
DESCRIPTION = "Classic neural language models on Hugging Face."

#: Every command of ``hf-nlm`` and its one-line help, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "train": "train a language model",
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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full ``hf-nlm`` parser (imports ``hf_nlm``): ``command`` with its arguments, or every command of
    :data:`COMMANDS` when None (a command line parses with its own command's parser alone, which builds
    faster)."""
    from hf_nlm.cli.main import add_commands

    parser, sub = command_parsers()
    names = [command] if command in COMMANDS else list(COMMANDS)
    add_commands(sub, {name: COMMANDS[name] for name in names if name not in SEPARATE_COMMANDS})
    return parser


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
    from hf_nlm.cli.main import run

    return run(build_parser(argv[0]), argv)


if __name__ == "__main__":
    sys.exit(main())
