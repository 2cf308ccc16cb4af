"""The discrete-latent-exponent density over numerals (Berg-Kirkpatrick & Spokoyny, EMNLP 2020, "DExp"),
checked against brute force: the numerals of one precision partition the line, an interval's mass is the
integral of the density written out, the quantile inverts the CDF, the mean is the density's first moment."""

from __future__ import annotations

import math

import pytest
import torch

from hf_nlm.heads.numeral.densities.discrete_exponent import NumeralExponentDensity


def density(**kwargs) -> NumeralExponentDensity:
    torch.manual_seed(0)
    d = NumeralExponentDensity(4, **{"min_exponent": -1, "max_exponent": 1, "max_precision": 2,
                                     **kwargs}).double()
    with torch.no_grad():  # spread the classes and mantissas so that every class matters
        d.class_logits.bias.normal_()
        d.mantissa_mean.bias.uniform_(-3, 3)
    return d.requires_grad_(False)  # values only: these tests compare numbers


def pdf(d: NumeralExponentDensity, hidden: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """p(x | h) written out from the module docstring, for one row of hidden and 10^min_exponent <= |x|
    within one class: the class of the points' middle (so that an end on a class boundary, where the
    density jumps, is read from the class being integrated)."""
    probs, mu, sigma, alpha, beta = d._classes(hidden[None])
    k = d.class_of(x[len(x) // 2 : len(x) // 2 + 1]).expand(len(x))
    e = d.class_exponent[k]
    u = torch.log10(x.abs()) - e
    m, s = mu[0, k], sigma[0, k]
    normal = torch.exp(-0.5 * ((u - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    truncation = torch.special.ndtr(beta[0, k]) - torch.special.ndtr(alpha[0, k])
    return probs[0, k] * normal / truncation / (x.abs() * math.log(10))


def test_the_numerals_of_one_precision_share_exactly_its_probability():
    d = density()
    h = torch.randn(3, 4, dtype=torch.float64)
    for r in (0, 1):
        # Every r-decimal numeral whose interval meets (-100, 100): together they cover it, and beyond is
        # nothing.
        values = torch.arange(-100 * 10**r, 100 * 10**r + 1, dtype=torch.float64) / 10**r
        total = d.vocabulary_log_probs(h, values, torch.full_like(values, r, dtype=torch.long)).exp().sum(-1)
        torch.testing.assert_close(total, d.log_precision_probs(h)[:, r].exp())


@pytest.mark.parametrize("value, precision",
                         [(3.5, 1), (-42.0, 0), (9.96, 1), (0.15, 2), (57.0, 0), (-10.0, 0)])
def test_an_interval_gets_the_integral_of_the_density(value, precision):
    """Against the trapezoid rule on the density written out; 9.96 +- 0.05 crosses 10, a class boundary."""
    d = density()
    h = torch.randn(4, dtype=torch.float64)
    half = 0.5 * 10**-precision
    ends = [value - half, value + half]
    cuts = sorted({*ends, *(s * 10.0**e for s in (-1, 1) for e in range(-1, 3)
                            if ends[0] < s * 10.0**e < ends[1])})
    # The trapezoid rule on each side of a class boundary, where the density jumps.
    expected = math.log(sum(float(torch.trapezoid(pdf(d, h, xs), xs))
                            for lo, hi in zip(cuts, cuts[1:], strict=False)
                            for xs in [torch.linspace(lo, hi, 200_001, dtype=torch.float64)]))
    got = d.log_interval_probability(h[None], torch.tensor([value], dtype=torch.float64),
                                     torch.tensor([precision]))
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # log P(v, r | h) is that plus log P(r | h), and the vocabulary-wide scorer agrees with the exact one.
    exact = d.log_prob(h[None], torch.tensor([value], dtype=torch.float64), torch.tensor([precision]))
    assert exact.item() == pytest.approx(expected + d.log_precision_probs(h)[precision].item(), rel=1e-6)
    vocab = d.vocabulary_log_probs(h[None], torch.tensor([value], dtype=torch.float64),
                                   torch.tensor([precision]))
    torch.testing.assert_close(vocab[:, 0], exact.double())


def test_zero_gets_the_zero_class_and_the_small_powers_of_ten_around_it():
    d = density()
    h = torch.randn(4, dtype=torch.float64)
    probs = d.log_class_probs(h).exp()
    # "0" stands for [-0.5, 0.5]: the whole zero class, and [0.1, 0.5] of the classes +-10^-1.
    xs = torch.linspace(0.1, 0.5, 100_001, dtype=torch.float64)
    side = float(torch.trapezoid(pdf(d, h, xs), xs) + torch.trapezoid(pdf(d, h, -xs.flip(0)), -xs.flip(0)))
    expected = math.log(float(probs[d.num_exponents]) + side)
    got = d.log_interval_probability(h[None], torch.zeros(1, dtype=torch.float64),
                                     torch.zeros(1, dtype=torch.long))
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_a_tiny_interval_far_from_the_mean_is_finite_and_its_gradient_too():
    d = NumeralExponentDensity(4).double()
    h = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    value = torch.tensor([123456789.123456], dtype=torch.float64)
    out = d.log_prob(h, value, torch.tensor([6]))
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(h.grad).all()


@pytest.mark.parametrize("q", [0.05, 0.3, 0.5, 0.8, 0.99])
def test_the_quantile_inverts_the_cdf(q):
    d = density()
    h = torch.randn(5, 4, dtype=torch.float64)
    torch.testing.assert_close(d.cdf(h, d.quantile(h, q)), torch.full((5,), q, dtype=torch.float64))


def test_the_mean_is_the_first_moment_of_the_density():
    d = density()
    h = torch.randn(4, dtype=torch.float64)
    moment = 0.0
    for e in range(-1, 2):  # each power of ten on both sides, by the trapezoid rule
        xs = torch.linspace(10.0**e, 10.0 ** (e + 1), 400_001, dtype=torch.float64)[:-1]
        moment += float(torch.trapezoid(xs * pdf(d, h, xs), xs) + torch.trapezoid(-xs * pdf(d, h, -xs), xs))
    assert float(d.mean(h[None])) == pytest.approx(moment, rel=1e-5, abs=1e-8)


def test_samples_follow_the_interval_probabilities():
    """Drawn numerals land on each written numeral about as often as its probability says."""
    d = density(max_precision=0)  # every sample written with 0 decimals
    h = torch.randn(4, dtype=torch.float64)
    n = 40_000
    values, precisions, texts = d.sample(h.expand(n, 4), generator=torch.Generator().manual_seed(0))
    assert set(precisions.tolist()) == {0} and all(
        float(t) == v for t, v in zip(texts[:50], values[:50].tolist(), strict=False))
    for target in (-3.0, 0.0, 2.0, 7.0, 40.0):
        p = float(d.log_prob(h[None], torch.tensor([target], dtype=torch.float64),
                             torch.zeros(1, dtype=torch.long)).exp())
        share = float((values == target).double().mean())
        assert share == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / n) + 1e-4)


def test_training_numerals_set_the_class_prior():
    d = density()
    d.initialize_from(torch.tensor([3.0, 5.0, 50.0, -2.0, 0.0]), torch.tensor([0, 0, 0, 1, 0]))
    counts = torch.ones(d.num_classes, dtype=torch.float64)
    for value in (3.0, 5.0, 50.0, -2.0, 0.0):
        counts[d.class_of(torch.tensor([value]))] += 1
    torch.testing.assert_close(d.class_logits.bias.detach().softmax(-1), counts / counts.sum())
    # Classes in the order of the real line: -10^1 .. -10^-1, zero, 10^-1 .. 10^1.
    assert (d.class_of(torch.tensor([-50.0, -0.5, 0.0, 0.05, 0.5, 5.0, 99.0])).tolist()
            == [0, 2, 3, 3, 4, 5, 6])
