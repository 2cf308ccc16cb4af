from ..registry import (
    ROCSTORIES_SPLIT,
    ROCSTORIES_TOKENIZER,
    ROCSTORIES_TRAINING,
    ModelType,
    TrainingRecipe,
    defaults_table_recipes,
)
from .configuration_awd_lstm import AWDLSTMConfig
from .modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel

#: Merity et al.'s (2018, sec. 3-5) optimizer on Penn Treebank: SGD at lr 30, weight decay 1.2e-6, clipping
#: 0.25, batches of 20 columns read in BPTT chunks of 70.
MERITY_OPTIMIZER = {"optimizer": "sgd", "learning_rate": 30.0, "lr_scheduler": "constant",
                    "weight_decay": 1.2e-6, "max_grad_norm": 0.25, "block_size": 70, "batch_size": 20,
                    "eval_batch_size": 10}

#: The CPU-sized network of ``benchmarks/ptb_awd.py``'s Penn Treebank tables: 2 layers, embedding 200, hidden
#: 400, tied.
CPU_NETWORK = {"num_hidden_layers": 2, "embedding_size": 200, "hidden_size": 400}
#: Merity et al.'s (2018, sec. 4-5) Penn Treebank regularisers: weight drop 0.5, locked dropout 0.4 on the
#: outputs, 0.25 between layers, 0.4 on the inputs, embedding dropout 0.1, AR 2 and TAR 1.
PTB_REGULARISATION = {"dropout": 0.4, "dropout_hidden": 0.25, "dropout_input": 0.4, "dropout_embedding": 0.1,
                      "weight_drop": 0.5, "alpha": 2.0, "beta": 1.0}
#: The training of the Penn Treebank table's rows: the paper's optimizer, variable BPTT around 70, no early
#: stopping (the best validated epoch is kept), random seed `0`.
PTB_TABLE_TRAINING = {**MERITY_OPTIMIZER, "variable_bptt": True, "early_stopping_patience": None,
                      "logging_steps": 100, "seed": 0}


def regularisation(scale: float, ar_scale: float) -> dict:
    """:data:`PTB_REGULARISATION` with every dropout and the weight drop times ``scale``, AR and TAR times
    ``ar_scale`` (``benchmarks/ptb_awd.py``'s rows)."""
    return {k: round(v * (ar_scale if k in ("alpha", "beta") else scale), 4)
            for k, v in PTB_REGULARISATION.items()}


def ptb_table_recipe(row: str, epochs: int, scale: float | None = None, ar_scale: float = 0.0,
                     rounded: str | None = None) -> TrainingRecipe:
    """A row of the Penn Treebank table: Merity et al. 2018's training loop (sec. 3-5) on
    :data:`CPU_NETWORK` for ``epochs``, with the paper's regularisers times ``scale`` (AR / TAR times
    ``ar_scale``) and NT-ASGD (n = 5), or with none of them and plain SGD (``scale`` None); ``rounded`` says
    how the epochs were read off the row's timed run. The paper's figures are for its 3 x 1150 network
    trained 500 epochs, not for this one, so ``paper`` is empty."""
    plain = scale is None
    model = {**CPU_NETWORK, **(regularisation(0.0, 0.0) if plain else regularisation(scale, ar_scale))}
    training = {**PTB_TABLE_TRAINING, "num_epochs": epochs, "nt_asgd": not plain}
    what = ("no dropout, weight drop, AR or TAR, plain SGD" if plain else
            f"the paper's dropouts and weight drop x {scale:g}, AR / TAR x {ar_scale:g}, NT-ASGD (n = 5)")
    return TrainingRecipe(
        f"Merity et al. 2018, sec. 3-5, on Penn Treebank ({row}): SGD at lr 30, weight decay 1.2e-6, "
        "clipping 0.25, 20 columns, variable BPTT around 70, no early stopping (the best validated epoch "
        f"kept), random seed `0`; a CPU-sized network (2 layers, embedding 200, hidden 400, tied), {what}; "
        f"{epochs} epochs" + (f" ({rounded})" if rounded else ""),
        training=training,
        model=model,
        tokenizer={"min_frequency": 1},
        data={"corpus": "ptb"},
    )


