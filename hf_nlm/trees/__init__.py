"""Binary word trees for the tree (hierarchical) softmax head, and their builders.

Morin & Bengio (2005); Mnih & Hinton (2008); Huffman trees as in word2vec (Mikolov et al. 2013).
See :mod:`hf_nlm.trees.word_tree` for the structure and :class:`hf_nlm.heads.TreeSoftmaxHead` for its use.
"""

from .adaptive import TREE_MODES, adaptive_tree, check_tree_mode, word_vectors_from_predictions
from .builders import balanced_tree, huffman_tree, random_tree
from .word_tree import TreeTensors, WordTree, leaf

__all__ = [
    "TREE_MODES",
    "check_tree_mode",
    "TreeTensors",
    "WordTree",
    "adaptive_tree",
    "balanced_tree",
    "huffman_tree",
    "leaf",
    "random_tree",
    "word_vectors_from_predictions",
]
