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
from .mixture import NumeralMixture
from .open_branch import OpenNumeralBranchHead


def mixture_options(config) -> dict:
    """The mixture's construction options read from a config: K (``mog_components``), ``mog_transform`` and
    whether EM's components go on training (``mog_trainable``)."""
    return {"num_components": config.mog_components, "transform": config.mog_transform,
            "trainable": config.mog_trainable}


class ValueBranch:
    """A density over numbers as a numeral branch: the mixture of Gaussians (sec. 3.4,
    :class:`~hf_nlm.heads.numeral.mixture.NumeralMixture`) or the discrete latent exponent
    (:class:`~hf_nlm.heads.numeral.exponent.NumeralExponentDensity`). Its distribution over all numerals,
    each written numeral the mass of the interval it stands for, laid over the vocabulary's numeral rows,
    and the numerals it writes.

    ``density`` is the module the head registers under a name of its own (:meth:`build`: ``mixture`` for
    ``mog`` and ``combination``), so its parameters are the head's. A numeral row is scored by its value and
    precision (the first row of each, ``rows``, their ``(value, precision)`` in ``known_numerals``; a second
    spelling of the same numeral gets 0); ``<unk_num>`` (``unknown_row``) gets the rest, every numeral
    outside the vocabulary. The head holds the scored rows' values and precisions as the buffers
    ``known_values`` / ``known_precisions`` (saved with the weights), which :meth:`log_probs` is given.
    """

    def __init__(self, density: nn.Module, tokens: list[str]) -> None:
        self.density = density
        keys = [self.key(token) for token in tokens]
        self.rows = first_rows(keys)
        # (value, precision) of each scored row as Python numbers: what the buffers are written from again.
        self.known_numerals = [keys[row] for row in self.rows]
        self.unknown_row = tokens.index(UNK_NUM_TOKEN)
        self.num_rows = len(tokens)

    @classmethod
    def build(cls, head: nn.Module, tokens: list[str], density: nn.Module, name: str = "mixture") -> ValueBranch:
        """``density`` registered on ``head`` as ``name``, the branch over the numeral rows ``tokens``, and the
        head's buffers ``known_values`` / ``known_precisions``."""
        setattr(head, name, density)
        branch = cls(density, tokens)
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
        """The density as at construction (its ``init_weights``) and the head's buffers of the scored rows,
        which follow from the numeral tokens; what was loaded from a checkpoint is kept."""
        self.density.init_weights(init)
        values, precisions = self.known_numeral_tensors()
        write_unless_loaded(known_values, values)
        write_unless_loaded(known_precisions, precisions)

    def fit(self, stream: dict[str, torch.Tensor], head_name: str) -> None:
        """The density started from the training split's numerals (its ``initialize_from``: EM for the
        mixture's components, the training frequencies for the biases)."""
        mask = stream.get("numeral_mask")
        if mask is None or not bool(mask.any()):
            raise ValueError(f"the {head_name} head fits its density to the training numerals, but the "
                             "training data has none (or no numeral fields: use a numeracy tokenizer)")
        mask = mask.bool()
        self.density.initialize_from(stream["numeral_value"][mask], stream["numeral_precision"][mask])

    def log_probs(self, hidden: torch.Tensor, known_values: torch.Tensor, known_precisions: torch.Tensor) -> torch.Tensor:
        """The density's open distribution over the numeral rows (..., |N|), float64: P(r | h) times the
        interval mass of each scored row (values ``known_values``, precisions ``known_precisions``)."""
        known = self.density.vocabulary_log_probs(hidden, known_values, known_precisions)
        return spread_over_rows(known, self.rows, self.unknown_row, self.num_rows)

    def exact(self, hidden: torch.Tensor, fields: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """log P(v, r | h) of each target's own ``numeral_value`` and ``numeral_precision``; None without them."""
        if not {"numeral_mask", "numeral_value", "numeral_precision"} <= fields.keys():
            return None
        return self.density.log_prob(hidden, fields["numeral_value"].to(torch.float64), fields["numeral_precision"])

    def draw(self, hidden: torch.Tensor, do_sample: bool, generator: torch.Generator | None) -> list[str]:
        """One sample at ``hidden`` (D,), or the median written with the most likely precision."""
        if do_sample:
            return self.density.sample(hidden[None], generator=generator)[2]
        precision = int(self.density.log_precision_probs(hidden).argmax())
        return [f"{float(self.density.median(hidden[None])[0]):.{precision}f}"]


@register_head("mog")
class MixtureOfGaussiansHead(OpenNumeralBranchHead):
    """Hierarchical softmax whose numeral branch is a mixture of Gaussians (sec. 3.4, "MoG"): a numeral
    v written with r decimals has P(r | h) sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k) -
    Phi((v - 0.5 10^-r - mu_k) / sigma_k)] (:class:`~hf_nlm.heads.numeral.mixture.NumeralMixture`,
    ``mixture``; in log space, with the pdf x 10^-r fallback). ``branch`` is its :class:`ValueBranch`.
    The means and deviations are fitted by EM on the training numerals when training starts
    (:meth:`prepare_training`) and then frozen (only pi(h) and P(r | h) are learned), or trained on from
    there with ``config.mog_trainable``. ``config.mog_components`` = K, ``config.mog_transform``: ``"log"``
    (Gaussians over sign(v) log(1 + |v|), for numbers spanning orders of magnitude) or ``"none"`` (over v).
    Reads the targets' ``numeral_value`` and ``numeral_precision``."""

    target_fields = ("numeral_mask", "numeral_value", "numeral_precision")

    branch_options = staticmethod(mixture_options)

    def build_open_branch(self, in_features: int, tokens: list[str], num_components: int = 10,
                          transform: str = "log", trainable: bool = False) -> None:
        self.branch = ValueBranch.build(
            self, tokens, NumeralMixture(in_features, num_components, transform=transform, trainable=trainable))

    def init_weights(self, initializer_range: float, init=nn.init) -> None:
        super().init_weights(initializer_range, init)
        self.branch.init_weights(init, self.known_values, self.known_precisions)

    def prepare_training(self, stream: dict[str, torch.Tensor]) -> None:
        """EM on the training split's numerals (:meth:`ValueBranch.fit`)."""
        self.branch.fit(stream, self.head_name)

    def branch_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.branch.log_probs(hidden, self.known_values, self.known_precisions)


__all__ = ["MixtureOfGaussiansHead", "ValueBranch", "mixture_options"]
