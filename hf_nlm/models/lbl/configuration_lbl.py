"""Configuration of Mnih & Hinton's log-bilinear language model (LBL)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...configuration_utils import NLMConfig
from ...hub.model_card import CardText


@strict
class LBLConfig(NLMConfig):
    r"""
    Configuration for [`LBLForCausalLM`], the log-bilinear language model of A. Mnih, G. Hinton,
    "Three New Graphical Models for Statistical Language Modelling", ICML 2007 (and its hierarchical
    version, [`HLBLConfig`], Mnih & Hinton, NIPS 2008).

    The output head (`head`: the paper's softmax P(w) = softmax(r_hat . r_w + b_w), `"split"`, or `"tree"`,
    which is the HLBL: prefer [`HLBLConfig`]), `cutoffs`, the tree shape and the token ids are the fields of
    [`~hf_nlm.configuration_utils.NLMConfig`].

    Args:
        context_size (`int`, defaults to 5):
            n - 1, the number of previous words the model looks at.
        hidden_size (`int`, defaults to 100):
            The feature size D: the size of the word feature vectors r_w (and of the predicted vector r_hat),
            i.e. the embedding size, which is also its name (`embedding_size`, through `attribute_map`) and
            its command-line flag (`--embedding-size`).
        diagonal_context (`bool`, defaults to `False`):
            Use diagonal position matrices C_i (stored as vectors of D entries, r_hat = sum_i c_i * r_{w_i}),
            which makes the context cost linear in D instead of quadratic.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of R, C and the head's weights (biases start at 0).
        tie_word_embeddings (`bool`, *optional*):
            Use the same feature table R for the context words and the predicted word, as Mnih & Hinton do
            (`lm_head.weight` is `model.R.weight`). Must be `False` with a tree head, whose node vectors q_i
            are not word vectors. Unset, it is `True` for the heads whose weight is a word matrix (softmax,
            split) and `False` for the others (tree).
        use_cache (`bool`, defaults to `False`):
            The LBL has no recurrent state; `generate()` re-reads the last n - 1 tokens at every step.
    """

    model_type = "lbl"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))
    # D is at once the embedding and the hidden size; as the embedding size it has the NPLM's name.
    attribute_map = {"embedding_size": "hidden_size"}

    context_size: int = 5
    hidden_size: int = 100
    diagonal_context: bool = False
    tie_word_embeddings: bool | None = None

    def validate_sizes(self):
        self.require_positive(
            "context_size", "hidden_size",
            what={"context_size": "n - 1", "hidden_size": "D, the feature vector size"},
        )

    @property
    def order(self) -> int:
        """n, the order of the n-gram the model conditions on (context_size + 1)."""
        return self.context_size + 1


__all__ = ["LBLConfig"]
