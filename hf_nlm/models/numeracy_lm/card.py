"""The card text of the numeracy LM: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``NumeracyLMConfig.card_text`` by ``save_pretrained``,
the training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

SPITHOURAKIS_RIEDEL_2018 = Paper(
    "Spithourakis & Riedel, *Numeracy for Language Models: Evaluating and Improving their Ability to Predict "
    "Numbers*, ACL 2018",
    """@inproceedings{spithourakis2018numeracy,
  title     = {Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers},
  author    = {Spithourakis, Georgios and Riedel, Sebastian},
  booktitle = {Proceedings of the 56th Annual Meeting of the Association for Computational Linguistics},
  year      = {2018}
}""",
)

CARD_TEXT = CardText(
    title="Numeracy LM",
    summary=(
        "Spithourakis & Riedel's numeracy language model: an LSTM over tokens that are words or numerals (a "
        "numeral keeps its value and precision), with an output strategy for numerals chosen by "
        "`numeral_strategy`: one softmax, a softmax whose numeral rows add a character-RNN encoding of their "
        "digits, or a hierarchical softmax p(class | h) p(token | class, h) over the classes word and "
        "numeral. Evaluated by perplexity and adjusted perplexity over words and numerals."
    ),
    paper=SPITHOURAKIS_RIEDEL_2018,
    extra_tags=("lstm", "numeracy"),
)
