"""One folder per architecture, transformers-style (configuration_x.py + modeling_x.py)."""

from .awd_lstm import AWDLSTMConfig, AWDLSTMForCausalLM, AWDLSTMModel
from .hlbl import HLBLConfig, HLBLForCausalLM, HLBLModel
from .lbl import LBLConfig, LBLForCausalLM, LBLModel
from .nplm import NPLMConfig, NPLMForCausalLM, NPLMModel

__all__ = [
    "AWDLSTMConfig",
    "AWDLSTMForCausalLM",
    "AWDLSTMModel",
    "HLBLConfig",
    "HLBLForCausalLM",
    "HLBLModel",
    "LBLConfig",
    "LBLForCausalLM",
    "LBLModel",
    "NPLMConfig",
    "NPLMForCausalLM",
    "NPLMModel",
]
