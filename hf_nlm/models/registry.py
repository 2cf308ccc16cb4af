"""What an architecture declares to be registered: its :class:`ModelType` (config, body and language model
classes), and the registration of every type with the transformers Auto classes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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
        return tuple(c for c in (self.config_class, self.base_model_class, self.causal_lm_class, self.seq2seq_lm_class) if c)


def register_auto_classes(model_types: Iterable[ModelType]) -> None:
    """Register each model type with ``AutoConfig``, ``AutoModel`` and its LM's Auto class, so that
    ``from_pretrained`` / ``pipeline`` load them without ``trust_remote_code``."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    for t in model_types:
        AutoConfig.register(t.name, t.config_class, exist_ok=True)
        AutoModel.register(t.config_class, t.base_model_class, exist_ok=True)
        if t.causal_lm_class is not None:
            AutoModelForCausalLM.register(t.config_class, t.causal_lm_class, exist_ok=True)
        if t.seq2seq_lm_class is not None:
            AutoModelForSeq2SeqLM.register(t.config_class, t.seq2seq_lm_class, exist_ok=True)
        if t.tokenizer_class is not None:
            AutoTokenizer.register(t.config_class, tokenizer_class=t.tokenizer_class, exist_ok=True)
