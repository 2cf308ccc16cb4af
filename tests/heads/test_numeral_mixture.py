"""The mixture-of-Gaussians numeral density (Spithourakis & Riedel 2018, "MoG"): interval probabilities
against numerical integration, partitions summing to P(r | h), the tails, EM, point estimates, sampling.

References are computed independently: the mixture pdf written out by hand and integrated with
``torch.trapezoid``, the normal CDF from ``math.erf``, medians from large samples drawn here."""

import math
import re

import numpy as np
import pytest
import torch

from hf_nlm.heads.numeral.densities.gaussian_mixture import (
    NumeralMixture,
    _log_mass_exact,
    _log_mass_small_width,
    fit_gaussian_mixture,
    log_interval_probability,
    log_normal_interval_mass,
)

F64 = torch.float64


def mixture_pdf(x, weights, means, stds):
    """sum_k w_k N(x; mu_k, s_k^2), written out by hand (float64)."""
    x = x.unsqueeze(-1)
    dens = torch.exp(-0.5 * ((x - means) / stds) ** 2) / (stds * math.sqrt(2 * math.pi))
    return (weights * dens).sum(-1)


def log_trapezoid_mass(lo, hi, weights, means, stds, points=4001):
    grid = torch.linspace(lo, hi, points, dtype=F64)
    return math.log(float(torch.trapezoid(mixture_pdf(grid, weights, means, stds), grid)))


def normal_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def lip(values, precisions, weights, means, stds, transform="none"):
    """log_interval_probability of one shared mixture for a batch of numerals."""
    values = torch.as_tensor(values, dtype=F64).reshape(-1)
    precisions = torch.as_tensor(precisions).reshape(-1).expand(values.shape)
    log_w = torch.log(torch.as_tensor(weights, dtype=F64)).expand(values.shape[0], -1)
    return log_interval_probability(
        values, precisions, log_w, torch.as_tensor(means, dtype=F64),
        torch.log(torch.as_tensor(stds, dtype=F64)), transform,
    )


MIXTURES = {
    1: ([1.0], [2.0], [1.5]),
    2: ([0.3, 0.7], [-4.0, 3.0], [1.0, 2.5]),
    3: ([0.2, 0.5, 0.3], [-10.0, 0.0, 8.0], [1.0, 0.5, 1.5]),
}


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("value,precision",
                         [(3.0, 0), (-2.35, 2), (0.0, 1), (-9.5, 1), (12.25, 2), (0.123, 3)])
def test_interval_probability_equals_numerical_integration(k, value, precision):
    weights, means, stds = (torch.tensor(x, dtype=F64) for x in MIXTURES[k])
    half = 0.5 * 10.0**-precision
    expected = log_trapezoid_mass(value - half, value + half, weights, means, stds)
    got = float(lip([value], [precision], weights, means, stds))
    assert got == pytest.approx(expected, abs=1e-7)


def test_per_row_components_and_float32_values_broadcast_like_shared_ones():
    weights, means, stds = (torch.tensor(x, dtype=F64) for x in MIXTURES[3])
    values, precisions = torch.tensor([-9.5, 0.25, 8.0]), torch.tensor([1, 2, 0])  # float32 values
    shared = log_interval_probability(values, precisions, weights.log().expand(3, -1), means, stds.log())
    per_row = log_interval_probability(
        values.double(), precisions, weights.log().expand(3, -1), means.expand(3, -1),
        stds.log().expand(3, -1),
    )
    assert torch.equal(shared, per_row)
    with pytest.raises(TypeError):
        log_interval_probability(values, precisions.double(), weights.log().expand(3, -1), means, stds.log())


