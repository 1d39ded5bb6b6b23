"""The fast energy and partition function of a weighted measure (meanfield.kernels.interaction,
fast path) against the tiled direct sum, and a Lagrangian run's outputs by both methods."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield import Model, nodes, solve_lagrangian
from meanfield.kernels import fastsum
from meanfield.kernels.interaction import energy_terms, fast_energy_reason, use_fast_energy, weighted_energy

EPS = max(fastsum.DEFAULT_TOL / 8, fastsum.NUFFT_EPS_MIN)
"""Accuracy of the nonuniform transforms the fast path calls."""


def _measure(d: int, clustered: bool, seed: int = 0, n: int = 1200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1, n, d))
    if clustered:  # half the mass in a near-Dirac cluster (spread 1e-6)
        x[0, : n // 2] = x[0, :1] + 1e-6 * rng.normal(size=(n // 2, d))
    x /= np.linalg.norm(x, axis=-1)[..., None]
    w = rng.random((1, n))
    return x, w / w.sum()


CASES = [(d, att, beta, value, clustered)
         for d in (2, 3)
         for att, beta, value in (("softmax", 9.0, 1.0), ("softmax", 0.3, 1.0), ("unnormalized", 2.0, -1.0))
         for clustered in (False, True)]


@pytest.mark.parametrize(("d", "attention", "beta", "value", "clustered"), CASES)
def test_fast_energy_and_partition_match_direct(d: int, attention: str, beta: float, value: float,
                                                clustered: bool) -> None:
    x, w = _measure(d, clustered)
    model = Model(beta=beta, attention=attention, value=value)
    ref = energy_terms(model, x, w, partition=True)
    fast = energy_terms(model, x, w, partition=True, method="fast")
    assert ref.partition is not None and fast.partition is not None
    # energy: fastsum.energy's bound 2 eps e^beta (particles.observables.fast_energy_error), plus
    # the direct sum's own rounding, 1e-15 of the sum of the terms' magnitudes e^beta / (2 beta)
    tol_e = 2 * EPS * np.exp(beta) + 1e-15 * np.exp(beta) / (2 * beta)
    assert abs(fast.energy[0] - ref.energy[0]) <= tol_e
    assert abs(fast.log_energy[0] - ref.log_energy[0]) <= tol_e / ref.energy[0]
    # Z - 1: absolute error e^beta (tail + C_Z eps max Z e^-beta) with C_Z = 2
    # (fastsum.NUFFT_ERROR), the tail below 1e-16 (TAIL_FRACTION tol); plus the direct sum's
    # rounding, 1e-15 max Z
    Z = 1.0 + ref.partition[0]
    _, tail = fastsum.band_limit(beta, d, fastsum.DEFAULT_TOL)
    tol_z = np.exp(beta) * tail + (fastsum.NUFFT_ERROR[0] * EPS + 1e-15) * Z.max()
    assert np.max(np.abs(fast.partition[0] - ref.partition[0])) <= tol_z


def test_weighted_energy_method_choice() -> None:
    x, w = _measure(3, False, n=50)
    model = Model(beta=2.0)
    e_direct, _ = weighted_energy(model, x, w)
    e_fast, _ = weighted_energy(model, x, w, method="fast")
    assert abs(e_fast[0] - e_direct[0]) <= 2 * EPS * np.exp(2.0) + 1e-15 * np.exp(2.0)
    assert not use_fast_energy("auto", model, 3, 50)  # below the crossover
    assert use_fast_energy("auto", model, 3, 4096)
    with pytest.raises(ValueError, match="method"):
        use_fast_energy("fastest", model, 3, 50)
    with pytest.raises(ValueError, match="attention='sigmoid'"):
        weighted_energy(Model(beta=2.0, attention="sigmoid"), x, w, method="fast")
    assert "d = 4" in str(fast_energy_reason(model, 4))
    assert "beta" in str(fast_energy_reason(Model(beta=0.0), 3))


def test_lagrangian_outputs_fast_match_direct() -> None:
    """A run on S^2 with field_method='fast' has the energy and dissipation of the direct run
    (same positions to the ODE tolerance: the two fields agree to 1e-12 relative)."""
    from validation.checks.lagrangian_references import SPHERE_RHO0

    nd = nodes.sphere(SPHERE_RHO0, 8)
    model = Model(beta=4.0)
    t = [0.0, 0.5, 1.0]
    a = solve_lagrangian(model, nd, t, field_method="direct", rtol=1e-10, atol=1e-12)
    b = solve_lagrangian(model, nd, t, field_method="fast", rtol=1e-10, atol=1e-12)
    assert b.attrs["settings"].count('"field_method": "fast"') == 1
    # the runs differ by the controller's tolerance (1e-10 relative, a few steps) in x; the
    # energy and dissipation are Lipschitz in x with constants O(e^beta / beta), O(beta e^beta)
    np.testing.assert_allclose(b["energy"].values, a["energy"].values, rtol=1e-8)
    np.testing.assert_allclose(b["dissipation"].values, a["dissipation"].values, rtol=1e-8)


@pytest.mark.parametrize("bad", [0.0, -1e-9, float("nan"), float("inf"), "1e-9", True])
def test_field_tol_must_be_positive_finite(bad: object) -> None:
    nd = nodes.sphere(lambda th, ph: 1 + 0 * th, 4)
    with pytest.raises(ValueError, match="field_tol"):
        solve_lagrangian(Model(beta=1.0), nd, [0.0, 0.1], field_tol=bad)  # type: ignore[arg-type]


def test_field_tol_reaches_the_fast_field() -> None:
    """The run's fast field is asked for field_tol (recorded in settings.fast_field.tol)."""
    import json

    nd = nodes.sphere(lambda th, ph: 1 + 0.3 * np.cos(th), 6)
    ds = solve_lagrangian(Model(beta=2.0), nd, [0.0, 0.2], field_method="fast", field_tol=1e-9)
    assert json.loads(ds.attrs["settings"])["fast_field"]["tol"] == 1e-9
