from dataclasses import replace

from ...tokenization.numerals import NumeracyTokenizerFast
from ..registry import ADAM_DEFAULT, PLAIN_SGD, ModelType
from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

RECIPES = {
    # The paper's top-K vocabulary (Spithourakis & Riedel 2018 keep 5,000 tokens of arXiv abstracts): a
    # softmax over every word and numeral of a number-rich text is tens of thousands wide, and most of them
    # are seen once.
    "default": replace(ADAM_DEFAULT, tokenizer={"vocab_size": 5000}),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                       tokenizer_class=NumeracyTokenizerFast, default_tokenizer="numeracy", recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NumeracyLMConfig", "NumeracyLMForCausalLM", "NumeracyLMModel",
           "NumeracyLMPreTrainedModel"]
