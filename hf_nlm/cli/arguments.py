"""Flag groups shared by the ``hf-nlm`` commands: data, tokenizer, generation, and the model and training flags
generated from the config classes (one flag per config field, typed, documented and defaulted from it)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable

from ..data.registry import CORPORA, OPTION_FLAGS
from ..training.config import TrainingConfig

#: Corpora read from local split files (``--train-file`` ...), and those a loader finds by path.
FILE_CORPORA = tuple(name for name, entry in CORPORA.items() if entry.split_files)
NAMED_CORPORA = tuple(name for name, entry in CORPORA.items() if not entry.split_files)
TOKENIZERS = ("word", "numeracy", "bpe", "wordpiece")
TREE_CHOICES = ("random", "balanced", "huffman")
# Config fields the command fills itself rather than through a flag: the vocabulary and token ids come
# from the tokenizer, the tree shape from the tree, tying from the head (a tree head cannot be tied).
DERIVED_FIELDS = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "use_cache",
                  "tree_num_nodes", "tree_max_codes", "tree_max_depth", "numeral_vocab",
                  "tokenizer_fingerprint")


def fail(parser: argparse.ArgumentParser, message: str):
    parser.error(message)  # "hf-nlm CMD: error: MESSAGE" and the --help hint on stderr, exit status 2


def _optional(convert: Callable) -> Callable:
    """argparse type for an optional number: 'none' gives None."""

    def parse(text: str):
        return None if text.lower() == "none" else convert(text)

    parse.__name__ = convert.__name__  # argparse names the type in its error message
    return parse


def _taking(option: str) -> str:
    return ", ".join(name for name, entry in CORPORA.items() if option in entry.options)


def add_data_arguments(parser: argparse.ArgumentParser, require_train: bool = True) -> None:
    """``--corpus`` (every corpus of :data:`hf_nlm.data.registry.CORPORA`), ``--corpus-path``, the split files
    and the loader options (:data:`hf_nlm.data.registry.OPTION_FLAGS`)."""
    fetched = [name for name in NAMED_CORPORA if CORPORA[name].fetcher]
    local = [name for name in NAMED_CORPORA if not CORPORA[name].fetcher]
    group = parser.add_argument_group("data")
    group.add_argument("--corpus", choices=tuple(CORPORA), default=None,
                       help=f"a corpus: {', '.join(fetched)} (fetch with `hf-nlm download`), {', '.join(local)} "
                            f"(licensed data: give --corpus-path), or {' / '.join(FILE_CORPORA)} files given with "
                            f"--train-file ... (default: {FILE_CORPORA[0]} when --train-file is given)")
    group.add_argument("--corpus-path", "--data-dir", dest="data_dir", default=None, metavar="PATH",
                       help="the file or folder the corpus is read from (default: its folder in $HF_NLM_DATA, "
                            "where `hf-nlm download` puts the corpora it fetches): "
                            + "; ".join(f"{name}: {CORPORA[name].path_help}" for name in NAMED_CORPORA))
    for split in ("train", "validation", "test"):
        group.add_argument(f"--{split}-file", nargs="+", default=None, metavar="FILE",
                           help=f"{split} split: text files (one sentence or line per line) or CSV files")
    group.add_argument(OPTION_FLAGS["text_column"], default=None,
                       help=f"{_taking('text_column')}: the column holding the text (default: text)")
    group.add_argument(OPTION_FLAGS["split_fractions"], type=float, nargs=3, default=None,
                       metavar=("TRAIN", "VALIDATION", "TEST"),
                       help=f"{_taking('split_fractions')}: fractions of the records (patients, papers, stories) "
                            "in each split, by a hash of their id (default: the loader's)")
    group.add_argument(OPTION_FLAGS["seed"], type=int, default=None,
                       help=f"{_taking('seed')}: seed of that hash, hence of the split (default: 0)")


def add_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tokenizer")
    group.add_argument("--tokenizer", choices=TOKENIZERS, default=None,
                       help="word: whitespace words with a frequency cut-off (the papers' setting); numeracy: words "
                            "and numerals (value, precision, digits kept), <unk_word> / <unk_num>; bpe / wordpiece: "
                            "subwords (default: numeracy for --model numeracy_lm, else word)")
    group.add_argument("--min-frequency", type=int, default=None,
                       help="keep words (word) or merges (bpe/wordpiece) seen at least this often; Bengio et al. "
                            "merge Brown words of frequency <= 3, i.e. 4 (default: the --recipe's, else 1)")
    group.add_argument("--vocab-size", type=_optional(int), default=None,
                       help="maximum vocabulary size (required for bpe/wordpiece; optional cap for word)")
    group.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                       help="lowercase the text before tokenizing (default: no)")
    group.add_argument("--split-punctuation", action=argparse.BooleanOptionalAction, default=None,
                       help="word and numeracy tokenizers: cut punctuation off words (raw text such as SOTU: "
                            "'Nation,' is 'Nation' ','; 'don't', 'U.S.' and numerals such as '1,200.5' keep theirs). "
                            "Unset: cut when at least 1%% of the training words carry punctuation at their end "
                            "(raw text), not for tokenized text such as Penn Treebank")


def model_flags(models) -> dict[str, dict[str, str]]:
    """Every model flag (by its ``dest``) and, for each model of ``models`` it applies to, the config
    field it sets. A flag is a config field's name, or the name its config's ``attribute_map`` gives it
    (the LBL's D, ``hidden_size``, is ``--embedding-size``)."""
    from transformers import PreTrainedConfig

    from ..models import MODEL_TYPES

    inherited = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    flags: dict[str, dict[str, str]] = {}
    for name in models:
        config_class = MODEL_TYPES[name].config_class
        alias = {field: flag for flag, field in config_class.attribute_map.items()}
        for f in dataclasses.fields(config_class):
            if f.name not in inherited and f.name not in DERIVED_FIELDS:
                flags.setdefault(alias.get(f.name, f.name), {})[name] = f.name
    return flags


#: Where a field's description ends its first sentence: a full stop, then a space and a capital letter or a digit, not
#: after an abbreviation ("et al. Sec. 3" and "e.g. LSTM" go on).
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bsec)(?<!\bSec)(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\bvs)(?<!\bEq)(?<!\bFig)"
                           r"(?<!\bapprox)\.\s+(?=[A-Z0-9])")


