"""What a training run is, as one frozen value: :class:`RunSpec`, with its data (:class:`DataSpec`) and
tokenizer (:class:`TokenizerSpec`).

A spec holds everything that decides a run: the data (a corpus and its splits), the tokenizer settings, the
model type and its config fields, the word tree of a tree head, the training recipe (resolved once, when the
spec is made) and the :class:`~hf_nlm.training.config.TrainingConfig`. :func:`hf_nlm.training.train` runs one;
``hf-nlm train``, ``examples/`` and the benchmarks all make one and call it.

    spec = RunSpec.from_recipe("nplm", train_file="train.txt", validation_file="valid.txt",
                               output_dir="runs/x")
    spec = RunSpec.from_run_folder("runs/x").resumed_with(max_steps=2000)   # go on from the newest checkpoint

Every setting has one flat name, the ``hf-nlm train`` flag's without the dashes (``--min-frequency`` is
``min_frequency``); messages name settings by their flag, as ``transformers.TrainingArguments`` does.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..data.lm import check_split_has_text
from ..data.reading import table_header
from ..data.registry import CORPORA, OPTION_FLAGS
from ..data.storylines import check_story_stage
from ..models import MODEL_TYPES, model_type_of_recipe
from ..models.registry import DEFAULT_RECIPE
from ..trees import TREE_MODES
from .config import RESUME_CHANGEABLE, TrainingConfig, recipe_training_values

#: The loader options a spec may set, by field, and the loader keyword each one is passed as.
LOADER_OPTIONS = {"text_column": "text_column", "split_fractions": "split_fractions", "split_seed": "seed",
                  "story_stage": "stage"}
SPLITS = ("train", "validation", "test")


def _files(value) -> tuple[str, ...] | None:
    """A split's files as a tuple of absolute paths (a single path may be given as such)."""
    if value is None:
        return None
    paths = [value] if isinstance(value, str | os.PathLike) else list(value)
    return tuple(os.path.abspath(os.fspath(p)) for p in paths)


