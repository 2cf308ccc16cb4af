"""The ``hf-nlm`` command: train, evaluate and sample from the package's language models.

    hf-nlm train --corpus brown --output-dir runs/mlp1 --context-size 4 --hidden-size 50 --embedding-size 60
    hf-nlm train --train-file train.txt --validation-file valid.txt --test-file test.txt --output-dir runs/toy
    hf-nlm train --corpus brown --model lbl --embedding-size 100 --output-dir runs/lbl
    hf-nlm train --corpus brown --model hlbl --tree huffman --output-dir runs/hlbl-huffman
    hf-nlm build-tree --corpus brown --tree-mode adaptive --eps 0.25 --output-dir runs/hlbl-adaptive
    hf-nlm evaluate runs/mlp1 --corpus brown --split test
    hf-nlm generate runs/mlp1 "the president said" --num-beams 5 --max-new-tokens 20
    hf-nlm card runs/mlp1
    hf-nlm push runs/mlp1 --repo-id your-name/nplm-brown
    hf-nlm download brown ptb sotu

The command is a thin layer over the library: each ``build_*`` / ``load_*`` function below turns
parsed arguments into one library call, so ``examples/train_lm.py`` reuses them step by step.
Bad input (unknown corpus, missing file, bad hyperparameter) ends with an argparse error (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from .training.config import TrainingConfig

NAMED_CORPORA = ("brown", "ptb", "sotu")
FILE_CORPORA = ("text", "csv")
TOKENIZERS = ("word", "numeracy", "bpe", "wordpiece")
TREE_CHOICES = ("random", "balanced", "huffman")
# Config fields the command fills itself rather than through a flag: the vocabulary and token ids come
# from the tokenizer, the tree shape from the tree, tying from the head (a tree head cannot be tied).
DERIVED_FIELDS = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "use_cache",
                  "tree_num_nodes", "tree_max_codes", "tree_max_depth", "numeral_vocab")


# ----------------------------------------------------------------------------- arguments


def _optional(convert: Callable) -> Callable:
    """argparse type for an optional number: 'none' gives None."""

    def parse(text: str):
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its error message
    return parse


def add_data_arguments(parser: argparse.ArgumentParser, require_train: bool = True) -> None:
    group = parser.add_argument_group("data")
    group.add_argument("--corpus", choices=NAMED_CORPORA + FILE_CORPORA, default=None,
                       help="a named corpus (brown, ptb, sotu; fetch with `hf-nlm download`) or text/csv files "
                            "(default: text when --train-file is given)")
    group.add_argument("--data-dir", default=None,
                       help="folder holding the named corpus (default: where `hf-nlm download` puts it)")
    for split in ("train", "validation", "test"):
        group.add_argument(f"--{split}-file", nargs="+", default=None, metavar="FILE",
                           help=f"{split} split: text files (one sentence or line per line) or CSV files")
    group.add_argument("--text-column", default="text", help="CSV column holding the text (default: text)")


def add_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tokenizer")
    group.add_argument("--tokenizer", choices=TOKENIZERS, default=None,
                       help="word: whitespace words with a frequency cut-off (the papers' setting); numeracy: words "
                            "and numerals (value, precision, digits kept), <unk_word> / <unk_num>; bpe / wordpiece: "
                            "subwords (default: numeracy for --model numeracy_lm, else word)")
    group.add_argument("--min-frequency", type=int, default=1,
                       help="keep words (word) or merges (bpe/wordpiece) seen at least this often; Bengio et al. "
                            "merge Brown words of frequency <= 3, i.e. 4 (default: 1)")
    group.add_argument("--vocab-size", type=_optional(int), default=None,
                       help="maximum vocabulary size (required for bpe/wordpiece; optional cap for word)")
    group.add_argument("--lowercase", action="store_true", help="lowercase the text before tokenizing")
    group.add_argument("--split-punctuation", action="store_true",
                       help="numeracy tokenizer: cut punctuation off words too (raw text such as SOTU); numerals "
                            "keep their commas, points and signs")


def model_flags(models) -> dict[str, dict[str, str]]:
    """Every model flag (by its ``dest``) and, for each model of ``models`` it applies to, the config
    field it sets. A flag is a config field's name, or the name its config's ``attribute_map`` gives it
    (the LBL's D, ``hidden_size``, is ``--embedding-size``)."""
    from transformers import PreTrainedConfig

    from .models import MODEL_TYPES

    inherited = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    flags: dict[str, dict[str, str]] = {}
    for name in models:
        config_class = MODEL_TYPES[name].config_class
        alias = {field: flag for flag, field in config_class.attribute_map.items()}
        for f in dataclasses.fields(config_class):
            if f.name not in inherited and f.name not in DERIVED_FIELDS:
                flags.setdefault(alias.get(f.name, f.name), {})[name] = f.name
    return flags


def _first_sentence(doc: str) -> str:
    """A field's description up to its first full stop (not the one of "et al."), without markdown."""
    return re.split(r"(?<! al)\. ", doc.replace("`", ""), maxsplit=1)[0].rstrip(".")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _field_argument(config_class, field: str) -> dict:
    """argparse settings for a config field, from its type (the annotation as written)."""
    kind = str(next(f.type for f in dataclasses.fields(config_class) if f.name == field))
    if kind.startswith("bool"):
        return {"action": argparse.BooleanOptionalAction}
    if kind.startswith("list[int]"):
        return {"type": int, "nargs": "+", "metavar": "N"}
    if field == "head":
        from .heads import HEAD_REGISTRY

        return {"choices": list(HEAD_REGISTRY)}
    return {"type": {"int": int, "float": float, "str": str}[kind.split(" |")[0]]}


def add_model_arguments(parser: argparse.ArgumentParser, models: tuple[str, ...] | None = None) -> None:
    """``--model`` and one flag per config field of those models, generated from the config classes
    (their types, defaults and docstrings), plus the flags that build a tree head's word tree."""
    from .configuration_utils import NLMConfig, config_field_docs
    from .models import MODEL_TYPES

    shared = {f.name for f in dataclasses.fields(NLMConfig)}  # documented once, in NLMConfig
    models = tuple(MODEL_TYPES) if models is None else models
    group = parser.add_argument_group(
        "model (every flag sets the config field of that name; unset, the config's default, given per model)"
    )
    group.add_argument("--model", choices=models, default=models[0], help=f"model architecture (default: {models[0]})")
    for dest, fields in model_flags(models).items():
        configs = {m: MODEL_TYPES[m].config_class for m in fields}
        docs, defaults = {}, {}
        for m, f in fields.items():
            documented_in = NLMConfig if f in shared else configs[m]
            docs.setdefault(_first_sentence(config_field_docs(documented_in).get(f, "")), []).append(m)
            default = next(x.default for x in dataclasses.fields(configs[m]) if x.name == f)
            defaults.setdefault(repr(default), []).append(m)
        doc = next(iter(docs)) if len(docs) == 1 else "; ".join(f"{', '.join(ms)}: {d}" for d, ms in docs.items())
        shown = "; ".join(f"{', '.join(ms)}: {value}" for value, ms in defaults.items())
        m, f = next(iter(fields.items()))
        group.add_argument(_flag(dest), dest=dest, default=None, help=f"{doc} [default {shown}]",
                           **_field_argument(configs[m], f))
    tree = parser.add_argument_group("tree head: the word tree (Morin & Bengio 2005; Mnih & Hinton 2008)")
    tree.add_argument("--tree", choices=TREE_CHOICES, default=None,
                      help="random (default), balanced or huffman (by training-set frequency)")
    tree.add_argument("--tree-file", default=None, metavar="JSON",
                      help="a word tree saved with WordTree.save (e.g. a build-tree run's word_tree.json); its "
                           "word ids must be those of this run's tokenizer (same corpus and tokenizer flags)")
    tree.add_argument("--tree-seed", type=int, default=0, help="seed of the random tree (default: 0)")


def add_training_arguments(parser: argparse.ArgumentParser, resume: bool = True) -> None:
    """One flag per :class:`TrainingConfig` field (``--learning-rate`` for ``learning_rate``), plus ``--resume``."""
    group = parser.add_argument_group("training (TrainingConfig)")
    for f in dataclasses.fields(TrainingConfig):
        if f.name == "resume_from_checkpoint":
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        kind = str(f.type)
        if f.name == "output_dir":
            group.add_argument(flag, required=True, help=help_text)
        elif kind == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        else:
            base = {"int": int, "float": float, "str": str}[kind.split(" |")[0]]
            convert = _optional(base) if "None" in kind else base
            group.add_argument(flag, type=convert, default=f.default, choices=f.metadata.get("choices"),
                               help=f"{help_text} (default: {f.default})")
    if not resume:
        return
    group.add_argument("--init-from", default=None, metavar="MODEL_DIR",
                       help="start from a saved model (its weights and tokenizer; the model and tokenizer flags are "
                            "then unused), e.g. AWD-LSTM fine-tuning: --init-from RUN_DIR --fine-tune")
    group.add_argument("--resume", nargs="?", const="latest", default=None, metavar="CHECKPOINT",
                       help="resume from CHECKPOINT (a checkpoint folder, or a run's output dir); without a value "
                            "the newest checkpoint in --output-dir")


def add_train_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every argument of ``hf-nlm train`` (also used by ``examples/train_lm.py``)."""
    add_data_arguments(parser)
    add_tokenizer_arguments(parser)
    add_model_arguments(parser)
    add_training_arguments(parser)
    return parser


def add_build_tree_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every argument of ``hf-nlm build-tree`` (also used by ``examples/train_hlbl.py``)."""
    from .trees import TREE_MODES

    add_data_arguments(parser)
    add_tokenizer_arguments(parser)
    add_model_arguments(parser, models=("hlbl",))
    group = parser.add_argument_group("word tree (Mnih & Hinton 2008, sec. 4)")
    group.add_argument("--tree-mode", choices=TREE_MODES, default="adaptive",
                       help="split rule of the EM tree: adaptive (more responsible component) or balanced "
                            "(sorted by responsibility, cut in half) (default: adaptive)")
    group.add_argument("--eps", type=float, default=0.0,
                       help="adaptive only: words whose responsibility is within eps of 1/2 go down both "
                            "branches (several codes); in [0, 0.5) (default: 0)")
    group.add_argument("--first-stage-epochs", type=int, default=None,
                       help="epochs of the random-tree model of step 1 (default: --num-epochs)")
    add_training_arguments(parser, resume=False)
    return parser


# ----------------------------------------------------------------------------- library calls


def _fail(parser: argparse.ArgumentParser, message: str):
    parser.error(message)  # prints usage + message to stderr, exits with status 2


def corpus_name(args: argparse.Namespace) -> str:
    files = [args.train_file, args.validation_file, args.test_file]
    if args.corpus in NAMED_CORPORA and any(files):
        raise ValueError(f"--corpus {args.corpus} reads its own files; drop --train-file/--validation-file/--test-file")
    if args.corpus is not None:
        return args.corpus
    if not any(files):
        raise ValueError("give --corpus (brown, ptb, sotu) or --train-file FILE [--validation-file ...] [--test-file ...]")
    given = [p for group in files if group for p in group]
    return "csv" if all(str(p).lower().endswith(".csv") for p in given) else "text"


def load_corpus(args: argparse.Namespace):
    """The ``DatasetDict`` the arguments name (``hf_nlm.data.corpora`` loaders)."""
    from .data import corpora

    name = corpus_name(args)
    if name in NAMED_CORPORA:
        loader = {"brown": corpora.load_brown, "ptb": corpora.load_ptb, "sotu": corpora.load_sotu}[name]
        return loader(path=args.data_dir)
    files = {"train": args.train_file, "validation": args.validation_file, "test": args.test_file}
    for paths in files.values():
        for path in paths or []:
            if not Path(path).is_file():
                raise FileNotFoundError(f"no such file: {path}")
    if name == "csv":
        return corpora.load_csv_files(**files, text_column=args.text_column)
    return corpora.load_text_files(**files)


def build_tokenizer(args: argparse.Namespace, train_texts):
    """Train the tokenizer the arguments ask for on the training texts."""
    if args.min_frequency < 1:
        raise ValueError(f"--min-frequency must be >= 1, got {args.min_frequency}")
    kind = args.tokenizer or ("numeracy" if getattr(args, "model", None) == "numeracy_lm" else "word")
    if kind in ("word", "numeracy"):
        from .tokenization import train_numeracy_tokenizer, train_word_level_tokenizer

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
        from .tokenization import subword
    except ImportError as err:
        raise ValueError(f"--tokenizer {kind} is not available in this install ({err})") from err
    train = subword.train_bpe_tokenizer if kind == "bpe" else subword.train_wordpiece_tokenizer
    return train(train_texts, vocab_size=args.vocab_size, min_frequency=args.min_frequency, lowercase=args.lowercase)


def build_config(args: argparse.Namespace, tokenizer):
    """The model configuration the arguments describe, sized for ``tokenizer`` (no tree shape yet)."""
    from .configuration_utils import config_field_docs
    from .heads import HEAD_REGISTRY
    from .models import MODEL_TYPES

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
            raise ValueError(f"{_flag(dest)} does not apply to --model {args.model}: the "
                             f"{args.model.upper()}'s {what} is {_flag(renamed.pop())}")
        raise ValueError(f"{_flag(dest)} applies to --model {' / '.join(applies)} only, not {args.model}")
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
        **fields,
    )


