from ..registry import FEED_FORWARD_DEFAULT, PLAIN_SGD, ModelType, TrainingRecipe
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

RECIPES = {
    "default": TrainingRecipe(
        "learns from a text of about a million words in minutes on a CPU: Adam (Kingma & Ba 2015) at a "
        "constant rate, feature vectors of D = 100 (Mnih & Hinton 2008's size), and words seen once merged "
        "into <unk> so that <unk> is trained",
        training={**FEED_FORWARD_DEFAULT, "learning_rate": 5e-3, "batch_size": 16},
        tokenizer={"min_frequency": 2},
    ),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel"]
