from ...tokenization.numerals import NumeracyTokenizerFast
from ..registry import ADAM_CONSTANT, PLAIN_SGD, ModelType, TrainingRecipe
from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

RECIPES = {
    "default": TrainingRecipe(
        "Adam (Kingma & Ba 2015) at a constant rate with clipping, the network of NumeracyLMConfig's defaults",
        training={**ADAM_CONSTANT, "learning_rate": 1e-3, "max_grad_norm": 1.0},
    ),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                        tokenizer_class=NumeracyTokenizerFast, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NumeracyLMConfig", "NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel"]
