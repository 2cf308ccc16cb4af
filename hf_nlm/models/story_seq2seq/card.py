"""The card text of the attention seq2seq: what every model card of this model type says about it
(:class:`~hf_nlm.hub.model_card.CardText`), read from ``StorySeq2SeqConfig.card_text`` by ``save_pretrained``,
the training loop and ``hf-nlm card``."""

from ...hub.model_card import CardText, Paper

LUONG_2015 = Paper(
    "Luong, Pham & Manning, *Effective Approaches to Attention-based Neural Machine Translation*, EMNLP 2015",
    """@inproceedings{luong2015effective,
  title     = {Effective Approaches to Attention-based Neural Machine Translation},
  author    = {Luong, Thang and Pham, Hieu and Manning, Christopher D.},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  year      = {2015}
}""",
)

CARD_TEXT = CardText(
    title="Attention seq2seq",
    summary=(
        "An LSTM encoder (optionally bidirectional) and an LSTM decoder with global attention (dot, general, "
        "additive or concat scores, or none), the attention context joined with the decoder state before the "
        "output head, optional input feeding (Luong et al. 2015; Bahdanau et al. 2015): the "
        "storyline-to-story stage of a Plan-and-Write story generator (Yao et al. 2019). Loaded with "
        "`AutoModelForSeq2SeqLM`."
    ),
    paper=LUONG_2015,
    extra_tags=("seq2seq", "attention", "lstm"),
    pipeline_tag="text2text-generation",
    how_to_load="""import hf_nlm  # registers the model types with transformers
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

model = AutoModelForSeq2SeqLM.from_pretrained("{where}")
tokenizer = AutoTokenizer.from_pretrained("{where}")
ids = tokenizer("dog # park # ball", return_tensors="pt").input_ids
print(tokenizer.decode(model.generate(ids, num_beams=5, max_new_tokens=40)[0], skip_special_tokens=True))""",
)
