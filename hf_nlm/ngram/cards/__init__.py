"""The card texts of the n-gram baselines (:class:`~hf_nlm.hub.model_card.CardText`), by the model type a
card names, declared in ``kneser_ney.toml`` and ``interpolated.toml`` in this folder: what
``model_cards/generate.py`` writes about them in their card templates (``kneser_ney.md``, ``interpolated.md``
beside them) and in the reference models' cards."""

from pathlib import Path

from ...hub.model_card import CardText

#: How a card loads a saved n-gram model; ``{where}`` is the folder.
NGRAM_LOADING = """from hf_nlm.ngram import NgramLM
from transformers import AutoTokenizer

lm = NgramLM.load("{where}")  # ngram.json + ngram.npz, no pickle
tokenizer = AutoTokenizer.from_pretrained("{where}")  # the tokenizer it was counted with
lm.evaluate(test_split, tokenizer)["perplexity"]"""

#: The card text of each n-gram model type.
CARD_TEXTS: dict[str, CardText] = {
    name: CardText.from_toml(Path(__file__).with_name(f"{name}.toml"), how_to_load=NGRAM_LOADING)
    for name in ("kneser_ney", "interpolated")
}

__all__ = ["CARD_TEXTS", "NGRAM_LOADING"]
