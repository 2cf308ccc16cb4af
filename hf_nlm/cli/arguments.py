"""Flags of the ``hf-nlm`` commands that run saved models (generation), the folder argument, and the usage
error. A run's flags (data, tokenizer, model, training) are the library's:
:mod:`hf_nlm.training.arguments`."""

from __future__ import annotations

import argparse
import os
import re

#: A setting named in the library's words: a config field (``TrainingConfig.learning_rate``, ``NPLMConfig:
#: cutoffs``) or a keyword argument (``top_p``); not inside a path or a flag, nor a value read
#: (``head='split'``).
_SETTING = re.compile(r"(?<![\w./\\-])(?P<config>[A-Z]\w*Config(?:\.|: ))?"
                      r"(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)*)(?:='(?P<value>[^']*)')?(?![\w/\\-]|\.\w)")


def flag_names(parser: argparse.ArgumentParser, message: str) -> str:
    """``message`` with each setting named as the library names it (``TrainingConfig.learning_rate``,
    ``top_p``, or a plain word that starts it: ``temperature must be ...``) written as ``parser``'s flag
    for it (``--learning-rate``, ``--top-p``, ``--temperature``)."""
    from ..models import MODEL_TYPES
    from ..training.spec import model_settings

    # The flag that sets it: --overwrite-output-dir, not --no-overwrite-output-dir (BooleanOptionalAction).
    flags = {action.dest: max([o for o in action.option_strings if not o.startswith("--no-")]
                              or action.option_strings, key=len)
             for action in parser._actions if action.option_strings}
    if "resume" in flags:  # --resume gives TrainingConfig.resume_from_checkpoint
        flags["resume_from_checkpoint"] = flags["resume"]
    # A model config's field by the setting it is given with: HLBLConfig.hidden_size is --embedding-size.
    settings = {MODEL_TYPES[m].config_class.__name__ + ".": {} for m in MODEL_TYPES}
    for setting, fields in model_settings().items():
        for m, field_name in fields.items():
            settings[MODEL_TYPES[m].config_class.__name__ + "."][field_name] = setting

    def flag(match: re.Match) -> str:
        name, value = match.group("name"), match.group("value")
        name = settings.get((match.group("config") or "").replace(": ", "."), {}).get(name, name)
        # A name='value' is a value the library read (a checkpoint's model_type='gpt2'), not a flag given.
        named = ("_" in name or match.group("config") or match.start() == 0) and value is None
        if not named or name not in flags:
            return match.group(0)
        return flags[name]

    return _SETTING.sub(flag, message)


def fail(parser: argparse.ArgumentParser, message: str):
    """End the command with a usage error: ``hf-nlm CMD: error: MESSAGE`` (the settings it names written as
    the command's flags, :func:`flag_names`) and the --help hint on stderr, exit status 2."""
    parser.error(flag_names(parser, message))


def output_file(path: str) -> str:
    """argparse type of a file a command writes: refused at once, naming the flag, where its folder does not
    exist or it is a folder (rather than after the model has loaded and run)."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a folder: give a file name")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{path}: {folder} is a file, not a folder")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{path}: there is no folder {folder} to write it in (create it "
                                         "first)")
    return path


def picture_file(path: str) -> str:
    """argparse type of a picture a command draws: an :func:`output_file` whose extension names a format
    matplotlib writes (``.png``, ``.pdf``, ``.svg``, ...)."""
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if os.path.splitext(path)[1].lstrip(".").lower() not in formats:
        raise argparse.ArgumentTypeError(f"{path}: name a picture file ending in one of "
                                         f"{', '.join('.' + f for f in sorted(formats))}")
    return output_file(path)


def load_saved_run(parser: argparse.ArgumentParser, folder: str, flag: str | None = None):
    """:func:`hf_nlm.saved_run.load_run`, a folder that does not load ending the command with a usage error
    (naming ``flag``, the option that gave the folder, if any)."""
    from ..saved_run import load_run

    try:
        return load_run(folder)
    except (ValueError, FileNotFoundError) as err:
        fail(parser, f"{flag} {err}" if flag else str(err))


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
                        help="sampling temperature, in [1e-30, 1e30]: beyond, the probabilities overflow "
                             "(with --do-sample; default: 1.0)")
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
                       dest: str = "model_dir") -> argparse.ArgumentParser:
    """The parser of a command whose first argument is a saved folder (a model, or a training run's
    ``--output-dir``): ``hf-nlm NAME FOLDER ...``."""
    parser = sub.add_parser(name, help=help_text)
    parser.add_argument(dest, help=folder_help)
    return parser
