"""Output layers ("heads") shared by every body: h_t -> distribution over the next token.

:mod:`hf_nlm.heads.base` defines the interface (:class:`OutputHead`: ``forward``, ``log_probs``,
``nll``) and the registry of heads by name; a model's config picks one with its ``head`` field and
:func:`build_head` builds it. Registered here: ``"softmax"`` (full softmax), ``"split"`` (split softmax
with tombstones, Merity et al. 2018) and ``"tree"`` (binary tree softmax, Morin & Bengio 2005;
Mnih & Hinton 2008).
"""

from .base import HEAD_REGISTRY, OutputHead, Targets, build_head, check_head_config, head_class, register_head
from .numeral import (
    CombinationHead,
    DigitRNNHead,
    DigitSoftmaxHead,
    MixtureOfGaussiansHead,
    NumeralHierarchicalSoftmaxHead,
)
from .softmax import SoftmaxHead
from .split import SplitSoftmaxHead, check_cutoffs, check_frequency_order
from .tree import TREE_FIELDS, TreeSoftmaxHead, tree_config_fields

__all__ = [
    "CombinationHead",
    "DigitRNNHead",
    "DigitSoftmaxHead",
    "MixtureOfGaussiansHead",
    "HEAD_REGISTRY",
    "NumeralHierarchicalSoftmaxHead",
    "OutputHead",
    "SoftmaxHead",
    "SplitSoftmaxHead",
    "TREE_FIELDS",
    "Targets",
    "TreeSoftmaxHead",
    "build_head",
    "check_cutoffs",
    "check_frequency_order",
    "check_head_config",
    "head_class",
    "register_head",
    "tree_config_fields",
]
