from ..registry import ModelType
from .configuration_nplm import NPLMConfig
from .modeling_nplm import NPLMForCausalLM, NPLMModel, NPLMPreTrainedModel

MODEL_TYPE = ModelType(NPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM)

__all__ = ["MODEL_TYPE", "NPLMConfig", "NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
