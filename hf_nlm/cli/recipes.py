"""The library calls behind ``hf-nlm train`` and friends, one per step: each turns parsed arguments into one
library call (corpus, tokenizer, config, tree, model, ``TrainingConfig``), so that ``examples/train_lm.py`` and
the tests reuse them step by step. Bad input raises ``ValueError`` / ``FileNotFoundError``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from pathlib import Path

from ..data.registry import CORPORA, OPTION_FLAGS
from ..memory import available_memory
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
    for split, paths in files.items():
        for path in paths or []:
            check_split_file(f"--{split}-file", path)
    return entry.load(**files, **options)


def check_split_file(flag: str, path: str | os.PathLike) -> None:
    """``path``, given to ``flag``, is a file; a folder is refused with the text and CSV files it holds."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".txt", ".csv"))
        inside = f"the text files in it: {' '.join(found[:10])}{' ...' if len(found) > 10 else ''}" if found else \
            "it holds no .txt or .csv file"
        raise FileNotFoundError(f"{flag} {path} is a folder, not a file: give files ({inside})")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")


def training_corpus(args: argparse.Namespace):
    """:func:`load_corpus`, checked to have a train split."""
    datasets = load_corpus(args)
    if "train" not in datasets:
        raise ValueError("the corpus has no train split (give --train-file)")
    return datasets


def build_tokenizer(args: argparse.Namespace, train_texts):
    """Train the tokenizer the arguments ask for on the training texts."""
    apply_recipe(args)
    if args.min_frequency < 1:
        raise ValueError(f"--min-frequency must be >= 1, got {args.min_frequency}")
    kind = args.tokenizer or ("numeracy" if getattr(args, "model", None) == "numeracy_lm" else "word")
    if kind in ("word", "numeracy"):
        from ..tokenization import train_numeracy_tokenizer, train_word_level_tokenizer
        from ..tokenization.numerals import NUMERACY_SPECIAL_TOKENS, numeracy_token_counts
        from ..tokenization.word_level import SPECIAL_TOKENS, word_counts

        split_punctuation = resolve_split_punctuation(args, train_texts)
        if kind == "word":
            tokenizer = train_word_level_tokenizer(train_texts, min_frequency=args.min_frequency,
                                                   lowercase=args.lowercase, max_vocab_size=args.vocab_size,
                                                   split_punctuation=split_punctuation)
            counts = word_counts(train_texts, args.lowercase, split_punctuation)
        else:
            tokenizer = train_numeracy_tokenizer(train_texts, min_frequency=args.min_frequency,
                                                 lowercase=args.lowercase, max_vocab_size=args.vocab_size,
                                                 split_punctuation=split_punctuation)
            counts = numeracy_token_counts(train_texts, args.lowercase, split_punctuation)
        try:
            check_vocabulary_coverage(tokenizer, counts, args.min_frequency, args.vocab_size,
                                      SPECIAL_TOKENS if kind == "word" else NUMERACY_SPECIAL_TOKENS)
        except ValueError:
            if "min_frequency" not in getattr(args, "recipe_values", ()) or args.min_frequency == 1:
                raise
            # The recipe's cut-off is meant for texts of many thousand words; a small text keeps every word.
            print(f"--min-frequency {args.min_frequency} (the recipe's) would leave most of this small text unknown; "
                  "using --min-frequency 1", file=sys.stderr)
            args.min_frequency = 1
            args.recipe_values = set(args.recipe_values) - {"min_frequency"}
            return build_tokenizer(args, train_texts)
        return tokenizer
    if args.vocab_size is None:
        raise ValueError(f"--tokenizer {kind} needs --vocab-size")
    try:
        from ..tokenization import subword
    except ImportError as err:
        raise ValueError(f"--tokenizer {kind} is not available in this install ({err})") from err
    train = subword.train_bpe_tokenizer if kind == "bpe" else subword.train_wordpiece_tokenizer
    return train(train_texts, vocab_size=args.vocab_size, min_frequency=args.min_frequency, lowercase=args.lowercase)