def build_tree(args: argparse.Namespace, tokenizer, train_texts=None):
    """The word tree of a tree head: ``--tree-file``, or a random / balanced / Huffman tree over the vocabulary."""
    from .trees import WordTree, balanced_tree, huffman_tree, random_tree

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

    from .data.lm import tokenize_corpus

    ids, _ = tokenize_corpus(list(train_texts), tokenizer)
    return huffman_tree(torch.bincount(ids, minlength=V).numpy())


def build_model(args: argparse.Namespace, tokenizer, train_texts=None):
    """A freshly initialised model (seeded with ``--seed``) sized for ``tokenizer``.

    ``train_texts`` are only read for a Huffman tree (word frequencies).
    """
    import torch

    from .models import MODEL_TYPES

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
    from .modeling_utils import check_checkpoint_model_type
    from .training.checkpoint import resolve_checkpoint

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
    datasets = load_corpus(args)
    if "train" not in datasets:
        raise ValueError("the corpus has no train split (give --train-file)")
    init_from = getattr(args, "init_from", None)
    if checkpoint is not None or init_from is not None:
        model, tokenizer = load_model_folder(checkpoint if checkpoint is not None else Path(init_from))
        model.train()  # from_pretrained returns the model in eval mode
    else:
        tokenizer = build_tokenizer(args, datasets["train"]["text"])
        model = build_model(args, tokenizer, datasets["train"]["text"])
    return datasets, tokenizer, model, config


