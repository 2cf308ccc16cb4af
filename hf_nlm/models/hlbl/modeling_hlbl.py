"""Mnih & Hinton's hierarchical log-bilinear language model (HLBL) as a transformers causal LM.

A. Mnih, G. Hinton, "A Scalable Hierarchical Distributed Language Model", NIPS 2008, sec. 3.

The body is the LBL's (:mod:`hf_nlm.models.lbl`): r_hat = sum_{i=1}^{n-1} C_i r_{w_{t-i}}. The words
are the leaves of a binary tree; a word's code d is the bit string of its root-to-leaf path and q_i
the feature vector of the i-th internal node on it (the rows of ``lm_head.weight``, biases b_i in
``lm_head.bias``):

    P(d_i = 1 | q_i, w_{1:n-1}) = sigmoid(r_hat . q_i + b_i)                        (eq. 3)
    P(w_n = w | w_{1:n-1}) = sum_{d in D(w)} prod_i P(d_i | q_i, w_{1:n-1})         (eq. 4)

A word may sit at several leaves (several codes, ADAPTIVE(eps) trees); its probability sums over
them. Training touches only the O(log |V|) node vectors on the target's path(s).

The tree is built with :mod:`hf_nlm.trees` (random, balanced, Huffman, or the paper's data-built
adaptive tree, sec. 4: see :mod:`hf_nlm.training.tree_recipe` and ``hf-nlm build-tree``) and stored in the
head's buffers, so ``save_pretrained`` / ``from_pretrained`` keep it.
"""

from __future__ import annotations

import torch

from ...modeling_utils import shifted_targets
from ...trees import WordTree, word_vectors_from_predictions
from ..lbl.modeling_lbl import LBLForCausalLM, LBLModel
from .configuration_hlbl import HLBLConfig


class HLBLModel(LBLModel):
    """The HLBL body: the LBL's (n - 1 previous words -> predicted feature vector r_hat)."""

    config_class = HLBLConfig


class HLBLForCausalLM(LBLForCausalLM):
    """LBL body + tree softmax head (Mnih & Hinton 2008, eq. 3-4).

    Args:
        config: the :class:`HLBLConfig`.
        tree: the word tree (a :class:`~hf_nlm.trees.WordTree` over ``config.vocab_size`` words); its
            shape is written into the config. Not needed when the config already records a tree shape
            (``from_pretrained`` then loads the saved tree).
    """

    config_class = HLBLConfig
    base_model_class = HLBLModel

    def __init__(self, config: HLBLConfig, tree: WordTree | None = None, **head_kwargs) -> None:
        super().__init__(config, tree=tree, **head_kwargs)

    def tree(self) -> WordTree:
        """The model's word tree (read back from the head's buffers)."""
        return self.lm_head.tree()

    @torch.no_grad()
    def predicted_word_vectors(self, input_ids: torch.LongTensor,
                               labels: torch.LongTensor | None = None) -> torch.Tensor:
        """Each word's average predicted vector r_hat over the contexts it occurs in (Mnih & Hinton 2008,
        sec. 4, step 2): the representation the adaptive tree is built from.

        ``input_ids`` (B, T) blocks of text; ``labels`` as in ``forward`` (default ``input_ids``; -100 skips a
        target). Returns (|V|, D); see :func:`hf_nlm.trees.word_vectors_from_predictions`.
        """
        labels = input_ids if labels is None else labels
        r_hat = self.model(input_ids, return_dict=True).last_hidden_state
        hidden, targets = shifted_targets(r_hat, labels)
        return word_vectors_from_predictions(hidden, targets, self.config.vocab_size)


__all__ = ["HLBLForCausalLM", "HLBLModel"]
