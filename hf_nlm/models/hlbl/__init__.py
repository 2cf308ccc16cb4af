from ..registry import FEED_FORWARD_DEFAULT, PLAIN_SGD, ModelType, TrainingRecipe
from .configuration_hlbl import HLBLConfig
from .modeling_hlbl import HLBLForCausalLM, HLBLModel

RECIPES = {
    "default": TrainingRecipe(
        "learns from a text of about a million words in minutes on a CPU: Adam (Kingma & Ba 2015) at a "
        "constant rate, feature vectors of D = 100 (Mnih & Hinton 2008's size) over the tree --tree gives "
        "(random unless set), and words seen once merged into <unk> so that <unk> is trained",
        training={**FEED_FORWARD_DEFAULT, "learning_rate": 1e-3, "batch_size": 32},
        tokenizer={"min_frequency": 2},
    ),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(HLBLConfig, HLBLModel, causal_lm_class=HLBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "HLBLConfig", "HLBLForCausalLM", "HLBLModel"]
