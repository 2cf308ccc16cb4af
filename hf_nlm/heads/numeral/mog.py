"""``"mog"``: the hierarchical softmax whose numeral branch is the mixture of Gaussians of Spithourakis &
Riedel ("Numeracy for Language Models: Evaluating and Improving their Ability to Predict Numbers", ACL
2018, sec. 3.4, "MoG"), and :class:`ValueBranch`, that branch as an object a head holds (the
``combination`` head holds one too).

A numeral v written with r decimals has probability
P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) - Phi((v - 0.5 10^-r - mu_k) / sigma_k)]
(:class:`~hf_nlm.heads.numeral.mixture.NumeralMixture`), the mass of the interval its writing stands for.
"""

from __future__ import annotations

import torch
from torch import nn

from ...tokenization.numerals import UNK_NUM_TOKEN, parse_numeral
from ..base import register_head, write_unless_loaded
from .common import first_rows, spread_over_rows
from .mixture import NumeralMixture, log_interval_probability
from .open_branch import OpenNumeralBranchHead


def mixture_options(config) -> dict:
    """The mixture's construction options read from a config: K (``mog_components``) and ``mog_transform``."""
    return {"num_components": config.mog_components, "transform": config.mog_transform}


class ValueBranch:
    """The mixture of Gaussians (sec. 3.4) as a numeral branch: its distribution over all numerals, laid
    over the vocabulary's numeral rows, and the numerals it writes.

    ``mixture`` is the :class:`NumeralMixture` the head registers as ``mixture`` (:meth:`build`), so its
    parameters are the head's. A numeral row is scored by its value and precision (the first row of each,
    ``rows``, their ``(value, precision)`` in ``known_numerals``; a second spelling of the same numeral
    gets 0); ``<unk_num>`` (``unknown_row``) gets the rest, every numeral outside the vocabulary. The
    head holds the scored rows' values and precisions as the buffers ``known_values`` /
    ``known_precisions`` (saved with the weights), which :meth:`log_probs` is given.
    """

    def __init__(self, mixture: NumeralMixture, tokens: list[str]) -> None:
        self.mixture = mixture
        keys = [self.key(token) for token in tokens]
        self.rows = first_rows(keys)
        # (value, precision) of each scored row as Python numbers: what the buffers are written from again.
        self.known_numerals = [keys[row] for row in self.rows]
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.num_rows = len(tokens)

    @classmethod
    def build(cls, head: nn.Module, in_features: int, tokens: list[str], num_components: int,
              transform: str) -> ValueBranch:
        """A mixture of ``num_components`` Gaussians reading vectors of size ``in_features``, registered on
        ``head`` as ``mixture``, the branch over the numeral rows ``tokens``, and the head's buffers
        ``known_values`` / ``known_precisions``."""
        head.mixture = NumeralMixture(in_features, num_components, transform=transform)
        branch = cls(head.mixture, tokens)
        values, precisions = branch.known_numeral_tensors()
        head.register_buffer("known_values", values)
        head.register_buffer("known_precisions", precisions)
        return branch

    @staticmethod
    def key(text: str) -> tuple[float, int] | None:
        """What tells two numerals apart for the mixture: value and precision (None: no numeral)."""
        numeral = parse_numeral(text)
        return (numeral.value, numeral.precision) if numeral is not None else None

    def known_numeral_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The values (float64: exact for every numeral a float64 holds) and precisions of the scored rows."""
        values = torch.tensor([value for value, _ in self.known_numerals], dtype=torch.float64)
        precisions = torch.tensor([precision for _, precision in self.known_numerals], dtype=torch.long)
        return values, precisions

    def init_weights(self, init, known_values: torch.Tensor, known_precisions: torch.Tensor) -> None:
        """The mixture as at construction (:meth:`NumeralMixture.init_weights`) and the head's buffers of the
        scored rows, which follow from the numeral tokens; what was loaded from a checkpoint is kept."""
        self.mixture.init_weights(init)
        values, precisions = self.known_numeral_tensors()
        write_unless_loaded(known_values, values)
        write_unless_loaded(known_precisions, precisions)

    def fit(self, stream: dict[str, torch.Tensor], head_name: str) -> None:
        """EM on the training split's numerals: the components' means and deviations, the mixture and
        precision biases (:meth:`NumeralMixture.initialize_from`)."""
        mask = stream.get("numeral_mask")
        if mask is None or not bool(mask.any()):
            raise ValueError(f"the {head_name} head fits its Gaussians to the training numerals, but the "
                             "training data has none (or no numeral fields: use a numeracy tokenizer)")
        mask = mask.bool()
        self.mixture.initialize_from(stream["numeral_value"][mask], stream["numeral_precision"][mask])

    def log_probs(self, hidden: torch.Tensor, known_values: torch.Tensor, known_precisions: torch.Tensor) -> torch.Tensor:
        """The mixture's open distribution over the numeral rows (..., |N|), float64: P(r | h) times the
        interval mass of each scored row (values ``known_values``, precisions ``known_precisions``)."""
        mixture = self.mixture
        means, log_stds = mixture.components()
        r = mixture.clip_precision(known_precisions)
        interval = log_interval_probability(
            known_values, r, mixture.log_weights(hidden).unsqueeze(-2), means, log_stds, mixture.transform
        )
        known = mixture.log_precision_probs(hidden).index_select(-1, r).to(interval.dtype) + interval
        return spread_over_rows(known, self.rows, self.unknown_row, self.num_rows)

    def exact(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log P(v, r | h) of each target's own ``numeral_value`` and ``numeral_precision``; None without them."""
        if not {"numeral_mask", "numeral_value", "numeral_precision"} <= fields.keys():
            return None
        return self.mixture.log_prob(hidden, fields["numeral_value"].to(torch.float64), fields["numeral_precision"])

    def draw(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """One sample at ``hidden`` (D,), or the median written with the most likely precision."""
        if do_sample:
            return self.mixture.sample(hidden[None], generator=generator)[2]
        precision = int(self.mixture.log_precision_probs(hidden).argmax())
        return [f"{float(self.mixture.median(hidden[None])[0]):.{precision}f}"]


@register_head("mog")
class MixtureOfGaussiansHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a mixture of Gaussians (sec. 3.4, "MoG"): a numeral
    v written with r decimals has P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) -
    Phi((v - 0.5 10^-r - mu_k) / sigma_k)] (:class:`~hf_nlm.heads.numeral.mixture.NumeralMixture`,
    ``mixture``; in log space, with the pdf x 10^-r fallback). ``branch`` is its :class:`ValueBranch`.
    The means and deviations are fitted by EM on the training numerals when training starts
    (:meth:`prepare_training`) and then frozen (only pi(h) and P(r | h) are learned).
    ``config.mog_components`` = K, ``config.mog_transform``: ``"log"`` (Gaussians over
    sign(v) log(1 + |v|), for numbers spanning orders of magnitude) or ``"none"`` (over v).
    Reads the targets' ``numeral_value`` and ``numeral_precision``."""

    target_fields = ("numeral_mask", "numeral_value", "numeral_precision")

    branch_options = staticmethod(mixture_options)

    def build_open_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                          transform: str = "log") -> None:
        self.branch = ValueBranch.build(self, in_features, tokens, num_components, transform)

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(init, self.known_values, self.known_precisions)

    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """EM on the training split's numerals (:meth:`ValueBranch.fit`)."""
        self.branch.fit(stream, self.head_name)

    def branch_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.branch.log_probs(hidden, self.known_values, self.known_precisions)


__all__ = ["MixtureOfGaussiansHead", "ValueBranch", "mixture_options"]
