"""A mixture-of-Gaussians density over numerals (Spithourakis & Riedel, "Numeracy for Language
Models", ACL 2018: the "MoG" strategy), as a torch module for the numeral branch of the
hierarchical softmax.

A numeral is a value v written with r digits after the point. Written text cannot tell v from any
other number that rounds to the same string, so the model gives the *string* the probability of
the interval it stands for::

    P(v, r | h) = P(r | h) * sum_k pi_k(h) [Phi((v + 0.5 10^-r - mu_k) / sigma_k)
                                           - Phi((v - 0.5 10^-r - mu_k) / sigma_k)]

The intervals of all numerals of one precision r partition the real line, so the probabilities of
all strings with r decimals sum to P(r | h): a proper distribution over numerals (up to the
measure-zero rounding ties), which is what perplexity needs. The mixture weights pi(h) and P(r | h)
come from h; the K means and standard deviations are shared by all contexts.

This module holds

* :func:`log_interval_probability`: log sum_k pi_k [Phi(b_k) - Phi(a_k)], batched, in log space and
  float64 inside, never NaN or -inf for finite inputs (see "Numerics");
* :func:`fit_gaussian_mixture`: EM on training values, deterministic given the seed, with a
  variance floor; what :meth:`NumeralMixture.initialize_from` uses;
* :class:`NumeralMixture`: h -> (pi(h), P(r | h)) with ``log_prob``, point estimates (``mean``,
  ``median``, ``mode``) and ``sample`` (value, precision and the written numeral).

Negative numbers and very large magnitudes (``transform``)
----------------------------------------------------------
``transform="none"`` (the paper's): the Gaussians are over v itself. Negative numbers are ordinary
points of the real line. A very large magnitude (1e12 among values of a few hundred) lies far in the
tail of every component: it gets a very negative but finite log-probability (about -z^2/2 for
z = (v - mu) / sigma, computed in float64; z is clipped to +-1e150 and the result to the most
negative finite value of the output dtype, so nothing overflows to -inf).

``transform="log"``: the Gaussians are over u = T(v) = sign(v) log(1 + |v|), a monotone map of the
whole real line onto itself (odd, so negative numbers mirror positive ones, and T(0) = 0). The
interval [v - 0.5 10^-r, v + 0.5 10^-r] is mapped through the same T, so the result is still the
probability of the *same interval of v*: the intervals still partition the line and still sum to
P(r | h). This suits data spanning orders of magnitude (dates, doses, counts, prices): one component
covers a magnitude, not a fixed-width stretch of the line. Means and standard deviations (and EM's
fit) are then in u-space.

Numerics
--------
With z the interval's midpoint and d its width, both standardised (in u-space under ``"log"``; the
width of the mapped interval is computed analytically, not as a difference of two nearby numbers),
the mass of one component is computed by the best of

* the interval on the left of the mean (b <= 0, and mirrored for a >= 0, since the normal is
  symmetric): log Phi(b) + log1p(-exp(log Phi(a) - log Phi(b))), with ``torch.special.log_ndtr``
  (below -20 its asymptotic series, whose gradient stays finite where log_ndtr's backward overflows);
* an interval that contains the mean: (erf(b / sqrt 2) - erf(a / sqrt 2)) / 2, two positive terms;
* the small-width form (the paper's "pdf * 10^-r" fallback): log phi(z) + log d, plus the exact
  first-order correction log(sinh(z d / 2) / (z d / 2)) for the slope of the density across the
  interval (0 for small z d; it matters far in a tail, where the density falls by a large factor
  across the interval). Its error in log is at most d^2 / 8 whatever z is.

The small-width form is used where its error bound is below the rounding error of the difference
(estimated as eps (|log Phi(a)| + |log Phi(b)|) / |log Phi(a) - log Phi(b)|), in particular where the
difference underflows or cancels to nothing; for the un-transformed model this is
log pdf((v - mu) / sigma) - log sigma + log(10^-r). NaN in gives NaN out (the data preparation refuses
non-finite values).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ....tokenization.numerals import MAX_NUMERAL_LENGTH
from ...base import upcast, write_unless_loaded

#: The options of ``transform``: the space in which the Gaussians live.
TRANSFORMS = ("none", "log")
#: The longest precision the numeracy tokenizer produces: a numeral has at most
#: ``MAX_NUMERAL_LENGTH`` canonical symbols, so at most that many minus one (the point) decimals.
DEFAULT_MAX_PRECISION = MAX_NUMERAL_LENGTH - 1

_EPS = torch.finfo(torch.float64).eps
_LIMIT = 1e150  # |z| and d are clipped here: z^2 stays finite in float64
_LOG_LIMIT = math.log(_LIMIT)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG_10 = math.log(10.0)
_SQRT_HALF = math.sqrt(0.5)


def _check_transform(transform: str) -> str:
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    return transform


def forward_transform(x: torch.Tensor, transform: str = "none") -> torch.Tensor:
    """v -> u, the space of the Gaussians: v itself (``"none"``) or sign(v) log(1 + |v|) (``"log"``)."""
    if _check_transform(transform) == "none":
        return x
    return torch.sign(x) * torch.log1p(x.abs())


def inverse_transform(u: torch.Tensor, transform: str = "none") -> torch.Tensor:
    """u -> v, the inverse of :func:`forward_transform` (``"log"``: sign(u) (exp|u| - 1), inf beyond float
    range)."""
    if _check_transform(transform) == "none":
        return u
    return torch.sign(u) * torch.expm1(u.abs())


# ----------------------------------------------------------------------------- the interval masses


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x < 0, accurate near 0 and far below it."""
    return torch.where(x > -math.log(2.0), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def _log_sinhc(x: torch.Tensor) -> torch.Tensor:
    """log(sinh(x) / x) for x >= 0 (x^2 / 6 near 0, x - log 2x for large x)."""
    small = x < 1e-4
    xs = torch.where(small, torch.ones_like(x), x)
    large = xs + torch.log(-torch.expm1(-2 * xs)) - torch.log(2 * xs)
    return torch.where(small, x * x / 6, large)


_ASYMPTOTIC_BELOW = -20.0
# 1 - 1/x^2 + 3/x^4 - 15/x^6 + ...: the coefficients (-1)^n (2n - 1)!!, highest first for Horner
_ASYMPTOTIC_COEFFICIENTS = (-34459425.0, 2027025.0, -135135.0, 10395.0, -945.0, 105.0, -15.0, 3.0, -1.0, 1.0)


def _log_ndtr(x: torch.Tensor) -> torch.Tensor:
    """log Phi(x), with a gradient that stays finite far in the left tail.

    ``torch.special.log_ndtr`` is accurate there, but its backward, exp(-(log Phi(x) + x^2 / 2)), cancels
    two huge numbers and gives inf / NaN for x around -1e8 and below. Below -20 the asymptotic series
    log Phi(x) = -x^2/2 - log(-x) - log sqrt(2 pi) + log(1 - 1/x^2 + 3/x^4 - ...) (10 terms, accurate to
    float64 there) is used instead: plain operations whose autograd is stable.
    """
    tail = x < _ASYMPTOTIC_BELOW
    xt = torch.where(tail, x, torch.full_like(x, _ASYMPTOTIC_BELOW - 1))
    s = 1 / (xt * xt)
    series = torch.zeros_like(xt)
    for c in _ASYMPTOTIC_COEFFICIENTS:
        series = series * s + c
    asymptotic = -0.5 * xt * xt - torch.log(-xt) - _HALF_LOG_2PI + torch.log(series)
    direct = torch.special.log_ndtr(torch.where(tail, torch.zeros_like(x), x))
    return torch.where(tail, asymptotic, direct)


def _log_mass_exact(z: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log(Phi(z + d/2) - Phi(z - d/2)) from the normal CDF, and an estimate of its rounding error.

    By symmetry the interval is moved to the left of the mean (z -> -|z|); then either it lies on the
    left (b <= 0: a difference of ``log_ndtr``) or it contains the mean (a difference of erf, i.e. a sum
    of two positive terms). The error is inf where the difference underflowed or cancelled to nothing.
    """
    zn = -z.abs()
    a = (zn - d / 2).clamp_min(-2 * _LIMIT)
    b = zn + d / 2
    straddle = b > 0
    # b <= 0: log Phi(b) + log(1 - Phi(a) / Phi(b))
    lb, la = _log_ndtr(b), _log_ndtr(a)
    diff = la - lb
    tail_ok = ~straddle & (diff < 0)
    diff_safe = torch.where(tail_ok, diff, -torch.ones_like(diff))
    tail = lb + _log1mexp(diff_safe)
    tail_err = _EPS * (la.abs() + lb.abs() + 1) / -diff_safe
    # a < 0 < b: (erf(b / sqrt 2) + erf(-a / sqrt 2)) / 2, both terms positive
    p = 0.5 * (torch.special.erf(b * _SQRT_HALF) + torch.special.erf(-a * _SQRT_HALF))
    mid_ok = straddle & (p > 0)
    middle = torch.log(torch.where(mid_ok, p, torch.ones_like(p)))
    value = torch.where(straddle, middle, tail)
    inf = torch.full_like(value, math.inf)
    error = torch.where(mid_ok, 4 * _EPS * torch.ones_like(value), torch.where(tail_ok, tail_err, inf))
    return value, error


def _log_mass_small_width(z: torch.Tensor, log_d: torch.Tensor) -> torch.Tensor:
    """log of the mass of [z - d/2, z + d/2] as log phi(z) + log d + log sinhc(z d / 2): exact to d^2 / 8 in
    log."""
    half_slope = z.abs() * torch.exp(log_d) / 2
    return -0.5 * z * z - _HALF_LOG_2PI + log_d + _log_sinhc(half_slope)


def log_normal_interval_mass(z: torch.Tensor, log_d: torch.Tensor) -> torch.Tensor:
    """log(Phi(z + d/2) - Phi(z - d/2)) for a standard normal, float64, finite for finite inputs.

    ``z`` is the interval's standardised midpoint, ``log_d`` the log of its standardised width (a log,
    so that widths of 10^-300 are fine). Picks the exact difference of CDFs or the small-width form by
    their error bounds (module docstring, "Numerics").
    """
    z = z.clamp(-_LIMIT, _LIMIT)
    log_d = log_d.clamp(max=_LOG_LIMIT)
    d = torch.exp(log_d)
    exact, exact_err = _log_mass_exact(z, d)
    small_err = d * d / 8
    use_small = small_err <= exact_err
    # the small-width form only where chosen: elsewhere a harmless input (its gradient is masked out)
    zeros = torch.zeros_like(z)
    small = _log_mass_small_width(torch.where(use_small, z, zeros), torch.where(use_small, log_d, zeros))
    return torch.where(use_small, small, exact)


def _interval_in_model_space(
    value: torch.Tensor, precision: torch.Tensor, transform: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The midpoint and the log width, in the Gaussians' space, of [v - 0.5 10^-r, v + 0.5 10^-r]
    (float64)."""
    v = value.to(torch.float64)
    r = precision.to(torch.float64)
    log_width = -r * _LOG_10  # log(10^-r): no underflow of 10^-r for large r
    if transform == "none":
        return v, log_width
    half = 0.5 * torch.pow(10.0, -r)
    lo, hi = v - half, v + half
    mid = 0.5 * (forward_transform(lo, "log") + forward_transform(hi, "log"))
    # T(hi) - T(lo) on one side of 0: log1p(y) with y = 2 half / (1 + |end nearer 0|); its log is
    # log y + log(log1p(y) / y), with log y analytic (a width of 10^-300 does not underflow).
    near = torch.where(lo >= 0, lo, -hi).clamp_min(0)
    log_y = log_width - torch.log1p(near)  # 2 * half = 10^-r
    y = torch.exp(log_y)
    ratio = torch.where(y > 1e-8, torch.log1p(y) / torch.where(y > 1e-8, y, torch.ones_like(y)), 1 - y / 2)
    same_side = log_y + torch.log(ratio)
    # across 0: T(hi) - T(lo) = log1p(hi) + log1p(-lo), both >= 0
    across = torch.log(torch.log1p(hi.clamp_min(0)) + torch.log1p((-lo).clamp_min(0)))
    straddles = (lo < 0) & (hi > 0)
    return mid, torch.where(straddles, across, same_side)


def log_interval_probability(
    value: torch.Tensor,
    precision: torch.Tensor,
    log_weights: torch.Tensor,
    means: torch.Tensor,
    log_stds: torch.Tensor,
    transform: str = "none",
) -> torch.Tensor:
    """log sum_k pi_k [Phi((v + 0.5 10^-r - mu_k) / sigma_k) - Phi((v - 0.5 10^-r - mu_k) / sigma_k)].

    The log-probability of the interval a numeral stands for, log P(v, r | h) without the P(r | h)
    factor. Under ``transform="log"`` the interval's ends go through u = sign(v) log(1 + |v|) and the
    Gaussians are over u, so it is still the probability of the same interval of v (module docstring).

    Args:
        value: (...,) the numerals' values v, float64 or float32 (computed in float64).
        precision: (...,) int, r >= 0, the digits after the point.
        log_weights: (..., K) log pi_k (log-softmaxed mixture weights; not re-normalised here).
        means: (K,) or (..., K) mu_k, in the Gaussians' space.
        log_stds: (K,) or (..., K) log sigma_k, in the Gaussians' space.
        transform: ``"none"`` (Gaussians over v, the paper's) or ``"log"``.

    Returns:
        (...,) log-probabilities, in the dtype of ``log_weights`` (float32 for half-precision weights),
        finite for finite inputs: a value far in a tail gets a very negative finite number, no lower than
        the most negative finite number of that dtype. Differentiable in ``log_weights``, ``means`` and
        ``log_stds``.
    """
    _check_transform(transform)
    if precision.dtype.is_floating_point or precision.dtype == torch.bool:
        raise TypeError(f"precision must be an integer tensor, got {precision.dtype}")
    if not torch.compiler.is_compiling() and precision.numel() and bool((precision < 0).any()):
        raise ValueError("precision must be >= 0 (the number of digits after the point)")
    out_dtype = log_weights.dtype if log_weights.dtype in (torch.float32, torch.float64) else torch.float32
    mid, log_width = _interval_in_model_space(value, precision, transform)
    mu, log_sigma = means.to(torch.float64), log_stds.to(torch.float64)
    z = (mid.unsqueeze(-1) - mu) * torch.exp(-log_sigma)
    log_mass = log_normal_interval_mass(z, log_width.unsqueeze(-1) - log_sigma)
    result = torch.logsumexp(log_weights.to(torch.float64) + log_mass, dim=-1)
    return result.clamp_min(torch.finfo(out_dtype).min).to(out_dtype)


# ----------------------------------------------------------------------------- EM


def _as_float64_vector(values) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        x = values.detach().to("cpu", torch.float64).reshape(-1)
    else:
        x = torch.as_tensor(np.asarray(values, dtype=np.float64)).reshape(-1)
    if x.numel() == 0:
        raise ValueError("fit_gaussian_mixture needs at least one value")
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        raise ValueError(f"fit_gaussian_mixture: {int(bad.sum())} of {x.numel()} values are NaN or infinite")
    return x


def _normal_log_pdf(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return -0.5 * ((x - mean) / std) ** 2 - torch.log(std) - _HALF_LOG_2PI


def fit_gaussian_mixture(
    values,
    num_components: int,
    iterations: int = 200,
    seed: int = 0,
    transform: str = "none",
    min_std: float | None = None,
    tol: float = 1e-9,
    max_samples: int = 100_000,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A K-component 1-D Gaussian mixture fitted by EM to training values (the MoG initialisation).

    Deterministic given ``seed``: k-means++ seeding (the first centre uniformly, each next one with
    probability proportional to the squared distance to the nearest centre so far, drawn from a
    ``torch.Generator`` seeded with ``seed``), all standard deviations starting at (data std) / K, equal
    weights; then EM until the mean log-likelihood improves by less than ``tol`` or ``iterations``.
    Every standard deviation is floored at ``min_std`` (default 1e-3 times the data's std, or 1e-3 when
    all values are equal), so no component collapses onto one repeated value. A component that loses
    all its points is re-seeded at the worst-explained value. More than ``max_samples`` values are
    subsampled (seeded) first.

    Args:
        values: training values v (numpy, torch or a list; float64 inside). NaN or inf is refused.
        num_components: K >= 1. With fewer distinct values than K some components coincide.
        transform: fit in the Gaussians' space: v (``"none"``) or sign(v) log(1 + |v|) (``"log"``).

    Returns:
        (weights, means, stds): float64 tensors of shape (K,), sorted by mean; means and stds in the
        Gaussians' space (u-space under ``"log"``).
    """
    _check_transform(transform)
    if int(num_components) != num_components or num_components < 1:
        raise ValueError(f"num_components must be a positive integer, got {num_components!r}")
    k_count = int(num_components)
    x = _as_float64_vector(values)
    generator = torch.Generator().manual_seed(int(seed))
    if x.numel() > max_samples:
        x = x[torch.randperm(x.numel(), generator=generator)[:max_samples].sort().values]
    u = forward_transform(x, transform)
    n = u.numel()
    spread = float(u.std(unbiased=False)) if n > 1 else 0.0
    scale = spread if spread > 0 else 1.0
    floor = float(min_std) if min_std is not None else 1e-3 * scale
    if not floor > 0:
        raise ValueError(f"min_std must be > 0, got {min_std!r}")

    # k-means++ seeding
    first = int(torch.randint(n, (1,), generator=generator))
    centres = [u[first]]
    dist2 = (u - u[first]) ** 2
    for _ in range(1, k_count):
        total = float(dist2.sum())
        if total > 0:
            pick = int(torch.multinomial(dist2 / total, 1, generator=generator))
        else:
            pick = int(torch.randint(n, (1,), generator=generator))
        centres.append(u[pick])
        dist2 = torch.minimum(dist2, (u - u[pick]) ** 2)
    means = torch.stack(centres)
    stds = torch.full((k_count,), max(scale / k_count, floor), dtype=torch.float64)
    weights = torch.full((k_count,), 1.0 / k_count, dtype=torch.float64)

    column = u.unsqueeze(1)
    previous = -math.inf
    for _ in range(iterations):
        joint = torch.log(weights) + _normal_log_pdf(column, means, stds)  # (n, K)
        per_value = torch.logsumexp(joint, dim=1)
        mean_ll = float(per_value.mean())
        resp = torch.exp(joint - per_value.unsqueeze(1))
        counts = resp.sum(dim=0)
        safe = counts.clamp_min(1e-300)
        means = (resp * column).sum(dim=0) / safe
        stds = torch.sqrt((resp * (column - means) ** 2).sum(dim=0) / safe).clamp_min(floor)
        weights = counts / n
        dead = torch.nonzero(counts < 1e-8 * n).flatten()
        if dead.numel():
            worst = torch.argsort(per_value)[: dead.numel()]
            means[dead] = u[worst]
            stds[dead] = max(scale / k_count, floor)
            weights[dead] = 1.0 / n
            weights = weights / weights.sum()
        elif mean_ll - previous < tol:
            break
        previous = mean_ll
    order = torch.argsort(means)
    return weights[order], means[order], stds[order]


# ----------------------------------------------------------------------------- the module


class WrittenPrecision:
    """The distribution of a numeral's written precision r (its number of decimals),
    P(r | h) = softmax(W_r h), capped at ``max_precision``: a density over values scores the interval a
    written numeral stands for, whose width is 10^-r. A density module holding ``precision_logits``
    (Linear D -> max_precision + 1) and ``max_precision`` mixes it in."""

    def log_precision_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """log P(r | h) for r = 0 .. max_precision, (..., max_precision + 1)."""
        return torch.log_softmax(upcast(self.precision_logits(hidden)), -1)

    def clip_precision(self, precision: torch.Tensor) -> torch.Tensor:
        """r clipped to {0, ..., max_precision} (the documented cap)."""
        return precision.long().clamp(0, self.max_precision)


def write_value(value: float, precision: int) -> str:
    """``value`` written with ``precision`` decimals, ``f"{v:.{r}f}"`` (``-0.0..`` written ``0.0..``), with
    at most the decimals that keep it within ``MAX_NUMERAL_LENGTH`` symbols, so that the tokenizer reads it
    back as a numeral (a value whose integer part alone is longer reads back as a word, whatever its
    decimals)."""
    whole = len(f"{value:.0f}")
    text = f"{value:.{max(0, min(precision, MAX_NUMERAL_LENGTH - whole - 1))}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def decimals(text: str) -> int:
    """The number of digits after the point of a numeral written by :func:`write_value`."""
    return len(text) - text.index(".") - 1 if "." in text else 0


class NumeralMixture(WrittenPrecision, nn.Module):
    """h -> a mixture-of-Gaussians distribution over numerals (value v, precision r).

    ``log_prob(h, v, r) = log P(r | h) + log sum_k pi_k(h) [Phi(b_k) - Phi(a_k)]`` (module docstring):

    * ``mixture_logits``: Linear(D -> K), pi(h) = softmax;
    * ``precision_logits``: Linear(D -> max_precision + 1), P(r | h) over r in {0, ..., max_precision};
      a numeral with more decimals is scored as if written with ``max_precision`` (r is clipped, both for
      P(r | h) and for the interval width, whose centre stays v): an approximation, no longer an exact
      partition for such numerals. The default max_precision is the most the numeracy tokenizer produces,
      so with it the cap is never reached;
    * ``means`` and ``log_stds`` (K,): the components, shared by all contexts, in the Gaussians' space,
      initialised by EM (:meth:`initialize_from`). ``log_std_floor`` (a buffer) floors log sigma.

    Trained or frozen: ``trainable=False`` (the default) registers ``means`` / ``log_stds`` as buffers,
    so only the context-dependent weights and P(r | h) are learned, which is our reading of the paper
    (means and variances from EM on the training numbers, the mixture weights predicted from h_t).
    It also keeps the components where EM put them, covering all the training values, rather than
    letting gradient steps pull them towards the frequent contexts' values. ``trainable=True`` makes
    them parameters (the floor still applies); the interval probability is at most 1, so shrinking a
    sigma cannot blow up the likelihood.

    The computation is float64 inside whatever the module's dtype; log-probabilities come back in the
    dtype of the logits (float32 for half-precision hidden states).
    """

    def __init__(
        self,
        in_features: int,
        num_components: int,
        max_precision: int = DEFAULT_MAX_PRECISION,
        transform: str = "none",
        trainable: bool = False,
        min_std: float = 1e-6,
    ) -> None:
        super().__init__()
        if num_components < 1:
            raise ValueError(f"num_components must be >= 1, got {num_components}")
        if max_precision < 0:
            raise ValueError(f"max_precision must be >= 0, got {max_precision}")
        self.in_features = in_features
        self.num_components = num_components
        self.max_precision = max_precision
        self.transform = _check_transform(transform)
        self.trainable = trainable
        self.mixture_logits = nn.Linear(in_features, num_components)
        self.precision_logits = nn.Linear(in_features, max_precision + 1)
        means = torch.linspace(-1.0, 1.0, num_components) if num_components > 1 else torch.zeros(1)
        log_stds = torch.zeros(num_components)
        if trainable:
            self.means = nn.Parameter(means)
            self.log_stds = nn.Parameter(log_stds)
        else:
            self.register_buffer("means", means)
            self.register_buffer("log_stds", log_stds)
        self.min_std = min_std
        self.register_buffer("log_std_floor", torch.tensor(math.log(min_std)))

    def init_weights(self, init=nn.init) -> None:
        """The initialisation of :meth:`__init__` again, for what was not loaded: PyTorch's own ``nn.Linear``
        initialisation, Uniform(+-1/sqrt(D)), for the two linear maps, and the placeholder components
        (means evenly spaced over [-1, 1], sigma 1, the floor at ``min_std``) that EM replaces when training
        starts (:meth:`initialize_from`). ``init`` as in :meth:`hf_nlm.heads.base.OutputHead.init_weights`."""
        bound = self.in_features**-0.5 if self.in_features > 0 else 0.0
        for layer in (self.mixture_logits, self.precision_logits):
            init.uniform_(layer.weight, -bound, bound)
            init.uniform_(layer.bias, -bound, bound)
        K = self.num_components
        write_unless_loaded(self.means, torch.linspace(-1.0, 1.0, K) if K > 1 else torch.zeros(1))
        write_unless_loaded(self.log_stds, torch.zeros(K))
        write_unless_loaded(self.log_std_floor, torch.tensor(math.log(self.min_std)))

    # --- parameters

    @torch.no_grad()
    def initialize_from(self, values, precisions=None, iterations: int = 200,
                        seed: int = 0) -> NumeralMixture:
        """Means and stds from EM on training ``values`` (:func:`fit_gaussian_mixture`, in this module's
        ``transform``); the mixture bias to log(EM weights), so pi(h) starts near them; and, given the
        training ``precisions``, the precision bias to their log-frequencies (add-one smoothed, clipped to
        ``max_precision``). The std floor becomes EM's. Returns self."""
        weights, means, stds = fit_gaussian_mixture(
            values, self.num_components, iterations=iterations, seed=seed, transform=self.transform
        )
        self.means.copy_(means.to(self.means.dtype))
        self.log_stds.copy_(torch.log(stds).to(self.log_stds.dtype))
        self.log_std_floor.fill_(float(torch.log(stds.min())))
        self.mixture_logits.bias.copy_(torch.log(weights.clamp_min(1e-12)).to(self.mixture_logits.bias.dtype))
        if precisions is not None:
            r = (torch.as_tensor(np.asarray(precisions, dtype=np.int64)).reshape(-1)
                 .clamp(0, self.max_precision))
            counts = torch.bincount(r, minlength=self.max_precision + 1).to(torch.float64) + 1
            bias = torch.log(counts / counts.sum())
            self.precision_logits.bias.copy_(bias.to(self.precision_logits.bias.dtype))
        return self

    def components(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(means, log_stds) in float64, log sigma floored at ``log_std_floor``."""
        floor = self.log_std_floor.to(torch.float64)
        return self.means.to(torch.float64), torch.maximum(self.log_stds.to(torch.float64), floor)

    def log_weights(self, hidden: torch.Tensor) -> torch.Tensor:
        """log pi(h), (..., K)."""
        return torch.log_softmax(upcast(self.mixture_logits(hidden)), -1)

    # --- scoring

    def log_interval_probability(self, hidden: torch.Tensor, value: torch.Tensor,
                                 precision: torch.Tensor) -> torch.Tensor:
        """log sum_k pi_k(h) [Phi(b_k) - Phi(a_k)] with r clipped to ``max_precision``; shape
        ``hidden.shape[:-1]``."""
        means, log_stds = self.components()
        return log_interval_probability(
            value, self.clip_precision(precision), self.log_weights(hidden), means, log_stds, self.transform
        )

    def log_prob(self, hidden: torch.Tensor, value: torch.Tensor, precision: torch.Tensor) -> torch.Tensor:
        """log P(v, r | h) = log P(r | h) + log P(v's interval | h), shape ``hidden.shape[:-1]``.

        ``value`` (float64 preferred: float32 cannot hold 16777217) and ``precision`` (int) have shape
        ``hidden.shape[:-1]``; precisions above ``max_precision`` are clipped to it, negative ones refused.
        """
        if not torch.compiler.is_compiling() and precision.numel() and bool((precision < 0).any()):
            raise ValueError("precision must be >= 0 (the number of digits after the point)")
        r = self.clip_precision(precision)
        log_r = self.log_precision_probs(hidden).gather(-1, r.unsqueeze(-1)).squeeze(-1)
        interval = self.log_interval_probability(hidden, value, r)
        return log_r.to(interval.dtype) + interval

    def vocabulary_log_probs(self, hidden: torch.Tensor, values: torch.Tensor,
                             precisions: torch.Tensor) -> torch.Tensor:
        """log P(v, r | h) of each of the numerals ``values`` / ``precisions`` (S,) for every row of
        ``hidden``: ``hidden.shape[:-1] + (S,)``, float64 (an S x K table of interval masses per row)."""
        means, log_stds = self.components()
        r = self.clip_precision(precisions)
        interval = log_interval_probability(
            values, r, self.log_weights(hidden).unsqueeze(-2), means, log_stds, self.transform
        )
        return self.log_precision_probs(hidden).index_select(-1, r).to(interval.dtype) + interval

    @property
    def terms_per_numeral(self) -> int:
        """The interval masses computed per numeral and row: one per component."""
        return self.num_components

    # --- point estimates and sampling (no gradients)

    @torch.no_grad()
    def _mixture(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        means, log_stds = self.components()
        return torch.exp(self.log_weights(hidden).to(torch.float64)), means, torch.exp(log_stds)

    @torch.no_grad()
    def mean(self, hidden: torch.Tensor) -> torch.Tensor:
        """E[v | numeral, h] in value space, float64, shape ``hidden.shape[:-1]``.

        ``"none"``: sum_k pi_k mu_k. ``"log"``: the exact mean of v = sign(u)(exp|u| - 1) under the
        mixture over u (not the back-transformed mean of u), from the closed form per component
        E[v] = e^(mu + s^2/2) Phi((mu + s^2)/s) - e^(-mu + s^2/2) Phi((s^2 - mu)/s) + Phi(-mu/s) - Phi(mu/s);
        it is inf where that overflows float64 (a very wide component), and it is pulled by the heavy
        right tail: :meth:`median` is the robust point estimate there.
        """
        weights, mu, sigma = self._mixture(hidden)
        if self.transform == "none":
            per_component = mu
        else:
            var = sigma * sigma
            ndtr, log_ndtr = torch.special.ndtr, torch.special.log_ndtr
            up = torch.exp(mu + var / 2 + log_ndtr((mu + var) / sigma))
            down = torch.exp(-mu + var / 2 + log_ndtr((var - mu) / sigma))
            per_component = up - down + ndtr(-mu / sigma) - ndtr(mu / sigma)
        return (weights * per_component).sum(-1)

    @torch.no_grad()
    def cdf(self, hidden: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """P(V <= v | numeral, h), float64, for ``value`` of shape ``hidden.shape[:-1]``."""
        weights, mu, sigma = self._mixture(hidden)
        u = forward_transform(value.to(torch.float64), self.transform)
        return (weights * torch.special.ndtr((u.unsqueeze(-1) - mu) / sigma)).sum(-1)

    @torch.no_grad()
    def median(self, hidden: torch.Tensor, iterations: int = 100) -> torch.Tensor:
        """The median of v, float64, shape ``hidden.shape[:-1]``: :meth:`quantile` 0.5."""
        return self.quantile(hidden, 0.5, iterations)

    @torch.no_grad()
    def quantile(self, hidden: torch.Tensor, q: float, iterations: int = 100) -> torch.Tensor:
        """The q-quantile of v, float64, shape ``hidden.shape[:-1]``: bisection on the mixture CDF in the
        Gaussians' space (the transform is monotone, so a quantile maps back through it), starting from
        [min_k mu_k - 10 sigma_k, max_k mu_k + 10 sigma_k], ``iterations`` halvings."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"a quantile needs 0 < q < 1, got {q}")
        weights, mu, sigma = self._mixture(hidden)
        lo = torch.full(weights.shape[:-1], float((mu - 10 * sigma).min()), dtype=torch.float64)
        hi = torch.full(weights.shape[:-1], float((mu + 10 * sigma).max()), dtype=torch.float64)
        for _ in range(iterations):
            mid = (lo + hi) / 2
            below = (weights * torch.special.ndtr((mid.unsqueeze(-1) - mu) / sigma)).sum(-1) < q
            lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        return inverse_transform((lo + hi) / 2, self.transform)

    @torch.no_grad()
    def mode(self, hidden: torch.Tensor) -> torch.Tensor:
        """The best of the K component means by the mixture density, float64, shape ``hidden.shape[:-1]``
        (the densest candidate, not an exact maximiser between them). Under ``"log"`` the density is that
        of u (the most likely magnitude), and the chosen mean is mapped back to v."""
        weights, mu, sigma = self._mixture(hidden)
        log_density = torch.logsumexp(
            torch.log(weights).unsqueeze(-2) + _normal_log_pdf(mu.unsqueeze(-1), mu, sigma), dim=-1
        )  # (..., K): the mixture density at each candidate mu_k
        best = mu[log_density.argmax(-1)]
        return inverse_transform(best, self.transform)

    @torch.no_grad()
    def sample(self, hidden: torch.Tensor,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """Draw numerals: r ~ P(r | h), k ~ pi(h), u ~ N(mu_k, sigma_k^2), v = inverse transform of u.

        Returns (value, precision, text): ``text`` is v written with r decimals, ``f"{v:.{r}f}"`` (Python
        rounds the float to the nearest r-decimal string, ties by the exact binary value), with ``-0.0..``
        written ``0.0..``; ``value`` is the written numeral's value ``float(text)`` (float64), so the
        string, its value and its precision agree as the tokenizer would read them, and a sample lands on
        the string whose interval contains the drawn v, i.e. with probability P(v, r | h). Shapes
        ``hidden.shape[:-1]``; ``text`` is a flat list in row-major order. Huge draws under ``"log"`` are
        capped at +-1e300; the decimals are cut where the numeral would pass the tokenizer's length limit
        (:func:`write_value`; ``precision`` is then the decimals written).
        """
        weights, mu, sigma = self._mixture(hidden)
        shape = weights.shape[:-1]
        flat_w = weights.reshape(-1, weights.shape[-1])
        r_probs = torch.exp(self.log_precision_probs(hidden).to(torch.float64)).reshape(flat_w.shape[0], -1)
        r = torch.multinomial(r_probs, 1, generator=generator).squeeze(-1)
        k = torch.multinomial(flat_w, 1, generator=generator).squeeze(-1)
        noise = torch.randn(k.shape, generator=generator, dtype=torch.float64)
        u = mu[k] + sigma[k] * noise
        v = inverse_transform(u, self.transform).clamp(-1e300, 1e300)
        texts = [write_value(value, digits) for value, digits in zip(v.tolist(), r.tolist(), strict=True)]
        r = torch.tensor([decimals(t) for t in texts], dtype=r.dtype)
        values = torch.tensor([float(t) for t in texts], dtype=torch.float64).reshape(shape)
        return values, r.reshape(shape), texts

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, num_components={self.num_components}, "
            f"max_precision={self.max_precision}, transform={self.transform!r}, trainable={self.trainable}"
        )


__all__ = [
    "DEFAULT_MAX_PRECISION",
    "NumeralMixture",
    "TRANSFORMS",
    "fit_gaussian_mixture",
    "forward_transform",
    "inverse_transform",
    "log_interval_probability",
    "log_normal_interval_mass",
    "write_value",
]
