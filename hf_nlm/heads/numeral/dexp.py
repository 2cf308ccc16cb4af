"""``"dexp"``: the hierarchical softmax whose numeral branch is the discrete-latent-exponent density of
Berg-Kirkpatrick & Spokoyny ("An Empirical Investigation of Contextualized Number Prediction", EMNLP 2020,
"DExp"): a softmax over signed powers of ten, then a density for the mantissa within the chosen one
(:class:`~hf_nlm.heads.numeral.densities.discrete_exponent.NumeralExponentDensity`), on the class split of
Spithourakis & Riedel (ACL 2018, sec. 3.2).
"""

from __future__ import annotations

from torch import nn

from ..base import register_head
from .densities.discrete_exponent import NumeralExponentDensity
from .open_branch import OpenNumeralBranchHead, ValueBranch


@register_head("dexp", place=6)  # after the strategies of Spithourakis & Riedel
class DiscreteExponentHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a discrete latent exponent: p(sign, power of ten | h),
    then a truncated Gaussian over the log-mantissa within it, both read from h
    (:class:`~hf_nlm.heads.numeral.densities.discrete_exponent.NumeralExponentDensity`, ``exponent_density``).
    A numeral v written with r decimals gets P(r | h) times the mass of [v - 0.5 10^-r, v + 0.5 10^-r], as for
    ``mog``, so its probability is exact at its written precision. ``branch`` is its
    :class:`~hf_nlm.heads.numeral.open_branch.ValueBranch`. The class and precision biases start at the
    training numerals' frequencies when training starts (:meth:`prepare_training`). Reads the targets'
    ``numeral_value`` and ``numeral_precision``."""

    target_fields = ("numeral_mask", "numeral_value", "numeral_precision")

    def build_open_branch(self, in_features: int, tokens: list[str]) -> None:
        self.branch = ValueBranch.build(self, tokens, NumeralExponentDensity(in_features), "exponent_density")

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(init, self.known_values, self.known_precisions)

    def prepare_training(self, stream) -> None:
        """The class and precision biases from the training split's numerals (:meth:`ValueBranch.fit`)."""
        self.branch.fit(stream, self.head_name)

    def branch_log_probs(self, hidden):
        return self.branch.log_probs(hidden, self.known_values, self.known_precisions)


__all__ = ["DiscreteExponentHead"]
