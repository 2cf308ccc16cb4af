"""A run's settings as command-line flags, and back into a :class:`~hf_nlm.training.RunSpec`.

One flag per setting, named after it (``min_frequency`` is ``--min-frequency``): the data, the tokenizer, one
flag per config field of the model types (typed, documented and defaulted from the config classes), the word
tree and one flag per :class:`~hf_nlm.training.TrainingConfig` field. A flag not given is absent from the
parsed namespace (``argparse.SUPPRESS``), so that :func:`spec_from_arguments` tells a value given (which wins
over the recipe, or must match a resumed run) from one left to the recipe. ``hf-nlm train`` and ``examples/``
parse with it, as transformers' examples parse with ``HfArgumentParser``:

    parser = add_train_arguments(argparse.ArgumentParser())
    spec = spec_from_arguments(parser.parse_args())
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable

from ..data.registry import CORPORA, OPTION_FLAGS
from ..data.storylines import STORY_STAGES
from ..models import MODEL_TYPES
from ..models.registry import DEFAULT_RECIPE
from .config import TrainingConfig
from .spec import (
    DEFAULT_MODEL,
    TOKENIZERS,
    TREE_CHOICES,
    TREE_MODES,
    DataSpec,
    RunSpec,
    data_spec_fields,
    model_settings,
    option_flag,
)

#: Corpora read from local split files (``--train-file`` ...), and those a loader finds by path.
FILE_CORPORA = tuple(name for name, entry in CORPORA.items() if entry.split_files)
NAMED_CORPORA = tuple(name for name, entry in CORPORA.items() if not entry.split_files)
#: Given nowhere, a flag leaves no attribute: the recipe, the run resumed or the defaults decide.
UNSET = argparse.SUPPRESS


def _optional(convert: Callable) -> Callable:
    """argparse type for an optional number: 'none' gives None."""

    def parse(text: str):
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its error message
    return parse


def _taking(option: str) -> str:
    return ", ".join(name for name, entry in CORPORA.items() if option in entry.options)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """``--corpus`` (every corpus of :data:`hf_nlm.data.registry.CORPORA`), ``--corpus-path``, the split files
    and the loader options (:data:`hf_nlm.data.registry.OPTION_FLAGS`): the fields of
    :class:`~hf_nlm.training.spec.DataSpec`."""
    fetched = [name for name in NAMED_CORPORA if CORPORA[name].fetcher]
    local = [name for name in NAMED_CORPORA if not CORPORA[name].fetcher]
    group = parser.add_argument_group("data")
    group.add_argument("--corpus", choices=tuple(CORPORA), default=UNSET,
                       help=f"a corpus: {', '.join(fetched)} (fetch with `hf-nlm download`), "
                            f"{', '.join(local)} (licensed data: give --corpus-path), or "
                            f"{' / '.join(FILE_CORPORA)} files given with --train-file ... "
                            f"(default: {FILE_CORPORA[0]} when --train-file is given)")
    group.add_argument("--corpus-path", "--data-dir", dest="corpus_path", default=UNSET, metavar="PATH",
                       help="the file or folder the corpus is read from (default: its folder in "
                            "$HF_NLM_DATA, where `hf-nlm download` puts the corpora it fetches): "
                            + "; ".join(f"{name}: {CORPORA[name].path_help}" for name in NAMED_CORPORA))
    for split in ("train", "validation", "test"):
        group.add_argument(f"--{split}-file", nargs="+", default=UNSET, metavar="FILE",
                           help=f"{split} split: text files (one sentence or line per line) or CSV files")
    group.add_argument(OPTION_FLAGS["text_column"], default=UNSET,
                       help=f"{_taking('text_column')}: the column holding the text (default: text)")
    group.add_argument(OPTION_FLAGS["split_fractions"], type=float, nargs=3, default=UNSET,
                       metavar=("TRAIN", "VALIDATION", "TEST"),
                       help=f"{_taking('split_fractions')}: fractions of the records (patients, papers, "
                            "stories) in each split, by a hash of their id (default: the loader's)")
    group.add_argument(OPTION_FLAGS["seed"], dest="split_seed", type=int, default=UNSET,
                       help=f"{_taking('seed')}: seed of that hash, hence of the split (default: 0)")
    group.add_argument(OPTION_FLAGS["stage"], dest="story_stage", choices=STORY_STAGES, default=UNSET,
                       help=f"{_taking('stage')}: the (source, target) pairs of one stage of the seq2seq "
                            "story generator (Yao et al. 2019): storyline (title -> storyline) or story "
                            "('title <sep> storyline' -> story), for --model story_seq2seq")


def add_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    """The fields of :class:`~hf_nlm.training.spec.TokenizerSpec` (``--tokenizer`` is its ``kind``)."""
    group = parser.add_argument_group("tokenizer")
    group.add_argument("--tokenizer", choices=TOKENIZERS, default=UNSET,
                       help="word: whitespace words with a frequency cut-off (the papers' setting); "
                            "numeracy: words and numerals (value, precision, digits kept), <unk_word> / "
                            "<unk_num>; bpe / wordpiece: subwords "
                            "(default: numeracy for --model numeracy_lm, else word)")
    group.add_argument("--min-frequency", type=int, default=UNSET,
                       help="keep words (word) or merges (bpe/wordpiece) seen at least this often; "
                            "Bengio et al. merge Brown words of frequency <= 3, i.e. 4 "
                            "(default: the --recipe's, else 1)")
    group.add_argument("--vocab-size", type=_optional(int), default=UNSET,
                       help="maximum vocabulary size (required for bpe/wordpiece; optional cap for word)")
    group.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=UNSET,
                       help="lowercase the text before tokenizing (default: no)")
    group.add_argument("--split-punctuation", action=argparse.BooleanOptionalAction, default=UNSET,
                       help="word and numeracy tokenizers: cut punctuation off words (raw text such as SOTU: "
                            "'Nation,' is 'Nation' ','; 'don't', 'U.S.' and numerals such as '1,200.5' keep "
                            "theirs). Unset: cut when at least 1%% of the training words carry punctuation "
                            "at their end (raw text), not for tokenized text such as Penn Treebank")


#: Where a field's description ends its first sentence: a full stop, then a space and a capital letter or a
#: digit, not after an abbreviation ("et al. Sec. 3" and "e.g. LSTM" go on).
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bsec)(?<!\bSec)(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\bvs)(?<!\bEq)"
                           r"(?<!\bFig)(?<!\bapprox)\.\s+(?=[A-Z0-9])")


def _first_sentence(doc: str) -> str:
    """A field's description up to the end of its first sentence (:data:`_SENTENCE_END`), without markdown."""
    return _SENTENCE_END.split(doc.replace("`", ""), maxsplit=1)[0].rstrip(".")