def resolve_split_punctuation(args: argparse.Namespace, train_texts) -> bool:
    """``--split-punctuation`` / ``--no-split-punctuation``, or unset: split when the training text carries
    punctuation on its words (:data:`hf_nlm.tokenization.word_level.ATTACHED_PUNCTUATION_SHARE`), which raw
    text does and tokenized text (Penn Treebank) does not. The choice is written back to ``args`` (so the run
    records it) and said on stderr."""
    from ..tokenization.word_level import ATTACHED_PUNCTUATION_SHARE, attached_punctuation_share

    if getattr(args, "split_punctuation", None) is not None:
        return args.split_punctuation
    share = attached_punctuation_share(train_texts)
    args.split_punctuation = share >= ATTACHED_PUNCTUATION_SHARE
    if int(os.environ.get("RANK", "0")) == 0:
        said = ("cut off the words (--no-split-punctuation keeps it on them)" if args.split_punctuation else
                "left as it is (--split-punctuation cuts it off the words)")
        print(f"punctuation: {share:.1%} of the training words carry some at their end; {said}", file=sys.stderr)
    return args.split_punctuation


#: ``hf-nlm train`` refuses a word-level or numeracy vocabulary that leaves more than this share of the
#: training tokens unknown, and suggests settings that leave at most :data:`SUGGESTED_UNKNOWN_SHARE`.
MAX_UNKNOWN_SHARE = 0.5
SUGGESTED_UNKNOWN_SHARE = 0.1


def check_vocabulary_coverage(tokenizer, counts, min_frequency: int, vocab_size: int | None,
                              specials: tuple[str, ...] = ("<unk>", "<eos>")) -> None:
    """Refuse a vocabulary under which more than :data:`MAX_UNKNOWN_SHARE` of the training tokens (``counts``,
    token -> count as the tokenizer splits the text) are unknown, naming the flag that cut it and a value
    that keeps :data:`SUGGESTED_UNKNOWN_SHARE` or less unknown. ``specials``: the tokenizer's special tokens,
    those starting with ``<unk`` being its unknowns."""
    vocab = tokenizer.get_vocab()
    unknown_tokens = {t for t in specials if t.startswith("<unk")}
    total = sum(counts.values())
    unknown = sum(c for t, c in counts.items() if t not in vocab or t in unknown_tokens)
    if not total or unknown <= MAX_UNKNOWN_SHARE * total:
        return
    words = len(vocab) - len(specials)
    ranked = sorted((c for t, c in counts.items() if t not in specials), reverse=True)
    # The share left unknown keeping the `kept` most frequent words (an <unk> written in the text stays unknown).
    left = total - sum(c for t, c in counts.items() if t in specials and t not in unknown_tokens)
    kept = 0
    while kept < len(ranked) and left > SUGGESTED_UNKNOWN_SHARE * total:
        left -= ranked[kept]
        kept += 1
    cut_by_size = vocab_size is not None and sum(1 for c in ranked if c >= min_frequency) > words
    if cut_by_size:
        flag = f"--vocab-size {vocab_size}"
        fix = f"--vocab-size {kept + len(specials)}"
    else:
        flag = f"--min-frequency {min_frequency}"
        fix = f"--min-frequency {ranked[kept - 1] if kept else 1}"
    raise ValueError(
        f"{flag} keeps {words:,} of the {len(ranked):,} distinct training words: {unknown:,} of the {total:,} "
        f"training tokens ({unknown / total:.1%}) would be unknown, more than {MAX_UNKNOWN_SHARE:.0%}; "
        f"{fix} leaves at most {SUGGESTED_UNKNOWN_SHARE:.0%} unknown"
    )


def build_config(args: argparse.Namespace, tokenizer):
    """The model configuration the arguments describe, sized for ``tokenizer`` (no tree shape yet)."""
    apply_recipe(args)
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
    check_training_memory(args, MODEL_TYPES[args.model].lm_class, config, tree)
    torch.manual_seed(args.seed)  # the same initial weights on every process and every rerun
    model = MODEL_TYPES[args.model].lm_class(config, tree=tree)
    set_generation_defaults(model, tokenizer)
    return model