# ----------------------------------------------------------------------------- commands


def cmd_train(args: argparse.Namespace) -> int:
    from .training import LMTrainer

    try:
        datasets, tokenizer, model, config = prepare_training(args)
        # Building the trainer checks the data against the batch settings (e.g. too few blocks).
        trainer = LMTrainer(model, tokenizer, datasets, config, dataset_name=corpus_name(args))
    except (ValueError, TypeError, FileNotFoundError) as err:
        _fail(args.parser, str(err))
    try:
        results = trainer.train()
    except KeyboardInterrupt:
        return _interrupted(args)
    if results:
        print(json.dumps({k: results[k] for k in ("validation", "test", "best_val_ppl", "stop_reason") if k in results}))
    return 0


def load_model_folder(folder: str | os.PathLike):
    """``(model, tokenizer)`` saved in ``folder``; any failure to load them is one ``ValueError`` naming
    the folder and the cause (the library's errors name the file and field)."""
    if not (Path(folder) / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a saved model folder (no config.json)")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_nlm  # noqa: F401  (registers the model types with the Auto classes)

    from .modeling_utils import check_config_field_types
    from .training.checkpoint import quiet_progress_bars

    try:
        check_config_field_types(folder)  # before AutoConfig, which would fail on a wrong type less clearly
        seq2seq = getattr(AutoConfig.from_pretrained(folder), "is_encoder_decoder", False)
        with quiet_progress_bars():
            model = (AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM).from_pretrained(folder)
        return model, AutoTokenizer.from_pretrained(folder)
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
    from .training.checkpoint import list_checkpoints

    found = list_checkpoints(output_dir)
    if not found:
        print("\ntraining interrupted before any checkpoint was written; nothing to resume", file=sys.stderr)
    elif resume is not None:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}\n"
              f"continue with: {resume}", file=sys.stderr)
    else:
        print(f"\ntraining interrupted; the last completed update is saved in {found[-1]}", file=sys.stderr)
    return 130