@dataclass(frozen=True)
class DataSpec:
    """The corpus of a run and its splits.

    Args:
        corpus: a corpus of :data:`hf_nlm.data.registry.CORPORA`; None: ``"text"``, or ``"csv"`` when every
            split file ends in ``.csv``.
        corpus_path: the file or folder a registered corpus is read from (default: its folder in
            ``$HF_NLM_DATA``).
        train_file, validation_file, test_file: the split files of a ``text`` or ``csv`` corpus (a path or
            several; kept as absolute paths).
        text_column: a CSV corpus's text column (default: ``text``).
        split_fractions: the corpora split by a hash of a record id: the train / validation / test fractions.
        split_seed: the seed of that hash.
        story_stage: ROCStories as the (source, target) pairs of one stage of Yao et al.'s (2019) seq2seq
            story generator: ``storyline`` (title -> storyline) or ``story`` ("title <sep> storyline" ->
            story).
    """

    corpus: str | None = None
    corpus_path: str | None = None
    train_file: tuple[str, ...] | None = None
    validation_file: tuple[str, ...] | None = None
    test_file: tuple[str, ...] | None = None
    text_column: str | None = None
    split_fractions: tuple[float, float, float] | None = None
    split_seed: int | None = None
    story_stage: str | None = None

    def __post_init__(self) -> None:
        for split in SPLITS:
            object.__setattr__(self, f"{split}_file", _files(getattr(self, f"{split}_file")))
        if self.corpus_path is not None:
            object.__setattr__(self, "corpus_path", os.path.abspath(os.fspath(self.corpus_path)))
        if self.split_fractions is not None:
            object.__setattr__(self, "split_fractions", tuple(self.split_fractions))
        if self.story_stage is not None:
            check_story_stage(self.story_stage)
        if self.corpus is not None and self.corpus not in CORPORA:
            raise ValueError(f"--corpus {self.corpus}: unknown corpus; choose from {', '.join(CORPORA)}")
        given = self.split_files()
        if self.corpus is not None and not CORPORA[self.corpus].split_files and given:
            raise ValueError(f"--corpus {self.corpus} reads its own files; drop "
                             "--train-file/--validation-file/--test-file")
        if self.corpus is None and not given:
            named = [name for name, entry in CORPORA.items() if not entry.split_files]
            raise ValueError(f"give --corpus ({', '.join(named)}) or --train-file FILE "
                             "[--validation-file ...] [--test-file ...]")
        name = self.name
        for setting, keyword in LOADER_OPTIONS.items():
            if getattr(self, setting) is not None and keyword not in CORPORA[name].options:
                takes = [other for other, entry in CORPORA.items() if keyword in entry.options]
                raise ValueError(f"{OPTION_FLAGS[keyword]} applies to --corpus {' / '.join(takes)} only, "
                                 f"not {name}")

    def split_files(self) -> dict[str, tuple[str, ...]]:
        """The split files given, by split."""
        return {split: files for split in SPLITS if (files := getattr(self, f"{split}_file"))}

    @property
    def name(self) -> str:
        """The registered corpus this spec reads: ``corpus``, else ``text`` / ``csv`` from the split files."""
        if self.corpus is not None:
            return self.corpus
        given = [path for files in self.split_files().values() for path in files]
        return "csv" if all(path.lower().endswith(".csv") for path in given) else "text"

    def load(self, pair_columns: tuple[str, str] | None = None):
        """The corpus as a ``DatasetDict``, from its loader (given ``corpus_path`` or the split files, and the
        loader options set). A split file that is a folder or missing is refused, naming its flag.
        ``pair_columns``: the (source, target) columns an encoder-decoder model trains on, read from CSV
        files."""
        entry = CORPORA[self.name]
        options = {keyword: getattr(self, setting) for setting, keyword in LOADER_OPTIONS.items()
                   if getattr(self, setting) is not None}
        if self.story_stage is not None and pair_columns is None:
            raise ValueError(f"--story-stage {self.story_stage} gives (source, target) pairs, which an "
                             "encoder-decoder model trains on (--model story_seq2seq); a causal LM reads "
                             "--corpus rocstories without it")
        if pair_columns is not None and self.story_stage is not None:
            datasets = entry.load(path=self.corpus_path, **options)
            renamed = {old: new for old, new in zip(("source", "target"), pair_columns, strict=True)
                       if old != new}
            return datasets.rename_columns(renamed) if renamed else datasets
        if pair_columns is not None:
            if self.name != "csv" or self.text_column is not None:
                raise ValueError(
                    f"an encoder-decoder model trains on (source, target) pairs: give CSV files whose header "
                    f"names the columns {pair_columns[0]!r} and {pair_columns[1]!r} (--train-file pairs.csv "
                    "...), not "
                    + ("--text-column" if self.text_column is not None else f"--corpus {self.name}")
                    + (" (--corpus rocstories gives pairs with --story-stage storyline or story)"
                       if self.name == "rocstories" else "")
                )
            options.update(text_column=None, columns=pair_columns)
        if not entry.split_files:
            return entry.load(path=self.corpus_path, **options)
        for split, paths in self.split_files().items():
            for path in paths:
                check_split_file(f"--{split}-file", path)
        if self.corpus is None and self.name == "text":
            check_not_tables(self.split_files())
        files = {split: list(getattr(self, f"{split}_file")) if getattr(self, f"{split}_file") else None
                 for split in SPLITS}
        datasets = entry.load(**files, **options)
        for split, rows in datasets.items():
            if "text" in rows.column_names:
                check_split_has_text(rows["text"], self.describe(split))
        return datasets

    def describe(self, split: str) -> str:
        """How a message names ``split`` of this corpus: its files, or the corpus."""
        files = getattr(self, f"{split}_file")
        return f"--{split}-file {' '.join(files)}" if files else f"the {split} split of --corpus {self.name}"

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def check_split_file(flag: str, path: str | os.PathLike) -> None:
    """``path``, given to ``flag``, is a file; a folder is refused with the text and CSV files it holds."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".txt", ".csv"))
        inside = f"the text files in it: {' '.join(found[:10])}{' ...' if len(found) > 10 else ''}" \
            if found else "it holds no .txt or .csv file"
        raise FileNotFoundError(f"{flag} {path} is a folder, not a file: give files ({inside})")
    if not path.is_file():
        raise FileNotFoundError(f"{flag} {path}: no such file")


def check_not_tables(files: Mapping[str, Sequence[str]]) -> None:
    """The split files of a corpus inferred as ``text`` (read line by line) hold no table: a ``.csv`` file
    beside others that are not, a ``.tsv`` file, or a file whose first line reads as a CSV / TSV header
    (:func:`hf_nlm.data.reading.table_header`) is refused, naming its flag and the ``--corpus`` that reads it
    as meant: read as lines, its header and ids would become words of the text."""
    given = [path for paths in files.values() for path in paths]
    for split, paths in files.items():
        for path in paths:
            flag, suffix, header = f"--{split}-file {path}", Path(path).suffix.lower(), table_header(path)
            if suffix == ".csv":
                others = [other for other in given if not other.lower().endswith(".csv")]
                raise ValueError(
                    f"{flag} is a CSV file but {', '.join(others)} {'is' if len(others) == 1 else 'are'} "
                    "not, so every file would be read as lines of text, the CSV header and ids as words: "
                    "give --corpus csv to read them all as CSV (the text from --text-column, default text), "
                    "or --corpus text to read them all as lines"
                )
            if suffix == ".tsv" or (header is not None and header[1] == "\t"):
                first = f" (first line {header[0]!r})" if header is not None else ""
                raise ValueError(
                    f"{flag} is a tab-separated table{first}: read as lines of text, its header and ids "
                    "would become words. Convert it to CSV and give --corpus csv, or give --corpus text to "
                    "read every line as text"
                )
            if header is not None:
                raise ValueError(
                    f"{flag} looks like a CSV file (its first line, {header[0]!r}, reads as a header): read "
                    "as lines of text, its header and ids would become words. Give --corpus csv to read its "
                    "records (the text from --text-column, default text), or --corpus text to read every "
                    "line as text"
                )


#: Rows hashed at a time by :func:`split_fingerprints`.
FINGERPRINT_BATCH = 10_000


def split_fingerprints(datasets) -> dict[str, str]:
    """A SHA-256 of each split's rows, in order: what a resumed run compares to know that its data is the
    run's by content, whatever the path. Read in batches, so that a corpus of millions of notes is never held
    as Python objects all at once."""
    prints = {}
    for split, rows in datasets.items():
        digest = hashlib.sha256(" ".join(sorted(rows.column_names)).encode("utf-8") + b"\0")
        for batch in rows.iter(batch_size=FINGERPRINT_BATCH):
            for column in sorted(batch):
                text = b"\n".join(str(value).encode("utf-8", "surrogatepass") for value in batch[column])
                digest.update(text + b"\0")
        prints[split] = digest.hexdigest()
    return prints


def data_spec_fields() -> tuple[str, ...]:
    """The settings of a run's data (:class:`DataSpec`'s fields)."""
    return tuple(f.name for f in dataclasses.fields(DataSpec))


#: The tokenizers a run can train: ``word`` (whitespace words with a frequency cut-off: the papers' setting),
#: ``numeracy`` (words and numerals, Spithourakis & Riedel 2018), ``bpe`` / ``wordpiece`` (subwords).
TOKENIZERS = ("word", "numeracy", "bpe", "wordpiece")


@dataclass(frozen=True)
class TokenizerSpec:
    """The tokenizer of a run, trained on its training texts.

    Args:
        kind: ``word``, ``numeracy``, ``bpe`` or ``wordpiece`` (the ``--tokenizer`` flag).
        min_frequency: keep words (word, numeracy) or merges (bpe, wordpiece) seen at least this often.
        vocab_size: the largest vocabulary (required for bpe and wordpiece); None: no cap.
        lowercase: lowercase the text before tokenizing.
        split_punctuation: word and numeracy tokenizers: cut punctuation off words; None: decided from the
            training text (:meth:`resolve`).
    """

    kind: str = "word"
    min_frequency: int = 1
    vocab_size: int | None = None
    lowercase: bool = False
    split_punctuation: bool | None = None

    def __post_init__(self) -> None:
        if self.kind not in TOKENIZERS:
            raise ValueError(f"--tokenizer {self.kind}: choose from {', '.join(TOKENIZERS)}")
        if self.min_frequency < 1:
            raise ValueError(f"--min-frequency must be >= 1, got {self.min_frequency}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise ValueError(f"--vocab-size must be >= 1, got {self.vocab_size}")
        if self.kind in ("bpe", "wordpiece") and self.vocab_size is None:
            raise ValueError(f"--tokenizer {self.kind} needs --vocab-size")

    @property
    def word_level(self) -> bool:
        return self.kind in ("word", "numeracy")

    def resolve(self, train_texts: Sequence[str]) -> TokenizerSpec:
        """This spec with ``split_punctuation`` decided where it is None: cut when the training text carries
        punctuation on its words (:data:`hf_nlm.tokenization.word_level.ATTACHED_PUNCTUATION_SHARE`), which
        raw text does and tokenized text (Penn Treebank) does not. The choice is said on stderr."""
        if not self.word_level or self.split_punctuation is not None:
            return self
        from ..tokenization.word_level import ATTACHED_PUNCTUATION_SHARE, attached_punctuation_share

        share = attached_punctuation_share(train_texts)
        split = share >= ATTACHED_PUNCTUATION_SHARE
        if int(os.environ.get("RANK", "0")) == 0:
            said = ("cut off the words (--no-split-punctuation keeps it on them)" if split else
                    "left as it is (--split-punctuation cuts it off the words)")
            print(f"punctuation: {share:.1%} of the training words carry some at their end; {said}",
                  file=sys.stderr)
        return dataclasses.replace(self, split_punctuation=split)

    def train(self, train_texts: Sequence[str]):
        """The tokenizer this spec describes, trained on ``train_texts`` (``split_punctuation`` resolved
        first). A word-level vocabulary leaving most training tokens unknown raises ``ValueError``
        (:func:`hf_nlm.tokenization.word_level.check_vocabulary_coverage`)."""
        spec = self.resolve(train_texts)
        if spec.kind in ("bpe", "wordpiece"):
            try:
                from ..tokenization import subword
            except ImportError as err:
                raise ValueError(f"--tokenizer {spec.kind} is not available in this install ({err})") from err
            train = subword.train_bpe_tokenizer if spec.kind == "bpe" else subword.train_wordpiece_tokenizer
            return train(train_texts, vocab_size=spec.vocab_size, min_frequency=spec.min_frequency,
                         lowercase=spec.lowercase)
        from ..tokenization.numerals import (
            NUMERACY_SPECIAL_TOKENS,
            numeracy_token_counts,
            train_numeracy_tokenizer,
        )
        from ..tokenization.word_level import (
            SPECIAL_TOKENS,
            check_vocabulary_coverage,
            train_word_level_tokenizer,
            word_counts,
        )

        numeracy = spec.kind == "numeracy"
        train, count = ((train_numeracy_tokenizer, numeracy_token_counts) if numeracy
                        else (train_word_level_tokenizer, word_counts))
        tokenizer = train(train_texts, min_frequency=spec.min_frequency, lowercase=spec.lowercase,
                          max_vocab_size=spec.vocab_size, split_punctuation=spec.split_punctuation)
        check_vocabulary_coverage(tokenizer, count(train_texts, spec.lowercase, spec.split_punctuation),
                                  spec.min_frequency, spec.vocab_size,
                                  NUMERACY_SPECIAL_TOKENS if numeracy else SPECIAL_TOKENS)
        return tokenizer

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: What ``hf-nlm train`` trains without ``--model``: Bengio et al.'s NPLM, the first neural LM.
DEFAULT_MODEL = "nplm"

#: Config fields a run derives rather than takes: the vocabulary and token ids come from the tokenizer, the
#: tree shape from the tree, tying from the head (a tree head cannot be tied).
DERIVED_FIELDS = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings",
                  "use_cache", "tree_num_nodes", "tree_max_codes", "tree_max_depth", "numeral_vocab",
                  "unk_token_id", "first_step_suppressed_ids", "tokenizer_fingerprint")

#: The word-tree settings of a tree head: ``tree`` (random, balanced or huffman), ``tree_file`` (a saved
#: :class:`~hf_nlm.trees.WordTree`), ``tree_seed`` (of the random tree); or Mnih & Hinton's (2008, sec. 4)
#: data-built tree: ``tree_mode`` (the split rule of its EM, :data:`TREE_MODES`), ``tree_eps`` (ADAPTIVE(eps):
#: words within eps of 1/2 go down both branches) and ``first_stage_epochs`` (of the random-tree model whose
#: predicted vectors the tree is built from; None: ``num_epochs``).
TREE_CHOICES = ("random", "balanced", "huffman")
TREE_SETTINGS = ("tree", "tree_file", "tree_seed", "tree_mode", "tree_eps", "first_stage_epochs")
#: The settings that say which tree a run trains on: given one, a recipe's tree is not used.
TREE_KIND_SETTINGS = ("tree", "tree_file", "tree_mode")

#: The tokenizer settings, by flat name, and the :class:`TokenizerSpec` field each one sets.
TOKENIZER_SETTINGS = {"tokenizer": "kind", "min_frequency": "min_frequency", "vocab_size": "vocab_size",
                      "lowercase": "lowercase", "split_punctuation": "split_punctuation"}

#: Of :data:`RESUME_CHANGEABLE`, what a resumed run takes from its own settings or their defaults, not the
#: run's.
RESUME_STOPPING = ("num_epochs", "max_steps", "max_time_s", "max_time_within_epoch",
                   "early_stopping_patience")


def model_settings(model_types=None) -> dict[str, dict[str, str]]:
    """Every model setting (by flat name) and, for each model type of ``model_types`` (default: all) it
    applies to, the config field it sets. A setting is a config field's name, or the name its config's
    ``attribute_map`` gives it (the LBL's D, ``hidden_size``, is ``embedding_size``)."""
    from transformers import PreTrainedConfig

    inherited = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    settings: dict[str, dict[str, str]] = {}
    for name in MODEL_TYPES if model_types is None else model_types:
        config_class = MODEL_TYPES[name].config_class
        alias = {config_field: setting for setting, config_field in config_class.attribute_map.items()}
        for f in dataclasses.fields(config_class):
            if f.name not in inherited and f.name not in DERIVED_FIELDS:
                settings.setdefault(alias.get(f.name, f.name), {})[name] = f.name
    return settings


def option_flag(name: str) -> str:
    """The command-line flag of a setting: ``--`` and its name with ``-`` for ``_``."""
    return "--" + name.replace("_", "-")


def shown(value) -> str:
    """A value as a command line would write it."""
    return " ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _model_type(name: str):
    if name not in MODEL_TYPES:
        raise ValueError(f"--model {name}: unknown model type; choose from {', '.join(MODEL_TYPES)}")
    return MODEL_TYPES[name]


def _flag_of(model_type: str) -> dict[str, str]:
    """Config field -> its setting name, for ``model_type``."""
    return {fields[model_type]: name for name, fields in model_settings([model_type]).items()}


@dataclass(frozen=True)
class RunSpec:
    """One training run.

    Args:
        model_type: a model type of :data:`hf_nlm.models.MODEL_TYPES` (``"nplm"``, ``"awd_lstm"``, ...).
        data: the corpus and its splits.
        training: the :class:`TrainingConfig` (``output_dir`` included).
        tokenizer: the tokenizer settings (a run that starts from a saved model, ``init_from`` or a resumed
            checkpoint, uses that model's tokenizer instead).
        model: config fields of the model type (by config field name); the others take the config's defaults.
        recipe: the training recipe whose values the spec holds where none was given.
        tree, tree_file, tree_seed: a tree head's fixed word tree (see :data:`TREE_SETTINGS`).
        tree_mode, tree_eps, first_stage_epochs: a tree head's data-built word tree (Mnih & Hinton, "A
            Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 4):
            :func:`~hf_nlm.training.train` trains a model on a random tree (``tree_seed``) for
            ``first_stage_epochs`` epochs (None: ``num_epochs``) in ``output_dir/random_tree``, builds the
            tree from its predicted vectors by recursive EM with the ``tree_mode`` split rule (``adaptive``
            or ``balanced``; ``tree_eps`` > 0: ADAPTIVE(eps)) into ``output_dir/word_tree.json``, and trains
            a fresh model on it in ``output_dir``. ``tree_mode`` None: a fixed tree.
        init_from: a saved model folder to start from (its weights and tokenizer).
        recipe_values: the settings (flat names) whose value came from the recipe.
        data_sha256: each split's content as the run recorded it (:func:`split_fingerprints`);
            set on a spec read back from a run folder, and checked against the data when it trains.
        resume_changes: what a resumed run changes of the recorded run's settings (:meth:`resumed_with`), as
            the run says it when it starts.

    Make one with :meth:`from_recipe` or :meth:`from_run_folder`.
    """

    model_type: str
    data: DataSpec
    training: TrainingConfig
    tokenizer: TokenizerSpec = field(default_factory=TokenizerSpec)
    model: Mapping[str, Any] = field(default_factory=dict)
    recipe: str = DEFAULT_RECIPE
    tree: str | None = None
    tree_file: str | None = None
    tree_seed: int = 0
    tree_mode: str | None = None
    tree_eps: float = 0.0
    first_stage_epochs: int | None = None
    init_from: str | None = None
    recipe_values: frozenset[str] = frozenset()
    data_sha256: Mapping[str, str] | None = None
    resume_changes: tuple[str, ...] = ()

    #: The settings a resumed run may change: where it writes, when it stops, what it logs, saves and
    #: evaluates, the per-process batch (the global batch is checked) and the device. Every other setting
    #: shaped the run.
    RESUME_CHANGEABLE = RESUME_CHANGEABLE

    def __post_init__(self) -> None:
        model_type = _model_type(self.model_type)
        model_type.recipe(self.recipe)  # a ValueError naming the model type's recipes
        fields = {f.name for f in dataclasses.fields(model_type.config_class)}
        unknown = sorted(set(self.model) - fields)
        if unknown:
            raise ValueError(f"{self.model_type} has no config field {', '.join(unknown)}")
        object.__setattr__(self, "model", MappingProxyType(dict(self.model)))
        object.__setattr__(self, "recipe_values", frozenset(self.recipe_values))
        if self.data_sha256 is not None:
            object.__setattr__(self, "data_sha256", MappingProxyType(dict(self.data_sha256)))
        if self.tree is not None and self.tree not in TREE_CHOICES:
            raise ValueError(f"--tree {self.tree}: choose from {', '.join(TREE_CHOICES)}")
        if self.tree is not None and self.tree_file is not None:
            raise ValueError("give --tree or --tree-file, not both")
        if self.tree_file is not None:
            object.__setattr__(self, "tree_file", os.path.abspath(os.fspath(self.tree_file)))
        if self.init_from is not None:
            object.__setattr__(self, "init_from", os.fspath(self.init_from))
        self._check_data_tree()

    def _check_data_tree(self) -> None:
        """The random tree's seed and the data-built tree's settings fit together (``ValueError`` naming the
        flag)."""
        if isinstance(self.tree_seed, bool) or not isinstance(self.tree_seed, int) or self.tree_seed < 0:
            raise ValueError(f"--tree-seed must be an integer >= 0, got {self.tree_seed!r}")
        mode, eps, epochs = self.tree_mode, self.tree_eps, self.first_stage_epochs
        if mode is not None and mode not in TREE_MODES:
            raise ValueError(f"--tree-mode {mode}: choose from {', '.join(TREE_MODES)}")
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0.0 <= eps < 0.5:
            raise ValueError(f"--tree-eps must lie in [0, 0.5), got {eps!r}")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
            raise ValueError(f"--first-stage-epochs must be an integer >= 1, got {epochs!r}")
        if mode is None:
            given = [flag for flag, value in (("--tree-eps", eps), ("--first-stage-epochs", epochs)) if value]
            if given:
                verb = "applies" if len(given) == 1 else "apply"
                raise ValueError(f"{' and '.join(given)} {verb} to a data-built tree only: give --tree-mode "
                                 f"({', '.join(TREE_MODES)}) too")
            return
        if eps > 0 and mode != "adaptive":
            raise ValueError(f"--tree-eps applies to --tree-mode adaptive only (words down both branches), "
                             f"not --tree-mode {mode}")
        if self.tree not in (None, "random") or self.tree_file is not None:
            given = f"--tree {self.tree}" if self.tree_file is None else "--tree-file"
            raise ValueError(f"--tree-mode {mode} builds the tree from a first model trained on a random "
                             f"tree: drop {given}")
        if self.init_from is not None:
            raise ValueError(f"--tree-mode {mode} trains fresh models on a random tree and then on the "
                             "tree it builds; --init-from starts from a saved model and its tree: give one "
                             "of them")

    # ------------------------------------------------------------------ making a spec

    @classmethod
    def from_recipe(cls, model_type: str | None = None, recipe: str | None = None, **settings) -> RunSpec:
        """A spec of ``model_type`` trained with ``recipe`` (default: its ``"default"`` one), whose values
        fill every setting that ``settings`` does not give; the rest take :class:`TrainingConfig`'s, the
        tokenizer's and the config's defaults. ``settings`` are flat names (``train_file``, ``min_frequency``,
        ``hidden_size``, ``learning_rate``, ``output_dir``, ...); a given value wins, None included. The
        recipe's data (its corpus) is used when ``settings`` name no corpus and no split file (the data
        settings they give, ``corpus_path`` or a loader option, then refine it), and its word tree when they
        name no tree (``tree``, ``tree_file``, ``tree_mode``).

        A named recipe says its model type itself (:func:`hf_nlm.models.model_type_of_recipe`); without
        either, the ``default`` recipe of :data:`DEFAULT_MODEL`:

            RunSpec.from_recipe(recipe="demo")          # the NPLM of `make demo`, on Brown
            RunSpec.from_recipe("awd_lstm", "merity2018", corpus="ptb", output_dir="runs/awd", max_time_s=600)
        """
        if model_type is None:
            model_type = DEFAULT_MODEL if recipe in (None, DEFAULT_RECIPE) else model_type_of_recipe(recipe)
        kind = _model_type(model_type)
        recipe = recipe or DEFAULT_RECIPE
        if recipe not in kind.recipes:
            raise ValueError(f"--recipe {recipe} is not a recipe of --model {model_type}; its recipes: "
                             f"{', '.join(kind.recipes)}")
        chosen = kind.recipes[recipe]
        groups = _group(model_type, settings)
        flag_of = _flag_of(model_type)
        training = recipe_training_values(chosen, groups["training"])
        model = {field_: v for field_, v in chosen.model.items() if flag_of[field_] not in settings}
        tokenizer = {name: v for name, v in chosen.tokenizer.items() if name not in settings}
        other_tree = any(settings.get(name) is not None for name in TREE_KIND_SETTINGS)
        tree = {name: v for name, v in chosen.tree.items()
                if name not in settings and not (other_tree and name != "tree_seed")}
        # Data of its own (a corpus, split files) replaces the recipe's; a path or a loader option refines it.
        own_data = {"corpus", *(f"{split}_file" for split in SPLITS)} & set(groups["data"])
        data = {} if own_data else {k: v for k, v in chosen.data.items() if k not in groups["data"]}
        used = [*training, *(flag_of[f] for f in model), *tokenizer, *tree, *data]
        tokenizer_values = {"tokenizer": kind.default_tokenizer, **tokenizer, **groups["tokenizer"]}
        spec = cls(
            model_type=model_type,
            data=DataSpec(**data, **groups["data"]),
            training=TrainingConfig(**{**training, **groups["training"]}),
            tokenizer=TokenizerSpec(**{TOKENIZER_SETTINGS[k]: v for k, v in tokenizer_values.items()}),
            model={**model, **groups["model"]},
            recipe=recipe,
            init_from=groups["other"].get("init_from"),
            recipe_values=frozenset(used),
            **{**tree, **{k: v for k, v in groups["other"].items() if k in TREE_SETTINGS}},
        )
        # The files last, the settings checked first; named as the caller named them (train_file), which the
        # command line writes as its flags.
        for split, paths in spec.data.split_files().items():
            for path in paths:
                check_split_file(f"{split}_file", path)
        return spec

    @classmethod
    def from_run_folder(cls, path: str | os.PathLike) -> RunSpec:
        """The spec a run recorded, set to resume it: ``path`` is a run's ``output_dir`` (its newest complete
        checkpoint is read) or a checkpoint folder. Data and tokenizer settings are those the run resolved
        (the punctuation rule decided, the recipe's cut-off as applied), with each split's content
        (``data_sha256``) so that a resumed run refuses data that changed, whatever its path."""
        from ..modeling_utils import check_checkpoint_model_type
        from .checkpoint import list_checkpoints, read_trainer_state, resolve_checkpoint

        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a run folder (no such folder)")
        if not (path / "trainer_state.json").is_file() and not list_checkpoints(path):
            raise FileNotFoundError(f"{path} is not a run folder: it holds no trainer_state.json and no "
                                    "checkpoints/checkpoint-N (give a run's output_dir, or one of its "
                                    "checkpoints)")
        folder = resolve_checkpoint(path, path)
        state = read_trainer_state(folder)
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = {}  # loading the checkpoint's model names the problem
        recorded = state.get("run_spec")
        if not isinstance(recorded, dict):
            found = config.get("model_type")
            if found not in MODEL_TYPES:
                raise ValueError(f"{folder / 'config.json'} is a checkpoint of model_type={found!r}, which "
                                 f"hf_nlm does not train (its model types: {', '.join(MODEL_TYPES)})")
            raise ValueError(f"{folder / 'trainer_state.json'} records no run specification (run_spec): it "
                             "was not written by hf_nlm.training.train; resume it with train_lm(..., "
                             "TrainingConfig(resume_from_checkpoint=...)) and the objects it was made of")
        spec = cls.from_dict(recorded)
        check_checkpoint_model_type(folder, spec.model_type)
        # The model the run made, so that a setting is compared with the checkpoint's value.
        return dataclasses.replace(spec.with_model_config(config), training=dataclasses.replace(
            spec.training, resume_from_checkpoint=os.fspath(folder)))

    @classmethod
    def from_dict(cls, values: Mapping) -> RunSpec:
        """The spec :meth:`to_dict` wrote (``ValueError`` naming what does not fit)."""
        try:
            return cls(
                model_type=values["model_type"],
                data=DataSpec(**values["data"]),
                training=TrainingConfig(**values["training"]),
                tokenizer=TokenizerSpec(**values["tokenizer"]),
                model=values.get("model", {}),
                recipe=values.get("recipe", DEFAULT_RECIPE),
                init_from=values.get("init_from"),
                recipe_values=frozenset(values.get("recipe_values", ())),
                data_sha256=values.get("data_sha256"),
                **{k: values[k] for k in TREE_SETTINGS if k in values},
            )
        except (KeyError, TypeError) as err:
            raise ValueError("a run specification that does not fit RunSpec "
                             f"({type(err).__name__}: {err})") from err

    def to_dict(self) -> dict:
        """The spec as JSON-able values (:meth:`from_dict` reads them back)."""
        return {
            "model_type": self.model_type,
            "recipe": self.recipe,
            "data": self.data.to_dict(),
            "tokenizer": self.tokenizer.to_dict(),
            "model": dict(self.model),
            "tree": self.tree,
            "tree_file": self.tree_file,
            "tree_seed": self.tree_seed,
            "tree_mode": self.tree_mode,
            "tree_eps": self.tree_eps,
            "first_stage_epochs": self.first_stage_epochs,
            "init_from": self.init_from,
            "training": self.training.to_dict(),
            "recipe_values": sorted(self.recipe_values),
            "data_sha256": dict(self.data_sha256) if self.data_sha256 is not None else None,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    # ------------------------------------------------------------------ reading a spec

    def settings(self) -> dict[str, Any]:
        """Every setting of the spec by flat name (the model's by the name its flag has)."""
        flag_of = _flag_of(self.model_type)
        return {
            **{f: getattr(self.data, f) for f in data_spec_fields()},
            **{name: getattr(self.tokenizer, f) for name, f in TOKENIZER_SETTINGS.items()},
            **{flag_of.get(f, f): v for f, v in self.model.items()},
            **{k: getattr(self, k) for k in (*TREE_SETTINGS, "init_from")},
            **self.training.to_dict(),
        }

    def recipe_line(self) -> str:
        """Which recipe the spec used and the values it gave, as the run says it at the start; then the
        recipe's model and tokenizer settings that the run has other values of (given, or a saved model's:
        what its description names may not be what trains), with the recipe's."""
        kind = MODEL_TYPES[self.model_type].recipe(self.recipe)
        values, recipe = self.settings(), self._recipe_settings()
        given = ", ".join(f"{option_flag(name)} {shown(values[name])}" for name in recipe
                          if name in self.recipe_values)
        other = ", ".join(f"{option_flag(name)} {shown(values[name])} (the recipe's: {shown(value)})"
                          for name, value in recipe.items()
                          if name not in self.recipe_values and name not in kind.training
                          and _comparable(values[name]) != _comparable(value))
        description = kind.description
        return (f"recipe {self.recipe} of {self.model_type} ({description})" + (f": {given}" if given else "")
                + (f"; instead of the recipe's: {other}" if other else ""))

    def _recipe_settings(self) -> dict[str, Any]:
        """The recipe's values by flat name, in the recipe's order."""
        recipe = MODEL_TYPES[self.model_type].recipe(self.recipe)
        flag_of = _flag_of(self.model_type)
        return {**recipe.training, **{flag_of[f]: v for f, v in recipe.model.items()}, **recipe.tokenizer,
                **recipe.tree}

    # ------------------------------------------------------------------ changing a spec

    def with_model_config(self, config: Mapping | Any) -> RunSpec:
        """This spec with every model setting read from ``config`` (a config dict, or a loaded model's
        config): what a run that starts from saved weights (``--resume``, ``--init-from``) trains."""
        values = config.to_dict() if hasattr(config, "to_dict") else config
        fields = [name for by_type in model_settings([self.model_type]).values() for name in by_type.values()]
        model = {**self.model, **{f: values[f] for f in fields if f in values}}
        return dataclasses.replace(self, model=model)

    def replace(self, **settings) -> RunSpec:
        """A copy with ``settings`` (flat names) changed; the recipe is not applied again."""
        groups = _group(self.model_type, settings)
        return dataclasses.replace(
            self,
            data=dataclasses.replace(self.data, **groups["data"]),
            training=dataclasses.replace(self.training, **groups["training"]),
            tokenizer=dataclasses.replace(self.tokenizer,
                                          **{TOKENIZER_SETTINGS[k]: v
                                             for k, v in groups["tokenizer"].items()}),
            model={**self.model, **groups["model"]},
            recipe_values=self.recipe_values - set(settings),
            **groups["other"],
        )

    def resumed_with(self, **settings) -> RunSpec:
        """This recorded run, to resume, with ``settings`` applied where the run allows it: a setting of
        :attr:`RESUME_CHANGEABLE` applies, one equal to the run's is fine, any other is refused
        (``ValueError`` listing each with the run's value). When to stop (:data:`RESUME_STOPPING`) is taken
        from ``settings``, else the recipe's or :class:`TrainingConfig`'s defaults, not from the interrupted
        run."""
        differ = [f"{option_flag(name)} (the run's model and tree come from the checkpoint)"
                  for name in ("tree", "tree_file", "init_from") if settings.get(name) is not None]
        if settings.get("model_type", self.model_type) != self.model_type:
            differ.append(f"--model {settings['model_type']} (the run's: {self.model_type})")
        if settings.get("recipe") not in (None, self.recipe):
            differ.append(f"--recipe {settings['recipe']} (the run's: {self.recipe})")
        fixed = {k: v for k, v in settings.items()
                 if k not in (*RESUME_CHANGEABLE, "tree", "tree_file", "init_from", "model_type", "recipe")}
        # paths compared as absolute paths
        recorded, asked = self.settings(), self.replace(**fixed).settings()
        differ += [f"{option_flag(name)} {shown(settings[name])} (the run's: {shown(recorded[name])})"
                   for name in fixed if _comparable(asked[name]) != _comparable(recorded[name])]
        if differ:
            folder = self.training.resume_from_checkpoint
            raise ValueError(
                f"--resume continues the run saved in {folder} with the settings it recorded; these differ: "
                f"{'; '.join(differ)}. Drop them to resume, or start a new run in another --output-dir (or "
                "with --overwrite-output-dir)"
            )
        defaults = {f.name: f.default for f in dataclasses.fields(TrainingConfig)
                    if f.name in RESUME_STOPPING}
        recipe = recipe_training_values(MODEL_TYPES[self.model_type].recipe(self.recipe), settings)
        defaults.update({k: v for k, v in recipe.items() if k in RESUME_STOPPING})
        changed = {k: v for k, v in settings.items() if k in RESUME_CHANGEABLE}
        notes = tuple(f"{option_flag(k)} {shown(v)} (the run's: {shown(recorded.get(k))})"
                      for k, v in changed.items()
                      if k not in ("output_dir", "resume_from_checkpoint")
                      and _comparable(v) != _comparable(recorded.get(k)))
        return dataclasses.replace(self.replace(**{**defaults, **changed}), resume_changes=notes)


def _comparable(value):
    """Lists and tuples compare by their items."""
    if isinstance(value, list | tuple):
        return tuple(_comparable(v) for v in value)
    return value


def _group(model_type: str, settings: Mapping) -> dict[str, dict]:
    """``settings`` (flat names) by where they go: data, tokenizer, model (by config field), training, other
    (tree, init_from). An unknown name, or a model setting of another model type, is a ``ValueError`` naming
    it."""
    groups: dict[str, dict] = {"data": {}, "tokenizer": {}, "model": {}, "training": {}, "other": {}}
    training = {f.name for f in dataclasses.fields(TrainingConfig)}
    model = model_settings()
    config_class = MODEL_TYPES[model_type].config_class
    data = set(data_spec_fields())
    for name, value in settings.items():
        if name in data:
            groups["data"][name] = value
        elif name in TOKENIZER_SETTINGS:
            groups["tokenizer"][name] = value
        elif name in training:
            groups["training"][name] = value
        elif name in (*TREE_SETTINGS, "init_from"):
            groups["other"][name] = value
        elif model_type in model.get(name, {}):
            groups["model"][model[name][model_type]] = value
        elif name in model or name in {f.name for f in dataclasses.fields(config_class)}:
            renamed = {setting for setting, f in config_class.attribute_map.items() if f == name}
            if renamed:  # the model has this field, under another name
                from ..configuration_utils import config_field_docs

                what = config_field_docs(config_class).get(name, name).split(":")[0].removeprefix("The ")
                raise ValueError(f"{option_flag(name)} does not apply to --model {model_type}: the "
                                 f"{model_type.upper()}'s {what} is {option_flag(renamed.pop())}")
            raise ValueError(f"{option_flag(name)} applies to --model {' / '.join(model.get(name, {}))} "
                             f"only, not {model_type}")
        else:
            known = [*data, *TOKENIZER_SETTINGS, *training, *TREE_SETTINGS, "init_from", *model]
            close = difflib.get_close_matches(name, known, n=3)
            raise ValueError(f"unknown setting {name!r}"
                             + (f"; did you mean {', '.join(close)}?" if close else ""))
    return groups


__all__ = ["DEFAULT_MODEL", "DERIVED_FIELDS", "DataSpec", "RESUME_STOPPING", "RunSpec", "TOKENIZERS",
           "TREE_CHOICES", "TREE_MODES", "TREE_SETTINGS", "TokenizerSpec", "check_split_file",
           "data_spec_fields", "model_settings", "option_flag", "split_fingerprints"]
