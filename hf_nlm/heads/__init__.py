"""Output layers ("heads") shared by every body: h_t -> distribution over the next token.

Every head offers the same three things (see docs in DESIGN.md, "body x head"):

* ``forward(hidden)``: scores whose ``log_softmax`` over the last axis is the exact next-token
  log-distribution. ``generate()`` applies ``log_softmax`` to what the model returns, so a head
  that already normalises (a tree softmax) may return log-probabilities directly.
* ``nll(hidden, target)``: the per-token negative log-likelihood used for training; heads that can
  avoid building a ``|V|``-wide tensor (tree, split softmax) do so here.
* ``log_probs(hidden)``: exact full-vocabulary log-probabilities, for evaluation.

A model chooses its head with its config's ``head`` field; :func:`build_head` builds it.
"""

from .factory import HEADS, build_head, check_head_config, init_head, tree_config_fields
from .softmax import SoftmaxHead
from .split import SplitSoftmaxHead, check_frequency_order
from .tree import TreeSoftmaxHead

__all__ = [
    "HEADS",
    "SoftmaxHead",
    "SplitSoftmaxHead",
    "check_frequency_order",
    "TreeSoftmaxHead",
    "build_head",
    "check_head_config",
    "init_head",
    "tree_config_fields",
]
