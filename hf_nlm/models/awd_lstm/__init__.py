from ..registry import ModelType
from .configuration_awd_lstm import AWDLSTMConfig
from .modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel

MODEL_TYPE = ModelType(AWDLSTMConfig, AWDLSTMModel, causal_lm_class=AWDLSTMForCausalLM)

__all__ = ["MODEL_TYPE", "AWDLSTMConfig", "AWDLSTMForCausalLM", "AWDLSTMModel", "AWDLSTMPreTrainedModel"]