def _first_sentence(doc: str) -> str:
    """A field's description up to the end of its first sentence (:data:`_SENTENCE_END`), without markdown."""
    return _SENTENCE_END.split(doc.replace("`", ""), maxsplit=1)[0].rstrip(".")


def option_flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _field_argument(config_class, field: str) -> dict:
    """argparse settings for a config field, from its type (the annotation as written)."""
    kind = str(next(f.type for f in dataclasses.fields(config_class) if f.name == field))
    if kind.startswith("bool"):
        return {"action": argparse.BooleanOptionalAction}
    if kind.startswith("list[int]"):
        return {"type": int, "nargs": "+", "metavar": "N"}
    if field == "head":
        from ..heads import HEAD_REGISTRY

        return {"choices": list(HEAD_REGISTRY)}
    return {"type": {"int": int, "float": float, "str": str}[kind.split(" |")[0]]}


#: What ``hf-nlm train`` trains without ``--model``: Bengio et al.'s NPLM, the first neural LM.
DEFAULT_MODEL = "nplm"


def add_model_arguments(parser: argparse.ArgumentParser, models: tuple[str, ...] | None = None) -> None:
    """``--model`` and one flag per config field of those models, generated from the config classes
    (their types, defaults and docstrings), plus the flags that build a tree head's word tree."""
    from ..configuration_utils import NLMConfig, config_field_docs
    from ..models import MODEL_TYPES
    from ..models.registry import DEFAULT_RECIPE

    shared = {f.name for f in dataclasses.fields(NLMConfig)}  # documented once, in NLMConfig
    models = tuple(MODEL_TYPES) if models is None else models
    group = parser.add_argument_group(
        "model (every flag sets the config field of that name; unset, the config's default, given per model)"
    )
    default = DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]
    group.add_argument("--model", choices=models, default=default, help=f"model architecture (default: {default})")
    recipes = {name: list(MODEL_TYPES[name].recipes) for name in models}
    group.add_argument("--recipe", default=None, metavar="NAME",
                       help="the training recipe: values for every training, model and tokenizer flag not given "
                            f"(printed at start). '{DEFAULT_RECIPE}' (the default) learns from a text of about a "
                            "million words in minutes on a CPU; the others (a paper's settings, or plain SGD): "
                            + "; ".join(f"{name}: {', '.join(r for r in names if r != DEFAULT_RECIPE)}"
                                        for name, names in recipes.items() if len(names) > 1))
    for dest, fields in model_flags(models).items():
        configs = {m: MODEL_TYPES[m].config_class for m in fields}
        docs, defaults = {}, {}
        for m, f in fields.items():
            documented_in = NLMConfig if f in shared else configs[m]
            docs.setdefault(_first_sentence(config_field_docs(documented_in).get(f, "")), []).append(m)
            default = next(x.default for x in dataclasses.fields(configs[m]) if x.name == f)
            recipe = MODEL_TYPES[m].recipes.get(DEFAULT_RECIPE)
            default = recipe.model.get(f, default) if recipe else default
            defaults.setdefault(repr(default), []).append(m)
        doc = next(iter(docs)) if len(docs) == 1 else "; ".join(f"{', '.join(ms)}: {d}" for d, ms in docs.items())
        shown = "; ".join(f"{', '.join(ms)}: {value}" for value, ms in defaults.items())
        m, f = next(iter(fields.items()))
        group.add_argument(option_flag(dest), dest=dest, default=None, help=f"{doc} [default recipe: {shown}]",
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
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                               help=f"{help_text} (default: the --recipe's, else {'yes' if f.default else 'no'})")
        else:
            base = {"int": int, "float": float, "str": str}[kind.split(" |")[0]]
            convert = _optional(base) if "None" in kind else base
            group.add_argument(flag, type=convert, default=None, choices=f.metadata.get("choices"),
                               help=f"{help_text} (default: the --recipe's, else {f.default})")
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
    from ..trees import TREE_MODES

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


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """Search and sampling flags, read by :func:`hf_nlm.cli.generate.generation_settings`."""
    parser.add_argument("--num-beams", type=int, default=1, help="beam width; 1 = greedy or sampling (default: 1)")
    parser.add_argument("--do-sample", action="store_true", help="sample instead of greedy / beam search")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature, > 0 (with --do-sample; default: 1.0)")
    parser.add_argument("--top-k", type=int, default=None,
                        help="sample from the k most likely tokens; 0 = all (with --do-sample; default: 0)")
    parser.add_argument("--top-p", type=float, default=None,
                        help="nucleus sampling mass, in (0, 1] (with --do-sample; default: 1.0)")
    parser.add_argument("--seed", type=int, default=None, help="seed for sampling")
    parser.add_argument("--no-repeat-ngram-size", type=int, default=None, metavar="N",
                        help="never write the same N-gram twice; 0 = allow repeats (default: the model's generation "
                             "config: 3 for a model hf-nlm train made)")
    parser.add_argument("--allow-unknown", action="store_true",
                        help="let the continuation write the unknown-word token, which a model hf-nlm train made "
                             "never writes by default (its generation config's suppress_tokens)")


def add_folder_command(sub: argparse._SubParsersAction, name: str, help_text: str, folder_help: str,
                       description: str | None = None, dest: str = "model_dir") -> argparse.ArgumentParser:
    """The parser of a command whose first argument is a saved folder (a model, or a training run's
    ``--output-dir``): ``hf-nlm NAME FOLDER ...``."""
    parser = sub.add_parser(name, help=help_text, description=description)
    parser.add_argument(dest, help=folder_help)
    return parser