def _interrupted(args: argparse.Namespace) -> int:
    return report_interrupt(args.output_dir, resume_command(args.argv))


def _load_saved_model(parser: argparse.ArgumentParser, folder: str):
    try:
        return load_model_folder(folder)
    except (ValueError, FileNotFoundError) as err:
        _fail(parser, str(err))


def _load_model_and_corpus(args: argparse.Namespace):
    """``(model, tokenizer, corpus)`` of a command that scores a saved model on ``--split`` of a corpus."""
    model, tokenizer = _load_saved_model(args.parser, args.model_dir)
    try:
        datasets = load_corpus(args)
    except (ValueError, FileNotFoundError) as err:
        _fail(args.parser, str(err))
    if args.split not in datasets:
        _fail(args.parser, f"the corpus has no {args.split!r} split (it has {', '.join(datasets)})")
    return model, tokenizer, datasets


CACHE_DEFAULTS = {"cache_window": 500, "cache_theta": 1.0, "cache_lambda": 0.1}


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluation import evaluate_lm

    for name, default in CACHE_DEFAULTS.items():
        flag = "--" + name.replace("_", "-")
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif not args.neural_cache:
            _fail(args.parser, f"{flag} needs --neural-cache")
    model, tokenizer, datasets = _load_model_and_corpus(args)
    if args.neural_cache:
        from .evaluation.neural_cache import evaluate_with_neural_cache

        # Grave et al. (2017): one stream, batch 1, the state carried over blocks of --block-size tokens.
        try:
            result = evaluate_with_neural_cache(
                model, datasets[args.split], tokenizer, window=args.cache_window, theta=args.cache_theta,
                lambda_=args.cache_lambda, bptt=args.block_size, show_progress=sys.stderr.isatty(),
            )
        except (ValueError, FloatingPointError) as err:
            _fail(args.parser, str(err))
    else:
        result = evaluate_lm(model, datasets[args.split], tokenizer, block_size=args.block_size,
                             batch_size=args.batch_size, show_progress=sys.stderr.isatty())
    print(json.dumps({"split": args.split, **result}))
    return 0


def cmd_predict_numbers(args: argparse.Namespace) -> int:
    from .evaluation.number_prediction import evaluate_number_prediction, predict_numbers

    model, tokenizer, datasets = _load_model_and_corpus(args)
    try:
        if args.predictions:
            with open(args.predictions, "w", encoding="utf-8") as f:
                for row in predict_numbers(model, tokenizer, datasets[args.split], args.statistic,
                                               interval=args.interval, block_size=args.block_size):
                    f.write(json.dumps(row) + "\n")
        train = datasets["train"] if "train" in datasets else None
        report = evaluate_number_prediction(model, tokenizer, datasets[args.split], train, args.statistic,
                                            block_size=args.block_size)
    except ValueError as err:
        _fail(args.parser, str(err))
    print(json.dumps({"split": args.split, **report}))
    return 0


SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}


