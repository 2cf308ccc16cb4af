from ..registry import ModelType, TrainingRecipe, defaults_table_recipes, feed_forward_recipe
from .configuration_nplm import NPLMConfig
from .modeling_nplm import NPLMForCausalLM, NPLMModel, NPLMPreTrainedModel

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
}

RECIPES.update(defaults_table_recipes("nplm", RECIPES["default"], ptb=3, sotu=1))

MODEL_TYPE = ModelType(NPLMConfig, NPLMModel, causal_lm_class=NPLMForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "NPLMConfig", "NPLMForCausalLM", "NPLMModel", "NPLMPreTrainedModel"]
