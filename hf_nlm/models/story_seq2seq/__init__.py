from ..registry import ADAM_CONSTANT, PLAIN_SGD, ModelType, TrainingRecipe
from .configuration_story_seq2seq import ATTENTION_TYPES, StorySeq2SeqConfig
from .modeling_story_seq2seq import (
    StorySeq2SeqForConditionalGeneration,
    StorySeq2SeqModel,
    StorySeq2SeqPreTrainedModel,
    shift_tokens_right,
)

RECIPES = {
    "default": TrainingRecipe(
        "Adam (Kingma & Ba 2015) at a constant rate with clipping, the network of StorySeq2SeqConfig's defaults",
        training={**ADAM_CONSTANT, "learning_rate": 1e-3, "max_grad_norm": 1.0},
    ),
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(StorySeq2SeqConfig, StorySeq2SeqModel, seq2seq_lm_class=StorySeq2SeqForConditionalGeneration,
                       recipes=RECIPES)

__all__ = ["MODEL_TYPE",
    "ATTENTION_TYPES",
    "StorySeq2SeqConfig",
    "StorySeq2SeqForConditionalGeneration",
    "StorySeq2SeqModel",
    "StorySeq2SeqPreTrainedModel",
    "shift_tokens_right",
]
