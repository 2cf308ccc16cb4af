"""One folder per architecture, transformers-style (configuration_x.py + modeling_x.py), and the one
list of model types: :data:`MODEL_TYPES`. ``import hf_nlm`` registers each with the Auto classes
(:func:`register_auto_classes`) and the ``hf-nlm`` command builds its ``--model`` choices and model
flags from it, so a new architecture is a folder and one line here."""

from __future__ import annotations

from dataclasses import dataclass

from ..tokenization.numerals import NumeracyTokenizerFast
from .awd_lstm import AWDLSTMConfig, AWDLSTMForCausalLM, AWDLSTMModel
from .hlbl import HLBLConfig, HLBLForCausalLM, HLBLModel
from .lbl import LBLConfig, LBLForCausalLM, LBLModel
from .nplm import NPLMConfig, NPLMForCausalLM, NPLMModel
from .numeracy_lm import NumeracyLMConfig, NumeracyLMForCausalLM, NumeracyLMModel
from .story_seq2seq import StorySeq2SeqConfig, StorySeq2SeqForConditionalGeneration, StorySeq2SeqModel


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


MODEL_TYPES: dict[str, ModelType] = {
    t.name: t
    for t in (
        ModelType(NPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM),
        ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM),
        ModelType(HLBLConfig, HLBLModel, causal_lm_class=HLBLForCausalLM),
        ModelType(AWDLSTMConfig, AWDLSTMModel, causal_lm_class=AWDLSTMForCausalLM),
        ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                  tokenizer_class=NumeracyTokenizerFast),
        ModelType(StorySeq2SeqConfig, StorySeq2SeqModel, seq2seq_lm_class=StorySeq2SeqForConditionalGeneration),
    )
}


def register_auto_classes() -> None:
    """Register every model type with ``AutoConfig``, ``AutoModel`` and its LM's Auto class, so that
    ``from_pretrained`` / ``pipeline`` load them without ``trust_remote_code``."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    for t in MODEL_TYPES.values():
        AutoConfig.register(t.name, t.config_class, exist_ok=True)
        AutoModel.register(t.config_class, t.base_model_class, exist_ok=True)
        if t.causal_lm_class is not None:
            AutoModelForCausalLM.register(t.config_class, t.causal_lm_class, exist_ok=True)
        if t.seq2seq_lm_class is not None:
            AutoModelForSeq2SeqLM.register(t.config_class, t.seq2seq_lm_class, exist_ok=True)
        if t.tokenizer_class is not None:
            AutoTokenizer.register(t.config_class, tokenizer_class=t.tokenizer_class, exist_ok=True)


__all__ = ["MODEL_TYPES", "ModelType", "register_auto_classes", *sorted(c.__name__ for t in MODEL_TYPES.values() for c in t.classes)]
