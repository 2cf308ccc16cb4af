"""``"combination"``: the combination of strategies of Spithourakis & Riedel ("Numeracy for Language Models:
Evaluating and Improving their Ability to Predict Numbers", ACL 2018, sec. 3.5), a numeral branch that mixes
the h-softmax (sec. 3.2), the d-RNN (sec. 3.3, :class:`~.open_branch.DigitBranch`) and the mixture of
Gaussians (sec. 3.4, :class:`~.open_branch.ValueBranch`) with weights predicted from h.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...tokenization.numerals import decode_digits
from ..base import register_head, upcast
from .densities.gaussian_mixture import NumeralMixture
from .mog import mixture_options
from .open_branch import DigitBranch, OpenNumeralBranchHead, ValueBranch


@register_head("combination", place=5)  # sec. 3.5
class CombinationHead(OpenNumeralBranchHead):
    """The combination of strategies (sec. 3.5): p(s | numeral, h) = sum_m p(m | h) p_m(s | h) over
    m in {h-softmax, d-RNN, MoG}, the strategy weights p(m | h) a softmax of h (``strategy_weight``).

    The head holds the three components: the h-softmax's ``numeral_weight`` / ``numeral_bias``, the
    d-RNN's branch ``digit_branch`` (its ``digit_rnn``) and the mixture's ``value_branch`` (its ``mixture``
    and the buffers ``known_values`` / ``known_precisions``).

    Each component is a distribution over numerals. The h-softmax component is closed: a softmax over the
    vocabulary's numerals, each counted once (``<unk_num>`` and a second spelling of a numeral, the rows the
    d-RNN gives 0, have no share of it), so a numeral outside the vocabulary gets
    p(s | numeral, h) = p(d-RNN | h) p_d(s | h) + p(MoG | h) p_MoG(s | h) and the strategy weights learn where
    the open components are needed. Scoring a target then needs the d-RNN on that numeral's own digits only,
    never on every numeral of the vocabulary. Reads the targets' ``digit_ids``, ``numeral_value`` and
    ``numeral_precision``; the MoG's Gaussians are fitted by EM when training starts (and trained on with
    ``config.mog_trainable``), as for ``mog``. Two numerals are told apart by their canonical digit strings
    (the d-RNN's key), and a generated ``<unk_num>`` is written by the open component the context weighs
    more."""

    target_fields = ("numeral_mask", "digit_ids", "numeral_value", "numeral_precision")
    #: The components, in the order of ``strategy_weight``'s rows.
    STRATEGIES = ("hsoftmax", "drnn", "mog")

    branch_options = staticmethod(mixture_options)

    def build_open_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                          transform: str = "log", trainable: bool = False) -> None:
        self.numeral_weight = nn.Parameter(torch.empty(len(tokens), in_features))
        self.numeral_bias = nn.Parameter(torch.zeros(len(tokens)))
        self.strategy_weight = nn.Parameter(torch.empty(len(self.STRATEGIES), in_features))
        self.strategy_bias = nn.Parameter(torch.zeros(len(self.STRATEGIES)))
        self.digit_branch = DigitBranch.build(self, in_features, tokens)
        self.value_branch = ValueBranch.build(
            self, tokens,
            NumeralMixture(in_features, num_components, transform=transform, trainable=trainable))
        # The h-softmax row of each canonical numeral string, to read a target's share without |N| lookups.
        self._row_of = dict(zip(self.digit_branch.strings, self.digit_branch.rows, strict=True))

    def cut_numeral_rows(self, num_rows: int) -> None:
        super().cut_numeral_rows(num_rows)
        self._row_of = dict(zip(self.digit_branch.strings, self.digit_branch.rows, strict=True))

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.digit_branch.init_weights(initializer_range, init)
        self.value_branch.init_weights(init, self.known_values, self.known_precisions)

    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """EM on the training split's numerals for the mixture (:meth:`ValueBranch.fit`)."""
        self.value_branch.fit(stream, self.head_name)

    def strategy_log_weights(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(m | h) for m in :data:`STRATEGIES`, (..., 3)."""
        return torch.log_softmax(upcast(F.linear(hidden, self.strategy_weight, self.strategy_bias)), dim=-1)

    def softmax_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The h-softmax component over the numeral rows (..., |N|), float64: a softmax over the rows the
        d-RNN scores (one per numeral of the vocabulary), -inf at ``<unk_num>`` and at second spellings."""
        logits = upcast(F.linear(hidden, self.numeral_weight, self.numeral_bias))
        closed = logits.masked_fill(~self._scored_rows(hidden.device), float("-inf"))
        return torch.log_softmax(closed, dim=-1).to(torch.float64)

    def _scored_rows(self, device: torch.device) -> torch.Tensor:
        """(|N|,) bool: the rows of the d-RNN's numerals (the first spelling of each; not ``<unk_num>``)."""
        mask = torch.zeros(len(self.numeral_tokens), dtype=torch.bool, device=device)
        mask[self.digit_branch.rows] = True
        return mask

    def component_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each strategy's distribution over the numeral rows, (..., |N|, 3), float64."""
        values = self.value_branch.log_probs(hidden, self.known_values, self.known_precisions)
        return torch.stack([self.softmax_log_probs(hidden), self.digit_branch.log_probs(hidden), values], -1)

    def numeral_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        mixed = torch.logsumexp(
            self.component_log_probs(hidden) + self.strategy_log_weights(hidden).unsqueeze(-2), -1)
        return mixed.to(torch.promote_types(hidden.dtype, torch.float32))

    def exact_numeral_log_probs(self, hidden: torch.Tensor,
                                fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        digits, values = self.digit_branch.exact(hidden, fields), self.value_branch.exact(hidden, fields)
        if digits is None or values is None:
            return None
        # The h-softmax's share: the row of this numeral's canonical string, 0 (-inf) outside the vocabulary.
        canonical = [decode_digits(row) for row in fields["digit_ids"].tolist()]
        rows = torch.tensor([self._row_of.get(text, -1) for text in canonical], device=hidden.device)
        own = self.softmax_log_probs(hidden).gather(-1, rows.clamp(min=0)[:, None]).squeeze(-1)
        soft_share = own.masked_fill(rows < 0, float("-inf"))
        components = torch.stack([soft_share, digits.to(torch.float64), values.to(torch.float64)], -1)
        return torch.logsumexp(components + self.strategy_log_weights(hidden).to(torch.float64), -1)

    def numeral_key(self, text: str):
        return self.digit_branch.key(text)

    def draw_numeral(self, hidden: torch.Tensor, do_sample: bool,
                     generator: torch.Generator | None) -> list[str]:
        # Written by the open component the context trusts more (the h-softmax cannot write an unseen
        # numeral).
        weights = self.strategy_log_weights(hidden)
        branch = self.digit_branch if bool(weights[1] >= weights[2]) else self.value_branch
        return branch.draw(hidden, do_sample, generator)


__all__ = ["CombinationHead"]
