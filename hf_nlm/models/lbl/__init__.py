from ..registry import PLAIN_SGD, ModelType, feed_forward_recipe
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size)", 5e-3, 16),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
