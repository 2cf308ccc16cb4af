"""Flags of the ``hf-nlm`` commands that run saved models (generation), the folder argument, and the usage
error. A run's flags (data, tokenizer, model, training) are the library's:
:mod:`hf_nlm.training.arguments`."""

from __future__ import annotations

import argparse


def fail(parser: argparse.ArgumentParser, message: str):
    parser.error(message)  # "hf-nlm CMD: error: MESSAGE" and the --help hint on stderr, exit status 2


def load_saved_run(parser: argparse.ArgumentParser, folder: str):
    """:func:`hf_nlm.training.load_run`, a folder that does not load ending the command with a usage error."""
    from ..training.run import load_run

    try:
        return load_run(folder)
    except (ValueError, FileNotFoundError) as err:
        fail(parser, str(err))


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """Search and sampling flags, read by :func:`hf_nlm.cli.generate.generation_settings`; a search flag left
    out is the model's generation config's."""
    parser.add_argument("--num-beams", type=int, default=None,
                        help="beam width; 1 = greedy or sampling (default: the model's generation config; 1 "
                             "where it names none, as for a model hf-nlm train made)")
    parser.add_argument("--do-sample", action="store_true",
                        help="sample instead of greedy / beam search (a model hf-nlm train made does not "
                             "sample unless asked)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature, > 0 (with --do-sample; default: 1.0)")
    parser.add_argument("--top-k", type=int, default=None,
                        help="sample from the k most likely tokens; 0 = all (with --do-sample; default: 0)")
    parser.add_argument("--top-p", type=float, default=None,
                        help="nucleus sampling mass, in (0, 1] (with --do-sample; default: 1.0)")
    parser.add_argument("--seed", type=int, default=None, help="seed for sampling")
    parser.add_argument("--no-repeat-ngram-size", type=int, default=None, metavar="N",
                        help="never write the same N-gram twice; 0 = allow repeats (default: the model's "
                             "generation config: 3 for a model hf-nlm train made)")
    parser.add_argument("--allow-unknown", action="store_true",
                        help="let the continuation write the unknown-word token, which a model hf-nlm train "
                             "made never writes by default (its generation config's suppress_tokens)")


def add_folder_command(sub: argparse._SubParsersAction, name: str, help_text: str, folder_help: str,
                       description: str | None = None, dest: str = "model_dir") -> argparse.ArgumentParser:
    """The parser of a command whose first argument is a saved folder (a model, or a training run's
    ``--output-dir``): ``hf-nlm NAME FOLDER ...``."""
    parser = sub.add_parser(name, help=help_text, description=description)
    parser.add_argument(dest, help=folder_help)
    return parser
