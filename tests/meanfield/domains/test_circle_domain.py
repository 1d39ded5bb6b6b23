"""The Circle domain: transforms, Parseval, multipliers, particles."""

import numpy as np
import pytest
from scipy import special

from meanfield import Circle
from meanfield.domains.base import Domain

# Round-off of an N-point FFT pair on O(1) data: a few times N^{1/2} eps; 1e-13 covers N <= 4096.
ROUNDOFF = 1e-13


@pytest.mark.parametrize("N", [8, 64, 1000])
def test_round_trip_and_plans_reused(N, rng):
    d = Circle(N)
    f = rng.random(N)
    c = d.forward(f)
    plan = d._fft.r2c
    # the Nyquist mode is dropped (kept zero): compare with f minus its Nyquist component
    nyq = np.mean(f * (-1.0) ** np.arange(N)) * (-1.0) ** np.arange(N)
    np.testing.assert_allclose(d.backward(c), f - nyq, atol=ROUNDOFF)
    d.forward(f)
    assert d._fft.r2c is plan  # plans are made once per domain


def test_parseval_and_mass(rng):
    d = Circle(64)
    k = np.arange(1, 20)
    f = 1 + np.sum(np.cos(np.outer(d.grid, k) + rng.random(k.size)) / k**2, axis=1)
    g = 2 + np.sum(np.sin(np.outer(d.grid, k)) / k**3, axis=1)
    assert d.inner(d.forward(f), d.forward(g)) == pytest.approx(d.integrate(f * g), rel=ROUNDOFF)
    assert d.mass(d.forward(f)) == pytest.approx(d.integrate(f), rel=ROUNDOFF)


def test_padded_gradient_and_divergence():
    d = Circle(32)
    f = np.sin(3 * d.grid) + 0.5 * np.cos(5 * d.grid)
    grad = d.gradient_padded(d.forward(f))[0]
    th = d.padded_grid
    np.testing.assert_allclose(grad, 3 * np.cos(3 * th) - 2.5 * np.sin(5 * th), atol=ROUNDOFF)
    div = d.divergence_padded(np.cos(2 * th)[None, :])  # d/dtheta cos 2theta = -2 sin 2theta
    np.testing.assert_allclose(d.backward(div), -2 * np.sin(2 * d.grid), atol=ROUNDOFF)


def test_products_are_dealiased():
    """The 3/2 rule: the product of two degree-(N/2-1) polynomials, truncated, is exact."""
    d = Circle(16)
    a = np.cos(7 * d.grid)
    b = np.cos(6 * d.grid)
    prod = d.divergence_padded((d.synthesize_padded(d.forward(a)) * d.synthesize_padded(d.forward(b)))[None])
    # d/dtheta [cos7 cos6] = d/dtheta [(cos 13 + cos 1)/2]; only mode 1 survives truncation
    expect = np.zeros_like(prod)
    expect[1] = 0.5j * 0.5
    np.testing.assert_allclose(prod, expect, atol=ROUNDOFF)


@pytest.mark.parametrize("beta", [0.0, 1e-8, 0.1, 4.0, 50.0, 500.0])
def test_kernel_multipliers_match_bessel(beta):
    d = Circle(64)
    k = d.degrees
    lam = d.scaled_kernel_multipliers(beta)
    if beta == 0:
        np.testing.assert_allclose(lam, np.where(k == 0, 2 * np.pi, 0.0), rtol=1e-15, atol=0)
    else:
        # ive is accurate to a few ulp; the log/exp route adds a few more. Multipliers under
        # 1e-100 of the largest are flushed to zero (far below round-off; no subnormals).
        exact = 2 * np.pi * special.ive(k, beta)
        kept = exact >= 1e-100 * exact.max()
        np.testing.assert_allclose(lam[kept], exact[kept], rtol=1e-13)
        assert np.all(lam[~kept] == 0.0)
        assert np.all(np.isfinite(lam))
    quad = d.zonal_multipliers(lambda t: np.exp(beta * (t - 1)))
    if beta <= 50:  # the trapezoid rule with 8N points is exact for I_k at these beta
        np.testing.assert_allclose(quad, lam, rtol=1e-12, atol=1e-14 * lam[0])


