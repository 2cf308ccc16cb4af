from ..lbl import brown_trees_recipe
from ..registry import PLAIN_SGD, ModelType, defaults_table_recipes, feed_forward_recipe
from .configuration_hlbl import HLBLConfig
from .modeling_hlbl import HLBLForCausalLM, HLBLModel

RECIPES = {
    "default": feed_forward_recipe("feature vectors of D = 100 (Mnih & Hinton 2008's size) over the tree "
                                   "--tree gives (random unless set)", 1e-3, 32),
    "sgd": PLAIN_SGD,
    # The HLBL trees table (Mnih & Hinton 2008, sec. 4): a fixed tree, or one built from the predicted vectors
    # of a first HLBL on the random tree (trained as the row says) and a fresh HLBL trained on it.
    **{name: brown_trees_recipe(name, row, **tree) for name, row, tree in (
        ("brown-hlbl-random", "the HLBL on a random tree (step 1 of the paper's recipe)", {"tree": "random"}),
        ("brown-hlbl-huffman", "the HLBL on a Huffman tree over the training words' frequencies",
         {"tree": "huffman"}),
        ("brown-hlbl-balanced", "the HLBL on the paper's data-built tree, BALANCED EM splits",
         {"tree_mode": "balanced"}),
        ("brown-hlbl-adaptive", "the HLBL on the paper's data-built tree, ADAPTIVE EM splits",
         {"tree_mode": "adaptive"}),
        ("brown-hlbl-adaptive-eps0.25", "the HLBL on the paper's data-built tree, ADAPTIVE(eps = 0.25) EM "
         "splits (words within 0.25 of 1/2 go down both branches)",
         {"tree_mode": "adaptive", "tree_eps": 0.25}),
    )},
}

# benchmarks/defaults.py's runs (transformers 5.24, torch 2.13 CPU, one thread, the machine shared with other
# runs): the figures and the seconds of the whole `hf-nlm train --recipe` command.
RECIPES.update(defaults_table_recipes("hlbl", RECIPES["default"], ptb=8, sotu=4, recorded={
    "ptb": ({"validation_perplexity": 198.94, "test_perplexity": 195.44,
            "kn5_validation_perplexity": 142.03, "kn5_test_perplexity": 140.72,
            "test_ratio_to_kn5": 1.3889}, 259.4),
    "sotu": ({"validation_perplexity": 238.45, "test_perplexity": 290.15,
             "kn5_validation_perplexity": 194.6, "kn5_test_perplexity": 239.27,
             "test_ratio_to_kn5": 1.2126}, 211.5),
}))

MODEL_TYPE = ModelType(HLBLConfig, HLBLModel, causal_lm_class=HLBLForCausalLM, recipes=RECIPES)

__all__ = ["MODEL_TYPE", "HLBLConfig", "HLBLForCausalLM", "HLBLModel"]
