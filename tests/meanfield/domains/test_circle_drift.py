"""The circle's fused drift (four FFTs) against the generic composition of domain transforms."""

from __future__ import annotations

import numpy as np
import pytest

import meanfield as mf
from meanfield.domains.base import Domain
from meanfield.spectral.initial import von_mises


def roundoff(flow: mf.flow.Flow, c: np.ndarray) -> float:
    """``64 eps (N/2) max |rho X|``: the two evaluations round differently. Each FFT adds
    ~``eps log2(M)`` of the largest value it carries (``max |rho X|`` for the flux), the
    derivative multiplies by up to ``N/2``, and SA's division by ``Z`` passes ``Z``'s relative
    round-off on at the size of ``X``; 64 covers ``log2 M ~ 7`` times a few transforms. FFTW's
    measured plans vary from run to run; over repeated runs the difference reached 13 of
    these units on rough spectra and well under 1 on smooth ones."""
    rho, X, _ = flow.velocity_padded(c)
    return 64 * np.finfo(float).eps * (flow.domain.N / 2) * float(np.max(np.abs(rho * X)))


def generic_drift(flow: mf.flow.Flow, c: np.ndarray) -> tuple[np.ndarray, float]:
    """``-div(rho X)`` through ``velocity_padded`` and ``divergence_padded`` (no fusion)."""
    rho, X, _ = flow.velocity_padded(c)
    out = -flow.domain.divergence_padded(X * rho)
    return out, float(np.max(np.abs(X)))


@pytest.mark.parametrize("form", ["continuity", "gradient"])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("value", [1, -1])
@pytest.mark.parametrize(("N", "beta"), [(16, 0.0), (8, 0.5), (64, 4.0), (250, 30.0)])
def test_fused_drift_equals_generic(form, attention, value, N, beta):
    d = mf.Circle(N)
    c = d.forward(von_mises(d, [0.3, 2.5], [2.0, 1.0], weights=[0.7, 0.3]))
    flow = mf.make_flow(mf.Model(beta, attention=attention, value=value), d, form)
    assert d.fused_drift(*flow._velocity_parts()[:3], flow.sign) is not None
    fused = flow.drift(c)
    ref, speed = generic_drift(flow, c)
    np.testing.assert_allclose(fused, ref, rtol=0, atol=roundoff(flow, c))
    assert flow.max_speed == pytest.approx(speed, rel=1e-13)
    assert fused[-1] == 0  # Nyquist stays zero


def rough_coefficients(N: int, seed: int) -> np.ndarray:
    """``c_k = (noise) / (1 + k)`` up to Nyquist: every wavenumber present at order 1/k, so a
    product formed without the 3/2 rule aliases at ~1e-2 and any missing factor shows."""
    rng = np.random.default_rng(seed)
    K = N // 2 + 1
    c = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / (1.0 + np.arange(K))
    c[0] = 1.0 / (2 * np.pi) * 3.0  # mean well above the oscillation: Z > 0 for SA
    c[-1] = 0.0
    return c


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("threads", [1, 2])
def test_fused_drift_on_rough_data_and_reused(attention, threads):
    """Rough spectra (dealiasing matters), and one flow evaluated on c1, c2, c1 in turn: each
    result equals the generic composition, and the first is untouched by the later calls."""
    d = mf.Circle(96, threads=threads)
    flow = mf.make_flow(mf.Model(3.0, attention=attention), d)
    c1, c2 = rough_coefficients(96, 1), rough_coefficients(96, 2)
    results = [flow.drift(c) for c in (c1, c2, c1)]
    for c, got in zip((c1, c2, c1), results):
        ref, speed = generic_drift(flow, c)
        np.testing.assert_allclose(got, ref, rtol=0, atol=roundoff(flow, c))
    assert flow.max_speed == pytest.approx(speed, rel=1e-13)
    np.testing.assert_array_equal(results[0], results[2])
    # the same products without the 3/2 rule differ at the size of the aliased tail
    naive = mf.domains.circle_drift.CircleDrift(96, 96, d.wavenumbers, *flow._velocity_parts()[:3],
                                                flow.sign)
    assert np.max(np.abs(naive.evaluate(c1) - results[0])) > 1e-4 * np.max(np.abs(results[0]))


def test_fused_drift_rejects_coefficients_of_the_wrong_shape():
    d = mf.Circle(16)
    flow = mf.make_flow(mf.Model(1.0), d)
    c = d.forward(von_mises(d, [0.3], [2.0]))
    flow.drift(c)
    for bad in (c[:-1], c[:1], np.complex128(1.0), list(c)):
        with pytest.raises(ValueError, match="expected 9 Fourier coefficients"):
            flow.drift(bad)


def test_fused_drift_returns_new_arrays():
    """The integrator keeps every stage: an evaluation must not overwrite an earlier result."""
    d = mf.Circle(32)
    flow = mf.make_flow(mf.Model(2.0), d)
    c1 = d.forward(von_mises(d, [0.3], [2.0]))
    c2 = d.forward(von_mises(d, [2.0], [1.0]))
    k1 = flow.drift(c1)
    k1_copy = k1.copy()
    flow.drift(c2)
    np.testing.assert_array_equal(k1, k1_copy)


def test_generic_domains_have_no_fused_drift():
    """The default hook lets the flow compose the domain's transforms."""
    assert Domain.fused_drift(mf.Sphere(8), np.ones(1), 1.0, None, 1.0) is None


@pytest.mark.parametrize("noise", [0.0, 0.3])
def test_rhs_is_drift_plus_diffusion(noise):
    """``rhs = drift + sigma Laplacian`` with ``Laplacian = -k^2`` on the circle."""
    d = mf.Circle(32)
    flow = mf.make_flow(mf.Model(2.0, noise=noise), d)
    c = d.forward(von_mises(d, [0.3], [2.0]))
    expected = flow.drift(c) - noise * d.degrees**2 * c
    np.testing.assert_allclose(flow.rhs(c), expected, rtol=0, atol=1e-15 * np.abs(expected).max())