def _annotation(kind) -> str:
    """A field's type as written (``"int | None"``), whether its module postpones annotations or not."""
    return kind if isinstance(kind, str) else re.sub(r"<class '([\w.]+)'>", r"\1", str(kind))


def _field_argument(config_class, field: str) -> dict:
    """argparse settings for a config field, from its type (the annotation as written)."""
    kind = _annotation(next(f.type for f in dataclasses.fields(config_class) if f.name == field))
    if kind.startswith("bool"):
        return {"action": argparse.BooleanOptionalAction}
    if kind.startswith("list[int]"):
        return {"type": int, "nargs": "+", "metavar": "N"}
    if field == "head":
        from ..heads import HEAD_REGISTRY

        return {"choices": list(HEAD_REGISTRY)}
    return {"type": {"int": int, "float": float, "str": str}[kind.split(" |")[0]]}


def add_model_arguments(parser: argparse.ArgumentParser, models: tuple[str, ...] | None = None,
                        data_tree: bool = True) -> None:
    """``--model``, ``--recipe`` and one flag per config field of those models (:func:`model_settings`),
    generated from the config classes (their types, defaults and docstrings), plus the flags of a tree head's
    word tree: a fixed one and, with ``data_tree``, Mnih & Hinton's (2008) data-built one
    (:func:`add_data_tree_arguments`)."""
    from ..configuration_utils import NLMConfig, config_field_docs

    shared = {f.name for f in dataclasses.fields(NLMConfig)}  # documented once, in NLMConfig
    models = tuple(MODEL_TYPES) if models is None else models
    group = parser.add_argument_group(
        "model (every flag sets the config field of that name; unset, the config's default, given per model)"
    )
    default = DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]
    group.add_argument("--model", dest="model_type", choices=models, default=UNSET,
                       help=f"model architecture (default: {default})")
    recipes = {name: list(MODEL_TYPES[name].recipes) for name in models}
    group.add_argument("--recipe", default=UNSET, metavar="NAME",
                       help="the training recipe: values for every training, model, tokenizer and data flag "
                            f"not given (printed at start). '{DEFAULT_RECIPE}' (the default) learns from a "
                            "text of about a million words in minutes on a CPU; the others (a paper's "
                            "settings, plain SGD, a published number's run, which names --model and --corpus "
                            "itself): "
                            + "; ".join(f"{name}: {', '.join(r for r in names if r != DEFAULT_RECIPE)}"
                                        for name, names in recipes.items() if len(names) > 1))
    for dest, fields in model_settings(models).items():
        configs = {m: MODEL_TYPES[m].config_class for m in fields}
        docs, defaults = {}, {}
        for m, f in fields.items():
            documented_in = NLMConfig if f in shared else configs[m]
            docs.setdefault(_first_sentence(config_field_docs(documented_in).get(f, "")), []).append(m)
            default = next(x.default for x in dataclasses.fields(configs[m]) if x.name == f)
            recipe = MODEL_TYPES[m].recipes.get(DEFAULT_RECIPE)
            default = recipe.model.get(f, default) if recipe else default
            defaults.setdefault(repr(default), []).append(m)
        doc = next(iter(docs)) if len(docs) == 1 else "; ".join(f"{', '.join(ms)}: {d}"
                                                                for d, ms in docs.items())
        shown = "; ".join(f"{', '.join(ms)}: {value}" for value, ms in defaults.items())
        m, f = next(iter(fields.items()))
        group.add_argument(option_flag(dest), dest=dest, default=UNSET,
                           help=f"{doc} [default recipe: {shown}]", **_field_argument(configs[m], f))
    tree = parser.add_argument_group("tree head: the word tree (Morin & Bengio 2005; Mnih & Hinton 2008)")
    tree.add_argument("--tree", choices=TREE_CHOICES, default=UNSET,
                      help="random (default), balanced or huffman (by training-set frequency)")
    tree.add_argument("--tree-file", default=UNSET, metavar="JSON",
                      help="a word tree saved with WordTree.save (e.g. a build-tree run's word_tree.json); "
                           "its word ids must be those of this run's tokenizer "
                           "(same corpus and tokenizer flags)")
    tree.add_argument("--tree-seed", type=int, default=UNSET,
                      help="seed of the random tree; >= 0 (default: 0)")
    if data_tree:
        add_data_tree_arguments(tree)