def test_far_tail_is_finite_and_matches_the_density_times_the_width():
    weights, means, stds = [1.0], [0.0], [1.0]
    # 60 sigma out with r = 6: the small-width (pdf * 10^-r) form, against the float64 density in log space
    got = float(lip([60.0], [6], weights, means, stds))
    expected = -0.5 * 60.0**2 - 0.5 * math.log(2 * math.pi) + math.log(1e-6)
    assert got == pytest.approx(expected, abs=1e-6)
    # 40 sigma out with r = 0: the density falls by e^40 across the interval; against a log-space trapezoid
    grid = torch.linspace(39.5, 40.5, 20001, dtype=F64)
    log_pdf = -0.5 * grid**2 - 0.5 * math.log(2 * math.pi)
    top = float(log_pdf.max())
    expected = top + math.log(float(torch.trapezoid(torch.exp(log_pdf - top), grid)))
    assert float(lip([40.0], [0], weights, means, stds)) == pytest.approx(expected, abs=1e-6)
    # negative tail, and absurd magnitudes: very negative but finite, monotone in the distance
    far = lip([-45.0, 1e6, 1e12, -1e200, 1e300], [2, 0, 0, 0, 3], weights, means, stds)
    assert torch.isfinite(far).all() and (far < -1000).all()
    assert far[1] > far[2] > far[3] >= far[4]  # |z| is clipped at 1e150
    assert float(far[2]) == pytest.approx(-0.5e24, rel=1e-9)


def test_small_width_form_matches_the_exact_difference_where_both_are_computable():
    z = torch.tensor([-6.0, -2.0, -0.3, 0.0, 0.4, 3.0, 9.0], dtype=F64)
    for d in (1e-2, 1e-3, 1e-4):
        exact, error = _log_mass_exact(z, torch.full_like(z, d))
        small = _log_mass_small_width(z, torch.full_like(z, math.log(d)))
        assert torch.isfinite(exact).all() and (error < 1e-9).all()
        assert torch.allclose(small, exact, rtol=0, atol=d * d / 8 + 1e-10)
    # where the exact difference cancels to nothing, the chosen value is still the small-width one
    z = torch.tensor([-1e8], dtype=F64)
    exact, error = _log_mass_exact(z, torch.tensor([1e-9], dtype=F64))
    assert not torch.isfinite(error).all() or error.item() > 1.0
    chosen = log_normal_interval_mass(z, torch.tensor([math.log(1e-9)], dtype=F64))
    expected = -0.5e16 - 0.5 * math.log(2 * math.pi) + math.log(1e-9)
    assert torch.isfinite(chosen).all() and float(chosen) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("precision", [0, 1, 2])
def test_probabilities_of_a_partition_sum_to_one(precision):
    weights, means, stds = MIXTURES[3]
    scale = 10**precision
    # every numeral with r decimals in [-40, 40]
    values = torch.arange(-40 * scale, 40 * scale + 1, dtype=F64) / scale
    probs = torch.exp(lip(values, [precision], weights, means, stds))
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-9)


def test_log_transform_keeps_interval_probabilities():
    weights, means, stds = [0.2, 0.5, 0.3], [-1.0, 2.0, 4.0], [0.5, 0.7, 0.8]  # over u = sign(v) log(1 + |v|)

    def expected_mass(lo, hi):
        t = [math.copysign(math.log1p(abs(x)), x) for x in (lo, hi)]
        return sum(w * (normal_cdf((t[1] - m) / s) - normal_cdf((t[0] - m) / s))
                   for w, m, s in zip(weights, means, stds, strict=True))

    # the integers of [-3000, 3000] (r = 0) partition [-3000.5, 3000.5]
    values = torch.arange(-3000, 3001, dtype=F64)
    probs = torch.exp(lip(values, [0], weights, means, stds, "log"))
    assert float(probs.sum()) == pytest.approx(expected_mass(-3000.5, 3000.5), abs=1e-9)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-4)
    # numerals with 2 decimals around 0, where the interval straddles 0 for 0.00
    values = torch.arange(-500, 501, dtype=F64) / 100
    probs = torch.exp(lip(values, [2], weights, means, stds, "log"))
    assert float(probs.sum()) == pytest.approx(expected_mass(-5.005, 5.005), abs=1e-9)
    # single numerals: -5, 0.00 and 1e12 (a tiny interval in u-space: the small-width form)
    for value, precision in [(-5.0, 0), (0.0, 2), (7.25, 2)]:
        half = 0.5 * 10.0**-precision
        got = math.exp(float(lip([value], [precision], weights, means, stds, "log")))
        assert got == pytest.approx(expected_mass(value - half, value + half), rel=1e-9)
    u, mu, s = math.log1p(1e12), 27.0, 1.5
    expected = -0.5 * ((u - mu) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi) - math.log1p(1e12)
    assert float(lip([1e12], [0], [1.0], [mu], [s], "log")) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("transform", ["none", "log"])
