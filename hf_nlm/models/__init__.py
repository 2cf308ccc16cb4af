"""One folder per architecture, transformers-style (configuration_x.py + modeling_x.py)."""

from .nplm import NPLMConfig, NPLMForCausalLM, NPLMModel

__all__ = ["NPLMConfig", "NPLMForCausalLM", "NPLMModel"]