#: A model ``hf-nlm train`` makes never writes the same n-gram of this length twice (as BART's summarisation
#: checkpoints do with 3): beam search from a small LM otherwise settles into a loop.
NO_REPEAT_NGRAM_SIZE = 3


def set_generation_defaults(model, tokenizer) -> None:
    """The generation config a trained model is saved with, so that ``generate()``, ``pipeline`` and ``hf-nlm
    generate`` write text rather than loops: no repeated n-gram (:data:`NO_REPEAT_NGRAM_SIZE`), and the
    unknown-word token suppressed: it stands for every word outside the vocabulary at once, so after many
    contexts it is the likeliest "word", and it reads as nothing. A numeracy tokenizer's ``<unk_num>`` stays: an
    open-vocabulary strategy writes an unseen numeral there. Both are plain ``GenerationConfig`` fields that
    ``generate()`` arguments override (``no_repeat_ngram_size=0``, ``suppress_tokens=None``)."""
    model.generation_config.no_repeat_ngram_size = NO_REPEAT_NGRAM_SIZE
    if tokenizer.unk_token_id is not None:
        model.generation_config.suppress_tokens = [tokenizer.unk_token_id]


#: Copies of the weights training holds, by optimizer: weights and gradients, plus Adam's two moments
#: (SGD's momentum buffer when ``--momentum`` is set).
OPTIMIZER_COPIES = {"sgd": 2, "adam": 4, "adamw": 4}


def check_training_memory(args: argparse.Namespace, lm_class, config, tree=None) -> None:
    """Refuse settings whose model cannot be trained in the memory available, before allocating it: the
    parameters are counted on the ``meta`` device (no memory), times 4 bytes, times the copies training holds
    (:data:`OPTIMIZER_COPIES`). Skipped where the free memory cannot be read."""
    import torch

    free = available_memory(gpu=torch.cuda.is_available() and not getattr(args, "cpu", False))
    if free is None:
        return
    with torch.device("meta"):
        model = lm_class(config, tree=tree)
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = getattr(args, "optimizer", "sgd")
    copies = OPTIMIZER_COPIES.get(optimizer, 4) + (optimizer == "sgd" and bool(getattr(args, "momentum", 0)))
    weights = parameters * 4 * copies
    activations = _forward_bytes(model, getattr(args, "batch_size", 1), getattr(args, "block_size", 1))
    (available, where) = free
    if weights + activations <= available:
        return
    given = [option_flag(dest) for dest in model_flags([args.model]) if getattr(args, dest, None) is not None]
    raise ValueError(
        f"these settings make a {args.model} of {parameters:,} parameters: training it with {optimizer} needs about "
        f"{_gigabytes(weights + activations)} ({_gigabytes(weights)} for weights, gradients and optimizer state, "
        f"{_gigabytes(activations)} for one batch's forward pass), more than the {_gigabytes(available)} of "
        f"{where}; lower {', '.join(given) or 'the model sizes'} (or --batch-size / --block-size)"
    )


