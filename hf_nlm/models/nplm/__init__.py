from ..registry import ModelType, TrainingRecipe, defaults_table_recipes, feed_forward_recipe
from .configuration_nplm import NPLMConfig
from .modeling_nplm import NPLMForCausalLM, NPLMModel, NPLMPreTrainedModel

#: Bengio et al. 2003, Table 1 (Brown): each MLP row's network (n, h, m, direct connections) and its test
#: perplexity; MLP10 is MLP9 mixed with the interpolated trigram.
TABLE1 = {"mlp1": (5, 50, 60, True, 268.0), "mlp3": (5, 0, 60, True, 310.0), "mlp5": (5, 50, 30, True, 279.0),
          "mlp7": (3, 50, 30, True, 293.0), "mlp9": (5, 100, 30, False, 276.0)}
#: Table 1's MLP10 (MLP9 with the trigram, a = 0.5) and the Kneser-Ney back-off 5-gram, test perplexities.
TABLE1_MLP10, TABLE1_KN5 = 252.0, 321.0
#: The paper's recipe as ``benchmarks/brown_table.py`` runs it (Bengio et al. 2003, sec. 4): plain SGD with
#: eps_t = eps_0 / (1 + r t), eps_0 = 1e-3 per example, i.e. 0.512 for a step on the mean loss of 8 x 64
#: targets, r = 1e-8, weight decay 1e-4 on the weights, early stopping on validation (patience 1), random
#: random seed `0`.
BROWN_SGD = {"optimizer": "sgd", "learning_rate": 0.512, "lr_scheduler": "bengio", "lr_decay": 1e-8,
             "weight_decay": 1e-4, "batch_size": 8, "block_size": 64, "early_stopping_patience": 1,
             "logging_steps": 100, "seed": 0}
#: The adam recipe of the same table: AdamW (Loshchilov & Hutter 2019) at a constant 1e-3, no weight decay,
#: 8 x 64 targets per update, early stopping on validation (patience 1) and the best epoch kept, 4 epochs at
#: most.
BROWN_ADAM = {"optimizer": "adamw", "learning_rate": 1e-3, "lr_scheduler": "constant", "weight_decay": 0.0,
              "batch_size": 8, "block_size": 64, "num_epochs": 4, "early_stopping_patience": 1,
              "logging_steps": 100, "seed": 0}
#: Table 1's "mix": the model and the deleted-interpolation trigram, a = 0.5 (Bengio et al. 2003, sec. 4.1).
TRIGRAM_MIX = {"ngram_mixture": True, "ngram_mixture_order": 3, "ngram_mixture_smoothing": "interpolated",
               "ngram_mixture_weight": 0.5}


def brown_table1_recipe(row: str, adam: bool = False, epochs: int | None = None,
                        mix: bool = False) -> TrainingRecipe:
    """A row of Bengio et al. 2003's Table 1 on Brown (their split, words of frequency <= 3 merged, counted on
    the training split): the network of ``row`` (a key of :data:`TABLE1`), trained with :data:`BROWN_SGD`
    for ``epochs`` or with :data:`BROWN_ADAM`; ``mix``: Table 1's mixture with the interpolated trigram
    (MLP10). ``paper`` holds the table's figures for the row (trained with their SGD)."""
    n, h, m, direct, test = TABLE1[row]
    name = "MLP10 (MLP9 mixed with the deleted-interpolation trigram, a = 0.5)" if mix else row.upper()
    network = (f"n = {n}, h = {h}, m = {m}, {'direct connections' if direct else 'no direct connections'}, "
               "no dropout")
    if adam:
        how = ("AdamW (Loshchilov & Hutter 2019) at a constant 1e-3, no weight decay, 8 x 64 targets per "
               "update, early stopping on validation (patience 1), the best of at most 4 epochs (the "
               "epochs the table's adam run trained)")
        training = dict(BROWN_ADAM)
    else:
        how = (f"plain SGD with eps_t = eps_0 / (1 + r t), eps_0 = 1e-3 per example (0.512 per update of "
               f"8 x 64 targets), r = 1e-8, weight decay 1e-4, early stopping on validation (patience 1), "
               f"{epochs} epochs (the whole epochs the table's run of this row completed in its 9-minute "
               "budget)")
        training = {**BROWN_SGD, "num_epochs": epochs}
    paper = {"test_perplexity": test, "kn5_test_perplexity": TABLE1_KN5,
             "test_ratio_to_kn5": round(test / TABLE1_KN5, 4)}
    if mix:
        training.update(TRIGRAM_MIX)
        paper.update(mixture_test_perplexity=TABLE1_MLP10,
                     mixture_test_ratio_to_kn5=round(TABLE1_MLP10 / TABLE1_KN5, 4))
    return TrainingRecipe(
        f"Bengio et al. 2003, Table 1 on Brown, {name}: {network}; their split, words seen <= 3 times in the "
        f"training split merged into <unk>; {how}; random seed `0`",
        training=training,
        model={"context_size": n - 1, "embedding_size": m, "hidden_size": h, "direct_connections": direct,
               "dropout": 0.0},
        tokenizer={"min_frequency": 4},
        data={"corpus": "brown"},
        paper=paper,
    )


