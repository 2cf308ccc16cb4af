"""The card text of the HLBL: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``HLBLConfig.card_text`` by ``save_pretrained``, the
training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

MNIH_HINTON_2008 = Paper(
    "Mnih & Hinton, *A Scalable Hierarchical Distributed Language Model*, NIPS 2008",
    """@inproceedings{mnih2008scalable,
  title     = {A Scalable Hierarchical Distributed Language Model},
  author    = {Mnih, Andriy and Hinton, Geoffrey E.},
  booktitle = {Advances in Neural Information Processing Systems 21 (NIPS 2008)},
  pages     = {1081--1088},
  year      = {2008}
}""",
)

CARD_TEXT = CardText(
    title="HLBL (hierarchical log-bilinear)",
    summary=(
        "Mnih & Hinton's hierarchical log-bilinear model: the LBL's predicted vector, with the softmax "
        "replaced by a binary tree over the vocabulary (a word's probability is the product of the logistic "
        "decisions on its path), so a training step costs O(log |V|) instead of O(|V|)."
    ),
    paper=MNIH_HINTON_2008,
    extra_tags=("log-bilinear", "hierarchical-softmax"),
)
