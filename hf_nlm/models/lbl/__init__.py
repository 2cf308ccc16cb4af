from ..registry import PLAIN_SGD, ModelType, TrainingRecipe, defaults_table_recipes, feed_forward_recipe
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel

#: ``benchmarks/hlbl_trees.py``'s run of the HLBL trees table's recipes (transformers 5.24, torch 2.13 CPU,
#: one thread, the machine shared with other runs): validation and test perplexity, the Kneser-Ney 5-gram's
#: on the same split, and the seconds of training.
BROWN_TREES_RECORDED = {
    "brown-lbl-softmax": ({"validation_perplexity": 142.62, "test_perplexity": 130.24,
                          "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                          "test_ratio_to_kn5": 0.8678}, 2542.0),
    "brown-hlbl-random": ({"validation_perplexity": 165.29, "test_perplexity": 152.96,
                          "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                          "test_ratio_to_kn5": 1.0192}, 104.0),
    "brown-hlbl-huffman": ({"validation_perplexity": 159.95, "test_perplexity": 147.01,
                           "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                           "test_ratio_to_kn5": 0.9795}, 152.0),
    "brown-hlbl-balanced": ({"validation_perplexity": 149.35, "test_perplexity": 135.38,
                            "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                            "test_ratio_to_kn5": 0.902}, 181.0),
    "brown-hlbl-adaptive": ({"validation_perplexity": 149.35, "test_perplexity": 134.99,
                            "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                            "test_ratio_to_kn5": 0.8995}, 121.0),
    "brown-hlbl-adaptive-eps0.25": ({"validation_perplexity": 149.15, "test_perplexity": 134.99,
                                    "kn5_validation_perplexity": 161.24, "kn5_test_perplexity": 150.08,
                                    "test_ratio_to_kn5": 0.8994}, 93.0),
}


def brown_trees_recipe(name: str, row: str, **tree) -> TrainingRecipe:
    """A row of the HLBL trees table (``benchmarks/hlbl_trees.py``): Mnih & Hinton's comparison of the LBL
    with its tree-softmax form over random, Huffman and data-built trees (A. Mnih, G. Hinton, "A Scalable
    Hierarchical Distributed Language Model", NIPS 2008, sec. 4 and Table 1) on Brown, every row trained the
    same way; ``name`` is the recipe's name (its recorded run: :data:`BROWN_TREES_RECORDED`), ``row`` says
    which model and tree, ``tree`` gives the tree settings. The paper reports APNews only, so no paper figure
    stands beside these."""
    return TrainingRecipe(
        f"{row}: Mnih & Hinton 2008's LBL body (n - 1 = 5, D = 100, full C_i) on Brown with Bengio et al.'s "
        "split and words of frequency <= 3 merged, as every row of the HLBL trees table: Adam (Kingma & Ba "
        "2015) at a constant 1e-3, 32 x 64 targets per update, up to 8 epochs stopped early on validation "
        "(patience 1)",
        training={"optimizer": "adam", "learning_rate": 1e-3, "lr_scheduler": "constant", "weight_decay": 0.0,
                  "batch_size": 32, "block_size": 64, "eval_batch_size": 64, "num_epochs": 8,
                  "early_stopping_patience": 1, "logging_steps": 100, "seed": 0},
        model={"context_size": 5, "hidden_size": 100, "diagonal_context": False},
        tokenizer={"min_frequency": 4},
        tree=tree,
        data={"corpus": "brown"},
        recorded=BROWN_TREES_RECORDED[name][0],
        time_s=BROWN_TREES_RECORDED[name][1],
    )




RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size)", 5e-3, 16),
    "sgd": PLAIN_SGD,
    "brown-lbl-softmax": brown_trees_recipe("brown-lbl-softmax",
                                            "the LBL with the full softmax (Mnih & Hinton 2007)"),
}

# benchmarks/defaults.py's runs (transformers 5.24, torch 2.13 CPU, one thread, the machine shared with other
# runs): the figures and the seconds of the whole `hf-nlm train --recipe` command.
RECIPES.update(defaults_table_recipes("lbl", RECIPES["default"], ptb=3, sotu=1, recorded={
    "ptb": ({"validation_perplexity": 163.36, "test_perplexity": 161.95,
            "kn5_validation_perplexity": 142.03, "kn5_test_perplexity": 140.72,
            "test_ratio_to_kn5": 1.1509}, 704.0),
    "sotu": ({"validation_perplexity": 206.66, "test_perplexity": 248.06,
             "kn5_validation_perplexity": 194.6, "kn5_test_perplexity": 239.27,
             "test_ratio_to_kn5": 1.0367}, 713.9),
}))

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM, recipes=RECIPES)

__all__ = ["BROWN_TREES_RECORDED", "MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel",
           "LBLPreTrainedModel", "brown_trees_recipe"]
