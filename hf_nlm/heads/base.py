"""The output-head interface every body talks to, and the registry of heads by name.

A language model here is a body (context -> hidden vector h_t) followed by a head (h_t -> a
distribution over the next token); the papers of this package are mostly about heads. Any body
works with any head because the body only ever calls the methods of :class:`OutputHead`:

* ``forward(hidden)``: scores whose ``log_softmax`` over the last axis is the exact next-token
  log-distribution (``generate()`` applies ``log_softmax`` to what the model returns, so a head
  that already normalises returns log-probabilities and says so with ``returns_log_probs``);
* ``log_probs(hidden)``: exact full-vocabulary log-probabilities, for evaluation;
* ``nll(hidden, targets)``: the per-token negative log-likelihood used for training, where a head
  avoids building a |V|-wide tensor if its method allows (split and tree softmax do).

``targets`` is a tensor of token ids or a :class:`Targets`, which carries per-target tensors beside
the ids (a numeral's value and precision, its digit string): a head names the ones it reads in
``target_fields`` and the model hands them over from its ``forward(**kwargs)``.

Adding a head is one class and one line::

    @register_head("unigram")
    class UnigramHead(OutputHead):
        ...

after which ``config.head = "unigram"`` works with every body, through training, ``generate()``
and ``save_pretrained`` / ``from_pretrained``. A head with settings of its own declares them beside it,
as a :func:`head_options` class (typed fields with defaults, their documentation, ``validate_*`` checks);
the config of a model that offers the head lists that class among its bases, so the settings are config
fields like any other: saved flat in ``config.json``, checked, and ``hf-nlm train`` flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn


@dataclass
class Targets:
    """What a head is asked to score: token ids and, aligned with them, any per-target tensors.

    Args:
        ids: the target token ids, any shape; -100 marks a position without a target.
        fields: extra per-target tensors whose leading dimensions are ``ids.shape`` (e.g.
            ``{"numeral_value": (N,) float}``), named as in the batch the model received.
    """

    ids: torch.LongTensor
    fields: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def of(cls, targets: torch.Tensor | Targets) -> Targets:
        """``targets`` as a :class:`Targets` (a bare id tensor carries no fields)."""
        return targets if isinstance(targets, Targets) else cls(targets)


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Half-precision scores -> float32 before a softmax (its sums lose too much in 16 bits)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


#: The registered heads by name, in the order of their ``place`` (:func:`register_head`): the order in which
#: ``hf-nlm train --head`` offers them and errors list them.
HEAD_REGISTRY: dict[str, type[OutputHead]] = {}


def zero_with_gradient(parameters) -> torch.Tensor:
    """0, as a function of every tensor of ``parameters``: added to a loss, it gives each of them a zero
    gradient and changes nothing else. A head whose branches run only on the targets that need them
    (the numeral branch on numeral targets) ties in the branches a batch left unused: DDP reduces every
    parameter's gradient at each step and stops a run where one process's loss did not use one."""
    return sum((p.reshape(-1)[:0].sum() for p in parameters), torch.zeros(()))


def register_head(name: str, place: float = math.inf):
    """Class decorator: make an :class:`OutputHead` subclass available as ``config.head = name``.

    ``place`` is where :data:`HEAD_REGISTRY` lists the head, lowest first; heads with equal places, and heads
    that give none, keep the order in which they were registered (after every head that gives one)."""

    def register(cls: type[OutputHead]) -> type[OutputHead]:
        if not (isinstance(cls, type) and issubclass(cls, OutputHead)):
            raise TypeError(f"register_head({name!r}) decorates OutputHead subclasses, got {cls!r}")
        taken = HEAD_REGISTRY.get(name)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"head name {name!r} is already registered by {taken.__module__}.{taken.__qualname__}"
            )
        cls.head_name = name
        cls.registry_place = place  # set on every registered class: a subclass does not take its base's
        HEAD_REGISTRY[name] = cls
        # stable: ties keep their order
        ordered = sorted(HEAD_REGISTRY.items(), key=lambda item: item[1].registry_place)
        HEAD_REGISTRY.clear()
        HEAD_REGISTRY.update(ordered)
        return cls

    return register


def head_options(cls: type) -> type:
    """Class decorator: ``cls`` declares the config fields a head reads (``mog_components: int = 10``), with
    their documentation in an ``Args:`` section (transformers' style) and ``validate_*`` checks that raise
    ``ValueError`` naming the field.

    It is a dataclass that only declares fields: the config of a model that offers the head lists it among its
    bases (``class NumeracyLMConfig(AWDLSTMConfig, MixtureOfGaussiansOptions)``), so the fields are that
    config's own. ``config.json`` keeps them flat, ``@strict`` checks their types, the config runs the checks
    when it is built and saved, and ``hf-nlm train`` generates a flag per field with the field's
    documentation."""
    return dataclass(kw_only=True, init=False, repr=False, eq=False)(cls)


def head_class(name: str) -> type[OutputHead]:
    """The head class registered as ``name``."""
    if name not in HEAD_REGISTRY:
        raise ValueError(f"unknown head {name!r}; expected one of {', '.join(HEAD_REGISTRY)}")
    return HEAD_REGISTRY[name]


def refuse_arguments(config, kwargs: dict) -> None:
    """Raise ``ValueError`` if any construction argument in ``kwargs`` is set: the head takes none."""
    given = [name for name, value in kwargs.items() if value is not None]
    if given:
        raise ValueError(
            f"a word {given[0]} was given but the config's head is {config.head!r}, which takes no {given[0]}"
            if given == ["tree"]
            else f"{', '.join(given)} given, but the config's head {config.head!r} takes none of them"
        )


class OutputHead(nn.Module):
    """Base class of the output layers: h_t (``in_features``) -> distribution over ``vocab_size`` tokens.

    Subclasses implement ``forward``, ``nll`` and (unless ``forward`` already normalises)
    ``log_probs``, and ``from_config`` when they read config fields beyond ``vocab_size``. The class
    attributes answer what the model, the trainer and the evaluation need to know about a head.
    """

    #: The name it is registered under and its place in :data:`HEAD_REGISTRY` (set by :func:`register_head`).
    head_name: ClassVar[str] = ""
    registry_place: ClassVar[float] = math.inf
    #: The config fields this head alone reads (e.g. ``("cutoffs",)``): a config that sets them for
    #: another head is refused, so that a saved config never carries settings nothing uses.
    config_fields: ClassVar[tuple[str, ...]] = ()
    #: Per-target tensors ``nll`` reads from :class:`Targets` (taken from the batch by name).
    target_fields: ClassVar[tuple[str, ...]] = ()
    #: ``forward`` returns normalised log-probabilities (``log_softmax`` leaves them unchanged).
    returns_log_probs: ClassVar[bool] = False
    #: ``weight`` is a |V| x D word matrix that may be tied to the input embedding.
    tieable: ClassVar[bool] = False
    #: ``resize`` can follow a resized vocabulary (``resize_token_embeddings``), for some sizes at least
    #: (:meth:`check_resize` says which).
    resizable: ClassVar[bool] = False
    #: Attributes that cache tensors derived from the head's buffers (a tree head's path tables): rebuilt
    #: when the buffers change, never saved. Every other tensor of a head is a parameter or a buffer, which
    #: ``init_weights`` can write again (a model built on the meta device, then ``to_empty``).
    derived_caches: ClassVar[tuple[str, ...]] = ()
    #: The head is built over a word tree (``from_config(config, in_features, tree=...)``), which a run gives
    #: it: the tree its spec describes, or Mnih & Hinton's data-built one.
    takes_word_tree: ClassVar[bool] = False

    in_features: int
    vocab_size: int

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config, in_features: int, **kwargs) -> OutputHead:
        """The head ``config`` describes, reading vectors of size ``in_features``.

        ``kwargs`` are what a model passes at construction (``tree=`` for a tree head); a head that
        takes none refuses any that is set, so that e.g. a tree given to a softmax model is not
        silently ignored.
        """
        refuse_arguments(config, kwargs)
        return cls(in_features, config.vocab_size)

    @classmethod
    def prepare_run(cls, fields: dict, tokenizer, run) -> dict:
        """The one place a head reads a training run, before its model is built: ``fields`` are the config
        values the run gives, to which the head adds those it derives from the run (a split head's cut-offs
        from the vocabulary); ``run`` gives the run's ``spec``, ``train_texts``, ``word_tree()`` (the tree
        the spec describes) and ``say(line)`` (a line of the run's account). Returns the keyword arguments
        the model is built with (a tree head's ``tree=``). By default: nothing."""
        return {}

    @classmethod
    def check_config(cls, config, owner: str) -> None:
        """Raise ``ValueError`` if the config's fields for this head are inconsistent (``owner``, e.g.
        ``"NPLMConfig"``, starts the message). Called by the config's ``validate_head``."""

    def config_values(self) -> dict:
        """Config fields that describe this head instance and must be saved so that
        ``from_pretrained`` can rebuild it before loading the weights (a tree head's shape)."""
        return {}

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        """Uniform(+-initializer_range) weights, zero biases: the models' initialisation of a head.

        ``init`` is the module of init functions (``transformers.initialization`` inside a model's
        ``_init_weights``, which skips tensors already loaded from a checkpoint).
        """
        # The word matrix last: tied to the input embedding, from_pretrained does not draw it (it follows the
        # embedding), and the head's other draws (a split head's tombstones) must not depend on that.
        word_matrix = getattr(self, "weight", None)
        for p in sorted(self.parameters(recurse=False), key=lambda p: p is word_matrix):
            if p.ndim >= 2:
                init.uniform_(p, -initializer_range, initializer_range)
            else:
                init.zeros_(p)

    # ------------------------------------------------------------------ the distribution
    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log P(w | h) for every word, shape ``hidden.shape[:-1] + (|V|,)``."""
        scores = upcast(self.forward(hidden))
        return scores if self.returns_log_probs else torch.log_softmax(scores, dim=-1)

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor | Targets) -> torch.Tensor:
        """Per-token -log P(target | h), shape of the target ids; a target of -100 gives 0."""
        raise NotImplementedError(f"{type(self).__name__} does not implement nll()")

    def warm_cache(self) -> None:
        """Compute now whatever the head derives lazily from its state (a tree head's tables), so that
        ``torch.compile`` / ``torch.export`` find it; most heads derive nothing."""

    # ------------------------------------------------------------------ data checks and vocabulary changes
    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """Fit what the head takes from the training data before training starts (a mixture's
        Gaussians by EM on the training numerals): ``stream`` is the training split's token stream
        (``input_ids`` and the per-token fields). Most heads take nothing."""

    def check_training_counts(self, counts: torch.Tensor, special_ids=()) -> None:
        """Raise ``ValueError`` if training data with these per-id ``counts`` does not suit the head
        (the split softmax needs ids sorted by frequency). Most heads take any data."""

    def check_resize(self, vocab_size: int) -> None:
        """Raise ``ValueError``, saying what to do instead, if the head cannot follow a vocabulary resized
        to ``vocab_size`` tokens; called before anything is resized."""
        if not self.resizable:
            raise ValueError(
                f"{type(self).__name__} cannot follow a resized vocabulary: build a new model over the new "
                "vocabulary"
            )

    def resize(self, vocab_size: int, mean_init: bool = True) -> None:
        """Follow a resized vocabulary (``resize_token_embeddings``): new tokens are words added at the end
        of the vocabulary, a smaller vocabulary cuts the last ids. Heads that can implement it."""
        self.check_resize(vocab_size)
        raise NotImplementedError(
            f"{type(self).__name__} says it is resizable but does not implement resize()"
        )


def write_unless_loaded(tensor: torch.Tensor, value: torch.Tensor) -> None:
    """Write ``value`` into ``tensor`` (a buffer, or a parameter set rather than drawn) unless it holds
    values loaded from a checkpoint: ``transformers.initialization.copy_``, for any ``init`` module.

    transformers marks what ``from_pretrained`` loaded with ``_is_hf_initialized``; a tensor without the
    mark holds nothing yet (a model built on the meta device, then ``to_empty``) or is being reset, and
    a head's ``init_weights`` writes it from what the head was built from."""
    if not getattr(tensor, "_is_hf_initialized", False):
        with torch.no_grad():
            tensor.copy_(value)


def build_head(config, in_features: int, **kwargs) -> OutputHead:
    """The output head ``config.head`` names, reading vectors of size ``in_features``."""
    return head_class(config.head).from_config(config, in_features, **kwargs)


def check_head_config(config, owner: str) -> None:
    """Validate a config's head fields; ``owner`` (e.g. ``"NPLMConfig"``) starts the error messages."""
    if config.head not in HEAD_REGISTRY:
        raise ValueError(f"{owner}.head must be one of {', '.join(HEAD_REGISTRY)}; got {config.head!r}")
    cls = HEAD_REGISTRY[config.head]
    for other in HEAD_REGISTRY.values():
        if other is cls:
            continue
        given = [name for name in other.config_fields
                 if name not in cls.config_fields and getattr(config, name, None) is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(
                f"{owner}: {', '.join(given)} {verb} to head={other.head_name!r} only, but "
                f"head={config.head!r}"
            )
    if getattr(config, "tie_word_embeddings", False) and not cls.tieable:
        can_tie = ", ".join(name for name, c in HEAD_REGISTRY.items() if c.tieable)
        raise ValueError(
            f"{owner}: tie_word_embeddings=True needs a head whose weight is a word matrix ({can_tie}); the "
            f"{config.head!r} head's is not. Set tie_word_embeddings=False"
        )
    cls.check_config(config, owner)


__all__ = [
    "HEAD_REGISTRY",
    "OutputHead",
    "Targets",
    "build_head",
    "check_head_config",
    "head_class",
    "head_options",
    "refuse_arguments",
    "register_head",
    "write_unless_loaded",
    "upcast",
]
