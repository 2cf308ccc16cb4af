from ..registry import ModelType
from .configuration_hlbl import HLBLConfig
from .modeling_hlbl import HLBLForCausalLM, HLBLModel

MODEL_TYPE = ModelType(HLBLConfig, HLBLModel, causal_lm_class=HLBLForCausalLM)

__all__ = ["MODEL_TYPE", "HLBLConfig", "HLBLForCausalLM", "HLBLModel"]
