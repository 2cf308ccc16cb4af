"""``"drnn"``: the hierarchical softmax whose numeral branch is the digit-RNN of Spithourakis & Riedel
("Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018,
sec. 3.3, "d-RNN"), and :class:`DigitBranch`, that branch as an object a head holds (the ``combination``
head holds one too).

Started from h_t, the d-RNN spells the numeral over {0-9, ., -, end}
(:class:`~hf_nlm.heads.numeral.digit_rnn.DigitRNN`): p(s | numeral, h) = prod_k p(x_k | x_<k, h), an
open vocabulary of numerals with no ``<unk_num>`` of its own.
"""

from __future__ import annotations

import torch
from torch import nn

from ...tokenization.numerals import UNK_NUM_TOKEN, canonical_digits
from ..base import register_head
from .common import first_rows, spread_over_rows
from .digit_rnn import DigitRNN
from .open_branch import OpenNumeralBranchHead


class DigitBranch:
    """The d-RNN (sec. 3.3) as a numeral branch: its distribution over all numerals, laid over the
    vocabulary's numeral rows, and the numerals it writes.

    ``rnn`` is the :class:`DigitRNN` the head registers as ``digit_rnn`` (:meth:`build`), so its parameters
    are the head's. A numeral row is scored by its canonical digit string (the first row of each string,
    ``rows`` / ``strings``; a second spelling of the same numeral gets 0); ``<unk_num>`` (``unknown_row``)
    gets the rest, every numeral outside the vocabulary.
    """

    def __init__(self, rnn: DigitRNN, tokens: list[str]) -> None:
        self.rnn = rnn
        keys = [canonical_digits(token) for token in tokens]
        self.rows = first_rows(keys)
        self.strings = [keys[row] for row in self.rows]
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.num_rows = len(tokens)

    @classmethod
    def build(cls, head: nn.Module, in_features: int, tokens: list[str]) -> DigitBranch:
        """A d-RNN reading vectors of size ``in_features``, registered on ``head`` as ``digit_rnn``, and the
        branch over the numeral rows ``tokens``."""
        head.digit_rnn = DigitRNN(in_features)
        return cls(head.digit_rnn, tokens)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        self.rnn.init_weights(initializer_range, init)

    @staticmethod
    def key(text: str) -> str | None:
        """What tells two numerals apart for the d-RNN: the canonical digit string."""
        return canonical_digits(text)

    def vocabulary_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p_d(s | h) of the numeral of each scored row, (..., len(rows))."""
        return self.rnn.log_prob_of_strings(hidden, self.strings)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The d-RNN's open distribution over the numeral rows (..., |N|), float64."""
        return spread_over_rows(self.vocabulary_log_probs(hidden), self.rows, self.unknown_row, self.num_rows)

    def exact(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log p_d(s | h) of each target's own digits (``digit_ids``); None without the fields."""
        if "digit_ids" not in fields or "numeral_mask" not in fields:
            return None
        return self.rnn.log_prob(hidden, fields["digit_ids"])

    def draw(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """One sample at ``hidden`` (D,), or the 16 most likely strings of a beam search, best first."""
        if do_sample:
            return self.rnn.sample(hidden[None], generator=generator)[0]
        # The most likely strings, best first, so that the best one outside the vocabulary is found.
        beams, _ = self.rnn.beam_search(hidden[None], num_beams=16, num_return_sequences=16)
        return [text for text in beams[0] if text]


@register_head("drnn")
class DigitRNNHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a digit-level RNN (sec. 3.3, "d-RNN"): started from
    h_t, it spells the numeral over {0-9, ., -, end} (:class:`~hf_nlm.heads.numeral.digit_rnn.DigitRNN`,
    ``digit_rnn``), an open vocabulary with no ``<unk_num>`` of its own. ``branch`` is its
    :class:`DigitBranch`. Reads the targets' ``digit_ids``."""

    target_fields = ("numeral_mask", "digit_ids")

    def build_open_branch(self, in_features: int, tokens: list[str]) -> None:
        self.branch = DigitBranch.build(self, in_features, tokens)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(initializer_range, init)


__all__ = ["DigitBranch", "DigitRNNHead"]