def add_data_tree_arguments(group, eps_flags: tuple[str, ...] = ("--tree-eps",)) -> None:
    """The flags of Mnih & Hinton's (2008, sec. 4) data-built word tree (``tree_mode``, ``tree_eps``,
    ``first_stage_epochs`` of :class:`~hf_nlm.training.RunSpec`); ``eps_flags``: the names of ``tree_eps``'s
    flag."""
    group.add_argument("--tree-mode", choices=TREE_MODES, default=UNSET,
                       help="build the tree from the data (Mnih & Hinton 2008, sec. 4): train a model on a "
                            "random tree, split its words' average predicted vectors by recursive EM with "
                            "this rule, adaptive (more responsible component) or balanced (sorted by "
                            "responsibility, cut in half), and train a fresh model on that tree "
                            "(OUTPUT_DIR/random_tree, OUTPUT_DIR/word_tree.json)")
    group.add_argument(*eps_flags, dest="tree_eps", type=float, default=UNSET,
                       help="--tree-mode adaptive only: words whose responsibility is within eps of 1/2 go "
                            "down both branches (several codes); in [0, 0.5) (default: 0)")
    group.add_argument("--first-stage-epochs", type=_optional(int), default=UNSET,
                       help="epochs of the random-tree model of --tree-mode; >= 1 (default: --num-epochs)")


def add_training_arguments(parser: argparse.ArgumentParser, resume: bool = True) -> None:
    """One flag per :class:`TrainingConfig` field (``--learning-rate`` for ``learning_rate``), plus
    ``--init-from`` and ``--resume``."""
    group = parser.add_argument_group("training (TrainingConfig)")
    for f in dataclasses.fields(TrainingConfig):
        if f.name == "resume_from_checkpoint":
            continue
        flag = option_flag(f.name)
        help_text = f.metadata.get("help", "")
        kind = _annotation(f.type)
        if f.name == "output_dir":
            group.add_argument(flag, required=True, help=help_text)
        elif kind == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=UNSET,
                               help=f"{help_text} (default: the --recipe's, else "
                                    f"{'yes' if f.default else 'no'})")
        else:
            base = {"int": int, "float": float, "str": str}[kind.split(" |")[0]]
            convert = _optional(base) if "None" in kind else base
            group.add_argument(flag, type=convert, default=UNSET, choices=f.metadata.get("choices"),
                               help=f"{help_text} (default: the --recipe's, else {f.default})")
    if not resume:
        return
    group.add_argument("--init-from", default=UNSET, metavar="MODEL_DIR",
                       help="start from a saved model (its weights and tokenizer; the model and tokenizer "
                            "flags are then unused), "
                            "e.g. AWD-LSTM fine-tuning: --init-from RUN_DIR --fine-tune")
    group.add_argument("--resume", nargs="?", const="latest", default=None, metavar="CHECKPOINT",
                       help="resume from CHECKPOINT (a checkpoint folder, or a run's output dir); without a "
                            "value the newest checkpoint in --output-dir")


