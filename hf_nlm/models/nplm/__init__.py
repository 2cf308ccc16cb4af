from ..registry import FEED_FORWARD_DEFAULT, ModelType, TrainingRecipe
from .configuration_nplm import NPLMConfig
from .modeling_nplm import NPLMForCausalLM, NPLMModel, NPLMPreTrainedModel

RECIPES = {
    "default": TrainingRecipe(
        "learns from a text of about a million words in minutes on a CPU: Adam (Kingma & Ba 2015) at a "
        "constant rate, m = 100 and h = 100 without direct connections (the softmax over h units is the cost "
        "of a step), light dropout, and words seen once merged into <unk> so that <unk> is trained",
        training={**FEED_FORWARD_DEFAULT, "learning_rate": 5e-3, "batch_size": 16},
        model={"embedding_size": 100, "hidden_size": 100, "direct_connections": False, "dropout": 0.1},
        tokenizer={"min_frequency": 2},
    ),
    "bengio2003": TrainingRecipe(
        "Bengio et al. 2003, sec. 4 (Brown): plain SGD with eps_t = eps_0 / (1 + r t), r = 1e-8, weight "
        "decay 1e-4 on the weights, words of frequency <= 3 merged; eps_0 = 0.1 for a step on a batch's mean "
        "loss (the paper's 1e-3 is per example); the network of NPLMConfig's defaults (n = 5, m = 60, "
        "h = 50, direct connections)",
        training={"optimizer": "sgd", "learning_rate": 0.1, "lr_scheduler": "bengio", "lr_decay": 1e-8,
                  "weight_decay": 1e-4},
        tokenizer={"min_frequency": 4},
    ),
}

MODEL_TYPE = ModelType(NPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NPLMConfig", "NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
