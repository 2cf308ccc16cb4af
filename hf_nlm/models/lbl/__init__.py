from ..registry import PLAIN_SGD, ModelType, TrainingRecipe, defaults_table_recipes, feed_forward_recipe
from .configuration_lbl import LBLConfig
from .modeling_lbl import LBLForCausalLM, LBLModel, LBLPreTrainedModel


def brown_trees_recipe(row: str, **tree) -> TrainingRecipe:
    """A row of the HLBL trees table (``benchmarks/hlbl_trees.py``): Mnih & Hinton's comparison of the LBL
    with its tree-softmax form over random, Huffman and data-built trees (A. Mnih, G. Hinton, "A Scalable
    Hierarchical Distributed Language Model", NIPS 2008, sec. 4 and Table 1) on Brown, every row trained the
    same way; ``row`` says which model and tree, ``tree`` gives the tree settings. The paper reports APNews
    only, so no paper figure stands beside these."""
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
    )


RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size)", 5e-3, 16),
    "sgd": PLAIN_SGD,
    "brown-lbl-softmax": brown_trees_recipe("the LBL with the full softmax (Mnih & Hinton 2007)"),
}

RECIPES.update(defaults_table_recipes("lbl", RECIPES["default"], ptb=3, sotu=1))

MODEL_TYPE = ModelType(LBLConfig, LBLModel, causal_lm_class=LBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "LBLConfig", "LBLForCausalLM", "LBLModel", "LBLPreTrainedModel",
           "brown_trees_recipe"]
