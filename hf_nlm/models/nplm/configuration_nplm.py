"""Configuration of Bengio et al.'s neural probabilistic language model (NPLM)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...configuration_utils import NLMConfig
from ...hub.model_card import CardText


@strict
class NPLMConfig(NLMConfig):
    r"""
    Configuration for [`NPLMForCausalLM`], the feed-forward n-gram language model of
    Bengio, Ducharme, Vincent & Jauvin, "A Neural Probabilistic Language Model", JMLR 3 (2003).

    The defaults are the paper's Brown-corpus model MLP1 (n = 5, h = 50, m = 60, direct connections). The
    output head (`head`, `cutoffs`, tree shape), `initializer_range` and the token ids are the fields of
    [`~hf_nlm.configuration_utils.NLMConfig`]; `head="tree"` is Morin & Bengio's hierarchical NPLM (AISTATS
    2005).

    Args:
        vocab_size (`int`, defaults to 16383):
            |V|, the number of token ids (16,383 on Brown in the paper).
        context_size (`int`, defaults to 4):
            n - 1, the number of previous tokens the model looks at (the paper's n is the n-gram order).
        embedding_size (`int`, defaults to 60):
            m, the size of each word feature vector C(w).
        hidden_size (`int`, defaults to 50):
            h, the number of tanh hidden units. `0` removes the hidden layer (the paper's MLP3), which then
            requires `direct_connections=True`.
        direct_connections (`bool`, defaults to `True`):
            Whether the output also sees the word features directly (the paper's W x term); `False` sets
            W = 0.
        dropout (`float`, defaults to 0.0):
            Dropout probability on z = [tanh(d + H x); x], the vector the output layer reads, during training.
            Not in the paper (0 is its model); a regulariser of today's recipes for the bigger rows, which
            otherwise overfit Brown within a few epochs of Adam.
        initializer_range (`float`, defaults to 0.1):
            Half-width of the uniform initialisation of C, H and the output layer's weights (biases start at
            0).
        tie_word_embeddings (`bool`, defaults to `False`):
            Always `False`: the NPLM's output matrix [U W] does not have the shape of C.
        use_cache (`bool`, defaults to `False`):
            The NPLM has no recurrent state; `generate()` re-reads the last n - 1 tokens at every step.
    """

    model_type = "nplm"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))

    vocab_size: int = 16383
    context_size: int = 4
    embedding_size: int = 60
    hidden_size: int = 50
    direct_connections: bool = True
    dropout: float = 0.0

    def validate_sizes(self):
        self.require_positive("context_size", "embedding_size",
                              what={"context_size": "n - 1", "embedding_size": "m"})
        if self.hidden_size < 0:
            raise ValueError(f"NPLMConfig.hidden_size (h) must be >= 0, got {self.hidden_size}")
        if self.hidden_size == 0 and not self.direct_connections:
            raise ValueError(
                "NPLMConfig: hidden_size=0 with direct_connections=False leaves the output layer no input; "
                "set hidden_size > 0 or direct_connections=True"
            )

    def validate_dropout(self):
        self.require_dropout("dropout")

    def validate_untied(self):
        if self.tie_word_embeddings:
            raise ValueError("NPLMConfig.tie_word_embeddings must be False: [U W] is not shaped like C")

    @property
    def order(self) -> int:
        """n, the order of the n-gram the model conditions on (context_size + 1)."""
        return self.context_size + 1

    @property
    def output_input_size(self) -> int:
        """Width of the vector the output layer reads: h (tanh units) plus (n-1)m if direct connections."""
        return self.hidden_size + (self.context_size * self.embedding_size if self.direct_connections else 0)


__all__ = ["NPLMConfig"]