#: The rows of ``benchmarks/ptb_awd.py``'s tables: the AWD-LSTM against a plain LSTM with the whole machine
#: per row, and the rows of the regularisation sweep (two rows side by side, a thread each). Each gives the
#: whole epochs its timed run trained, a fractional count rounded to whole epochs.
PTB_TABLE_RECIPES = {
    "ptb-awd-lstm": ptb_table_recipe("AWD-LSTM", 6, scale=0.25, ar_scale=0.0,
                                     rounded="6.15 epochs in the table's 20-minute run, rounded"),
    "ptb-lstm": ptb_table_recipe("LSTM", 7, rounded="6.92 epochs in the table's 20-minute run, rounded"),
    "ptb-sweep-lstm": ptb_table_recipe(
        "sweep, LSTM", 4, rounded="the sweep's 4 epochs; its equal-time row's 3.80, rounded"),
    "ptb-sweep-awd-reg25": ptb_table_recipe("sweep, AWD-LSTM", 4, scale=0.25, ar_scale=1.0),
    "ptb-sweep-awd-reg10": ptb_table_recipe("sweep, AWD-LSTM", 3, scale=0.1, ar_scale=1.0),
    "ptb-sweep-awd-reg50": ptb_table_recipe("sweep, AWD-LSTM", 3, scale=0.5, ar_scale=1.0),
    "ptb-sweep-awd-reg25-noar": ptb_table_recipe("sweep, AWD-LSTM", 3, scale=0.25, ar_scale=0.0),
    "ptb-sweep-awd-reg25-ar25": ptb_table_recipe("sweep, AWD-LSTM", 3, scale=0.25, ar_scale=0.25),
    "ptb-sweep-awd-reg25-noar-4ep": ptb_table_recipe(
        "sweep, AWD-LSTM", 4, scale=0.25, ar_scale=0.0, rounded="the sweep's equal-time row's 3.74, rounded"),
}

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
    **PTB_TABLE_RECIPES,
    # Yao et al. report no perplexity of their LM on their split, so no paper figure is set.
    "rocstories-lm": TrainingRecipe(
        "Yao et al. 2019 (Plan-and-Write), the LM approach on ROCStories: one AWD-LSTM over 'title <sep> k1 "
        "# k2 # ... <sep> story' (storylines of one RAKE keyword phrase per sentence) that serves both "
        "stages; Merity et al. 2018's network (3 layers, embedding 400, hidden 1150) with their WikiText-2 "
        "dropouts, trained with Adam (Kingma & Ba 2015) at 1e-3, 32 x 70-token blocks, 20 epochs with early "
        "stopping, random seed `0`; the 15,000 most frequent words; stories split 90 / 5 / 5 %",
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
        "of 50-token blocks, 20 epochs with early stopping, random seed `0`; the 10,000 most frequent words",
        training={"optimizer": "adam", "learning_rate": 2e-3, "lr_scheduler": "constant",
                  "weight_decay": 1e-4, "max_grad_norm": 1.0, "batch_size": 64, "eval_batch_size": 64,
                  "block_size": 50, "num_epochs": 20, "early_stopping_patience": 2, "logging_steps": 200,
                  "save_total_limit": 1, "eval_test": False, "seed": 0},
        model={"num_hidden_layers": 2, "embedding_size": 256, "hidden_size": 256, "dropout": 0.2,
               "dropout_hidden": 0.2, "dropout_input": 0.2, "dropout_embedding": 0.05, "weight_drop": 0.2},
        tokenizer={"vocab_size": 10000, "min_frequency": 1, "split_punctuation": False},
    ),
}

# benchmarks/defaults.py's runs (transformers 5.24, torch 2.13 CPU, one thread, the machine shared with other
# runs): the figures and the seconds of the whole `hf-nlm train --recipe` command.
RECIPES.update(defaults_table_recipes("awd_lstm", RECIPES["default"], ptb=2, sotu=1, recorded={
    "ptb": ({"validation_perplexity": 163.45, "test_perplexity": 165.78,
            "kn5_validation_perplexity": 142.03, "kn5_test_perplexity": 140.72,
            "test_ratio_to_kn5": 1.1781}, 833.4),
    "sotu": ({"validation_perplexity": 211.24, "test_perplexity": 268.84,
             "kn5_validation_perplexity": 194.6, "kn5_test_perplexity": 239.27,
             "test_ratio_to_kn5": 1.1236}, 2000.8),
}))

MODEL_TYPE = ModelType(AWDLSTMConfig, AWDLSTMModel, causal_lm_class=AWDLSTMForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "AWDLSTMConfig", "AWDLSTMForCausalLM", "AWDLSTMModel", "AWDLSTMPreTrainedModel"]
