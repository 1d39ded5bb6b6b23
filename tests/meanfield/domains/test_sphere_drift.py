"""The sphere's fused drift (shared Legendre stages, FFTW ring transforms) against the
generic composition of the domain's transforms."""

from __future__ import annotations

import numpy as np
import pytest

import meanfield as mf
from meanfield.domains.sphere_drift import SphereDrift


def start(S: mf.Sphere) -> np.ndarray:
    """Two von Mises–Fisher bumps and a tilt: every order m is present."""
    x = S.points
    rho = np.exp(2.0 * (x[..., 2] - 1)) + 0.5 * np.exp(1.5 * (x[..., 0] - 1)) + 0.2 * x[..., 1]
    rho = rho - rho.min() + 0.1
    return S.forward(rho / S.integrate(rho))


def generic_drift(S: mf.Sphere, flow: mf.flow.Flow, c: np.ndarray) -> tuple[np.ndarray, float]:
    """``-div(rho X)`` through ``velocity_padded`` and ``divergence_padded`` (no fusion)."""
    rho, X, _ = flow.velocity_padded(c)
    return -S.divergence_padded(X * rho), float(np.max(np.abs(X)))


# Round-off: both sides sum the same O(lmax^2) terms in another order, each transform with
# relative error ~1e-16 sqrt(lmax); 1e-12 of the largest coefficient leaves a wide margin
# while any missing factor (sqrt(4 pi), a ring weight, the sign) is O(1).
TOL = 1e-12


@pytest.mark.parametrize("form", ["continuity", "gradient"])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("value", [1, -1])
@pytest.mark.parametrize(("lmax", "beta"), [(6, 0.0), (5, 0.5), (24, 4.0), (40, 20.0)])
def test_fused_drift_equals_generic(form, attention, value, lmax, beta):
    S = mf.Sphere(lmax)
    c = start(S)
    flow = mf.make_flow(mf.Model(beta, attention=attention, value=value), S, form)
    fused = flow.drift(c)
    assert flow._fused is not None
    ref, speed = generic_drift(S, flow, c)
    np.testing.assert_allclose(fused, ref, rtol=0, atol=TOL * np.max(np.abs(ref)))
    assert flow.max_speed == pytest.approx(speed, rel=1e-12)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_fused_drift_with_a_general_kernel(attention):
    """``grad_mult`` not a multiple of ``z_mult`` (SA with another potential): the ``d_phi``
    row gets its own Legendre stage; both must agree with the generic composition."""
    S = mf.Sphere(20)
    c = start(S)
    beta = 3.0
    z_mult = S.scaled_kernel_multipliers(beta)
    grad_mult = S.kernel_multipliers_over_beta(1.5) * (1.0 + 0.1 * S.degrees)
    z = None if attention == "unnormalized" else z_mult
    drift = SphereDrift(S, grad_mult, 2.0, z, -1.0)
    got = drift.evaluate(c)
    rho = S.synthesize_padded(c)
    X = -S.gradient_padded(grad_mult * c)
    X = X * 2.0 if z is None else X / S.synthesize_padded(z_mult * c)
    ref = -S.divergence_padded(X * rho)
    np.testing.assert_allclose(got, ref, rtol=0, atol=TOL * np.max(np.abs(ref)))
    assert drift.max_speed() == pytest.approx(float(np.max(np.abs(X))), rel=1e-12)


def rough_coefficients(S: mf.Sphere, seed: int) -> np.ndarray:
    """``c_lm = noise / (1 + l)`` for every stored (l, m) (real for m = 0), with a large mean:
    all degrees present, so the 3/2 rule and every per-ring factor matter."""
    rng = np.random.default_rng(seed)
    c = (rng.standard_normal(S.nalm) + 1j * rng.standard_normal(S.nalm)) / (1.0 + S.degrees)
    c[S.orders == 0] = c[S.orders == 0].real
    c[0] = 4.0  # keeps Z = K * rho positive for SA
    return 0.05 * c


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_fused_drift_on_rough_data_and_reused(attention, nthreads):
    """Rough spectra, one flow evaluated on c1, c2, c1: each result equals the generic
    composition, the first is untouched, and ``max_speed`` follows the last call."""
    S = mf.Sphere(20, nthreads=nthreads)
    flow = mf.make_flow(mf.Model(3.0, attention=attention), S)
    c1, c2 = rough_coefficients(S, 1), rough_coefficients(S, 2)
    results = [flow.drift(c) for c in (c1, c2, c1)]
    for c, got in zip((c1, c2, c1), results):
        ref, speed = generic_drift(S, flow, c)
        np.testing.assert_allclose(got, ref, rtol=0, atol=TOL * np.max(np.abs(ref)))
    assert flow.max_speed == pytest.approx(speed, rel=1e-12)
    np.testing.assert_array_equal(results[0], results[2])


def test_fused_drift_returns_new_arrays_and_checks_shape():
    S = mf.Sphere(10)
    flow = mf.make_flow(mf.Model(2.0), S)
    c1, c2 = start(S), S.forward(S.uniform())
    k1 = flow.drift(c1)
    k1_copy = k1.copy()
    flow.drift(c2)
    np.testing.assert_array_equal(k1, k1_copy)
    with pytest.raises(ValueError, match="coefficients for lmax=10"):
        flow.drift(c1[:-1])
