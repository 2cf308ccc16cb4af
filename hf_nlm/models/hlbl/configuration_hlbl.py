"""Configuration of Mnih & Hinton's hierarchical log-bilinear language model (HLBL)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...hub.model_card import CardText
from ..lbl.configuration_lbl import LBLConfig


@strict
class HLBLConfig(LBLConfig):
    r"""
    Configuration for [`HLBLForCausalLM`]: the LBL body with a binary tree softmax, from A. Mnih, G. Hinton,
    "A Scalable Hierarchical Distributed Language Model", NIPS 2008.

    The fields are those of [`LBLConfig`], with `head="tree"` (required) and `tie_word_embeddings=False`
    (the node vectors q_i are not word vectors). The tree itself is saved with the weights; the config records
    its shape (`tree_num_nodes`, `tree_max_codes`, `tree_max_depth`), filled in when the model is built with
    `HLBLForCausalLM(config, tree=tree)`.

    Args:
        head (`str`, defaults to `"tree"`):
            Always `"tree"`: the HLBL is the LBL with a tree softmax (for another head use [`LBLConfig`]).
        tie_word_embeddings (`bool`, defaults to `False`):
            Always `False`: a tree head's node vectors q_i are not word vectors.
    """

    model_type = "hlbl"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))

    head: str = "tree"
    tie_word_embeddings: bool = False

    def validate_head(self):
        if self.head != "tree":
            raise ValueError(
                "HLBLConfig.head must be 'tree' (the HLBL always has a tree head: the LBL with a tree "
                f"softmax), got {self.head!r}; for a softmax or split head use LBLConfig"
            )
        super().validate_head()


__all__ = ["HLBLConfig"]
