"""The configuration fields every hf_nlm model shares, and their checks, written once.

Every model is a body followed by an output head (:mod:`hf_nlm.heads`), so every config carries the
same head fields and token ids; :class:`NLMConfig` holds them, and each model's config adds its body's
fields. Checks that involve more than one field are ``validate_*`` methods, as in transformers 5's
``@strict`` configs: they run when a config is built AND again when it is saved, so a config made
inconsistent after construction (``config.head = "split"`` without cut-offs) refuses to save instead
of writing a folder that ``from_pretrained`` then refuses to load.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import re
import sys
import typing
from typing import ClassVar

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .generation import tokenizer_generation_ids
from .heads import HEAD_REGISTRY, check_head_config
from .heads.split import SplitSoftmaxOptions
from .heads.tree import TreeSoftmaxOptions
from .hub.model_card import CardText
from .remote_code import write_model_code
from .tokenization import tokenizer_fingerprint


@functools.cache
def _own_field_types(config_class: type) -> tuple[tuple[dataclasses.Field, object], ...]:
    """The fields a config class adds to ``PreTrainedConfig``, each with its annotation resolved to a type
    (``"int | None"`` -> ``int | None``) in the namespace of the module of the class that declares it (a
    head's options class declares its fields in the head's file)."""
    inherited = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    own = [f for f in dataclasses.fields(config_class) if f.name not in inherited]
    declared_in = {}
    for klass in reversed(config_class.__mro__):  # the last declaration of a field wins, as in dataclasses
        declared_in.update(dict.fromkeys(vars(klass).get("__annotations__", {}), klass.__module__))
    types = []
    for f in own:
        holder = type("Annotations", (), {"__annotations__": {f.name: f.type}})
        hints = typing.get_type_hints(holder, globalns=vars(sys.modules[declared_in[f.name]]))
        types.append((f, hints[f.name]))
    return tuple(types)


@strict
class NLMConfig(PreTrainedConfig, SplitSoftmaxOptions, TreeSoftmaxOptions):
    r"""
    Base class of the hf_nlm model configurations: the fields every body shares. The settings of the split and
    tree heads, which every body can take (`cutoffs`; `tree_num_nodes`, `tree_max_codes`, `tree_max_depth`),
    are declared and documented with those heads, in [`~hf_nlm.heads.split.SplitSoftmaxOptions`] and
    [`~hf_nlm.heads.tree.TreeSoftmaxOptions`], which this class lists among its bases.

    Args:
        vocab_size (`int`, defaults to 10000):
            |V|, the number of token ids.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of the weights (biases start at 0).
        head (`str`, defaults to `"softmax"`):
            The output layer, by its name in `hf_nlm.heads.HEAD_REGISTRY`: `"softmax"` (full softmax),
            `"split"` (split softmax with tombstones over a frequency-sorted vocabulary, needs `cutoffs`) or
            `"tree"` (binary tree softmax: Morin & Bengio 2005, Mnih & Hinton 2008), or any head registered
            with `hf_nlm.heads.register_head`.
        tie_word_embeddings (`bool`, *optional*, defaults to `False`):
            Use the input embedding matrix as the output head's word matrix (softmax and split heads only).
            `None` ties exactly where the head can (its weight is a word matrix): the default of the bodies
            whose papers tie, so that a config built from the defaults is valid with every head.
        use_cache (`bool`, defaults to `False`):
            Whether `generate()` carries a recurrent state between steps (feed-forward models have none).
        bos_token_id, eos_token_id, pad_token_id (`int`, *optional*, default to 1):
            The sentence-boundary / end-of-sentence / padding token (the word-level tokenizers here use one
            `<eos>` for all three). Feed-forward models fill the context before the start of the input with
            `bos_token_id`, as an n-gram model pads with <s>.
        unk_token_id (`int`, *optional*, defaults to 0):
            The unknown-word token (`<unk>`, id 0 in the word-level tokenizers here), which the model's
            generation config suppresses (`suppress_tokens`): it stands for every word outside the vocabulary
            at once, so after many contexts it is the likeliest "word", and it reads as nothing. `None`
            suppresses nothing.
        first_step_suppressed_ids (`list[int]`, *optional*):
            The tokens a continuation may not start with (`begin_suppress_tokens` of the model's generation
            config): the tokenizer's punctuation tokens but the comma
            (`hf_nlm.generation.first_step_suppressed_ids`), so that a prompt that reads as a whole sentence
            is not answered by "." and the end of the text. Set from the tokenizer by
            [`~NLMConfig.from_tokenizer`]; `None` refuses none.
        tokenizer_fingerprint (`str`, *optional*):
            The sha256 of the vocabulary of the tokenizer the model was trained with
            (`hf_nlm.tokenization.tokenizer_fingerprint`), written by `hf-nlm train` and the trainer.
            `hf_nlm.tokenization.check_tokenizer(model, tokenizer)`, which `hf-nlm` runs on every model folder
            it loads, refuses a tokenizer with another; without it, only the vocabulary size and special ids
            are compared. `resize_token_embeddings` clears it.
    """

    #: What the model cards of this model type say about it (title, summary, paper, tags): declared in the
    #: model type's folder (``card.toml``); every card writer reads it from the config it holds
    #: (:mod:`hf_nlm.hub.model_card`).
    card_text: ClassVar[CardText | None] = None

    vocab_size: int = 10000
    initializer_range: float = 0.1
    # A `str` checked against the head registry rather than a Literal: registering a head (one class and
    # one line) must make it usable here without editing this file.
    head: str = "softmax"
    tie_word_embeddings: bool | None = False
    use_cache: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 1
    pad_token_id: int | None = 1
    unk_token_id: int | None = 0
    first_step_suppressed_ids: list[int] | None = None
    tokenizer_fingerprint: str | None = None

    def __post_init__(self, **kwargs):
        if self.tie_word_embeddings is None and self.head in HEAD_REGISTRY:
            self.tie_word_embeddings = HEAD_REGISTRY[self.head].tieable
        super().__post_init__(**kwargs)
        # @strict runs the validators after __init__ too, but wraps their errors in its own exception
        # type; running them here first gives the user the plain ValueError that names the field.
        self.check()

    @classmethod
    def from_tokenizer(cls, tokenizer, **fields):
        """A config for a model over ``tokenizer``'s vocabulary: its size, its special token ids (bos and pad
        are the eos token where the tokenizer has none, as the word-level tokenizers here use one `<eos>` for
        all three), the ids the generation settings name (``unk_token_id``, ``first_step_suppressed_ids``)
        and its fingerprint; ``fields`` set the rest (and may override any of these)."""
        eos = tokenizer.eos_token_id
        derived = {
            "vocab_size": len(tokenizer),
            "bos_token_id": tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos,
            "eos_token_id": eos,
            "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
            **tokenizer_generation_ids(tokenizer),
            "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        }
        return cls(**{**derived, **fields})

    @classmethod
    def field_type_error(cls, values: dict) -> str | None:
        """What is wrong with the types of ``values`` (a config dict) for this config's own fields, or None:
        e.g. ``field 'hidden_size' must be int, got 'abc'``. An integer passes where a float is expected."""
        from huggingface_hub.dataclasses import type_validator

        for f, expected in _own_field_types(cls):
            if f.name not in values:
                continue
            name, value = f.name, values[f.name]
            if isinstance(value, int) and not isinstance(value, bool) and "float" in str(expected):
                continue
            try:
                type_validator(name, value, expected)
            except TypeError:
                return f"field {name!r} must be {str(f.type).replace(' | ', ' or ')}, got {value!r}"
        return None

    def check(self) -> None:
        """Run this config's ``validate_*`` checks, the base classes' first; raise the first ``ValueError``.

        (``@strict`` runs them in alphabetical order; base-first means a body check can rely on the
        shared fields being sound.)"""
        wrong = type(self).field_type_error({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        if wrong:  # before the checks that compare values, which would fail on a wrong type less clearly
            raise ValueError(f"{type(self).__name__}: {wrong}")
        names: dict[str, None] = {}
        for klass in reversed(type(self).__mro__):
            names.update((n, None) for n in vars(klass)
                         if n.startswith("validate_") and callable(vars(klass)[n]))
        for name in names:
            getattr(self, name)()

    def check_savable(self, save_directory: str | os.PathLike) -> None:
        """:meth:`check`, its error saying that nothing is saved to ``save_directory`` and why."""
        try:
            self.check()
        except ValueError as err:
            raise ValueError(
                f"not saving {type(self).__name__} to {save_directory}: it would not load back. {err}"
            ) from None

    def save_pretrained(self, save_directory: str | os.PathLike, push_to_hub: bool = False, **kwargs):
        """transformers' ``save_pretrained``, refusing a config that would not load back, and writing the
        ``auto_map`` and the code file that let the folder load without ``import hf_nlm``
        (``trust_remote_code=True``: :mod:`hf_nlm.remote_code`). The code file is written first, so that
        ``push_to_hub=True`` uploads it with ``config.json``."""
        self.check_savable(save_directory)
        auto_map = None if os.path.isfile(save_directory) else write_model_code(save_directory, type(self))
        if auto_map is not None:  # (transformers refuses a file as the folder with its own message)
            self.auto_map = auto_map
        return super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)

    @classmethod
    def register_for_auto_class(cls, auto_class="AutoConfig"):
        """Nothing: :meth:`save_pretrained` writes this package's auto_map itself. transformers calls this on
        a class it loaded as remote code; its own version would make every later save copy the defining
        module, whose relative imports of the rest of the package do not load from a model folder."""

    # --------------------------------------------------------------- checks (run at construction and at save)
    def validate_vocab_size(self):
        if self.vocab_size < 2:
            raise ValueError(f"{type(self).__name__}.vocab_size must be >= 2, got {self.vocab_size}")

    def validate_initializer_range(self):
        if not 0 <= self.initializer_range <= 3.4e38:  # the weights are float32
            raise ValueError(
                f"{type(self).__name__}.initializer_range must be a number from 0 to 3.4e38 (float32), got "
                f"{self.initializer_range}"
            )

    def validate_head(self):
        check_head_config(self, type(self).__name__)

    def validate_generation_ids(self):
        # The generation config names these ids; one past the vocabulary would fail inside generate().
        ids = [self.unk_token_id] if self.unk_token_id is not None else []
        wrong = [i for i in ids + list(self.first_step_suppressed_ids or []) if not 0 <= i < self.vocab_size]
        if wrong:
            raise ValueError(f"{type(self).__name__}: unk_token_id and first_step_suppressed_ids must be "
                             f"token ids below vocab_size ({self.vocab_size}), got {wrong}")

    def require_positive(self, *names: str, what: dict[str, str] | None = None) -> None:
        """Raise ``ValueError`` unless every field in ``names`` is >= 1 (``what`` glosses a name)."""
        what = what or {}
        for name in names:
            value = getattr(self, name)
            if value < 1:
                gloss = f" ({what[name]})" if name in what else ""
                raise ValueError(f"{type(self).__name__}.{name}{gloss} must be >= 1, got {value}")

    def require_dropout(self, *names: str) -> None:
        """Raise ``ValueError`` unless every field in ``names`` is a dropout probability in [0, 1)."""
        for name in names:
            p = getattr(self, name)
            # p = 1 would drop everything and the 1 / (1 - p) rescaling would divide by zero.
            if not 0.0 <= p < 1.0:
                raise ValueError(
                    f"{type(self).__name__}.{name} is a dropout probability and must be in [0, 1), got {p}"
                )


_ARG_LINE = re.compile(r"^(?P<names>\w+(?:, \w+)*) \((?P<kind>[^)]*)\):$")


def config_field_docs(config_class: type) -> dict[str, str]:
    """Each field's description from the ``Args:`` sections of ``config_class``'s docstrings (its own
    first, then its bases'), as one line: what the CLI shows as a flag's help."""
    docs: dict[str, str] = {}
    for klass in config_class.__mro__:
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        if "Args:" not in doc:
            continue
        names, lines = None, []
        for line in doc.split("Args:", 1)[1].splitlines() + [""]:
            match = (_ARG_LINE.match(line.strip())
                     if line.startswith("    ") and not line.startswith("     ") else None)
            if match or not line.strip():
                for name in names or []:
                    docs.setdefault(name, " ".join(lines))
                names, lines = (match["names"].split(", "), []) if match else (None, [])
            elif names is not None:
                lines.append(line.strip())
    return docs


__all__ = ["NLMConfig", "config_field_docs"]
