from ...tokenization.numerals import NumeracyTokenizerFast
from ..registry import ADAM_DEFAULT, PLAIN_SGD, ModelType
from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

RECIPES = {
    "default": ADAM_DEFAULT,
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                        tokenizer_class=NumeracyTokenizerFast, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NumeracyLMConfig", "NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel"]