#: Bengio et al. 2003's Table 1 on Brown, a recipe per row of ``benchmarks/brown_table.py``'s tables: the
#: paper's SGD for the epochs each row trained there, and the adam recipe.
TABLE1_RECIPES = {
    **{f"brown-{row}": brown_table1_recipe(row, epochs=epochs)
       for row, epochs in (("mlp1", 2), ("mlp3", 2), ("mlp5", 3), ("mlp7", 3), ("mlp9", 3))},
    "brown-mlp10": brown_table1_recipe("mlp9", epochs=3, mix=True),
    "brown-mlp1-adam": brown_table1_recipe("mlp1", adam=True),
    "brown-mlp9-adam": brown_table1_recipe("mlp9", adam=True),
    "brown-mlp10-adam": brown_table1_recipe("mlp9", adam=True, mix=True),
}

RECIPES = {
    "default": feed_forward_recipe(
        "m = 100 and h = 100 without direct connections (the softmax over h units is the cost of a step), "
        "light dropout", 5e-3, 16,
        embedding_size=100, hidden_size=100, direct_connections=False, dropout=0.1),
    "bengio2003": TrainingRecipe(
        "Bengio et al. 2003, sec. 4 (Brown): plain SGD with eps_t = eps_0 / (1 + r t), r = 1e-8, weight "
        "decay 1e-4 on the weights, words of frequency <= 3 merged; eps_0 = 0.1 for a step on a batch's mean "
        "loss (the paper's 1e-3 is per example); the network of NPLMConfig's defaults (n = 5, m = 60, "
        "h = 50, direct connections)",
        training={"optimizer": "sgd", "learning_rate": 0.1, "lr_scheduler": "bengio", "lr_decay": 1e-8,
                  "weight_decay": 1e-4},
        tokenizer={"min_frequency": 4},
    ),
    "demo": TrainingRecipe(
        "`make demo`: Bengio et al. 2003's MLP9 shape (n = 5, m = 30, h = 100, no direct connections) on "
        "Brown with their split and words of frequency <= 3 merged, trained with Adam (Kingma & Ba 2015) at "
        "2e-3 decaying linearly to 0 over 10 epochs of 8 x 64 targets per update, stopped early on "
        "validation; with the Kneser-Ney 5-gram and its mixture",
        training={"optimizer": "adam", "learning_rate": 2e-3, "lr_scheduler": "linear", "weight_decay": 0.0,
                  "max_grad_norm": 1.0, "batch_size": 8, "block_size": 64, "eval_batch_size": 64,
                  "num_epochs": 10, "early_stopping_patience": 1, "logging_steps": 50, "seed": 0,
                  "ngram_mixture": True},
        model={"context_size": 4, "embedding_size": 30, "hidden_size": 100, "direct_connections": False,
               "dropout": 0.0},
        tokenizer={"min_frequency": 4},
        data={"corpus": "brown"},
        # examples/demo.py's run (transformers 5.24, torch 2.13 CPU, 2 threads): 5 epochs, the best the 4th.
        recorded={"validation_perplexity": 142.62, "test_perplexity": 130.48,
                  "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                  "test_ratio_to_kn5": 0.8694, "mixture_test_perplexity": 118.98},
        # Table 1: MLP9 and the Kneser-Ney back-off 5-gram on the paper's Brown copy (|V| = 16,383).
        paper={"test_perplexity": 276.0, "kn5_test_perplexity": 321.0, "test_ratio_to_kn5": 0.8598},
        time_s=604.0,  # `make demo` after set-up: the 5-gram, 5 epochs, the mixture
    ),
    **TABLE1_RECIPES,
}

# benchmarks/defaults.py's runs (transformers 5.24, torch 2.13 CPU, one thread, the machine shared with other
# runs): the figures and the seconds of the whole `hf-nlm train --recipe` command.
RECIPES.update(defaults_table_recipes("nplm", RECIPES["default"], ptb=3, sotu=1, recorded={
    "ptb": ({"validation_perplexity": 155.94, "test_perplexity": 151.78,
            "kn5_validation_perplexity": 142.03, "kn5_test_perplexity": 140.72,
            "test_ratio_to_kn5": 1.0786}, 764.0),
    "sotu": ({"validation_perplexity": 200.2, "test_perplexity": 242.38,
             "kn5_validation_perplexity": 194.6, "kn5_test_perplexity": 239.27,
             "test_ratio_to_kn5": 1.013}, 1184.9),
}))

MODEL_TYPE = ModelType(NPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NPLMConfig", "NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