def test_gradients_are_finite_and_correct(transform):
    torch.manual_seed(0)
    values = torch.tensor([0.7, -3.25, 30.0, 5.0, -60.0], dtype=F64)  # near, tails, a tiny interval (r = 8)
    precisions = torch.tensor([0, 2, 1, 8, 0])
    log_w = torch.log_softmax(torch.randn(5, 2, dtype=F64), -1).requires_grad_()
    means = torch.tensor([-1.0, 4.0], dtype=F64, requires_grad=True)
    log_stds = torch.tensor([0.1, 0.5], dtype=F64, requires_grad=True)

    def f(lw, m, ls):
        return log_interval_probability(values, precisions, lw, m, ls, transform)

    assert torch.autograd.gradcheck(f, (log_w, means, log_stds), eps=1e-6, atol=1e-5, rtol=1e-4)
    # extreme numerals through the module: gradients finite everywhere
    head = NumeralMixture(4, 3, transform=transform, trainable=True).double()
    hidden = torch.randn(6, 4, dtype=F64)
    out = head.log_prob(
        hidden,
        torch.tensor([1e12, -5.0, 0.0, 1e-20, -1e20, 3.0], dtype=F64),
        torch.tensor([0, 0, 23, 23, 2, 40]),
    )
    out.sum().backward()
    assert torch.isfinite(out).all()
    for p in head.parameters():
        assert torch.isfinite(p.grad).all()
    # far in the tail the gradient in mu is (v - mu) / sigma^2, from the asymptotic log Phi
    mu = torch.tensor([3.0], dtype=F64, requires_grad=True)
    value = 1e12 if transform == "none" else 1e300
    far = log_interval_probability(
        torch.tensor([value], dtype=F64), torch.tensor([0]), torch.zeros(1, 1, dtype=F64), mu,
        torch.tensor([math.log(2.0)], dtype=F64), transform,
    )
    (grad,) = torch.autograd.grad(far.sum(), mu)
    u = value if transform == "none" else math.log1p(value)
    assert float(grad) == pytest.approx((u - 3.0) / 4.0, rel=1e-6)


def test_float32_module_stays_finite():
    head = NumeralMixture(4, 2, trainable=True)
    out = head.log_prob(torch.randn(3, 4), torch.tensor([1e23, -7.5, 0.1], dtype=F64),
                        torch.tensor([0, 1, 1]))
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert float(out[0].detach()) == torch.finfo(torch.float32).min  # -z^2/2 ~ -5e45 is below float32's range
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters())


def test_em_recovers_a_known_mixture_and_is_deterministic():
    rng = np.random.default_rng(0)
    true_w, true_mu, true_s = [0.2, 0.5, 0.3], [-10.0, 0.0, 8.0], [1.0, 0.5, 1.5]
    n = 4000
    counts = rng.multinomial(n, true_w)
    values = np.concatenate([rng.normal(m, s, c) for m, s, c in zip(true_mu, true_s, counts, strict=True)])
    rng.shuffle(values)
    weights, means, stds = fit_gaussian_mixture(values, 3, seed=1)
    assert torch.allclose(means, torch.tensor(true_mu, dtype=F64), atol=0.15)
    assert torch.allclose(stds, torch.tensor(true_s, dtype=F64), atol=0.15)
    assert torch.allclose(weights, torch.tensor(counts / n, dtype=F64), atol=0.02)
    again = fit_gaussian_mixture(torch.tensor(values), 3, seed=1)
    assert all(torch.equal(a, b) for a, b in zip((weights, means, stds), again, strict=True))
    # two well-separated clusters in log space (magnitudes 10 and 1e6), values given as a list
    two = list(rng.lognormal(math.log(10), 0.1, 300)) + list(rng.lognormal(math.log(1e6), 0.1, 700))
    weights, means, _ = fit_gaussian_mixture(two, 2, transform="log")
    assert torch.allclose(means, torch.tensor([math.log1p(10), math.log1p(1e6)], dtype=F64), atol=0.05)
    assert torch.allclose(weights, torch.tensor([0.3, 0.7], dtype=F64), atol=1e-6)


