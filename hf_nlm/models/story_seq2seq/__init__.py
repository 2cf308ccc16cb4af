from ..registry import ADAM_DEFAULT, PLAIN_SGD, ModelType
from .configuration_story_seq2seq import ATTENTION_TYPES, StorySeq2SeqConfig
from .modeling_story_seq2seq import (
    StorySeq2SeqForConditionalGeneration,
    StorySeq2SeqModel,
    StorySeq2SeqPreTrainedModel,
    shift_tokens_right,
)

RECIPES = {
    "default": ADAM_DEFAULT,
    "sgd": PLAIN_SGD,
}

MODEL_TYPE = ModelType(StorySeq2SeqConfig, StorySeq2SeqModel,
                       seq2seq_lm_class=StorySeq2SeqForConditionalGeneration, recipes=RECIPES)

__all__ = ["MODEL_TYPE",
    "ATTENTION_TYPES",
    "StorySeq2SeqConfig",
    "StorySeq2SeqForConditionalGeneration",
    "StorySeq2SeqModel",
    "StorySeq2SeqPreTrainedModel",
    "shift_tokens_right",
]
