"""The particle energy by fast summation on S^1 and S^2 (issue 23, part 2): against the
direct O(n^2) sum, the decision it shares with the field, and its wiring into simulate
(the energy monitor and the Dataset's ``energy``)."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model
from particles.observables import energies, energy, fast_energy_error, use_fast_energy

EPS64 = float(np.finfo(float).eps)


def _tol(model: Model, e_direct: np.ndarray, n: int) -> np.ndarray:
    """fastsum.energy's bound (``2 eps e^beta``, :func:`fast_energy_error`) plus the direct
    sum's round-off, ``n eps64 |E|`` (blocked sums of ``n^2`` terms of one sign of size up to
    ``e^beta / (2 beta n^2)``: an error growing at most like the ``n`` terms of a row)."""
    return fast_energy_error(model) + n * EPS64 * np.abs(e_direct)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("beta", [0.5, 4.0])
def test_fast_energy_matches_the_direct_sum(d: int, attention: str, beta: float) -> None:
    model = Model(beta=beta, attention=attention)
    rng = np.random.default_rng(1)
    x = particles.sample_sphere(1500, d, rng, batch=2)
    x[1] = x[1] + 0.5 * np.eye(d)[0]  # a clustered system too: E far from its uniform value
    x[1] /= np.linalg.norm(x[1], axis=-1, keepdims=True)
    e_dir, log_dir = energies(model, x, method="direct")
    e_fast, log_fast = energies(model, x, method="fast")
    assert np.all(np.abs(e_fast - e_dir) <= _tol(model, e_dir, x.shape[1])), (e_fast - e_dir)
    assert np.allclose(log_fast, np.log(e_fast), rtol=0, atol=1e-15)
    assert np.all(np.abs(log_fast - log_dir) <= _tol(model, e_dir, x.shape[1]) / e_dir)


def test_the_energy_follows_the_fields_decision() -> None:
    from meanfield.kernels import fastsum

    model = Model(beta=1.0)
    small, large = fastsum.CROSSOVER[2] - 1, fastsum.CROSSOVER[2]
    assert not use_fast_energy("auto", model, 2, small) and use_fast_energy("auto", model, 2, large)
    assert use_fast_energy("fast", model, 3, 10) and not use_fast_energy("direct", model, 3, 10**6)
    assert not use_fast_energy("auto", Model(beta=1.0, attention="l2"), 2, 10**5)  # no fast energy
    x = particles.sample_sphere(50, 2, np.random.default_rng(0))
    assert energy(model, x, method="auto") == energy(model, x)  # below the crossover: direct
    with pytest.raises(ValueError,
                       match="method='fast' does not apply to the energy: the fast energy needs SA or USA"):
        energy(Model(beta=1.0, attention="l2"), x, method="fast")
    with pytest.raises(ValueError, match="the fast energy is on S\\^1 and S\\^2"):
        energy(model, particles.sample_sphere(50, 4, np.random.default_rng(0)), method="fast")
    with pytest.raises(ValueError, match="method must be one of"):
        energy(model, x, method="quick")
    with pytest.raises(ValueError, match="needs tokens on the sphere"):
        energy(model, 1.5 * x, method="fast")


def test_simulate_sums_the_energy_fast_with_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    from meanfield.kernels import fastsum

    calls = []
    real = fastsum.energy
    monkeypatch.setattr(fastsum, "energy", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = Model(beta=2.0)
    x0 = particles.sample_sphere(800, 2, np.random.default_rng(3))
    t = np.linspace(0.0, 1.0, 5)
    fast = particles.simulate(model, x0, t, dt=0.05, field_method="fast")
    assert len(calls) == (t.size - 1) + t.size  # the monitor (after each step) and the Dataset
    e_fast = fast["energy"].values
    e_dir = np.array([energy(model, xk) for xk in fast["x"].values])  # the reference, same states
    assert np.all(np.abs(e_fast - e_dir) <= _tol(model, e_dir, 800)), e_fast - e_dir
    assert np.all(np.diff(e_fast) > 0)  # SA ascends its energy; the monitor let it run
    calls.clear()
    direct = particles.simulate(model, x0, t, dt=0.05, field_method="direct")
    assert not calls  # a direct field keeps the direct energy
    e_ref = direct["energy"].values  # the whole run direct: the fast field's error too
    # the fast field's relative error (DEFAULT_TOL = 1e-12 per evaluation) carried over 20
    # steps of a flow with rates of order beta: far below 1e-8 (measured: 2.3e-11)
    assert np.max(np.abs(e_fast - e_ref) / e_ref) < 1e-8


def test_simulate_passes_field_tol_to_the_fast_velocity(monkeypatch: pytest.MonkeyPatch) -> None:
    """``field_tol`` reaches :func:`particles.velocity` (its ``field_tol``), is recorded, and is
    refused by name outside ``(0, 1)``. Fast at ``1e-9`` against direct: the fast field meets
    ``1e-9`` relative per point (|v| <= 1 for SA) at every RK4 stage, so 20 steps of ``dt =
    0.05`` differ by at most ``~ 20 * 0.05 * 1e-9 * e^{L t}`` (``L <= 2 beta = 4``, ``t = 1``):
    ``< 1e-7``; and by RK4's stage difference (``x/|x|`` at off-sphere stages, ``~ dt^4``)."""
    import importlib
    import json

    sim_module = importlib.import_module("particles.simulate")

    seen: list[float] = []
    real = sim_module.velocity

    def spy(*args, **kwargs):
        seen.append(kwargs.get("field_tol"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sim_module, "velocity", spy)
    x0 = particles.sample_sphere(400, 3, np.random.default_rng(1))
    model = Model(beta=2.0)
    fast = particles.simulate(model, x0, [0.0, 1.0], dt=0.05, field_method="fast", field_tol=1e-9)
    assert seen and set(seen) == {1e-9}
    assert json.loads(fast.attrs["settings"])["field_tol"] == 1e-9
    direct = particles.simulate(model, x0, [0.0, 1.0], dt=0.05, field_method="direct")
    assert np.max(np.abs(fast["x"].values[-1] - direct["x"].values[-1])) < 1e-7
    for bad in (0.0, 1.0, -1e-9, "x"):
        with pytest.raises(ValueError, match="field_tol must be a relative accuracy"):
            particles.simulate(model, x0, [0.0, 1.0], dt=0.05, field_tol=bad)
