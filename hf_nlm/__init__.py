"""hf_nlm: classic neural language models as ordinary Hugging Face transformers models.

Importing the package registers every model with the transformers Auto classes, so that
``AutoConfig`` / ``AutoModelForCausalLM`` / ``pipeline("text-generation")`` load them without
``trust_remote_code``.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .models import (
    AWDLSTMConfig,
    AWDLSTMForCausalLM,
    AWDLSTMModel,
    HLBLConfig,
    HLBLForCausalLM,
    HLBLModel,
    LBLConfig,
    LBLForCausalLM,
    LBLModel,
    NPLMConfig,
    NPLMForCausalLM,
    NPLMModel,
)

__version__ = "0.1.0.dev0"


def _register() -> None:
    for config_class, base_class, lm_class in [
        (NPLMConfig, NPLMModel, NPLMForCausalLM),
        (LBLConfig, LBLModel, LBLForCausalLM),
        (HLBLConfig, HLBLModel, HLBLForCausalLM),
        (AWDLSTMConfig, AWDLSTMModel, AWDLSTMForCausalLM),
    ]:
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, base_class, exist_ok=True)
        AutoModelForCausalLM.register(config_class, lm_class, exist_ok=True)


_register()

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
    "__version__",
]
