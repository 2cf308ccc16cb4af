"""The card text of the LBL: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``LBLConfig.card_text`` by ``save_pretrained``, the
training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

MNIH_HINTON_2007 = Paper(
    "Mnih & Hinton, *Three New Graphical Models for Statistical Language Modelling*, ICML 2007",
    """@inproceedings{mnih2007three,
  title     = {Three New Graphical Models for Statistical Language Modelling},
  author    = {Mnih, Andriy and Hinton, Geoffrey},
  booktitle = {Proceedings of the 24th International Conference on Machine Learning (ICML)},
  pages     = {641--648},
  year      = {2007}
}""",
)

CARD_TEXT = CardText(
    title="LBL (log-bilinear)",
    summary=(
        "Mnih & Hinton's log-bilinear model: the predicted feature vector is a linear combination of the "
        "context words' feature vectors (one matrix C_i per position), scored against every word's feature "
        "vector by a softmax."
    ),
    paper=MNIH_HINTON_2007,
    extra_tags=("log-bilinear",),
)
