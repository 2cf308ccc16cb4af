from .configuration_nplm import NPLMConfig
from .modeling_nplm import NPLMForCausalLM, NPLMModel, NPLMPreTrainedModel

__all__ = ["NPLMConfig", "NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
