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

Generation with an open numeral branch (``drnn``, ``mog``, ``combination``): over the vocabulary,
``<unk_num>`` holds the mass of every numeral outside it, and the text must show one of them, written
by the branch's own decoder (sec. 3.3-3.4: the d-RNN spells it, the MoG writes a value with r
decimals). :meth:`NumeracyLMForCausalLM.generate` searches words and numerals jointly: greedy and
beam search score ``<unk_num>`` as the numeral the decoder would write there (its probability
log p(numeral | h) + log p(s | numeral, h), not the sum over all unseen numerals), so a hypothesis's
score is the probability of the text it shows. Since an unseen numeral is read back as ``<unk_num>``,
the states after it do not depend on which numeral was written, and this is the exact joint score
of each hypothesis. Sampling draws ``<unk_num>`` with its full probability and then the numeral from
the branch's distribution over unseen numerals: ancestral sampling of the joint distribution.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from ...heads.numeral import kept_numerals
from ..awd_lstm.modeling_awd_lstm import AWDLSTMForCausalLM, AWDLSTMModel, AWDLSTMPreTrainedModel
from .configuration_numeracy_lm import NumeracyLMConfig


class NumeracyLMPreTrainedModel(AWDLSTMPreTrainedModel):
    config_class = NumeracyLMConfig

    def check_resize(self, vocab_size: int) -> None:
        """New tokens are words; the numerals keep their ids, and a numeral whose id is cut leaves
        ``config.numeral_vocab`` (:meth:`resize_token_embeddings`). Refused: a size that cuts every numeral
        of a model that weighs the numerals in its loss (``numeral_loss_weight``), or that the head cannot
        follow."""
        if self.config.numeral_vocab and self.config.numeral_loss_weight != 1:
            kept_numerals(self.config.numeral_vocab, vocab_size, type(self).__name__)
        super().check_resize(vocab_size)

    def resize_token_embeddings(self, new_num_tokens: int | None = None,
                                pad_to_multiple_of: int | None = None, mean_resizing: bool = True):
        """The models' ``resize_token_embeddings``; ``config.numeral_vocab`` keeps the numerals whose ids
        the new vocabulary keeps (None where it keeps none)."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.config.numeral_vocab:
            size = embeddings.num_embeddings
            kept = {token: i for token, i in self.config.numeral_vocab.items() if i < size}
            self.config.numeral_vocab = kept or None
        return embeddings


class NumeracyLMModel(NumeracyLMPreTrainedModel, AWDLSTMModel):
    """The numeracy LM's body: token ids -> LSTM outputs h_t (the AWD-LSTM body under this config)."""


class NumeracyLMForCausalLM(NumeracyLMPreTrainedModel, AWDLSTMForCausalLM):
    """LSTM body + the numeral strategy's head (``config.numeral_strategy``).

    ``forward(input_ids, labels=input_ids)`` returns the mean NLL of the shifted labels in ``loss`` (in
    training mode weighted by ``config.numeral_loss_weight`` for numeral targets; ``nll`` is always the plain
    mean); ``logits`` are the scores whose ``log_softmax`` is the exact next-token distribution over words and
    numerals (the h-softmax returns log-probabilities directly). Per-token numeral tensors of a batch
    (``numeral_value``, ``numeral_precision``, ``digit_ids``, ``numeral_mask``) may be passed through: the
    closed-vocabulary heads read only the ids, the digit-RNN and mixture heads the fields they name in
    ``target_fields``.
    """

    base_model_class = NumeracyLMModel

    def target_loss_weights(self, target_ids: torch.Tensor) -> torch.Tensor | None:
        """``config.numeral_loss_weight`` for the numeral targets (``<unk_num>`` included), 1 for the words;
        None at weight 1, the plain mean NLL."""
        weight = self.config.numeral_loss_weight
        if weight == 1:
            return None
        numerals = torch.tensor(list(self.config.numeral_vocab.values()), device=target_ids.device)
        return torch.isin(target_ids, numerals).to(torch.float32) * (weight - 1) + 1

    def generate(self, inputs: torch.Tensor | None = None, generation_config=None, **kwargs):
        """``GenerationMixin.generate``, with words and numerals searched jointly by an open numeral
        branch (module docstring). With ``return_dict_in_generate=True`` the output also has
        ``numerals``: per returned sequence, ``{position: numeral text}`` for each ``<unk_num>``, the
        numeral written there (:func:`hf_nlm.evaluation.decode_generated` puts them in the text).
        """
        head = self.lm_head
        if not getattr(head, "open_numeral_vocabulary", False):
            return super().generate(inputs, generation_config, **kwargs)
        config = generation_config if generation_config is not None else self.generation_config
        sampling = bool(kwargs.get("do_sample", config.do_sample))
        joint = self._joint_numerals = None if sampling else JointNumeralScores(head)
        hook = self.lm_head.register_forward_hook(joint.observe) if joint is not None else None
        try:
            out = super().generate(inputs, generation_config, **kwargs)
        finally:
            self._joint_numerals = None
            if hook is not None:
                hook.remove()
        if isinstance(out, torch.Tensor):
            return out
        if joint is not None:  # the numeral each generated <unk_num> was scored as, remembered by its prefix
            found = [{t: joint.written.get(tuple(seq[:t].tolist()))
                      for t in torch.nonzero(seq == joint.unk_num_id).squeeze(-1).tolist()}
                     for seq in out.sequences]
            out.numerals = [{t: text for t, text in row.items() if text is not None} for row in found]
            return out
        mask = kwargs.get("attention_mask")
        if mask is not None:  # the prompt's padding, per returned sequence; generated tokens are all real
            mask = mask.repeat_interleave(out.sequences.shape[0] // mask.shape[0], dim=0)
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], out.sequences.shape[1] - mask.shape[1])], 1)
        # Sampling: <unk_num> was drawn with its whole mass; now the numeral, from the branch's distribution.
        out.numerals = write_unknown_numerals(self, out.sequences, mask, do_sample=True)
        return out

    def _get_logits_processor(self, *args, **kwargs):
        processors = super()._get_logits_processor(*args, **kwargs)
        joint = getattr(self, "_joint_numerals", None)
        if joint is not None:  # first: the other processors (suppression, penalties) then see the joint score
            processors.insert(0, joint)
        return processors


