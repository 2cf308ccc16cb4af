"""What an architecture declares to be registered: its :class:`ModelType` (config, body and language model
classes), and the registration of every type with the transformers Auto classes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

#: The recipe a model type trains with unless another is named.
DEFAULT_RECIPE = "default"

#: The tokenizer settings a recipe may give (the ``hf-nlm train`` flags of the same names).
RECIPE_TOKENIZER_SETTINGS = ("tokenizer", "min_frequency", "vocab_size", "lowercase", "split_punctuation")
#: The word-tree settings a recipe may give a tree head (the ``hf-nlm train`` flags of the same names): a
#: fixed tree (``tree``, ``tree_seed``) or Mnih & Hinton's (2008) data-built one (``tree_mode``, ``tree_eps``,
#: ``first_stage_epochs``).
RECIPE_TREE_SETTINGS = ("tree", "tree_seed", "tree_mode", "tree_eps", "first_stage_epochs")


@dataclass(frozen=True)
class TrainingRecipe:
    """How to train a model type: values for the fields of :class:`~hf_nlm.training.TrainingConfig`
    (``training``), of the model's config (``model``), of the tokenizer (``tokenizer``, keys of
    :data:`RECIPE_TOKENIZER_SETTINGS`), of a tree head's word tree (``tree``, keys of
    :data:`RECIPE_TREE_SETTINGS`) and of the data (``data``, fields of
    :class:`~hf_nlm.training.spec.DataSpec`: a recipe behind a published number names its corpus).
    ``hf-nlm train`` uses them for every setting no flag gives (the data unless a flag names a corpus or split
    files); :meth:`hf_nlm.training.TrainingConfig.for_model` does the same for ``training`` in Python.
    ``description`` says where the values come from (a paper and its section, or what they were chosen for).

    A recipe that publishes a number trains for a set amount of work (``num_epochs`` or ``max_steps``, with
    early stopping on validation, and its ``seed``), never for a time, so that a busy or slow machine takes
    longer and prints the same number. ``recorded`` holds the figures a run of the recipe gave (names of
    :data:`hf_nlm.training.published.FIGURES`), which ``hf-nlm train --recipe NAME --check`` compares a new
    run with; ``paper`` the paper's figures for the same setting, shown beside them (a paper's corpus copy
    and tokenization differ, so they are not checked). ``time_s`` is the recorded run's wall time, training
    and evaluation, on the 2-core CPU machine that recorded it (``hf-nlm recipes`` lists it; Benchmarks
    gives each table's threads and load: a busy or slower machine takes longer and prints the same
    figures)."""

    description: str
    training: Mapping = field(default_factory=dict)
    model: Mapping = field(default_factory=dict)
    tokenizer: Mapping = field(default_factory=dict)
    tree: Mapping = field(default_factory=dict)
    data: Mapping = field(default_factory=dict)
    recorded: Mapping = field(default_factory=dict)
    paper: Mapping = field(default_factory=dict)
    time_s: float | None = None

    def __post_init__(self) -> None:
        unknown = set(self.tokenizer) - set(RECIPE_TOKENIZER_SETTINGS)
        if unknown:
            raise ValueError(f"TrainingRecipe.tokenizer: unknown settings {sorted(unknown)}; "
                             f"known: {', '.join(RECIPE_TOKENIZER_SETTINGS)}")
        unknown = set(self.tree) - set(RECIPE_TREE_SETTINGS)
        if unknown:
            raise ValueError(f"TrainingRecipe.tree: unknown settings {sorted(unknown)}; "
                             f"known: {', '.join(RECIPE_TREE_SETTINGS)}")
        # Read-only: a recipe is shared by every run.
        for name in ("training", "model", "tokenizer", "tree", "data", "recorded", "paper"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def derive(self, description: str, *, training: Mapping = (), model: Mapping = (),
               tokenizer: Mapping = (), tree: Mapping = (), data: Mapping = (), recorded: Mapping = (),
               paper: Mapping = (), time_s: float | None = None) -> TrainingRecipe:
        """This recipe with ``training``, ``model``, ``tokenizer``, ``tree`` and ``data`` values set over its
        own, and ``description``, ``recorded``, ``paper`` and ``time_s`` of its own (a run of the new recipe
        is a new run: nothing recorded carries over)."""
        return TrainingRecipe(
            description,
            training={**self.training, **dict(training)},
            model={**self.model, **dict(model)},
            tokenizer={**self.tokenizer, **dict(tokenizer)},
            tree={**self.tree, **dict(tree)},
            data={**self.data, **dict(data)},
            recorded=recorded, paper=paper, time_s=time_s,
        )


#: The training settings the ``default`` recipes share: Adam (Kingma & Ba 2015) at a constant rate and no
#: weight decay, and with a time budget (``max_time_s``) training to its end, mid-epoch if need be.
ADAM_CONSTANT = {"optimizer": "adam", "lr_scheduler": "constant", "weight_decay": 0.0,
                 "max_time_within_epoch": True}

#: What the ``default`` recipes of the feed-forward n-gram models (NPLM, LBL, HLBL) share: Adam at a constant
#: rate clipped at 1.0, blocks of 64 targets, early stopping after 2 epochs without improvement; each adds its
#: rate and batch.
FEED_FORWARD_DEFAULT = {**ADAM_CONSTANT, "max_grad_norm": 1.0, "block_size": 64, "early_stopping_patience": 2}


def feed_forward_recipe(network: str, learning_rate: float, batch_size: int, **model) -> TrainingRecipe:
    """The ``default`` recipe of a feed-forward n-gram model (NPLM, LBL, HLBL), made for a text of about a
    million words: :data:`FEED_FORWARD_DEFAULT` at ``learning_rate`` and ``batch_size``, the ``model``
    fields (``network`` says what they are), and words seen once merged into ``<unk>`` so that ``<unk>`` is
    trained."""
    return TrainingRecipe(
        "learns from a text of about a million words in minutes on a CPU: Adam (Kingma & Ba 2015) at a "
        f"constant rate, {network}, and words seen once merged into <unk> so that <unk> is trained",
        training={**FEED_FORWARD_DEFAULT, "learning_rate": learning_rate, "batch_size": batch_size},
        model=model,
        tokenizer={"min_frequency": 2},
    )

#: The corpora of the README's "do the defaults learn?" table (``benchmarks/defaults.py``).
DEFAULTS_TABLE_CORPORA = {"ptb": "Penn Treebank", "sotu": "State of the Union addresses"}


def defaults_table_recipes(model_type: str, default: TrainingRecipe, recorded: Mapping = (),
                           **num_epochs: int) -> dict:
    """The README's defaults table rows of ``model_type``: its ``default`` recipe on each corpus of
    ``num_epochs`` (``ptb=3, sotu=1``) for that many epochs (a budget of a few minutes on 2 cores, in work),
    named ``CORPUS-MODEL_TYPE-default`` (``ptb-nplm-default``). ``recorded``: corpus -> (the figures, the
    wall time in seconds) of the row's recorded run."""
    recorded = dict(recorded)
    rows = {
        f"{corpus}-{model_type.replace('_', '-')}-default": default.derive(
            f"the README's defaults table: the `default` recipe of {model_type} on "
            f"{DEFAULTS_TABLE_CORPORA[corpus]} ({corpus}) for {epochs} epoch{'s' if epochs > 1 else ''}, "
            "with the Kneser-Ney 5-gram on the same split; " + default.description,
            training={"num_epochs": epochs, "seed": 0},
            data={"corpus": corpus},
            recorded=recorded.get(corpus, ({}, None))[0], time_s=recorded.get(corpus, ({}, None))[1],
        )
        for corpus, epochs in num_epochs.items()
    }
    # A budget in work: the default recipe's rule for a time budget has nothing to apply to.
    untimed = "max_time_within_epoch"
    return {name: replace(row, training={k: v for k, v in row.training.items() if k != untimed})
            for name, row in rows.items()}