def test_reference_values_of_growth_rates():
    """docs/equations.md section 4 reference values (5 significant digits given)."""
    k = np.array([1, 2, 3])
    sa = k**2 * special.iv(k, 4.0) / (4.0 * special.iv(0, 4.0))
    np.testing.assert_allclose(sa, [0.21588, 0.56824, 0.66439], rtol=5e-5)
    usa = k**2 * special.iv(k, 1.0) / 1.0
    np.testing.assert_allclose(usa, [0.56516, 0.54299, 0.19952], rtol=5e-5)


def test_project_and_kernel_distance(rng):
    d = Circle(32)
    th = rng.random(50) * 2 * np.pi
    c = d.project(np.stack([np.cos(th), np.sin(th)], axis=1))
    k = d.degrees[:-1]
    expect = np.exp(-1j * np.outer(th, k)).mean(axis=0) / (2 * np.pi)
    # NUFFT accuracy: epsilon = 1e-13 relative to sum |weights| = 1/(2 pi)
    np.testing.assert_allclose(c[:-1], expect, atol=1e-13)
    # ||mu_n - mu_n||^2 from a direct double sum: (1/n^2) sum e^{beta cos(th_i - th_j)} for
    # particle sets A, B, truncated to |k| < N/2 (negligible for beta = 1: I_16(1) ~ 1e-18)
    beta = 1.0
    a, b = th[:25], th[25:]
    direct = (
        np.exp(beta * np.cos(a[:, None] - a)).mean()
        + np.exp(beta * np.cos(b[:, None] - b)).mean()
        - 2 * np.exp(beta * np.cos(a[:, None] - b)).mean()
    )
    ca, cb = d.project(a), d.project(b)
    # NUFFT error 1e-13 per coefficient, times sum_k I_k ~ e^beta, against a squared
    # distance ~ 1/n = 0.04: relative error ~ 1e-11; 1e-10 leaves a factor 10.
    assert d.kernel_distance(ca, cb, beta) ** 2 == pytest.approx(direct, rel=1e-10)


def test_sampling_matches_density(rng):
    """Sample mean of cos(theta) under a wrapped Cauchy(r) is r (Ott-Antonsen family);
    n = 2e5 samples: standard error <= 1/sqrt(2n) ~ 1.6e-3, so 5 sigma = 8e-3."""
    from meanfield.spectral.initial import wrapped_cauchy

    d = Circle(128)
    r = 0.4
    x = d.sample(wrapped_cauchy(d, r, 0.0), 200_000, rng)
    assert np.mean(x[:, 0]) == pytest.approx(r, abs=8e-3)
    assert np.mean(x[:, 1]) == pytest.approx(0.0, abs=8e-3)
    q = d.quantiles(wrapped_cauchy(d, r, 0.0), 1000)
    th = np.sort(np.mod(np.arctan2(q[:, 1], q[:, 0]), 2 * np.pi))
    F = d.cdf(d.forward(wrapped_cauchy(d, r, 0.0)), th)
    # Newton converged: F(theta_i) = (i + 1/2)/n to round-off
    np.testing.assert_allclose(F, (np.arange(1000) + 0.5) / 1000, atol=1e-12)


@pytest.mark.parametrize("N", [4, 7, 9, 2.5, "64"])
def test_bad_resolution(N):
    with pytest.raises(ValueError, match="N"):
        Circle(N)


def test_state_round_trip():
    d = Circle(48, threads=2)
    assert Domain.from_state(d.state_json()) == d
    with pytest.raises(ValueError, match="unknown domain"):
        Domain.from_state({"name": "torus"})