@torch.no_grad()
def write_unknown_numerals(model, sequences: torch.Tensor, attention_mask: torch.Tensor | None = None,
                           do_sample: bool = False,
                           generator: torch.Generator | None = None) -> list[dict[int, str]]:
    """For every ``<unk_num>`` in generated ``sequences`` (B, T), the numeral it stands for, written by the
    model's own numeral decoder from the state that generated it: ``{position: text}`` per sequence.
    The digit-RNN spells it (greedy: the best string outside the vocabulary; or a sample), the mixture
    of Gaussians writes its median with the likeliest precision (or a sample). ``attention_mask``
    (B, T) marks left padding, if any. Empty dicts for a model whose numeral branch is closed
    (``<unk_num>`` is all it knows)."""
    head = getattr(model, "lm_head", None)
    if not getattr(head, "open_numeral_vocabulary", False):
        return [{} for _ in sequences]
    unk = int(head.numeral_ids[head.unknown_row])
    found = [torch.nonzero(seq == unk).squeeze(-1).tolist() for seq in sequences]
    if not any(found):
        return [{} for _ in sequences]
    # position t predicts t + 1
    hidden = model(sequences, attention_mask=attention_mask, output_hidden_states=True).hidden_states[-1]
    return [{t: head.write_numeral(hidden[b, t - 1], do_sample, generator) for t in positions if t > 0}
            for b, positions in enumerate(found)]


class JointNumeralScores(LogitsProcessor):
    """Replaces the score of ``<unk_num>`` by that of the numeral the head's decoder writes there
    (:meth:`~hf_nlm.heads.numeral.open_branch.OpenNumeralBranchHead.best_unknown_numerals`), read from the
    hidden state the head was just called with (``observe``, a forward hook on the head). ``written`` maps
    each prefix it scored to that numeral, so the text shows exactly the numeral the search scored."""

    def __init__(self, head) -> None:
        self.head = head
        self.unk_num_id = int(head.numeral_ids[head.unknown_row])
        self.texts: list[str] = []
        self.scores: torch.Tensor | None = None
        self.written: dict[tuple[int, ...], str] = {}

    def observe(self, module, args, output) -> None:
        hidden = args[0]  # (B, T, D): the last position predicts the next token
        self.texts, self.scores = self.head.best_unknown_numerals(hidden[:, -1])

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.scores is None or self.scores.shape[0] != scores.shape[0]:
            raise RuntimeError("JointNumeralScores: the head was not called on this step's hidden states")
        scores = scores.clone()
        scores[:, self.unk_num_id] = self.scores.to(scores.dtype)
        for prefix, text in zip(input_ids.tolist(), self.texts, strict=True):
            self.written[tuple(prefix)] = text
        self.scores = None
        return scores


__all__ = ["NumeracyLMForCausalLM", "NumeracyLMModel", "NumeracyLMPreTrainedModel", "write_unknown_numerals"]