def _forward_bytes(model, batch_size: int, block_size: int) -> int:
    """Bytes of the tensors one training batch's forward pass (up to the logits) creates, views left out, run
    on the ``meta`` device; where an op needs real values, what was counted up to it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Count(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not getattr(func, "is_view", False):
                Count.total += sum(t.numel() * t.element_size() for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    from ..data.batching import lm_context_size

    # A block of a feed-forward n-gram model starts with its n - 1 tokens of context.
    width = block_size + (lm_context_size(model) if hasattr(model.config, "context_size") else 0)
    ids = torch.zeros(batch_size, width, dtype=torch.long, device="meta")
    with contextlib.suppress(Exception), Count():  # an op that needs real values ends the count there
        model(input_ids=ids)
    return Count.total


def _gigabytes(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


def apply_recipe(args: argparse.Namespace) -> None:
    """Give every training, model and tokenizer setting that no flag gives (and a resumed run did not record)
    the value of ``--recipe`` (the model type's ``"default"`` recipe when unset), then the rest their
    ``TrainingConfig`` and tokenizer defaults. Runs once per ``args``; :func:`say_recipe` tells the user."""
    if getattr(args, "recipe_applied", False):
        return
    from ..models import MODEL_TYPES
    from ..models.registry import DEFAULT_RECIPE
    from ..training.config import recipe_training_values

    model_type = MODEL_TYPES[args.model]
    args.recipe = getattr(args, "recipe", None) or DEFAULT_RECIPE
    if args.recipe not in model_type.recipes:
        raise ValueError(f"--recipe {args.recipe} is not a recipe of --model {args.model}; its recipes: "
                         f"{', '.join(model_type.recipes)}")
    recipe = model_type.recipes[args.recipe]
    given = given_flags(args) or set()
    unset = [dest for dest, value in vars(args).items() if value is None and dest not in given]
    used = {}
    flag_of = {applies[args.model]: dest for dest, applies in model_flags(MODEL_TYPES).items() if args.model in applies}
    set_fields = {name: getattr(args, name) for name in vars(args) if name not in unset}
    values = {**recipe_training_values(recipe, set_fields), **{flag_of[f]: v for f, v in recipe.model.items()},
              **recipe.tokenizer}
    for dest, value in values.items():
        if dest in unset:
            setattr(args, dest, value)
            used[dest] = value
    defaults = {f.name: f.default for f in dataclasses.fields(TrainingConfig)}
    for dest, value in {**defaults, "min_frequency": 1, "lowercase": False}.items():
        if dest in unset and dest not in used:
            setattr(args, dest, value)
    args.recipe_applied = True
    args.recipe_values = set(used)
    shown = ", ".join(f"{option_flag(dest)} {_shown(value)}" for dest, value in used.items())
    args.recipe_summary = f"recipe {args.recipe} of {args.model} ({recipe.description})" + (f": {shown}" if shown else "")


def say_recipe(args: argparse.Namespace) -> None:
    """Print on stderr (once, on the main process) which recipe :func:`apply_recipe` used and the values it gave,
    once the data has been read: an error in the data comes first, alone."""
    summary = getattr(args, "recipe_summary", None)
    if summary and int(os.environ.get("RANK", "0")) == 0:
        print(summary, file=sys.stderr)
    args.recipe_summary = None


def training_config(args: argparse.Namespace, resume_from_checkpoint: str | None = None) -> TrainingConfig:
    apply_recipe(args)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainingConfig) if hasattr(args, f.name)}
    return TrainingConfig(**values, resume_from_checkpoint=resume_from_checkpoint)


def resume_checkpoint(args: argparse.Namespace) -> Path | None:
    """The checkpoint folder ``--resume`` names (checked to hold a model of type ``--model``), or None."""
    if args.resume is None:
        return None
    from ..modeling_utils import check_checkpoint_model_type
    from ..training.checkpoint import resolve_checkpoint

    folder = resolve_checkpoint(args.resume, args.output_dir)
    keep_run_settings(args, folder)
    check_checkpoint_model_type(folder, args.model)
    return folder


#: The data and tokenizer settings ``hf-nlm train`` records with a run (:func:`run_settings`), by ``dest``.
RUN_SETTINGS = ("corpus", "data_dir", "train_file", "validation_file", "test_file",
                *(flag[2:].replace("-", "_") for flag in OPTION_FLAGS.values()),
                "tokenizer", "min_frequency", "vocab_size", "lowercase", "split_punctuation", "recipe")


def _setting(args: argparse.Namespace, dest: str):
    """The value of ``dest`` as a run records it: paths absolute, the corpus and tokenizer resolved, lists."""
    value = getattr(args, dest, None)
    if dest == "corpus":
        return corpus_name(args)
    if dest == "tokenizer":
        return value or ("numeracy" if getattr(args, "model", None) == "numeracy_lm" else "word")
    if value is not None and dest.endswith("_file"):
        return [os.path.abspath(path) for path in value]
    if value is not None and dest == "data_dir":
        return os.path.abspath(value)
    return list(value) if isinstance(value, tuple) else value


def run_settings(args: argparse.Namespace) -> dict:
    """The corpus, data files and tokenizer settings of parsed ``train`` arguments, to keep with the run
    (``LMTrainer(run_settings=...)``): ``--resume`` compares the command line with them."""
    return {dest: _setting(args, dest) for dest in RUN_SETTINGS if hasattr(args, dest)}


def given_flags(args: argparse.Namespace) -> set[str] | None:
    """The ``dest`` of every flag written on the command line (``args.parser`` parsing ``args.argv``), or None
    where the arguments do not say."""
    parser, argv = getattr(args, "parser", None), getattr(args, "argv", None)
    if parser is None or argv is None:
        return None
    unset = object()
    namespace = argparse.Namespace(**{action.dest: unset for action in parser._actions})
    parser.parse_known_args(argv, namespace)
    return {dest for dest, value in vars(namespace).items() if value is not unset}


#: Of ``RESUME_CHANGEABLE``, the settings a resumed run takes from its flags or their defaults, not the run's.
RESUME_STOPPING = ("num_epochs", "max_steps", "max_time_s", "max_time_within_epoch", "early_stopping_patience")


def keep_run_settings(args: argparse.Namespace, folder: Path) -> None:
    """``--resume``: give ``args`` the settings the run recorded in checkpoint ``folder`` (its model type and
    config, data files, tokenizer and ``TrainingConfig``) wherever no flag sets them; a flag that sets one
    to another value is refused, except the training settings of ``RESUME_CHANGEABLE`` (when to stop, what
    to log and save, the device), which apply; those of ``RESUME_STOPPING`` take their defaults when not given.
    Prints what is kept and what changed."""

    from ..models import MODEL_TYPES
    from ..training.checkpoint import read_trainer_state
    from ..training.config import RESUME_CHANGEABLE

    given = given_flags(args)
    is_given = (lambda dest: True) if given is None else given.__contains__
    try:
        model_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        model_config = {}  # loading the model names the problem
    if not is_given("model") and model_config.get("model_type") in MODEL_TYPES:
        args.model = model_config["model_type"]
    saved = read_trainer_state(folder)
    differ, changed = [], []

    def compare(flag: str, now, then, changeable: bool = False) -> None:
        if now != then:
            (changed if changeable else differ).append(f"{flag} {_shown(now)} (the run's: {_shown(then)})")

    for dest, then in (saved.get("run_settings") or {}).items():
        if dest not in RUN_SETTINGS or not hasattr(args, dest):
            continue
        if is_given(dest):
            compare("--corpus-path" if dest == "data_dir" else option_flag(dest), _setting(args, dest), then)
        else:
            setattr(args, dest, then)
    for name, then in saved.get("config", {}).items():
        if name in ("output_dir", "resume_from_checkpoint", "overwrite_output_dir") or not hasattr(args, name):
            continue
        if is_given(name):
            compare(option_flag(name), getattr(args, name), then, changeable=name in RESUME_CHANGEABLE)
        elif name not in RESUME_STOPPING:  # those apply as given, or their defaults
            setattr(args, name, then)
    if args.model in MODEL_TYPES:
        for dest, applies in model_flags(MODEL_TYPES).items():
            value = getattr(args, dest, None)
            if is_given(dest) and value is not None and args.model in applies and applies[args.model] in model_config:
                compare(option_flag(dest), value, model_config[applies[args.model]])
    for dest in ("tree", "tree_file", "init_from"):
        if getattr(args, dest, None) is not None:
            differ.append(f"{option_flag(dest)} (the run's model and tree come from the checkpoint)")
    if differ:
        raise ValueError(
            f"--resume continues the run saved in {folder} with the settings it recorded; these differ: "
            f"{'; '.join(differ)}. Drop them to resume, or start a new run in another --output-dir (or with "
            "--overwrite-output-dir)"
        )
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"resuming {folder}: the run's model, tokenizer, data and training settings are kept"
              + (f"; changed: {'; '.join(changed)}" if changed else ""), file=sys.stderr)


def _shown(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


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
        say_recipe(args)
        tokenizer = build_tokenizer(args, datasets["train"]["text"])
        model = build_model(args, tokenizer, datasets["train"]["text"])
    say_recipe(args)
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
