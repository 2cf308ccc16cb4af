"""The library calls behind ``hf-nlm train`` and friends, one per step: each turns parsed arguments into one
library call (corpus, tokenizer, config, tree, model, ``TrainingConfig``), so that ``examples/train_lm.py`` and
the tests reuse them step by step. Bad input raises ``ValueError`` / ``FileNotFoundError``."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ..data.registry import CORPORA, OPTION_FLAGS
from ..training.config import TrainingConfig
from .arguments import NAMED_CORPORA, fail, model_flags, option_flag


def corpus_name(args: argparse.Namespace) -> str:
    """The registered corpus the arguments name: ``--corpus``, else text / csv from the split files' names."""
    files = [args.train_file, args.validation_file, args.test_file]
    if args.corpus in NAMED_CORPORA and any(files):
        raise ValueError(f"--corpus {args.corpus} reads its own files; drop --train-file/--validation-file/--test-file")
    if args.corpus is not None:
        return args.corpus
    if not any(files):
        raise ValueError(f"give --corpus ({', '.join(NAMED_CORPORA)}) or --train-file FILE [--validation-file ...] "
                         "[--test-file ...]")
    given = [p for group in files if group for p in group]
    return "csv" if all(str(p).lower().endswith(".csv") for p in given) else "text"


def load_corpus(args: argparse.Namespace):
    """The ``DatasetDict`` the arguments name, from the corpus's loader in :data:`hf_nlm.data.registry.CORPORA`
    (given ``--corpus-path``, or the split files, and the loader options given as flags)."""
    name = corpus_name(args)
    entry = CORPORA[name]
    options = {}
    for option, flag in OPTION_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is None:
            continue
        if option not in entry.options:
            takes = [other for other, e in CORPORA.items() if option in e.options]
            raise ValueError(f"{flag} applies to --corpus {' / '.join(takes)} only, not {name}")
        options[option] = tuple(value) if isinstance(value, list) else value
    if not entry.split_files:
        return entry.load(path=args.data_dir, **options)
    files = {"train": args.train_file, "validation": args.validation_file, "test": args.test_file}
    for paths in files.values():
        for path in paths or []:
            if not Path(path).is_file():
                raise FileNotFoundError(f"no such file: {path}")
    return entry.load(**files, **options)


def training_corpus(args: argparse.Namespace):
    """:func:`load_corpus`, checked to have a train split."""
    datasets = load_corpus(args)
    if "train" not in datasets:
        raise ValueError("the corpus has no train split (give --train-file)")
    return datasets


def build_tokenizer(args: argparse.Namespace, train_texts):
    """Train the tokenizer the arguments ask for on the training texts."""
    if args.min_frequency < 1:
        raise ValueError(f"--min-frequency must be >= 1, got {args.min_frequency}")
    kind = args.tokenizer or ("numeracy" if getattr(args, "model", None) == "numeracy_lm" else "word")
    if kind in ("word", "numeracy"):
        from ..tokenization import train_numeracy_tokenizer, train_word_level_tokenizer

        if kind == "word":
            if getattr(args, "split_punctuation", False):
                raise ValueError("--split-punctuation applies to --tokenizer numeracy only")
            return train_word_level_tokenizer(train_texts, min_frequency=args.min_frequency, lowercase=args.lowercase,
                                              max_vocab_size=args.vocab_size)
        return train_numeracy_tokenizer(train_texts, min_frequency=args.min_frequency, lowercase=args.lowercase,
                                        max_vocab_size=args.vocab_size,
                                        split_punctuation=getattr(args, "split_punctuation", False))
    if args.vocab_size is None:
        raise ValueError(f"--tokenizer {kind} needs --vocab-size")
    try:
        from ..tokenization import subword
    except ImportError as err:
        raise ValueError(f"--tokenizer {kind} is not available in this install ({err})") from err
    train = subword.train_bpe_tokenizer if kind == "bpe" else subword.train_wordpiece_tokenizer
    return train(train_texts, vocab_size=args.vocab_size, min_frequency=args.min_frequency, lowercase=args.lowercase)


