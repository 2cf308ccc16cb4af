"""The card text of the AWD-LSTM: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``AWDLSTMConfig.card_text`` by ``save_pretrained``, the
training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

MERITY_2018 = Paper(
    "Merity, Keskar & Socher, *Regularizing and Optimizing LSTM Language Models*, ICLR 2018",
    """@inproceedings{merity2018regularizing,
  title     = {Regularizing and Optimizing {LSTM} Language Models},
  author    = {Merity, Stephen and Keskar, Nitish Shirish and Socher, Richard},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2018}
}""",
)

CARD_TEXT = CardText(
    title="AWD-LSTM",
    summary=(
        "Merity et al.'s ASGD weight-dropped LSTM: a multi-layer LSTM language model with DropConnect on the "
        "hidden-to-hidden weights, variational (locked) dropout, embedding dropout, activation "
        "regularisation (AR / TAR), tied input and output embeddings, and non-monotonically triggered "
        "averaged SGD (NT-ASGD)."
    ),
    paper=MERITY_2018,
    extra_tags=("lstm",),
)
