from .configuration_awd_lstm import AWDLSTMConfig
from .modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel

__all__ = ["AWDLSTMConfig", "AWDLSTMForCausalLM", "AWDLSTMModel", "AWDLSTMPreTrainedModel"]