def check_generation_arguments(args: argparse.Namespace) -> None:
    """Refuse generation settings that make no sense, before the model loads (``ValueError``)."""
    if not args.do_sample:
        given = [_flag(name) for name in SAMPLING_DEFAULTS if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{' / '.join(given)} need --do-sample (greedy and beam search do not sample)")
    if args.temperature is not None and not args.temperature > 0:
        raise ValueError(f"--temperature must be > 0, got {args.temperature} (for the most likely token, drop --do-sample)")
    if args.top_k is not None and args.top_k < 0:
        raise ValueError(f"--top-k must be >= 0 (0 = all tokens), got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    n = args.num_return_sequences
    if n > 1 and not args.do_sample and n > args.num_beams:
        raise ValueError(f"--num-return-sequences {n} needs --do-sample or --num-beams >= {n} "
                         "(greedy search has one continuation)")


def cmd_generate(args: argparse.Namespace) -> int:
    import torch

    try:
        check_generation_arguments(args)
    except ValueError as err:
        _fail(args.parser, str(err))
    from .data.lm import unknown_token_ids
    from .evaluation import decode_generated

    model, tokenizer = _load_saved_model(args.parser, args.model_dir)
    if args.seed is not None:
        torch.manual_seed(args.seed)
    model.eval()
    sampling = {k: (default if getattr(args, k) is None else getattr(args, k)) if args.do_sample else None
                for k, default in SAMPLING_DEFAULTS.items()}
    for prompt in args.prompts:
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        unknown = int(torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer))).sum())
        if unknown and 2 * unknown >= ids.shape[1]:
            print(f"warning: {unknown} of the {ids.shape[1]} tokens of the prompt {prompt!r} are not in the model's "
                  f"vocabulary (they read as {tokenizer.unk_token}); the continuation has little to go on",
                  file=sys.stderr)
        if model.config.is_encoder_decoder:  # a source reads as in training: its tokens, then <eos>
            ids = torch.cat([ids, ids.new_full((1, 1), tokenizer.eos_token_id)], dim=1)
        # An empty prompt starts from the sentence boundary (generate() puts bos_token_id there).
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=args.max_new_tokens,
            num_beams=args.num_beams,
            do_sample=args.do_sample,
            **sampling,
            num_return_sequences=args.num_return_sequences,
            pad_token_id=tokenizer.pad_token_id,
            return_dict_in_generate=True,
        )
        # A causal LM's output repeats the prompt; an encoder-decoder's is the target alone.
        start = 0 if model.config.is_encoder_decoder else max(ids.shape[1], 1)
        # An open-vocabulary numeral strategy (d-RNN, MoG) wrote out each <unk_num> it generated.
        numerals = getattr(out, "numerals", None) or [{} for _ in out.sequences]
        texts = [decode_generated(tokenizer, seq[start:], {t - start: text for t, text in found.items() if t >= start})
                 for seq, found in zip(out.sequences, numerals, strict=True)]
        if args.json:
            print(json.dumps({"prompt": prompt, "generations": texts}))
        else:
            for text in texts:
                print(f"{prompt} {text.strip()}".strip())
    return 0


def _generation_settings(args: argparse.Namespace) -> dict:
    """``generate()`` keyword arguments from the generation flags (checked by ``check_generation_arguments``)."""
    sampling = {k: (default if getattr(args, k) is None else getattr(args, k)) if args.do_sample else None
                for k, default in SAMPLING_DEFAULTS.items()}
    return {"num_beams": args.num_beams, "do_sample": args.do_sample, "length_penalty": args.length_penalty,
            **{k: v for k, v in sampling.items() if v is not None}}


def cmd_story(args: argparse.Namespace) -> int:
    """Title -> storyline -> story (Yao et al. 2019, Plan-and-Write), each stage a saved LM or seq2seq model."""
    import torch

    from .story import write_story

    try:
        check_generation_arguments(args)
    except ValueError as err:
        _fail(args.parser, str(err))
    if args.model is None and args.storyline_model is None:
        _fail(args.parser, "give --model (one LM trained on 'title <sep> storyline <sep> story') or "
                           "--storyline-model and --story-model")
    if args.model is not None and (args.storyline_model or args.story_model):
        _fail(args.parser, "--model serves both stages: give it alone, or --storyline-model and --story-model")
    if args.storyline_model is not None and args.story_model is None:
        _fail(args.parser, "--storyline-model needs --story-model")
    first = _load_saved_model(args.parser, args.model or args.storyline_model)
    second = first if args.model else _load_saved_model(args.parser, args.story_model)
    for model, _ in (first, second):
        model.eval()
    if args.seed is not None:
        torch.manual_seed(args.seed)
    settings = _generation_settings(args)
    for title in args.titles:
        try:
            story = write_story(title, *first, *second, **settings)
        except ValueError as err:
            _fail(args.parser, str(err))
        if args.json:
            print(json.dumps(story))
        else:
            print(f"{story['title']}\n  storyline: {' # '.join(story['storyline'])}\n  story: {story['story']}")
    return 0


