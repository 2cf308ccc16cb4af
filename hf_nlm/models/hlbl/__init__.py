from .configuration_hlbl import HLBLConfig
from .modeling_hlbl import HLBLForCausalLM, HLBLModel

__all__ = ["HLBLConfig", "HLBLForCausalLM", "HLBLModel"]