#: The ``default`` recipe of the model types with no recipe of their own made for a million-word text.
ADAM_DEFAULT = TrainingRecipe(
    "Adam (Kingma & Ba 2015) at a constant rate with clipping, the network of the config's defaults",
    training={**ADAM_CONSTANT, "learning_rate": 1e-3, "max_grad_norm": 1.0},
)

#: :class:`~hf_nlm.training.TrainingConfig`'s own defaults as a recipe, for the model types with no paper
#: recipe.
PLAIN_SGD = TrainingRecipe(
    "plain SGD with the eps_t = eps_0 / (1 + r t) decay of Bengio et al. 2003, sec. 4 (eps_0 = 0.1, "
    "r = 1e-8, weight decay 1e-4): TrainingConfig's own defaults, with the network of the config's defaults",
    training={"optimizer": "sgd", "learning_rate": 0.1, "lr_scheduler": "bengio", "lr_decay": 1e-8,
              "weight_decay": 1e-4},
)

#: What the story generator's recipes on ROCStories share (Yao et al. 2019, "Plan-and-Write", with the
#: settings of ``examples/train_story.py --preset rocstories``): Adam (Kingma & Ba 2015) at 1e-3 held
#: constant, weight decay 1e-4, clipping 1.0, batches of 32 (a causal LM: 32 columns of 70-token blocks), 20
#: epochs with early stopping after 3 without a better validation perplexity, random seed `0`; the 15,000
#: most frequent words, punctuation left on them; the stories split 90 / 5 / 5 % by a hash of their id.
ROCSTORIES_TRAINING = {"optimizer": "adam", "learning_rate": 1e-3, "lr_scheduler": "constant",
                       "weight_decay": 1e-4, "max_grad_norm": 1.0, "batch_size": 32, "block_size": 70,
                       "num_epochs": 20, "early_stopping_patience": 3, "seed": 0}