def build_config(args: argparse.Namespace, tokenizer):
    """The model configuration the arguments describe, sized for ``tokenizer`` (no tree shape yet)."""
    from ..configuration_utils import config_field_docs
    from ..heads import HEAD_REGISTRY
    from ..models import MODEL_TYPES
    from ..tokenization import tokenizer_fingerprint

    config_class = MODEL_TYPES[args.model].config_class
    fields = {}
    for dest, applies in model_flags(MODEL_TYPES).items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if args.model in applies:
            fields[applies[args.model]] = value
            continue
        renamed = {flag for flag, field in config_class.attribute_map.items() if field == dest}
        if renamed:  # the model has this field, under another flag
            what = config_field_docs(config_class).get(dest, dest).split(":")[0].removeprefix("The ")
            raise ValueError(f"{option_flag(dest)} does not apply to --model {args.model}: the "
                             f"{args.model.upper()}'s {what} is {option_flag(renamed.pop())}")
        raise ValueError(f"{option_flag(dest)} applies to --model {' / '.join(applies)} only, not {args.model}")
    head = fields.get("head", next(f.default for f in dataclasses.fields(config_class) if f.name == "head"))
    if head in HEAD_REGISTRY and not HEAD_REGISTRY[head].tieable:
        fields["tie_word_embeddings"] = False  # e.g. a tree head's node vectors are not word vectors
    if any(f.name == "numeral_vocab" for f in dataclasses.fields(config_class)):
        # Which ids are numerals, from a numeracy tokenizer (None from another: a numeral head then says so).
        fields["numeral_vocab"] = getattr(tokenizer, "numeral_vocab", None)
    eos = tokenizer.eos_token_id
    return config_class(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        **fields,
    )


def build_tree(args: argparse.Namespace, tokenizer, train_texts=None):
    """The word tree of a tree head: ``--tree-file``, or a random / balanced / Huffman tree over the vocabulary."""
    from ..trees import WordTree, balanced_tree, huffman_tree, random_tree

    kind, path, V = getattr(args, "tree", None), getattr(args, "tree_file", None), len(tokenizer)
    if kind is not None and path is not None:
        raise ValueError("give --tree or --tree-file, not both")
    if path is not None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"no such file: {path}")
        tree = WordTree.load(path)
        if tree.vocab_size != V:
            raise ValueError(f"{path}: the tree covers {tree.vocab_size} words but the vocabulary has {V}")
        return tree
    kind = kind or "random"
    if kind == "random":
        return random_tree(V, seed=args.tree_seed)
    if kind == "balanced":
        return balanced_tree(V)
    if train_texts is None:
        raise ValueError("--tree huffman needs the training texts to count word frequencies")
    import torch

    from ..data.lm import tokenize_corpus

    ids, _ = tokenize_corpus(list(train_texts), tokenizer)
    return huffman_tree(torch.bincount(ids, minlength=V).numpy())


def build_model(args: argparse.Namespace, tokenizer, train_texts=None):
    """A freshly initialised model (seeded with ``--seed``) sized for ``tokenizer``.

    ``train_texts`` are only read for a Huffman tree (word frequencies).
    """
    import torch

    from ..models import MODEL_TYPES

    config = build_config(args, tokenizer)
    tree = None
    if config.head == "tree":
        tree = build_tree(args, tokenizer, train_texts)
    elif getattr(args, "tree", None) is not None or getattr(args, "tree_file", None) is not None:
        raise ValueError(f"--tree / --tree-file need a tree head (--head tree or --model hlbl), not --head {config.head}")
    torch.manual_seed(args.seed)  # the same initial weights on every process and every rerun
    return MODEL_TYPES[args.model].lm_class(config, tree=tree)


def training_config(args: argparse.Namespace, resume_from_checkpoint: str | None = None) -> TrainingConfig:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingConfig) if hasattr(args, f.name)}
    return TrainingConfig(**values, resume_from_checkpoint=resume_from_checkpoint)


