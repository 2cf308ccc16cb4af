from ...tokenization.numerals import NumeracyTokenizerFast
from ..registry import ModelType
from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

MODEL_TYPE = ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                        tokenizer_class=NumeracyTokenizerFast)

__all__ = ["MODEL_TYPE", "NumeracyLMConfig", "NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel"]
