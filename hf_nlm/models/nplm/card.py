"""The card text of the NPLM: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``NPLMConfig.card_text`` by ``save_pretrained``, the
training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

BENGIO_2003 = Paper(
    "Bengio, Ducharme, Vincent & Jauvin, *A Neural Probabilistic Language Model*, JMLR 3 (2003)",
    """@article{bengio2003neural,
  title   = {A Neural Probabilistic Language Model},
  author  = {Bengio, Yoshua and Ducharme, R{\\'e}jean and Vincent, Pascal and Jauvin, Christian},
  journal = {Journal of Machine Learning Research},
  volume  = {3},
  pages   = {1137--1155},
  year    = {2003}
}""",
)

CARD_TEXT = CardText(
    title="NPLM",
    summary=(
        "Bengio et al.'s neural probabilistic language model: the n-1 previous words' feature vectors "
        "(a shared table C) are concatenated, passed through a tanh hidden layer (and optionally straight to "
        "the output, the direct connections), and a softmax over the vocabulary gives the next word."
    ),
    paper=BENGIO_2003,
    extra_tags=("feed-forward",),
)
