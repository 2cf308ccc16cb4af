from ..registry import (
    ADAM_DEFAULT,
    PLAIN_SGD,
    ROCSTORIES_SPLIT,
    ROCSTORIES_TOKENIZER,
    ROCSTORIES_TRAINING,
    ModelType,
    TrainingRecipe,
)
from .configuration_story_seq2seq import ATTENTION_TYPES, StorySeq2SeqConfig
from .modeling_story_seq2seq import (
    StorySeq2SeqForConditionalGeneration,
    StorySeq2SeqModel,
    StorySeq2SeqPreTrainedModel,
    shift_tokens_right,
)

#: The network of the seq2seq approach on ROCStories (``examples/train_story.py --preset rocstories``): one
#: encoder and one decoder LSTM layer of 512 units over 512-dimensional embeddings, dropout 0.2, general
#: (multiplicative) attention (Luong et al. 2015).
ROCSTORIES_NETWORK = {"embedding_size": 512, "hidden_size": 512, "encoder_layers": 1, "decoder_layers": 1,
                      "dropout": 0.2, "attention": "general"}


def rocstories_stage_recipe(stage: str, what: str) -> TrainingRecipe:
    """The recipe of one stage of Yao et al.'s (2019) seq2seq approach on ROCStories: ``stage`` is the
    ``--story-stage`` whose (source, target) pairs the corpus gives, ``what`` says what they are."""
    return TrainingRecipe(
        f"Yao et al. 2019 (Plan-and-Write), the seq2seq approach's {stage} stage on ROCStories: {what}, "
        "storylines of one RAKE keyword phrase per sentence; an attention encoder-decoder (Luong et al. "
        "2015, general attention) of 512 units, dropout 0.2; Adam (Kingma & Ba 2015) at 1e-3, batch 32, "
        "20 epochs with early stopping, seed 0; the 15,000 most frequent words; stories split 90 / 5 / 5 %",
        training=ROCSTORIES_TRAINING,
        model=ROCSTORIES_NETWORK,
        tokenizer=ROCSTORIES_TOKENIZER,
        data={"corpus": "rocstories", "story_stage": stage, "split_fractions": ROCSTORIES_SPLIT},
    )


RECIPES = {
    "default": ADAM_DEFAULT,
    "sgd": PLAIN_SGD,
    # Yao et al. report no perplexity of either stage on their split, so no paper figure is set.
    "rocstories-storyline": rocstories_stage_recipe("storyline", "title -> storyline"),
    "rocstories-story": rocstories_stage_recipe("story", "'title <sep> storyline' -> story"),
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
