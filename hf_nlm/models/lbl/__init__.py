from ..registry import PLAIN_SGD, ModelType, defaults_table_recipes, feed_forward_recipe
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size)", 5e-3, 16),
    "sgd": PLAIN_SGD,
}

RECIPES.update(defaults_table_recipes("lbl", RECIPES["default"], ptb=3, sotu=1))

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
