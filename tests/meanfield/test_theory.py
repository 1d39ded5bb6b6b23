"""meanfield.theory: growth rates against the reference values of docs/equations.md section 4,
their beta -> 0 limit, and the gamma ODE of Theorem 6.8 at beta = 0 (closed form)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield import theory

REFERENCE = {  # docs/equations.md section 4, 5 significant digits
    (2, "softmax", 4.0): (0.21588, 0.56824, 0.66439),
    (2, "unnormalized", 1.0): (0.56516, 0.54299, 0.19952),
    (3, "unnormalized", 4.0): (2.5607, 4.4721, 4.1841, 2.7035),
}


@pytest.mark.parametrize(("key", "values"), REFERENCE.items())
def test_growth_rates_match_the_reference_values(key, values):
    d, attention, beta = key
    got = theory.growth_rate(d, attention, beta, np.arange(1, len(values) + 1))
    np.testing.assert_allclose(got, values, rtol=6e-5)  # values rounded to 5 digits


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("d", [2, 3, 8])
def test_growth_rate_limit_at_beta_zero_is_continuous(attention, d):
    """beta -> 0: gamma_1 -> (d-1)/d, gamma_l -> 0 for l >= 2 (error O(beta))."""
    ls = np.arange(1, 5)
    at_zero = theory.growth_rate(d, attention, 0.0, ls)
    near = theory.growth_rate(d, attention, 1e-7, ls)
    np.testing.assert_allclose(at_zero, near, atol=1e-6)
    assert at_zero[0] == pytest.approx((d - 1) / d)


def test_sign_and_noise():
    g = theory.growth_rate(2, "softmax", 4.0, 2)
    assert theory.growth_rate(2, "softmax", 4.0, 2, sign=-1.0, noise=0.1) == pytest.approx(-g - 0.4)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_gamma_at_beta_zero_is_the_closed_form(attention):
    n, t = 5, np.linspace(0, 3, 7)
    exact = (np.exp(2 * t) - 1) / (np.exp(2 * t) + n - 1)
    np.testing.assert_allclose(theory.gamma(0.0, n, t, attention), exact, atol=1e-10)
    t_star = 0.5 * math.log(((1 - 1e-3) * (n - 1) + 1) / 1e-3)
    assert theory.transition_time(0.0, n, 1e-3, attention) == pytest.approx(t_star, rel=1e-9)


def test_large_beta_never_overflows_and_usa_refuses_with_the_limit():
    """SA at beta = 800: e^beta cancels in the field, the solve runs (energies overflow to inf,
    said in docs/equations.md section 7); USA needs e^beta itself: a clear refusal."""
    import meanfield as mf

    circle = mf.Circle(64)
    rho0 = mf.initial.uniform_plus_modes(circle, {1: 0.05})
    ds = mf.solve(mf.Model(beta=800.0), circle, rho0, [0, 0.01], max_resolution=64)
    assert ds.attrs["successful"] == 1 and np.isfinite(ds.density.values).all()
    with pytest.raises(ValueError, match="exceeds 709.78, the largest beta for unnormalized"):
        mf.solve(mf.Model(beta=800.0, attention="unnormalized"), circle, rho0, [0, 0.01])
    assert theory.growth_rate(2, "softmax", 800.0, 3) > 0
