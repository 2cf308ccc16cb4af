from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

__all__ = ["LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