def cmd_plot_attention(args: argparse.Namespace) -> int:
    from .plots.attention import plot_attention

    model, tokenizer = _load_saved_model(args.parser, args.model_dir)
    if not model.config.is_encoder_decoder:
        _fail(args.parser, f"{args.model_dir} holds a {model.config.model_type} model; attention maps need an "
                           "encoder-decoder with attention (model_type story_seq2seq)")
    model.eval()
    output = args.output or str(Path(args.model_dir) / "attention.png")
    try:
        result = plot_attention(model, tokenizer, args.source, output, num_beams=args.num_beams,
                                max_new_tokens=args.max_new_tokens)
    except ValueError as err:
        _fail(args.parser, str(err))
    print(json.dumps({"source": args.source, "output": result[0] if isinstance(result, tuple) else result,
                      "picture": output}))
    return 0


def cmd_build_tree(args: argparse.Namespace) -> int:
    """Mnih & Hinton's recipe: HLBL on a random tree -> data-built tree -> fresh HLBL on it."""
    from .training.tree_recipe import train_with_data_tree
    from .trees import check_tree_mode

    try:
        check_tree_mode(args.tree_mode, args.eps, flags=True)
    except ValueError as err:
        _fail(args.parser, str(err))
    if args.first_stage_epochs is not None and args.first_stage_epochs < 1:
        _fail(args.parser, f"--first-stage-epochs must be >= 1, got {args.first_stage_epochs}")
    try:
        config = training_config(args)
        datasets = load_corpus(args)
        if "train" not in datasets:
            raise ValueError("the corpus has no train split (give --train-file)")
        tokenizer = build_tokenizer(args, datasets["train"]["text"])
        model_config = build_config(args, tokenizer)
        results = train_with_data_tree(
            model_config, tokenizer, datasets, config, mode=args.tree_mode, eps=args.eps,
            first_stage_epochs=args.first_stage_epochs, tree_seed=args.tree_seed, dataset_name=corpus_name(args),
        )
    except (ValueError, TypeError, FileNotFoundError) as err:
        _fail(args.parser, str(err))
    except KeyboardInterrupt:
        from .training.checkpoint import list_checkpoints

        out = Path(config.output_dir)  # the final stage's run, or step 1's under random_tree/
        code = report_interrupt(out if list_checkpoints(out) else out / "random_tree", None)
        print("build-tree does not resume a stage: run it again to start over", file=sys.stderr)
        return code
    keep = ("validation", "test", "best_val_ppl", "stop_reason", "elapsed_s")
    summary = {stage: {k: results[stage][k] for k in keep if k in results[stage]} for stage in ("random_tree", "data_tree")}
    print(json.dumps({**summary, "tree": results["tree"], "output_dir": config.output_dir}))
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from .hub.model_card import write_run_card

    try:
        path = write_run_card(args.run_dir, dataset=args.dataset, model_name=args.model_name)
    except (ValueError, FileNotFoundError, OSError) as err:
        _fail(args.parser, str(err))
    print(path)
    return 0


def cmd_plot_numerals(args: argparse.Namespace) -> int:
    from .plots.numerals import plot_numeral_density, plot_numeral_embeddings, plot_strategy_weights

    model, tokenizer = _load_saved_model(args.parser, args.model_dir)
    if getattr(tokenizer, "numeral_vocab", None) is None:
        _fail(args.parser, f"{args.model_dir}: its tokenizer does not tell numerals from words (train the model with "
                           "--tokenizer numeracy)")
    name = ("numeral_density.png" if args.density_after is not None else
            "strategy_weights.png" if args.weights_along is not None else "numeral_embeddings.png")
    output = args.output or str(Path(args.model_dir) / name)
    try:
        if args.density_after is not None:
            plot_numeral_density(model, tokenizer, args.density_after, output, value=args.value)
        elif args.weights_along is not None:
            plot_strategy_weights(model, tokenizer, args.weights_along, output)
        else:
            plot_numeral_embeddings(model, tokenizer, output, which=args.which)
    except ValueError as err:
        _fail(args.parser, str(err))
    print(output)
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from .hub import HubError, push_run

    try:
        info = push_run(args.run_dir, args.repo_id, private=args.private, revision=args.revision,
                        commit_message=args.commit_message)
    except (HubError, FileNotFoundError, ValueError) as err:
        _fail(args.parser, str(err))
    print(json.dumps({"repo_id": args.repo_id, "commit_url": info.commit_url, "oid": info.oid}))
    return 0


