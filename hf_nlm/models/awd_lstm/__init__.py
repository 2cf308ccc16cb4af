from ..registry import ROCSTORIES_SPLIT, ROCSTORIES_TOKENIZER, ROCSTORIES_TRAINING, ModelType, TrainingRecipe
from .configuration_awd_lstm import AWDLSTMConfig
from .modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel

#: Merity et al.'s (2018, sec. 3-5) optimizer on Penn Treebank: SGD at lr 30, weight decay 1.2e-6, clipping
#: 0.25, batches of 20 columns read in BPTT chunks of 70.
MERITY_OPTIMIZER = {"optimizer": "sgd", "learning_rate": 30.0, "lr_scheduler": "constant",
                    "weight_decay": 1.2e-6, "max_grad_norm": 0.25, "block_size": 70, "batch_size": 20,
                    "eval_batch_size": 10}

RECIPES = {
    "default": TrainingRecipe(
        "learns from a text of about a million words in minutes on a CPU: the paper's optimizer (SGD at "
        "lr 30, clipping 0.25, weight decay 1.2e-6, BPTT 70; Adam leaves the LSTM at the unigram plateau for "
        "longer) on a CPU-sized network (2 layers, embedding 200, hidden 400, tied) with a quarter of the "
        "paper's dropouts and weight drop and no AR / TAR, batch 20, and words seen once merged into <unk> "
        "so that <unk> is trained",
        training={**MERITY_OPTIMIZER, "early_stopping_patience": 2, "max_time_within_epoch": True},
        model={"num_hidden_layers": 2, "embedding_size": 200, "hidden_size": 400, "dropout": 0.1,
               "dropout_hidden": 0.0625, "dropout_input": 0.1, "dropout_embedding": 0.025,
               "weight_drop": 0.125, "alpha": 0.0, "beta": 0.0},
        tokenizer={"min_frequency": 2},
    ),
    "merity2018": TrainingRecipe(
        "Merity et al. 2018, sec. 3-5, Penn Treebank: SGD at lr 30, weight decay 1.2e-6, clipping 0.25, "
        "batch 20, variable-length BPTT around 70, NT-ASGD with n = 5, 500 epochs and no early stopping; the "
        "network of AWDLSTMConfig's defaults (3 layers, 400 / 1150 / 400, tied) with the paper's Penn "
        "Treebank dropouts",
        training={**MERITY_OPTIMIZER, "variable_bptt": True, "nt_asgd": True, "nonmono": 5, "num_epochs": 500,
                  "early_stopping_patience": None},
        model={"dropout": 0.4, "dropout_hidden": 0.25, "dropout_input": 0.4, "dropout_embedding": 0.1,
               "weight_drop": 0.5},
        tokenizer={"min_frequency": 1},
    ),
    # Yao et al. report no perplexity of their LM on their split, so no paper figure is set.
    "rocstories-lm": TrainingRecipe(
        "Yao et al. 2019 (Plan-and-Write), the LM approach on ROCStories: one AWD-LSTM over 'title <sep> k1 "
        "# k2 # ... <sep> story' (storylines of one RAKE keyword phrase per sentence) that serves both "
        "stages; Merity et al. 2018's network (3 layers, embedding 400, hidden 1150) with their WikiText-2 "
        "dropouts, trained with Adam (Kingma & Ba 2015) at 1e-3, 32 x 70-token blocks, 20 epochs with early "
        "stopping, seed 0; the 15,000 most frequent words; stories split 90 / 5 / 5 %",
        training=ROCSTORIES_TRAINING,
        model={"num_hidden_layers": 3, "embedding_size": 400, "hidden_size": 1150, "dropout": 0.4,
               "dropout_hidden": 0.3, "dropout_input": 0.65, "dropout_embedding": 0.1, "weight_drop": 0.5},
        tokenizer=ROCSTORIES_TOKENIZER,
        data={"corpus": "rocstories", "split_fractions": ROCSTORIES_SPLIT},
    ),
    "brown-keywords-lm": TrainingRecipe(
        "benchmarks/story_brown.py's lm row: Yao et al. 2019's LM approach on Brown sentences, an AWD-LSTM "
        "over 'keywords <sep> sentence' lines (the text the script writes), 2 layers of 256 units, dropouts "
        "0.2 / 0.2 / 0.2, embedding dropout 0.05, weight drop 0.2; Adam (Kingma & Ba 2015) at 2e-3, batch 64 "
        "of 50-token blocks, 20 epochs with early stopping, seed 0; the 10,000 most frequent words",
        training={"optimizer": "adam", "learning_rate": 2e-3, "lr_scheduler": "constant",
                  "weight_decay": 1e-4, "max_grad_norm": 1.0, "batch_size": 64, "eval_batch_size": 64,
                  "block_size": 50, "num_epochs": 20, "early_stopping_patience": 2, "logging_steps": 200,
                  "save_total_limit": 1, "eval_test": False, "seed": 0},
        model={"num_hidden_layers": 2, "embedding_size": 256, "hidden_size": 256, "dropout": 0.2,
               "dropout_hidden": 0.2, "dropout_input": 0.2, "dropout_embedding": 0.05, "weight_drop": 0.2},
        tokenizer={"vocab_size": 10000, "min_frequency": 1, "split_punctuation": False},
    ),
}

MODEL_TYPE = ModelType(AWDLSTMConfig, AWDLSTMModel, causal_lm_class=AWDLSTMForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "AWDLSTMConfig", "AWDLSTMForCausalLM", "AWDLSTMModel", "AWDLSTMPreTrainedModel"]
