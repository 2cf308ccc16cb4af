"""``"drnn"``: the hierarchical softmax whose numeral branch is the digit-RNN of Spithourakis & Riedel
("Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018,
sec. 3.3, "d-RNN"); the branch is a :class:`~hf_nlm.heads.numeral.open_branch.DigitBranch`.

Started from h_t, the d-RNN spells the numeral over {0-9, ., -, end}
(:class:`~hf_nlm.heads.numeral.densities.digit_rnn.DigitRNN`): p(s | numeral, h) = prod_k p(x_k | x_<k, h), an
open vocabulary of numerals with no ``<unk_num>`` of its own.
"""

from __future__ import annotations

from torch import nn

from ..base import register_head
from .open_branch import DigitBranch, OpenNumeralBranchHead


@register_head("drnn", place=3)  # sec. 3.3
class DigitRNNHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a digit-level RNN (sec. 3.3, "d-RNN"): started from h_t,
    it spells the numeral over {0-9, ., -, end} (:class:`~hf_nlm.heads.numeral.densities.digit_rnn.DigitRNN`,
    ``digit_rnn``), an open vocabulary with no ``<unk_num>`` of its own. ``branch`` is its
    :class:`~hf_nlm.heads.numeral.open_branch.DigitBranch`. Reads the targets' ``digit_ids``."""

    target_fields = ("numeral_mask", "digit_ids")

    def build_open_branch(self, in_features: int, tokens: list[str]) -> None:
        self.branch = DigitBranch.build(self, in_features, tokens)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(initializer_range, init)


__all__ = ["DigitRNNHead"]
