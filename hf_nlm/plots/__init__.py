"""Pictures of what a model learned: the attention of a story seq2seq model
(:mod:`~hf_nlm.plots.attention`) and a numeracy LM's numerals (:mod:`~hf_nlm.plots.numerals`: embeddings,
the predicted density of the next number, the strategy weights of a combination head).
matplotlib is imported when a picture is drawn."""

from .attention import attention_weights, plot_attention
from .numerals import (
    numeral_density,
    numeral_vectors,
    plot_numeral_density,
    plot_numeral_embeddings,
    plot_strategy_weights,
    strategy_weights,
)

__all__ = [
    "attention_weights",
    "numeral_density",
    "numeral_vectors",
    "plot_attention",
    "plot_numeral_density",
    "plot_numeral_embeddings",
    "plot_strategy_weights",
    "strategy_weights",
]
