from ..registry import PLAIN_SGD, ModelType, defaults_table_recipes, feed_forward_recipe
from .configuration_hlbl import HLBLConfig
from .modeling_hlbl import HLBLForCausalLM, HLBLModel

RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size) over the tree "
                                   "--tree gives (random unless set)", 1e-3, 32),
    "sgd": PLAIN_SGD,
}

RECIPES.update(defaults_table_recipes("hlbl", RECIPES["default"], ptb=8, sotu=4))

MODEL_TYPE = ModelType(HLBLConfig, HLBLModel, causal_lm_class=HLBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "HLBLConfig", "HLBLForCausalLM", "HLBLModel"]
