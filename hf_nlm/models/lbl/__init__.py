from ..registry import ModelType
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM)

__all__ = ["MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