def test_em_floors_the_variance_and_refuses_bad_values():
    weights, means, stds = fit_gaussian_mixture([5.0] * 50 + [7.0] * 50, 3, seed=0)
    assert torch.isfinite(stds).all() and (stds > 0).all()
    assert float(weights.sum()) == pytest.approx(1.0)
    _, _, stds = fit_gaussian_mixture([2.0] * 10, 2, min_std=0.25)
    assert torch.equal(stds, torch.full((2,), 0.25, dtype=F64))
    for bad in ([1.0, float("nan")], [float("inf")], []):
        with pytest.raises(ValueError):
            fit_gaussian_mixture(bad, 2)
    with pytest.raises(ValueError):
        fit_gaussian_mixture([1.0, 2.0], 0)
    with pytest.raises(ValueError):
        fit_gaussian_mixture([1.0, 2.0], 2, transform="sqrt")


def make_head(transform="none", k=3, seed=0, **kwargs):
    torch.manual_seed(seed)
    head = NumeralMixture(5, k, transform=transform, **kwargs).double()
    means, stds = (([-10.0, 0.0, 8.0], [1.0, 0.5, 1.5]) if transform == "none"
                   else ([0.5, 2.0, 4.0], [0.5, 0.3, 0.8]))
    head.means.copy_(torch.tensor(means[:k], dtype=F64))
    head.log_stds.copy_(torch.log(torch.tensor(stds[:k], dtype=F64)))
    return head


def test_module_partition_sums_to_the_precision_probability():
    head = make_head(max_precision=3)
    hidden = torch.randn(1, 5, dtype=F64)
    p_r = torch.exp(head.log_precision_probs(hidden).detach())[0]
    total = 0.0
    for r in range(3):
        values = torch.arange(-40 * 10**r, 40 * 10**r + 1, dtype=F64) / 10**r
        logp = head.log_prob(hidden.expand(values.numel(), -1), values, torch.full(values.shape, r))
        mass = float(torch.exp(logp.detach()).sum())
        assert mass == pytest.approx(float(p_r[r]), rel=1e-9)
        total += mass
    assert total <= 1.0
    # a precision above max_precision is scored as max_precision; a negative one is refused
    value = torch.tensor([1.5], dtype=F64)
    assert torch.equal(head.log_prob(hidden, value, torch.tensor([9])),
                       head.log_prob(hidden, value, torch.tensor([3])))
    with pytest.raises(ValueError):
        head.log_prob(hidden, value, torch.tensor([-1]))


def test_frozen_and_trainable_components():
    frozen = NumeralMixture(4, 2)
    assert "means" in dict(frozen.named_buffers()) and "means" not in dict(frozen.named_parameters())
    trainable = NumeralMixture(4, 2, trainable=True)
    assert trainable.means.requires_grad and trainable.log_stds.requires_grad
    assert set(frozen.state_dict()) == set(trainable.state_dict())
    values = np.r_[2.0 + np.linspace(-0.5, 0.5, 30), 50.0 + np.linspace(-0.5, 0.5, 70)]
    frozen.initialize_from(values, precisions=[0] * 90 + [1] * 8 + [7] * 2)
    assert torch.allclose(frozen.means, torch.tensor([2.0, 50.0]), atol=0.2)
    assert torch.allclose(torch.softmax(frozen.mixture_logits.bias, -1), torch.tensor([0.3, 0.7]), atol=1e-3)
    r_probs = torch.softmax(frozen.precision_logits.bias, -1)
    assert r_probs[0] > r_probs[1] > r_probs[7] > r_probs[2] > 0


