"""The numeracy LM as a transformers causal LM.

G. Spithourakis, S. Riedel, "Numeracy for Language Models: Evaluating and Improving their Ability to
Predict Numbers", ACL 2018. The text is a sequence of tokens s_t that are words or numerals (a
numeral keeps its value and precision beside its id, :mod:`hf_nlm.tokenization.numerals`); an LSTM
reads their embeddings, h_t = LSTM(e(s_t), h_{t-1}) (sec. 2), and an output layer gives p(s_{t+1} | h_t).
The paper's subject is that output layer, the *strategy* for numerals (sec. 3): here a head of
:mod:`hf_nlm.heads` chosen by ``config.numeral_strategy``:

* ``"softmax"``: one softmax over words and numerals;
* ``"softmax_digits"``: a numeral's output embedding adds a character-RNN encoding of its digits;
* ``"hsoftmax"``: p(class | h) p(s | class, h), class in {word, numeral}.

The body is the AWD-LSTM's (:mod:`hf_nlm.models.awd_lstm`), reused rather than copied: its LSTM,
recurrent cache, sentence-boundary start, padding and ``generate()`` support all carry over; the
defaults turn its extra regularisers off (the paper's 1 x 50 LSTM with dropout 0.1).
"""

from __future__ import annotations

from ..awd_lstm.modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel
from .configuration_numeracy_lm import NumeracyLMConfig


class NumeracyLMPreTrainedModel(AWDLSTMPreTrainedModel):
    config_class = NumeracyLMConfig


class NumeracyLMModel(NumeracyLMPreTrainedModel, AWDLSTMModel):
    """The numeracy LM's body: token ids -> LSTM outputs h_t (the AWD-LSTM body under this config)."""


class NumeracyLMForCausalLM(NumeracyLMPreTrainedModel, AWDLSTMForCausalLM):
    """LSTM body + the numeral strategy's head (``config.numeral_strategy``).

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of the shifted labels in ``loss``;
    ``logits`` are the scores whose ``log_softmax`` is the exact next-token distribution over words
    and numerals (the h-softmax returns log-probabilities directly). Per-token numeral tensors of a
    batch (``numeral_value``, ``numeral_precision``, ``digit_ids``, ``numeral_mask``) may be passed
    through; the heads of this issue read only the ids.
    """

    base_model_class = NumeracyLMModel


__all__ = ["NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel"]
