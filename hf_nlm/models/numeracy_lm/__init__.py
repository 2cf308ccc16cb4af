from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

__all__ = ["NumeracyLMConfig", "NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel"]
