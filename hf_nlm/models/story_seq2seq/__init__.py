from .configuration_story_seq2seq import ATTENTION_TYPES, StorySeq2SeqConfig
from .modeling_story_seq2seq import (
    StorySeq2SeqForConditionalGeneration,
    StorySeq2SeqModel,
    StorySeq2SeqPreTrainedModel,
    shift_tokens_right,
)

__all__ = [
    "ATTENTION_TYPES",
    "StorySeq2SeqConfig",
    "StorySeq2SeqForConditionalGeneration",
    "StorySeq2SeqModel",
    "StorySeq2SeqPreTrainedModel",
    "shift_tokens_right",
]
