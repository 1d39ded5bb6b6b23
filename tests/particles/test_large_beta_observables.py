"""Energy, gradient and dissipation at large beta (issue 15, "large beta overflows"): finite
wherever their values are, +-inf (never NaN, never a RuntimeWarning) beyond the float range."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

import meanfield.kernels.interaction as interaction
import particles.observables as ob
from meanfield import Model
from particles import dissipation, energy
from particles.samplers import sample_sphere

X = sample_sphere(16, 3, np.random.default_rng(0))


def _log_energy(beta: float) -> float:
    # log of (1 / (2 beta n^2)) sum_ij e^{beta s_ij}; the "-1" terms are e^{-beta} of it
    s = X @ X.T
    return float(logsumexp(beta * s) - math.log(2 * beta * X.shape[0] ** 2))


@pytest.mark.parametrize("beta", [710.0, 715.0])
def test_energy_beyond_e709_is_finite_and_right(beta: float) -> None:
    # e^beta overflows, E_beta ~ 1e304-1e306 does not (it used to be inf); the value agrees
    # with the log-sum-exp form to the round-off of exponents of size beta: beta * 2.2e-16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = energy(Model(beta), X)
        d = dissipation(Model(beta), X)
    assert math.isfinite(e) and math.isfinite(d) and d > 0  # attraction: E increases
    assert math.log(e) == pytest.approx(_log_energy(beta), abs=1e-12 * beta)


def test_beyond_the_float_range_is_inf_not_nan() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = energy(Model(800.0), X)
        d = dissipation(Model(800.0), X)
    assert e == math.inf and d == math.inf  # NaN (inf * 0) with RuntimeWarnings before


def test_shifted_sums_agree_with_direct_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # at beta = 650 both paths are representable: forcing the shifted one changes the energy
    # and gradient by round-off (exponents of size 650: 650 * 2.2e-16 = 1.4e-13, tolerance
    # 1e-12) and the dissipation, a sum with cancellation of tangent products, by 1e-9 at most
    # (measured 5e-12)
    model = Model(650.0)
    direct = energy(model, X), dissipation(model, X), ob.energy_gradient(model, X)
    monkeypatch.setattr(ob, "EXP_SAFE", 10.0)  # energy_gradient, dissipation
    monkeypatch.setattr(interaction, "EXP_SAFE", 10.0)  # energy
    shifted = energy(model, X), dissipation(model, X), ob.energy_gradient(model, X)
    assert shifted[0] == pytest.approx(direct[0], rel=1e-12)
    assert shifted[1] == pytest.approx(direct[1], rel=1e-9)
    np.testing.assert_allclose(shifted[2], direct[2], rtol=0, atol=1e-12 * np.abs(direct[2]).max())