def add_train_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every argument of ``hf-nlm train`` (also ``examples/train_lm.py``'s)."""
    add_data_arguments(parser)
    add_tokenizer_arguments(parser)
    add_model_arguments(parser)
    add_training_arguments(parser)
    return parser


def add_build_tree_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every argument of ``hf-nlm build-tree`` (also ``examples/train_hlbl.py``'s)."""

    add_data_arguments(parser)
    add_tokenizer_arguments(parser)
    add_model_arguments(parser, models=("hlbl",), data_tree=False)
    group = parser.add_argument_group("word tree (Mnih & Hinton 2008, sec. 4; hf-nlm train --tree-mode)")
    add_data_tree_arguments(group, eps_flags=("--eps", "--tree-eps"))
    add_training_arguments(parser, resume=False)
    return parser


#: Parsed attributes that are not settings of a run.
NOT_SETTINGS = ("resume", "func", "parser", "argv", "command", "check")


def given_settings(args: argparse.Namespace) -> dict:
    """The run settings a namespace parsed with these flags holds: those given on the command line."""
    return {k: v for k, v in vars(args).items() if k not in NOT_SETTINGS}


def spec_from_arguments(args: argparse.Namespace, default_model: str = DEFAULT_MODEL) -> RunSpec:
    """The :class:`RunSpec` of parsed arguments: the flags given over the recipe (``--recipe``, default the
    model type's ``default``); with ``--resume``, the resumed run's recorded spec with the flags given checked
    against it (:meth:`RunSpec.resumed_with`)."""
    settings = given_settings(args)
    resume = getattr(args, "resume", None)
    if resume is not None:
        from .checkpoint import resolve_checkpoint

        folder = resolve_checkpoint(resume, settings["output_dir"])
        return RunSpec.from_run_folder(folder).resumed_with(**settings)
    recipe = settings.pop("recipe", None)
    model_type = settings.pop("model_type", None if recipe not in (None, DEFAULT_RECIPE) else default_model)
    return RunSpec.from_recipe(model_type, recipe, **settings)


def build_tree_spec_from_arguments(args: argparse.Namespace) -> RunSpec:
    """The :class:`RunSpec` of ``hf-nlm build-tree``'s flags (:func:`add_build_tree_arguments`): an HLBL with
    Mnih & Hinton's (2008) data-built tree, its split rule ``--tree-mode``, else the recipe's, else
    ``adaptive``."""
    return spec_from_arguments(argparse.Namespace(**{**vars(args), "tree_mode": build_tree_mode(args)}),
                               default_model="hlbl")


def build_tree_mode(args: argparse.Namespace) -> str:
    """The split rule of ``hf-nlm build-tree``'s tree: ``--tree-mode``, else the ``--recipe``'s, else
    ``adaptive``."""
    if hasattr(args, "tree_mode"):
        return args.tree_mode
    recipe = MODEL_TYPES["hlbl"].recipes.get(getattr(args, "recipe", None) or DEFAULT_RECIPE)
    return recipe.tree.get("tree_mode", "adaptive") if recipe is not None else "adaptive"


def data_spec_from_arguments(args: argparse.Namespace):
    """The :class:`~hf_nlm.training.spec.DataSpec` of the data flags given (``hf-nlm evaluate`` and
    friends)."""
    return DataSpec(**{name: getattr(args, name) for name in data_spec_fields() if hasattr(args, name)})


__all__ = ["FILE_CORPORA", "NAMED_CORPORA", "add_build_tree_arguments", "add_data_arguments",
           "add_data_tree_arguments", "build_tree_mode", "build_tree_spec_from_arguments",
           "add_model_arguments", "add_tokenizer_arguments", "add_train_arguments", "add_training_arguments",
           "data_spec_from_arguments", "given_settings", "spec_from_arguments"]