def cmd_download(argv: list[str]) -> int:
    from .data.download import main as download_main

    return download_main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-nlm", description="Classic neural language models on Hugging Face.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{train,build-tree,evaluate,predict-numbers,generate,story,plot-attention,card,plot-numerals,push,download}")

    train = add_train_arguments(sub.add_parser("train", help="train a language model", description="Train a language model."))
    train.set_defaults(func=cmd_train, parser=train)

    build_tree_parser = add_build_tree_arguments(sub.add_parser(
        "build-tree", help="HLBL with a data-built word tree (Mnih & Hinton 2008): train, build the tree, retrain",
        description="Mnih & Hinton's (2008) recipe: train an HLBL on a random tree, represent each word by its "
                    "average predicted vector, build a tree by recursive EM (--tree-mode, --eps), train a fresh "
                    "HLBL on it. Output: OUTPUT_DIR (final model), OUTPUT_DIR/random_tree (step 1), "
                    "OUTPUT_DIR/word_tree.json.",
    ))
    build_tree_parser.set_defaults(func=cmd_build_tree, parser=build_tree_parser)

    evaluate = sub.add_parser("evaluate", help="perplexity of a saved model on a corpus split (JSON)")
    evaluate.add_argument("model_dir", help="a saved model folder (e.g. a training run's --output-dir)")
    add_data_arguments(evaluate)
    evaluate.add_argument("--split", default="test", help="split to evaluate (default: test)")
    evaluate.add_argument("--block-size", type=int, default=256, help="targets per evaluation block (default: 256)")
    evaluate.add_argument("--batch-size", type=int, default=32, help="blocks per batch (default: 32)")
    cache = evaluate.add_argument_group(
        "neural cache (Grave, Joulin & Usunier 2017; recurrent models only, e.g. AWD-LSTM)",
        "p(w) = (1 - lambda) p_model(w) + lambda p_cache(w), p_cache(w) proportional to the sum of "
        "exp(theta h_t . h_i) over the last WINDOW positions i followed by w. The split is read as one stream, "
        "batch 1, the state carried over blocks of --block-size tokens (--batch-size is unused).",
    )
    cache.add_argument("--neural-cache", action="store_true", help="evaluate with the neural cache pointer")
    cache.add_argument("--cache-window", type=int, default=None,
                       help=f"previous positions in the cache (default: {CACHE_DEFAULTS['cache_window']})")
    cache.add_argument("--cache-theta", type=float, default=None,
                       help=f"inverse temperature theta of the cache's softmax (default: {CACHE_DEFAULTS['cache_theta']})")
    cache.add_argument("--cache-lambda", type=float, default=None,
                       help=f"cache weight lambda in [0, 1] (default: {CACHE_DEFAULTS['cache_lambda']})")
    evaluate.set_defaults(func=cmd_evaluate, parser=evaluate)

    predict = sub.add_parser("predict-numbers", help="predict every number of a split with a numeracy model "
                                                     "(MAPE / MdAPE, JSON)")
    predict.add_argument("model_dir", help="a saved model folder trained with the numeracy tokenizer")
    add_data_arguments(predict)
    predict.add_argument("--split", default="test", help="split to predict (default: test)")
    predict.add_argument("--statistic", choices=("mean", "median", "mode"), default="median",
                         help="point estimate of the predicted distribution (default: median)")
    predict.add_argument("--interval", type=float, default=0.8,
                         help="probability mass of the interval written with each prediction (default: 0.8)")
    predict.add_argument("--predictions", default=None, metavar="FILE",
                         help="also write one JSON line per numeral: index, value, prediction, low, high")
    predict.add_argument("--block-size", type=int, default=256, help="tokens per chunk (default: 256)")
    predict.set_defaults(func=cmd_predict_numbers, parser=predict)

    generate = sub.add_parser("generate", help="continue prompts with a saved model")
    generate.add_argument("model_dir", help="a saved model folder")
    generate.add_argument("prompts", nargs="+", metavar="PROMPT", help="text to continue")
    generate.add_argument("--max-new-tokens", type=int, default=20, help="tokens to add (default: 20)")
    generate.add_argument("--num-beams", type=int, default=1, help="beam width; 1 = greedy or sampling (default: 1)")
    generate.add_argument("--do-sample", action="store_true", help="sample instead of greedy / beam search")
    generate.add_argument("--temperature", type=float, default=None,
                          help="sampling temperature, > 0 (with --do-sample; default: 1.0)")
    generate.add_argument("--top-k", type=int, default=None,
                          help="sample from the k most likely tokens; 0 = all (with --do-sample; default: 0)")
    generate.add_argument("--top-p", type=float, default=None,
                          help="nucleus sampling mass, in (0, 1] (with --do-sample; default: 1.0)")
    generate.add_argument("--num-return-sequences", type=int, default=1, help="continuations per prompt (default: 1)")
    generate.add_argument("--seed", type=int, default=None, help="seed for sampling")
    generate.add_argument("--json", action="store_true", help="print one JSON object per prompt")
    generate.set_defaults(func=cmd_generate, parser=generate)

    story = sub.add_parser("story", help="title -> storyline -> story with saved models (Yao et al. 2019)",
                           description="Write a story for each TITLE in two stages: title -> storyline (one keyword "
                                       "phrase per sentence) -> story. Either one LM trained on 'title <sep> k1 # k2 "
                                       "... <sep> story' (--model) serves both stages, or a model per stage "
                                       "(--storyline-model, --story-model), each a causal LM or a story_seq2seq model.")
    story.add_argument("titles", nargs="+", metavar="TITLE")
    story.add_argument("--model", default=None, help="one LM folder for both stages")
    story.add_argument("--storyline-model", default=None, help="model folder for title -> storyline")
    story.add_argument("--story-model", default=None, help="model folder for title + storyline -> story")
    story.add_argument("--num-beams", type=int, default=1, help="beam width; 1 = greedy or sampling (default: 1)")
    story.add_argument("--length-penalty", type=float, default=1.0,
                       help="beam search ranks finished hypotheses by sum log p / length**LP (default: 1.0, the "
                            "length-normalised (1/t) sum log p)")
    story.add_argument("--do-sample", action="store_true", help="sample instead of greedy / beam search")
    story.add_argument("--temperature", type=float, default=None, help="sampling temperature (with --do-sample)")
    story.add_argument("--top-k", type=int, default=None, help="top-k sampling (with --do-sample)")
    story.add_argument("--top-p", type=float, default=None, help="nucleus sampling (with --do-sample)")
    story.add_argument("--seed", type=int, default=None, help="seed for sampling")
    story.add_argument("--json", action="store_true", help="print one JSON object per title")
    story.set_defaults(func=cmd_story, parser=story, num_return_sequences=1)

    attention = sub.add_parser("plot-attention", help="draw a seq2seq model's attention while it generates (PNG)",
                               description="Generate from SOURCE with a saved story_seq2seq model and draw its "
                                           "attention weights (source words x generated words) as a heatmap.")
    attention.add_argument("model_dir", help="a saved story_seq2seq model folder")
    attention.add_argument("source", help="the source text")
    attention.add_argument("--output", default=None, help="PNG file (default: MODEL_DIR/attention.png)")
    attention.add_argument("--num-beams", type=int, default=1, help="beam width (default: 1, greedy)")
    attention.add_argument("--max-new-tokens", type=int, default=50, help="tokens to generate at most (default: 50)")
    attention.set_defaults(func=cmd_plot_attention, parser=attention)

    card = sub.add_parser("card", help="(re)write the model card (README.md) of a run folder",
                          description="Write RUN_DIR/README.md from its config.json and results.json: Hub metadata "
                                      "with a model-index of the measured perplexities, results, training settings, "
                                      "how to load, citation.")
    card.add_argument("run_dir", help="a training run's --output-dir")
    card.add_argument("--dataset", default=None,
                      help="corpus name for the card (brown, ptb, sotu, text, csv; default: the one results.json records)")
    card.add_argument("--model-name", default=None, help="name in the model-index (default: MODEL_TYPE-CORPUS)")
    card.set_defaults(func=cmd_card, parser=card)

    plot = sub.add_parser("plot-numerals", help="draw a numeracy model's numeral embeddings (PNG)",
                          description="The numerals' vectors of a saved model trained with the numeracy tokenizer on "
                                      "their first two principal components, coloured by log10(1 + |value|) "
                                      "(Spithourakis & Riedel 2018, fig. 2).")
    plot.add_argument("model_dir", help="a saved model folder")
    plot.add_argument("--output", default=None, help="PNG file (default: MODEL_DIR/numeral_embeddings.png)")
    plot.add_argument("--which", choices=("output", "input"), default="output",
                      help="the head's numeral rows (output, default) or the input embeddings")
    plot.add_argument("--density-after", default=None, metavar="TEXT",
                      help="instead: a mog model's predicted density of the next numeral after TEXT")
    plot.add_argument("--value", type=float, default=None, help="with --density-after: the true value, marked")
    plot.add_argument("--weights-along", default=None, metavar="TEXT",
                      help="instead: a combination model's strategy weights p(m | h) at every token of TEXT")
    plot.set_defaults(func=cmd_plot_numerals, parser=plot)

    push = sub.add_parser("push", help="upload a run folder to the Hugging Face Hub",
                          description="Upload RUN_DIR's model, tokenizer, generation config, card (written first if "
                                      "missing), results.json and curves.png to the Hub repo REPO_ID (created if "
                                      "needed). Needs a token: `hf auth login` (`huggingface-cli login`) or HF_TOKEN.")
    push.add_argument("run_dir", help="a training run's --output-dir")
    push.add_argument("--repo-id", required=True, help="the Hub repo, e.g. your-name/nplm-brown")
    push.add_argument("--private", action="store_true", default=None, help="create the repo private")
    push.add_argument("--revision", default=None, help="branch to commit to (created if needed; default: main)")
    push.add_argument("--commit-message", default=None, help="commit message (default: 'Upload model with hf-nlm')")
    push.set_defaults(func=cmd_push, parser=push)

    # `download` has its own parser (hf_nlm.data.download.main); listed here for --help only.
    sub.add_parser("download", help="fetch the brown / ptb / sotu corpora (see `hf-nlm download --help`)", add_help=False)
    return parser


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("max_new_tokens", "num_beams", "num_return_sequences", "block_size", "batch_size"):
        value = getattr(args, name, None)
        if isinstance(value, int) and value < 1:
            _fail(args.parser, f"--{name.replace('_', '-')} must be >= 1, got {value}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hf-nlm`` console script. Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "download":
        return cmd_download(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv[1:]  # the command's own arguments, e.g. to print the --resume command
    _check_numbers(args)
    return args.func(args)

if __name__ == "__main__":
    sys.exit(main())