ROCSTORIES_TOKENIZER = {"vocab_size": 15000, "min_frequency": 1, "split_punctuation": False}
ROCSTORIES_SPLIT = (0.9, 0.05, 0.05)


@dataclass(frozen=True)
class ModelType:
    """An architecture: its config, its body (``AutoModel``) and its language model, registered with
    ``AutoModelForCausalLM`` (``causal_lm_class``) or ``AutoModelForSeq2SeqLM`` (``seq2seq_lm_class``)."""

    config_class: type
    base_model_class: type
    causal_lm_class: type | None = None
    seq2seq_lm_class: type | None = None
    #: A tokenizer class of this package the type needs (``AutoTokenizer`` maps the type to it).
    tokenizer_class: type | None = None
    #: The tokenizer a run trains for this type unless told otherwise (``TokenizerSpec.kind``).
    default_tokenizer: str = "word"
    #: Named training recipes; :data:`DEFAULT_RECIPE` is the one used when none is named.
    recipes: Mapping[str, TrainingRecipe] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.recipes and DEFAULT_RECIPE not in self.recipes:
            raise ValueError(f"model type {self.name!r}: its recipes need one named {DEFAULT_RECIPE!r}")

    def recipe(self, name: str | None = None) -> TrainingRecipe:
        """The recipe called ``name`` (:data:`DEFAULT_RECIPE` when None), or a ValueError listing the
        others."""
        name = name or DEFAULT_RECIPE
        if name not in self.recipes:
            known = ", ".join(self.recipes) or "none"
            raise ValueError(f"{name!r} is not a recipe of model type {self.name!r} (its recipes: {known})")
        return self.recipes[name]

    @property
    def name(self) -> str:
        """The ``model_type`` (``config.json``'s, and the CLI's ``--model``)."""
        return self.config_class.model_type

    @property
    def lm_class(self) -> type:
        """The class that trains and generates: the causal or the seq2seq LM."""
        return self.causal_lm_class or self.seq2seq_lm_class

    @property
    def classes(self) -> tuple[type, ...]:
        return tuple(c for c in (self.config_class, self.base_model_class, self.causal_lm_class,
                                 self.seq2seq_lm_class) if c)

    def tiny_config_values(self, vocab_size: int) -> dict:
        """Config values of a tiny model of this type over ``vocab_size`` words, for tests (ours and
        transformers' common model tests): the config's defaults with every size above 8 made 6, 2 layers
        and a context of 2, so that a new model type is tested small without a line of its own."""
        values = {"vocab_size": vocab_size}
        for f in fields(self.config_class):
            default = f.default
            if not isinstance(default, int) or isinstance(default, bool) or f.name == "vocab_size":
                continue
            if f.name.endswith("_size") and default > 8:
                values[f.name] = 6
            elif f.name in ("num_hidden_layers", "context_size"):
                values[f.name] = 2
        return values


def register_auto_classes(model_types: Iterable[ModelType]) -> None:
    """Register each model type with ``AutoConfig``, ``AutoModel`` and its LM's Auto class, so that
    ``from_pretrained`` / ``pipeline`` load them without ``trust_remote_code``."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from ..tokenization import NLMTokenizerFast

    for t in model_types:
        AutoConfig.register(t.name, t.config_class, exist_ok=True)
        AutoModel.register(t.config_class, t.base_model_class, exist_ok=True)
        if t.causal_lm_class is not None:
            AutoModelForCausalLM.register(t.config_class, t.causal_lm_class, exist_ok=True)
        if t.seq2seq_lm_class is not None:
            AutoModelForSeq2SeqLM.register(t.config_class, t.seq2seq_lm_class, exist_ok=True)
        # AutoTokenizer finds a tokenizer_config.json's class by name among the registered classes.
        AutoTokenizer.register(t.config_class, tokenizer_class=t.tokenizer_class or NLMTokenizerFast,
                               exist_ok=True)
