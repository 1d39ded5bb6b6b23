"""Initial densities: each normalised, each bad input a ValueError naming it."""

import numpy as np
import pytest
from scipy import special

from meanfield import Circle, Model, initial, solve


@pytest.fixture
def circle():
    return Circle(64)


def test_von_mises_matches_closed_form(circle):
    rho = initial.von_mises(circle, 1.0, 3.0)
    exact = np.exp(3.0 * np.cos(circle.grid - 1.0)) / (2 * np.pi * special.iv(0, 3.0))
    # trapezoid normalisation is spectrally exact here (I_k(3) < 1e-16 beyond k = 20)
    np.testing.assert_allclose(rho, exact, rtol=1e-13)


def test_mixture_weights(circle):
    a = initial.von_mises(circle, 0.0, 2.0)
    b = initial.von_mises(circle, np.pi, 5.0)
    mix = initial.von_mises(circle, [0.0, np.pi], [2.0, 5.0], [3.0, 1.0])
    np.testing.assert_allclose(mix, 0.75 * a + 0.25 * b, rtol=1e-13)


def test_uniform_plus_modes(circle):
    rho = initial.uniform_plus_modes(circle, {3: 0.01, -2: 0.02})
    c = circle.forward(rho)
    assert c[3] == pytest.approx(0.005, abs=1e-15)
    assert c[2] == pytest.approx(-0.01j, abs=1e-15)
    with pytest.raises(ValueError, match="negative"):
        initial.uniform_plus_modes(circle, {1: 1.0})
    with pytest.raises(ValueError, match="not resolved"):
        initial.uniform_plus_modes(circle, {40: 0.01})


def test_from_samples_recovers_the_density(circle, rng):
    """KDE of 20 000 samples of a von Mises(kappa=2): the first moment is within sampling
    error (se ~ 0.7/sqrt(n) = 5e-3, times the kernel's shrink factor < 1; 4 sigma = 0.02)."""
    true = initial.von_mises(circle, 0.5, 2.0)
    x = circle.sample(true, 20_000, rng)
    est = initial.from_samples(circle, x)
    assert circle.integrate(est) == pytest.approx(1.0, abs=1e-12)
    m_true = circle.integrate(true * np.exp(1j * circle.grid))
    m_est = circle.integrate(est * np.exp(1j * circle.grid))
    # the kernel multiplies the first moment by I_1(kappa)/I_0(kappa) (bandwidth bias)
    kappa = min(20_000 ** (2 / 5), (32 / 6) ** 2)
    shrink = special.iv(1, kappa) / special.iv(0, kappa)
    assert abs(m_est - shrink * m_true) < 0.02


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda d: initial.von_mises(d, 0.0, -1.0), "kappas"),
        (lambda d: initial.von_mises(d, [0.0, 1.0], 1.0, [1.0]), "weights"),
        (lambda d: initial.von_mises(d, [[1.0, 0.0, 0.0]], 1.0), "center"),
        (lambda d: initial.wrapped_cauchy(d, 1.0), "r must be"),
        (lambda d: initial.from_samples(d, np.zeros((0, 2))), "samples"),
        (lambda d: initial.from_samples(d, np.full((3, 2), np.nan)), "non-finite"),
        (lambda d: initial.from_array(d, np.zeros(64)), "integrates to"),
        (lambda d: initial.from_array(d, np.ones(10)), "shape"),
    ],
)
def test_bad_inputs(circle, call, match):
    with pytest.raises(ValueError, match=match):
        call(circle)


def test_exponential_filter_only_touches_the_top_modes(circle):
    """An l-only filter exp(-36 (k/kmax)^36) changes mode k <= kmax/2 by < 36 * 2^-36 = 5e-10
    per step, and damps the top mode by e^-36."""
    f = circle.exponential_filter(36)
    assert f[0] == 1.0 and f[-1] == pytest.approx(np.exp(-36.0))
    assert np.all(1 - f[: circle.N // 4 + 1] < 6e-10)
    rho0 = initial.von_mises(circle, 0.0, 1.0)
    a = solve(Model(1.0), circle, rho0, [0, 0.5], filter_order=36)
    b = solve(Model(1.0), circle, rho0, [0, 0.5])
    np.testing.assert_allclose(a.density, b.density, atol=1e-8)
