"""``"mog"``: the hierarchical softmax whose numeral branch is the mixture of Gaussians of Spithourakis &
Riedel ("Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL 2018,
sec. 3.4, "MoG"), and its settings, :class:`MixtureOfGaussiansOptions` (the ``combination`` head reads them
too).

A numeral v written with r decimals has probability
P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) - Phi((v - 0.5 10^-r - mu_k) / sigma_k)]
(:class:`~hf_nlm.heads.numeral.densities.gaussian_mixture.NumeralMixture`), the mass of the interval its
writing stands for.
"""

from __future__ import annotations

import torch
from torch import nn

from ..base import head_options, register_head
from .densities.gaussian_mixture import TRANSFORMS, NumeralMixture
from .open_branch import OpenNumeralBranchHead, ValueBranch


@head_options
class MixtureOfGaussiansOptions:
    r"""
    The settings of the mixture of Gaussians of the ``mog`` and ``combination`` heads: fields of the config of
    a model that offers them (:class:`~hf_nlm.NumeracyLMConfig`).

    Args:
        mog_components (`int`, defaults to 10):
            With `head="mog"` or `"combination"` (the numeracy LM's `numeral_strategy`): K, the number of
            Gaussians of the numeral density (fitted by EM on the training numerals when training starts, then
            frozen unless `mog_trainable`).
        mog_transform (`str`, defaults to `"log"`):
            With `head="mog"` or `"combination"`: the space of the Gaussians, `"log"` (sign(v) log(1 + |v|):
            numbers spanning orders of magnitude, negative ones mirrored) or `"none"` (v itself, the paper's
            basic model).
        mog_trainable (`bool`, defaults to `False`):
            With `head="mog"` or `"combination"`: the Gaussians' means and log-deviations are parameters,
            trained by the loss from EM's start on (their deviations floored at the smallest one EM gave);
            `False` keeps them where EM put them (buffers) and learns only the context's mixture weights and
            precision distribution.
    """

    mog_components: int = 10
    mog_transform: str = "log"
    mog_trainable: bool = False

    def validate_mixture(self):
        name = type(self).__name__
        if self.mog_components < 1:
            raise ValueError(f"{name}.mog_components must be >= 1, got {self.mog_components}")
        if self.mog_transform not in TRANSFORMS:
            raise ValueError(f"{name}.mog_transform must be 'log' or 'none', got {self.mog_transform!r}")


def mixture_options(config) -> dict:
    """The mixture's construction options read from a config (:class:`MixtureOfGaussiansOptions`): K
    (``mog_components``), ``mog_transform`` and whether EM's components go on training (``mog_trainable``)."""
    return {"num_components": config.mog_components, "transform": config.mog_transform,
            "trainable": config.mog_trainable}


@register_head("mog", place=4)  # sec. 3.4
class MixtureOfGaussiansHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a mixture of Gaussians (sec. 3.4, "MoG"): a numeral
    v written with r decimals has P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) -
    Phi((v - 0.5 10^-r - mu_k) / sigma_k)]
    (:class:`~hf_nlm.heads.numeral.densities.gaussian_mixture.NumeralMixture`, ``mixture``; in log space,
    with the pdf x 10^-r fallback). ``branch`` is its :class:`~hf_nlm.heads.numeral.open_branch.ValueBranch`.
    The means and deviations are fitted by EM on the training numerals when training starts
    (:meth:`prepare_training`) and then frozen (only pi(h) and P(r | h) are learned), or trained on from
    there with ``config.mog_trainable``. ``config.mog_components`` = K, ``config.mog_transform``: ``"log"``
    (Gaussians over sign(v) log(1 + |v|), for numbers spanning orders of magnitude) or ``"none"`` (over v):
    :class:`MixtureOfGaussiansOptions`.
    Reads the targets' ``numeral_value`` and ``numeral_precision``."""

    target_fields = ("numeral_mask", "numeral_value", "numeral_precision")

    branch_options = staticmethod(mixture_options)

    def build_open_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                          transform: str = "log", trainable: bool = False) -> None:
        self.branch = ValueBranch.build(
            self, tokens,
            NumeralMixture(in_features, num_components, transform=transform, trainable=trainable))

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(init, self.known_values, self.known_precisions)

    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """EM on the training split's numerals (:meth:`ValueBranch.fit`)."""
        self.branch.fit(stream, self.head_name)

    def branch_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.branch.log_probs(hidden, self.known_values, self.known_precisions)


__all__ = ["MixtureOfGaussiansHead", "MixtureOfGaussiansOptions", "mixture_options"]