def test_mean_median_mode_of_a_known_mixture():
    head = make_head()
    hidden = torch.randn(3, 5, dtype=F64)
    weights = torch.softmax(head.mixture_logits(hidden), -1).detach()
    means, stds = torch.tensor([-10.0, 0.0, 8.0], dtype=F64), torch.tensor([1.0, 0.5, 1.5], dtype=F64)
    assert torch.allclose(head.mean(hidden), (weights * means).sum(-1))
    median = head.median(hidden)
    for w, m in zip(weights.tolist(), median.tolist(), strict=True):
        cdf = sum(wk * normal_cdf((m - mu) / s)
                  for wk, mu, s in zip(w, means.tolist(), stds.tolist(), strict=True))
        assert cdf == pytest.approx(0.5, abs=1e-12)
    # against the median of a large sample drawn here
    gen = torch.Generator().manual_seed(0)
    n = 200_000
    k = torch.multinomial(weights[0], n, replacement=True, generator=gen)
    draws = means[k] + stds[k] * torch.randn(n, generator=gen, dtype=F64)
    assert float(median[0]) == pytest.approx(float(draws.sort().values[n // 2]), abs=0.02)
    # mode: the densest component mean
    density = mixture_pdf(means, weights.unsqueeze(1), means, stds)  # (3 rows, 3 candidates)
    assert torch.equal(head.mode(hidden), means[density.argmax(-1)])


def test_mean_and_median_under_the_log_transform():
    head = make_head("log")
    hidden = torch.randn(2, 5, dtype=F64)
    weights = torch.softmax(head.mixture_logits(hidden), -1).detach()
    means, stds = torch.tensor([0.5, 2.0, 4.0], dtype=F64), torch.tensor([0.5, 0.3, 0.8], dtype=F64)
    u = torch.linspace(-8, 12, 40001, dtype=F64)
    v = torch.sign(u) * torch.expm1(u.abs())
    for row in range(2):
        density = mixture_pdf(u, weights[row], means, stds)
        expected_mean = float(torch.trapezoid(v * density, u))
        assert float(head.mean(hidden)[row]) == pytest.approx(expected_mean, rel=1e-6)
        median = float(head.median(hidden)[row])
        um = math.copysign(math.log1p(abs(median)), median)
        cdf = sum(w * normal_cdf((um - m) / s)
                  for w, m, s in zip(weights[row].tolist(), means.tolist(), stds.tolist(), strict=True))
        assert cdf == pytest.approx(0.5, abs=1e-12)
        assert float(head.cdf(hidden[row : row + 1], torch.tensor([median], dtype=F64))) == pytest.approx(
            0.5, abs=1e-12)
    modes = head.mode(hidden)
    assert all(any(math.isclose(m, math.expm1(c), rel_tol=1e-12) for c in means.tolist())
               for m in modes.tolist())


@pytest.mark.parametrize("transform", ["none", "log"])
def test_sample_writes_r_decimals(transform):
    head = make_head(transform, max_precision=4)
    hidden = torch.randn(200, 5, dtype=F64)
    values, precisions, texts = head.sample(hidden, generator=torch.Generator().manual_seed(0))
    assert values.shape == precisions.shape == (200,) and len(texts) == 200
    assert set(precisions.tolist()) == {0, 1, 2, 3, 4}
    for value, r, text in zip(values.tolist(), precisions.tolist(), texts, strict=True):
        pattern = r"\d+" if r == 0 else rf"\d+\.\d{{{r}}}"
        assert re.fullmatch(r"-?" + pattern, text), text
        assert float(text) == value and not (text.startswith("-") and value == 0)
    again = head.sample(hidden, generator=torch.Generator().manual_seed(0))
    assert again[2] == texts
    one = head.sample(hidden[0], generator=torch.Generator().manual_seed(1))
    assert one[0].shape == () and len(one[2]) == 1


@pytest.mark.parametrize("value, precision, expected", [
    (12.0045692355049666844025, 23, "12.004569235504966684402"),  # 24 symbols: 2 + point + 21 decimals
    (3.25, 1, "3.2"), (-0.0004, 2, "0.00"), (1234.5, 0, "1234"), (7.0, 30, "7." + "0" * 22),
])
def test_write_value_keeps_a_numeral_within_the_tokenizers_limit(value, precision, expected):
    from hf_nlm.heads.numeral.densities.gaussian_mixture import write_value
    from hf_nlm.tokenization.numerals import MAX_NUMERAL_LENGTH, parse_numeral

    text = write_value(value, precision)
    assert text == expected and len(text) <= MAX_NUMERAL_LENGTH and parse_numeral(text) is not None
