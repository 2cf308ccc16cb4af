"""Configuration of the numeracy LM (Spithourakis & Riedel, ACL 2018)."""

from __future__ import annotations

import math
from pathlib import Path

from huggingface_hub.dataclasses import strict

from ...heads.numeral.mog import MixtureOfGaussiansOptions
from ...hub.model_card import CardText
from ..awd_lstm.configuration_awd_lstm import AWDLSTMConfig


@strict
class NumeracyLMConfig(AWDLSTMConfig, MixtureOfGaussiansOptions):
    r"""
    Configuration for [`NumeracyLMForCausalLM`], the language model of G. Spithourakis, S. Riedel, "Numeracy
    for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018: an LSTM over
    tokens that are words or numerals, with an output layer chosen by `numeral_strategy`. The body is the
    AWD-LSTM's ([`AWDLSTMConfig`], whose fields all apply); the defaults are the paper's model: one LSTM layer
    of 50 units, 50-dimensional embeddings, dropout 0.1, none of AWD-LSTM's other regularisers. The settings
    of the mixture of Gaussians (`mog_components`, `mog_transform`, `mog_trainable`, for
    `numeral_strategy="mog"` or `"combination"`) are declared and documented with those heads, in
    [`~hf_nlm.heads.numeral.mog.MixtureOfGaussiansOptions`], which this class lists among its bases.

    Args:
        numeral_strategy (`str`, defaults to `"softmax"`):
            The output layer (the config's `head`, under the paper's name): `"softmax"` (one vocabulary;
            unknown words and numerals are `<unk_word>` / `<unk_num>`), `"softmax_digits"` (sec. 3.1: a
            numeral's output embedding is its token embedding plus a character-RNN encoding of its digits),
            `"hsoftmax"` (sec. 3.2: p(class | h) p(token | class, h) with class in {word, numeral}), `"drnn"`
            (sec. 3.3: the h-softmax whose numeral branch is a digit-RNN spelling the numeral, an open
            vocabulary), `"mog"` (sec. 3.4: the numeral branch is a mixture of Gaussians over the value, with
            the precision's own distribution), `"combination"` (sec. 3.5: the three numeral branches mixed by
            weights predicted from h), `"dexp"` (Berg-Kirkpatrick & Spokoyny, EMNLP 2020: a softmax over
            signed powers of ten, then a density for the mantissa within the chosen one), or any other head of
            `hf_nlm.heads`.
        numeral_vocab (`dict[str, int]`, *optional*):
            The numerals of the vocabulary (`<unk_num>` included) and their ids: `tokenizer.numeral_vocab` of
            a tokenizer from `hf_nlm.tokenization.train_numeracy_tokenizer`. Needed by `"softmax_digits"`
            (which numerals have digits) and `"hsoftmax"` (which ids form the numeral class).
        embedding_size (`int`, defaults to 50):
            Size of the token embeddings.
        hidden_size (`int`, defaults to 50):
            Hidden size of the LSTM (the paper's 50).
        num_hidden_layers (`int`, defaults to 1):
            Number of stacked LSTM layers (the paper's 1).
        dropout (`float`, defaults to 0.1):
            Dropout on the LSTM's outputs before the head (the paper's 0.1).
        dropout_input (`float`, defaults to 0.1):
            Dropout on the embedded inputs.
        numeral_loss_weight (`float`, defaults to 1.0):
            The weight of a numeral target's NLL in the training loss, a word's being 1: `loss` is the
            weighted mean sum_t w_t NLL_t / sum_t w_t in training mode (more of the gradient for numerals at a
            weight above 1). `nll`, and `loss` in evaluation mode, stay the plain mean NLL, so perplexities
            are unchanged by it.
        tie_word_embeddings (`bool`, defaults to `False`):
            Use the input embedding matrix as the output word matrix (`"softmax"` / `"softmax_digits"` only).
    """

    model_type = "numeracy_lm"
    card_text = CardText.from_toml(Path(__file__).with_name("card.toml"))
    attribute_map = {"numeral_strategy": "head"}

    embedding_size: int = 50
    hidden_size: int = 50
    num_hidden_layers: int = 1
    dropout: float = 0.1
    dropout_hidden: float = 0.0
    dropout_input: float = 0.1
    dropout_embedding: float = 0.0
    weight_drop: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0
    tie_word_embeddings: bool = False
    numeral_vocab: dict[str, int] | None = None
    numeral_loss_weight: float = 1.0

    def validate_numeral_loss_weight(self):
        name, w = type(self).__name__, self.numeral_loss_weight
        if not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0):
            raise ValueError(f"{name}.numeral_loss_weight must be a finite number > 0, got {w!r}")
        if w != 1 and not self.numeral_vocab:
            raise ValueError(
                f"{name}.numeral_loss_weight={w} needs numeral_vocab, which says which targets are numerals"
            )

    def validate_numeral_vocab(self):
        if self.numeral_vocab is None:
            return
        name = type(self).__name__
        ids = list(self.numeral_vocab.values())
        wrong = [(token, i) for token, i in self.numeral_vocab.items() if not 0 <= i < self.vocab_size]
        if wrong:
            raise ValueError(
                f"{name}.numeral_vocab: id {wrong[0][1]} of {wrong[0][0]!r} is outside [0, {self.vocab_size})"
            )
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}.numeral_vocab gives one id to two numerals")


__all__ = ["NumeracyLMConfig"]