def resume_checkpoint(args: argparse.Namespace) -> Path | None:
    """The checkpoint folder ``--resume`` names (checked to hold a model of type ``--model``), or None."""
    if args.resume is None:
        return None
    from ..modeling_utils import check_checkpoint_model_type
    from ..training.checkpoint import resolve_checkpoint

    folder = resolve_checkpoint(args.resume, args.output_dir)
    check_checkpoint_model_type(folder, args.model)
    return folder


def prepare_training(args: argparse.Namespace):
    """Corpus, tokenizer, model and ``TrainingConfig`` from parsed ``train`` arguments.

    Resuming reads the tokenizer and the model's configuration from the checkpoint, so the vocabulary
    is the one the interrupted run trained with. Raises ValueError / FileNotFoundError on bad input.
    """
    checkpoint = resume_checkpoint(args)
    config = training_config(args, resume_from_checkpoint=os.fspath(checkpoint) if checkpoint else None)
    datasets = training_corpus(args)
    init_from = getattr(args, "init_from", None)
    if checkpoint is not None or init_from is not None:
        model, tokenizer = load_model_folder(checkpoint if checkpoint is not None else Path(init_from))
        model.train()  # from_pretrained returns the model in eval mode
    else:
        tokenizer = build_tokenizer(args, datasets["train"]["text"])
        model = build_model(args, tokenizer, datasets["train"]["text"])
    return datasets, tokenizer, model, config


def load_model_folder(folder: str | os.PathLike):
    """``(model, tokenizer)`` saved in ``folder``; any failure to load them is one ``ValueError`` naming
    the folder and the cause (the library's errors name the file and field)."""
    if not (Path(folder) / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a saved model folder (no config.json)")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_nlm  # noqa: F401  (registers the model types with the Auto classes)

    from ..modeling_utils import check_config_field_types
    from ..training.checkpoint import quiet_progress_bars

    if not (Path(folder) / "tokenizer.json").is_file():
        # AutoTokenizer would look for a slow tokenizer next and ask for sentencepiece or tiktoken.
        found = ", ".join(sorted(p.name for p in Path(folder).iterdir())) or "nothing"
        raise FileNotFoundError(
            f"{folder} has no tokenizer: expected tokenizer.json (saved with tokenizer.save_pretrained beside the "
            f"model); the folder has {found}"
        )
    from ..tokenization import check_tokenizer

    try:
        check_config_field_types(folder)  # before AutoConfig, which would fail on a wrong type less clearly
        seq2seq = getattr(AutoConfig.from_pretrained(folder), "is_encoder_decoder", False)
        with quiet_progress_bars():
            model = (AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM).from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        check_tokenizer(model, tokenizer)
        return model, tokenizer
    except Exception as err:  # whatever a broken folder raises (Ctrl-C still interrupts)
        raise ValueError(f"cannot load the model in {folder}: {err}") from err


def resume_command(argv: list[str], program: tuple[str, ...] = ("hf-nlm", "train")) -> str:
    """The command line ``program + argv`` with ``--resume`` (any value given to it dropped)."""
    import shlex

    kept, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--resume":
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("-")
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return shlex.join([*program, *kept, "--resume"])


def report_interrupt(output_dir: str | os.PathLike, resume: str | None) -> int:
    """Ctrl-C / SIGTERM during training: where the last checkpoint is and, given ``resume``, the command
    that goes on from it. Returns 130, the exit status of a program stopped by SIGINT."""
    from ..training.checkpoint import list_checkpoints

    found = list_checkpoints(output_dir)
    if not found:
        print("\ntraining interrupted before any checkpoint was written; nothing to resume", file=sys.stderr)
    elif resume is not None:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}\n"
              f"continue with: {resume}", file=sys.stderr)
    else:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}", file=sys.stderr)
    return 130




def load_saved_model(parser: argparse.ArgumentParser, folder: str):
    """:func:`load_model_folder`, a failure ending the command with a usage error naming the folder."""
    try:
        return load_model_folder(folder)
    except (ValueError, FileNotFoundError) as err:
        fail(parser, str(err))
