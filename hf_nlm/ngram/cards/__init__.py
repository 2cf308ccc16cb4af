"""The card texts of the n-gram baselines (:class:`~hf_nlm.hub.model_card.CardText`), by the model type a card
names: what ``model_cards/generate.py`` writes about them in their card templates (``kneser_ney.md``,
``interpolated.md`` in this folder) and in the reference models' cards."""

from ...hub.model_card import CardText, Paper

#: How a card loads a saved n-gram model; ``{where}`` is the folder.
NGRAM_LOADING = """from hf_nlm.ngram import NgramLM
from transformers import AutoTokenizer

lm = NgramLM.load("{where}")  # ngram.json + ngram.npz, no pickle
tokenizer = AutoTokenizer.from_pretrained("{where}")  # the tokenizer it was counted with
lm.evaluate(test_split, tokenizer)["perplexity"]"""

CHEN_GOODMAN_1998 = Paper(
    "Kneser & Ney, *Improved Backing-off for M-gram Language Modeling*, ICASSP 1995; Chen & Goodman, "
    "*An Empirical Study of Smoothing Techniques for Language Modeling*, TR-10-98, Harvard (1998)",
    """@inproceedings{kneser1995improved,
  title     = {Improved Backing-off for {M}-gram Language Modeling},
  author    = {Kneser, Reinhard and Ney, Hermann},
  booktitle = {Proceedings of ICASSP},
  pages     = {181--184},
  year      = {1995}
}
@techreport{chen1998empirical,
  title       = {An Empirical Study of Smoothing Techniques for Language Modeling},
  author      = {Chen, Stanley F. and Goodman, Joshua},
  institution = {Harvard University},
  number      = {TR-10-98},
  year        = {1998}
}""",
)

KNESER_NEY = CardText(
    title="Kneser-Ney n-gram",
    summary=(
        "An interpolated modified Kneser-Ney n-gram model (Chen & Goodman's variant: three discounts per "
        "order from the count-of-counts, continuation counts for the lower orders), "
        "`hf_nlm.ngram.KneserNeyLM`."
    ),
    paper=CHEN_GOODMAN_1998,
    extra_tags=("n-gram", "kneser-ney"),
    how_to_load=NGRAM_LOADING,
)

JELINEK_MERCER_1980 = Paper(
    "Jelinek & Mercer, *Interpolated Estimation of Markov Source Parameters from Sparse Data*, 1980",
    """@inproceedings{jelinek1980interpolated,
  title     = {Interpolated Estimation of {M}arkov Source Parameters from Sparse Data},
  author    = {Jelinek, Frederick and Mercer, Robert L.},
  booktitle = {Proceedings of the Workshop on Pattern Recognition in Practice},
  pages     = {381--397},
  year      = {1980}
}""",
)

INTERPOLATED = CardText(
    title="Interpolated (deleted-interpolation) n-gram",
    summary=(
        "A Jelinek-Mercer interpolated n-gram model whose weights, bucketed by context count, are fitted "
        "by EM on the validation split: Bengio et al.'s \"interpolated trigram\" baseline, "
        "`hf_nlm.ngram.InterpolatedLM`."
    ),
    paper=JELINEK_MERCER_1980,
    extra_tags=("n-gram", "deleted-interpolation"),
    how_to_load=NGRAM_LOADING,
)

#: The card text of each n-gram model type.
CARD_TEXTS: dict[str, CardText] = {"kneser_ney": KNESER_NEY, "interpolated": INTERPOLATED}

__all__ = ["CARD_TEXTS", "INTERPOLATED", "KNESER_NEY", "NGRAM_LOADING"]
