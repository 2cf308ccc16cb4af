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
        "20 epochs with early stopping, random seed `0`; the 15,000 most frequent words; stories split "
        "90 / 5 / 5 %",
        training=ROCSTORIES_TRAINING,
        model=ROCSTORIES_NETWORK,
        tokenizer=ROCSTORIES_TOKENIZER,
        data={"corpus": "rocstories", "story_stage": stage, "split_fractions": ROCSTORIES_SPLIT},
    )


#: What the rows of ``benchmarks/story_reverse.py`` train with (reversing 10-30 random symbols, the pairs
#: written by the script): 128 units, no dropout, Adam (Kingma & Ba 2015) at 3e-3 held constant, clipping
#: 1.0, batches of 64, 12 epochs, random seed `0`.
REVERSAL_TRAINING = {"optimizer": "adam", "learning_rate": 3e-3, "lr_scheduler": "constant",
                     "weight_decay": 1e-4, "max_grad_norm": 1.0, "batch_size": 64, "eval_batch_size": 100,
                     "num_epochs": 12, "logging_steps": 100, "save_total_limit": 1, "eval_test": False,
                     "seed": 0}

#: What the seq2seq rows of ``benchmarks/story_brown.py`` train with (Brown sentences from their RAKE
#: keywords, the pairs written by the script): 256 units, dropout 0.2, targets cut at 40 tokens, Adam at 2e-3
#: held constant, clipping 1.0, batches of 64, 20 epochs with early stopping after 2, random seed `0`; the
#: 10,000 most frequent words.
BROWN_KEYWORDS_TRAINING = {"optimizer": "adam", "learning_rate": 2e-3, "lr_scheduler": "constant",
                           "weight_decay": 1e-4, "max_grad_norm": 1.0, "batch_size": 64,
                           "eval_batch_size": 64, "num_epochs": 20, "early_stopping_patience": 2,
                           "logging_steps": 200, "save_total_limit": 1, "eval_test": False, "seed": 0}


def reversal_recipe(attention: str) -> TrainingRecipe:
    """A row of ``benchmarks/story_reverse.py``: does attention (Bahdanau et al. 2015; Luong et al. 2015)
    let the decoder read the source position it needs?"""
    return TrainingRecipe(
        f"benchmarks/story_reverse.py's {attention} row: reversing 10-30 random symbols (pairs the script "
        f"writes), attention {attention} (Luong et al. 2015), embedding = hidden = 128, no dropout; Adam "
        "(Kingma & Ba 2015) at 3e-3, batch 64, 12 epochs, random seed `0`",
        training=REVERSAL_TRAINING,
        model={"embedding_size": 128, "hidden_size": 128, "attention": attention, "dropout": 0.0},
        tokenizer={"min_frequency": 1, "split_punctuation": False},
    )


def brown_keywords_recipe(attention: str) -> TrainingRecipe:
    """A seq2seq row of ``benchmarks/story_brown.py``: Yao et al.'s (2019) storyline -> story step on Brown
    sentences, keywords -> sentence."""
    return TrainingRecipe(
        f"benchmarks/story_brown.py's seq2seq row with attention {attention} (Luong et al. 2015): the top 3 "
        "RAKE phrases of a Brown sentence -> the sentence (pairs the script writes; Yao et al. 2019's "
        "storyline -> story step), embedding = hidden = 256, dropout 0.2, targets cut at 40 tokens; Adam "
        "(Kingma & Ba 2015) at 2e-3, batch 64, 20 epochs with early stopping, random seed `0`; the 10,000 "
        "most frequent words",
        training={**BROWN_KEYWORDS_TRAINING, "max_target_length": 40},
        model={"embedding_size": 256, "hidden_size": 256, "attention": attention, "dropout": 0.2},
        tokenizer={"vocab_size": 10000, "min_frequency": 1, "split_punctuation": False},
    )


RECIPES = {
    "default": ADAM_DEFAULT,
    "sgd": PLAIN_SGD,
    # Yao et al. report no perplexity of either stage on their split, so no paper figure is set.
    "rocstories-storyline": rocstories_stage_recipe("storyline", "title -> storyline"),
    "rocstories-story": rocstories_stage_recipe("story", "'title <sep> storyline' -> story"),
    "reversal-attention": reversal_recipe("general"),
    "reversal-none": reversal_recipe("none"),
    "brown-keywords-seq2seq": brown_keywords_recipe("general"),
    "brown-keywords-seq2seq-none": brown_keywords_recipe("none"),
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
