"""A density over numerals with a discrete latent exponent (Berg-Kirkpatrick & Spokoyny, "An Empirical
Investigation of Contextualized Number Prediction", EMNLP 2020: "DExp"), as a torch module for the numeral
branch of the hierarchical softmax.

A number x is first given a class from h: its sign and its power of ten, x in +-[10^e, 10^(e+1)) for
e in [e_min, e_max], or "zero", |x| < 10^e_min. Within a power of ten the log-mantissa
u = log10|x| - e in [0, 1) has a Gaussian density truncated to [0, 1), its mean (in [0, 1], a sigmoid)
and deviation also read from h; the zero class is uniform on (-10^e_min, 10^e_min)::

    p(x | h) = p(zero | h) U(x)
               + sum_{s, e} p(s, e | h) TN(log10|x| - e; mu_{s,e}(h), sigma_{s,e}(h)) / (|x| ln 10)

The classes tile the real line between -10^(e_max+1) and 10^(e_max+1). As for the mixture of Gaussians
(:mod:`.gaussian_mixture`), a numeral v written with r decimals is given the probability of the interval it
stands for, times a precision distribution::

    P(v, r | h) = P(r | h) * integral of p(x | h) over [v - 0.5 10^-r, v + 0.5 10^-r]

so the numerals of one precision partition the line and their probabilities sum to P(r | h). The interval is
cut at the class boundaries it crosses; each piece's mass is a difference of normal CDFs in u, computed in log
space by :func:`~.gaussian_mixture.log_normal_interval_mass` (the midpoint and the log of the width, so a
width of 10^-20 in u is no cancellation). The defaults cover every numeral the numeracy tokenizer keeps: at
most :data:`~hf_nlm.tokenization.numerals.MAX_NUMERAL_LENGTH` symbols, so |v| < 10^24 and a nonzero
|v| >= 10^-22.

Point estimates are closed forms: the CDF per class, the quantile by finding the class where the CDF
crosses q and inverting its truncated normal (``ndtri``), the mean from the log-normal's moments. Every
difference of normal CDFs is taken in log space (:func:`_log_normal_mass`): a deviation of 0.01 puts the
far end of a class 100 deviations away, where ``ndtr`` differences would cancel to nothing.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....tokenization.numerals import MAX_NUMERAL_LENGTH
from .gaussian_mixture import DEFAULT_MAX_PRECISION, WrittenPrecision, log_normal_interval_mass

#: The lowest and highest power of ten of the default classes: every numeral of at most
#: MAX_NUMERAL_LENGTH symbols is below 10^24 and, unless 0, at least 10^-22.
DEFAULT_MIN_EXPONENT = -(MAX_NUMERAL_LENGTH - 2)
DEFAULT_MAX_EXPONENT = MAX_NUMERAL_LENGTH - 1

_LN10 = math.log(10.0)
_LOG_LN10 = math.log(_LN10)


class NumeralExponentDensity(WrittenPrecision, nn.Module):
    """h -> a distribution over numerals (value v, precision r) with a discrete latent exponent (module
    docstring).

    Classes, in the order of the real line: ``-10^e_max`` down to ``-10^e_min`` (negative, largest
    magnitude first), zero, then ``+10^e_min`` up to ``+10^e_max``; ``num_classes = 2 E + 1`` with
    E = e_max - e_min + 1. Parameters: ``class_logits`` (Linear D -> num_classes), ``mantissa_mean`` and
    ``mantissa_log_std`` (Linear D -> 2E each: the log-mantissa's mean and log deviation for each signed
    power of ten) and
    ``precision_logits`` (Linear D -> max_precision + 1), as in :class:`~.gaussian_mixture.NumeralMixture`. A
    numeral with more decimals than ``max_precision`` is scored as if written with ``max_precision``.

    Computed in float64 inside; log-probabilities come back in float32 or wider.
    """

    def __init__(self, in_features: int, min_exponent: int = DEFAULT_MIN_EXPONENT,
                 max_exponent: int = DEFAULT_MAX_EXPONENT, max_precision: int = DEFAULT_MAX_PRECISION,
                 min_std: float = 1e-3) -> None:
        super().__init__()
        if min_exponent > max_exponent:
            raise ValueError(f"min_exponent ({min_exponent}) must be <= max_exponent ({max_exponent})")
        if max_precision < 0:
            raise ValueError(f"max_precision must be >= 0, got {max_precision}")
        self.in_features = in_features
        self.min_exponent, self.max_exponent = min_exponent, max_exponent
        self.num_exponents = max_exponent - min_exponent + 1
        self.num_classes = 2 * self.num_exponents + 1
        self.max_precision = max_precision
        self.min_std = min_std
        self.class_logits = nn.Linear(in_features, self.num_classes)
        self.mantissa_mean = nn.Linear(in_features, 2 * self.num_exponents)
        self.mantissa_log_std = nn.Linear(in_features, 2 * self.num_exponents)
        self.precision_logits = nn.Linear(in_features, max_precision + 1)
        self.init_weights()

    @property
    def class_exponent(self) -> torch.Tensor:
        """Each class's power of ten e (float64, in class order; 0 for the zero class)."""
        return _class_tables(self.min_exponent, self.max_exponent, self.class_logits.weight.device)[0]

    @property
    def class_sign(self) -> torch.Tensor:
        """Each class's sign, -1, 0 (the zero class) or 1 (float64, in class order)."""
        return _class_tables(self.min_exponent, self.max_exponent, self.class_logits.weight.device)[1]

    def init_weights(self, init=nn.init) -> None:
        """Uniform(+-1/sqrt(D)) weights (``nn.Linear``'s bound) and zero biases, except the log-mantissa's
        deviation: 0.3 (a third of a power of ten) to start. ``init`` as in
        :meth:`hf_nlm.heads.base.OutputHead.init_weights` (what a checkpoint loaded is kept)."""
        bound = self.in_features**-0.5 if self.in_features > 0 else 0.0
        for layer in (self.class_logits, self.mantissa_mean, self.mantissa_log_std, self.precision_logits):
            init.uniform_(layer.weight, -bound, bound)
        init.zeros_(self.class_logits.bias)
        init.zeros_(self.precision_logits.bias)
        init.zeros_(self.mantissa_mean.bias)  # sigmoid(0): the middle of the power of ten
        init.constant_(self.mantissa_log_std.bias, math.log(0.3))

    # --- parameters

    @torch.no_grad()
    def initialize_from(self, values, precisions=None) -> NumeralExponentDensity:
        """The class and precision biases from the training numerals' frequencies (add-one smoothed), so
        that p(class | h) and P(r | h) start at the training distribution. Returns self."""
        v = torch.as_tensor(np.asarray(values, dtype=np.float64)).reshape(-1)
        if v.numel() == 0:
            raise ValueError("initialize_from needs at least one value")
        counts = torch.bincount(self.class_of(v), minlength=self.num_classes).to(torch.float64) + 1
        self.class_logits.bias.copy_(torch.log(counts / counts.sum()).to(self.class_logits.bias.dtype))
        if precisions is not None:
            r = (torch.as_tensor(np.asarray(precisions, dtype=np.int64)).reshape(-1)
                 .clamp(0, self.max_precision))
            counts = torch.bincount(r, minlength=self.max_precision + 1).to(torch.float64) + 1
            self.precision_logits.bias.copy_(
                torch.log(counts / counts.sum()).to(self.precision_logits.bias.dtype))
        return self

    def class_of(self, value: torch.Tensor) -> torch.Tensor:
        """The class of each number (long): its sign and power of ten, or zero."""
        v = value.to(torch.float64)
        e = torch.floor(torch.log10(v.abs().clamp_min(1e-300))).clamp(self.min_exponent, self.max_exponent)
        zero = v.abs() < 10.0**self.min_exponent
        offset = (e - self.min_exponent).long()
        positive = self.num_exponents + 1 + offset
        negative = self.num_exponents - 1 - offset
        return torch.where(zero, self.num_exponents, torch.where(v > 0, positive, negative))

    def log_class_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log p(class | h), (..., num_classes), float64."""
        return torch.log_softmax(_linear64(self.class_logits, hidden), -1)

    def mantissa_parameters(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-mantissa's mean (in [0, 1]) and log deviation for every class, (..., num_classes) each,
        float64 (the zero class gets 0.5 and 0: placeholders, never read)."""
        mu = torch.sigmoid(_linear64(self.mantissa_mean, hidden))
        log_sigma = _linear64(self.mantissa_log_std, hidden).clamp_min(math.log(self.min_std))
        E = self.num_exponents

        def with_zero(x: torch.Tensor, fill: float) -> torch.Tensor:
            return torch.cat([x[..., :E], x.new_full((*x.shape[:-1], 1), fill), x[..., E:]], -1)

        return with_zero(mu, 0.5), with_zero(log_sigma, 0.0)

    # --- the intervals, cut at the class boundaries

    def interval_pieces(self, value: torch.Tensor, precision: torch.Tensor):
        """The pieces of each numeral's interval [v - 0.5 10^-r, v + 0.5 10^-r], one per class it meets.

        Returns ``(owner, klass, mid, log_width)``, flat tensors over the pieces: the numeral (index into
        the flattened ``value``), the class, and for a signed class the midpoint and log width of the
        piece in u (the log-mantissa), for the zero class the log of the piece's share of the zero class.
        """
        v = value.reshape(-1).to(torch.float64)
        r = self.clip_precision(precision.reshape(-1)).to(torch.float64)
        half = 0.5 * torch.pow(10.0, -r)
        a, b = (v - half)[:, None], (v + half)[:, None]
        e, sign = self.class_exponent, self.class_sign
        # Each signed class as a range of |x|: [10^e, 10^(e+1)); the piece of [a, b] on that side, in |x|.
        lo_edge, hi_edge = torch.pow(10.0, e), torch.pow(10.0, e + 1)
        # the interval mirrored onto the positive side for negative classes
        side_lo = torch.where(sign > 0, a, -b)
        side_hi = torch.where(sign > 0, b, -a)
        lo, hi = torch.maximum(side_lo, lo_edge), torch.minimum(side_hi, hi_edge)
        meets = (lo < hi) & (sign != 0)
        # The width in u: log10(hi / lo); unclipped it is the numeral's own width 10^-r, known exactly.
        width = torch.where((lo == side_lo) & (hi == side_hi), torch.pow(10.0, -r)[:, None], hi - lo)
        safe_lo = torch.where(meets, lo, torch.ones_like(lo))
        ratio = torch.where(meets, width, torch.ones_like(width)) / safe_lo
        log_width = torch.log(torch.log1p(ratio)) - _LOG_LN10
        u_lo = torch.log10(safe_lo) - e
        mid = u_lo + 0.5 * torch.log1p(ratio) / _LN10
        # The zero class: the share of (-z, z) the interval covers.
        z = 10.0**self.min_exponent
        overlap = (torch.minimum(b, torch.tensor(z)) - torch.maximum(a, torch.tensor(-z))).squeeze(-1)
        zero_share = torch.log(overlap.clamp_min(0) / (2 * z))
        zero_class = self.num_exponents
        meets[:, zero_class] = overlap > 0
        log_width[:, zero_class] = zero_share
        owner, klass = torch.nonzero(meets, as_tuple=True)
        return owner, klass, mid[owner, klass], log_width[owner, klass]

    def piece_log_masses(self, log_classes, mu, log_sigma, klass, mid, log_width) -> torch.Tensor:
        """log p(class | h) + log of the class's mass on each piece; the parameters already gathered per
        piece."""
        sigma_inv = torch.exp(-log_sigma)
        inside = log_normal_interval_mass((mid - mu) * sigma_inv, log_width - log_sigma)
        truncation = log_normal_interval_mass((0.5 - mu) * sigma_inv, -log_sigma)  # mass of [0, 1)
        mass = torch.where(klass == self.num_exponents, log_width, inside - truncation)
        return log_classes + mass

    # --- scoring

    def log_interval_probability(self, hidden: torch.Tensor, value: torch.Tensor,
                                 precision: torch.Tensor) -> torch.Tensor:
        """log of the density's mass on each numeral's interval (without P(r | h)), shape
        ``hidden.shape[:-1]``; ``value`` and ``precision`` have that shape too."""
        lead = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        owner, klass, mid, log_width = self.interval_pieces(value.reshape(-1), precision.reshape(-1))
        log_classes = self.log_class_probs(flat)
        mu, log_sigma = self.mantissa_parameters(flat)
        pieces = self.piece_log_masses(log_classes[owner, klass], mu[owner, klass], log_sigma[owner, klass],
                                       klass, mid, log_width)
        return _logsumexp_by_owner(pieces, owner, flat.shape[0]).reshape(lead)

    def log_prob(self, hidden: torch.Tensor, value: torch.Tensor, precision: torch.Tensor) -> torch.Tensor:
        """log P(v, r | h) = log P(r | h) + log P(v's interval | h), shape ``hidden.shape[:-1]``."""
        if not torch.compiler.is_compiling() and precision.numel() and bool((precision < 0).any()):
            raise ValueError("precision must be >= 0 (the number of digits after the point)")
        r = self.clip_precision(precision)
        log_r = self.log_precision_probs(hidden).gather(-1, r.unsqueeze(-1)).squeeze(-1)
        interval = self.log_interval_probability(hidden, value, r)
        out_dtype = torch.promote_types(log_r.dtype, torch.float32)
        return (log_r.to(torch.float64) + interval).to(out_dtype)

    def vocabulary_log_probs(self, hidden: torch.Tensor, values: torch.Tensor,
                             precisions: torch.Tensor) -> torch.Tensor:
        """log P(v, r | h) of each of the numerals ``values`` / ``precisions`` (S,) for every row of
        ``hidden``: ``hidden.shape[:-1] + (S,)``, float64. Only the pieces the numerals' intervals meet are
        computed (a numeral meets one class or a few), not S x num_classes."""
        lead = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        r = self.clip_precision(precisions)
        owner, klass, mid, log_width = self.interval_pieces(values, r)
        log_classes = self.log_class_probs(flat)
        mu, log_sigma = self.mantissa_parameters(flat)
        pieces = self.piece_log_masses(log_classes[:, klass], mu[:, klass], log_sigma[:, klass], klass, mid,
                                       log_width)
        interval = _logsumexp_by_owner(pieces, owner, values.numel())  # (rows, S)
        log_r = self.log_precision_probs(flat).to(torch.float64).index_select(-1, r)
        return (log_r + interval).reshape(*lead, values.numel())

    @property
    def terms_per_numeral(self) -> int:
        """About the pieces computed per numeral and row: most intervals meet one class, a few meet
        several."""
        return 4

    # --- point estimates and sampling (no gradients)

    @torch.no_grad()
    def _classes(self, hidden: torch.Tensor):
        """p(class | h), and each class's log-mantissa mean and deviation and its [0, 1) in standard units."""
        probs = torch.exp(self.log_class_probs(hidden))
        mu, log_sigma = self.mantissa_parameters(hidden)
        sigma = torch.exp(log_sigma)
        return probs, mu, sigma, -mu / sigma, (1 - mu) / sigma

    @torch.no_grad()
    def mean(self, hidden: torch.Tensor) -> torch.Tensor:
        """E[v | numeral, h], float64, ``hidden.shape[:-1]``: sum over classes of p(class) times the class's
        mean, s 10^e E[10^u] with u truncated normal: 10^(mu + ln10 sigma^2 / 2) times the truncated mass
        shifted by k = ln10 sigma over the mass itself (the log-normal's moment, in closed form)."""
        probs, mu, sigma, alpha, beta = self._classes(hidden)
        k = _LN10 * sigma
        log_moment = (_LN10 * mu + k * k / 2 + _log_normal_mass(alpha - k, beta - k)
                      - _log_normal_mass(alpha, beta))
        per_class = self.class_sign * torch.exp(self.class_exponent * _LN10 + log_moment)
        return (probs * per_class).sum(-1)

    @torch.no_grad()
    def cdf(self, hidden: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """P(V <= v | numeral, h), float64, for ``value`` of shape ``hidden.shape[:-1]``."""
        probs, mu, sigma, alpha, beta = self._classes(hidden)
        v = value.to(torch.float64).unsqueeze(-1)
        e, sign = self.class_exponent, self.class_sign
        u = (torch.log10(v.abs().clamp_min(1e-300)) - e).clamp(0, 1)
        # P(|x| <= |v|) within the class: the truncated mass of [0, u] over that of [0, 1].
        within = torch.exp(_log_normal_mass(alpha, (u - mu) / sigma) - _log_normal_mass(alpha, beta))
        lo, hi = torch.pow(10.0, e), torch.pow(10.0, e + 1)
        positive = torch.where(v >= hi, 1.0, torch.where(v < lo, 0.0, within))
        negative = torch.where(-v >= hi, 0.0, torch.where(-v < lo, 1.0, 1 - within))
        z = 10.0**self.min_exponent
        zero = ((v + z) / (2 * z)).clamp(0, 1)
        share = torch.where(sign > 0, positive, torch.where(sign < 0, negative, zero))
        return (probs * share).sum(-1)

    @torch.no_grad()
    def _value_at(self, sign, e, mu, sigma, alpha, beta, within) -> torch.Tensor:
        """The number at the share ``within`` of its class (0: the class's lowest number, 1: its highest)."""
        # Negative classes run from large magnitudes to small: a share `within` lies at or below the number.
        target = torch.where(sign < 0, 1 - within, within)
        u = (mu + sigma * _truncated_normal_icdf(alpha, beta, target)).clamp(0, 1)
        z = 10.0**self.min_exponent
        return torch.where(sign == 0, -z + 2 * z * within, sign * torch.pow(10.0, e + u))

    @torch.no_grad()
    def quantile(self, hidden: torch.Tensor, q: float) -> torch.Tensor:
        """The q-quantile of v, float64, ``hidden.shape[:-1]``: the class where the CDF crosses q (classes
        are in the order of the real line), then its truncated normal inverted."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"a quantile needs 0 < q < 1, got {q}")
        probs, mu, sigma, alpha, beta = self._classes(hidden)
        cumulative = probs.cumsum(-1)
        k = torch.searchsorted(cumulative.contiguous(),
                               torch.full((*probs.shape[:-1], 1), q, dtype=probs.dtype))
        k = k.clamp(max=self.num_classes - 1)

        def pick(t: torch.Tensor) -> torch.Tensor:
            return t.expand_as(probs).gather(-1, k).squeeze(-1)

        within = ((q - pick(cumulative - probs)) / pick(probs).clamp_min(1e-300)).clamp(0, 1)
        return self._value_at(pick(self.class_sign), pick(self.class_exponent), pick(mu), pick(sigma),
                              pick(alpha), pick(beta), within)

    @torch.no_grad()
    def median(self, hidden: torch.Tensor) -> torch.Tensor:
        """The median of v, float64, ``hidden.shape[:-1]``."""
        return self.quantile(hidden, 0.5)

    @torch.no_grad()
    def mode(self, hidden: torch.Tensor) -> torch.Tensor:
        """The most likely magnitude: the likeliest class and the mode of its log-mantissa (mu clipped to
        [0, 1]), float64, ``hidden.shape[:-1]`` (0 for the zero class)."""
        probs, mu, _, _, _ = self._classes(hidden)
        k = probs.argmax(-1, keepdim=True)
        sign = self.class_sign.expand_as(probs).gather(-1, k).squeeze(-1)
        e = self.class_exponent.expand_as(probs).gather(-1, k).squeeze(-1)
        u = mu.gather(-1, k).squeeze(-1).clamp(0, 1)
        return sign * torch.pow(10.0, e + u)

    @torch.no_grad()
    def sample(self, hidden: torch.Tensor,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """Draw numerals: r ~ P(r | h), a class, then the log-mantissa from its truncated normal (by the
        inverse CDF); the text is v written with r decimals. Returns (value, precision, text) as
        :meth:`~.gaussian_mixture.NumeralMixture.sample` does."""
        probs, mu, sigma, alpha, beta = self._classes(hidden)
        shape = probs.shape[:-1]
        flat = probs.reshape(-1, self.num_classes)
        n = flat.shape[0]
        r_probs = torch.exp(self.log_precision_probs(hidden).to(torch.float64)).reshape(n, -1)
        r = torch.multinomial(r_probs, 1, generator=generator).squeeze(-1)
        k = torch.multinomial(flat, 1, generator=generator)
        within = torch.rand(n, generator=generator, dtype=torch.float64)

        def pick(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(-1, t.shape[-1]).expand(n, -1).gather(-1, k).squeeze(-1)

        v = self._value_at(pick(self.class_sign), pick(self.class_exponent), pick(mu), pick(sigma),
                           pick(alpha), pick(beta), within)
        texts = []
        for value, digits in zip(v.tolist(), r.tolist(), strict=True):
            text = f"{value:.{digits}f}"
            texts.append(text[1:] if text.startswith("-") and float(text) == 0 else text)
        values = torch.tensor([float(t) for t in texts], dtype=torch.float64).reshape(shape)
        return values, r.reshape(shape), texts

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, exponents=[{self.min_exponent}, {self.max_exponent}], "
                f"num_classes={self.num_classes}, max_precision={self.max_precision}")


def _linear64(layer: nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
    """``layer(hidden)`` computed in float64: the powers of ten turn a float32 rounding of the exponent's
    mantissa into a relative error of the number itself, and a float32 product's rounding depends on how
    many rows it has (the same numeral would get another estimate in another batch)."""
    return F.linear(hidden.to(torch.float64), layer.weight.to(torch.float64), layer.bias.to(torch.float64))


@functools.lru_cache(maxsize=16)
def _class_tables(min_exponent: int, max_exponent: int,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The classes' powers of ten and signs, in the order of the real line; built once per device, never
    written to (tables that follow from the constructor's arguments, not state to save or load)."""
    exponents = (list(range(max_exponent, min_exponent - 1, -1)) + [0]
                 + list(range(min_exponent, max_exponent + 1)))
    signs = [-1] * (max_exponent - min_exponent + 1) + [0] + [1] * (max_exponent - min_exponent + 1)
    return (torch.tensor(exponents, dtype=torch.float64, device=device),
            torch.tensor(signs, dtype=torch.float64, device=device))


def _log_normal_mass(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log(Phi(b) - Phi(a)) for a <= b, accurate in either tail
    (:func:`~.gaussian_mixture.log_normal_interval_mass` on the midpoint and the width); -inf where a == b."""
    width = b - a
    mass = log_normal_interval_mass((a + b) / 2, torch.log(width.clamp_min(1e-300)))
    return torch.where(width > 0, mass, torch.full_like(mass, -math.inf))


def _truncated_normal_icdf(alpha: torch.Tensor, beta: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
    """The z in [alpha, beta] below which lies ``share`` of a standard normal truncated to [alpha, beta]. With
    alpha <= 0 <= beta (the mantissa's mean is in [0, 1]) both Phi(alpha) and 1 - Phi(beta) are at most 1/2,
    so the sum below loses no digits; z is clipped to [alpha, beta] against ndtri's rounding at 0 and 1."""
    lower = torch.special.ndtr(alpha)
    p = lower + share * (torch.special.ndtr(beta) - lower)
    return torch.minimum(torch.maximum(torch.special.ndtri(p), alpha), beta)


def _logsumexp_by_owner(pieces: torch.Tensor, owner: torch.Tensor, num_owners: int) -> torch.Tensor:
    """log sum exp of the pieces (..., P) that belong to each owner (P,) -> (..., num_owners); -inf where an
    owner has none. Shifted by each owner's own maximum, so no owner's sum underflows."""
    index = owner.expand_as(pieces)
    top = pieces.new_full((*pieces.shape[:-1], num_owners), -math.inf).scatter_reduce(
        -1, index, pieces.detach(), "amax", include_self=True)
    shift = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = pieces.new_zeros((*pieces.shape[:-1], num_owners)).scatter_add(
        -1, index, torch.exp(pieces - shift.gather(-1, index)))
    return torch.log(total) + shift


__all__ = ["DEFAULT_MAX_EXPONENT", "DEFAULT_MIN_EXPONENT", "NumeralExponentDensity"]
