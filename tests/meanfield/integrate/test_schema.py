"""One result schema: every solver's Dataset carries the same attrs keys with the same types,
and runs that end early keep their results up to the last accepted state and say why."""

from __future__ import annotations

import json

import numpy as np
import pytest

import meanfield as mf
import particles
from meanfield.integrate import RESULT_ATTRS, Interrupted, StopReason
from validation.phase_diagram import phase_diagram
from validation.sweep import sweep


def _cell(a: float, rng: np.random.Generator) -> dict:
    return {"v": ((), a + rng.random())}


def results() -> dict:
    circle = mf.Circle(32)
    return {
        "solve": mf.solve(mf.Model(beta=1.0), circle,
                          mf.initial.uniform_plus_modes(circle, {1: 0.1}), [0, 0.1]),
        "solve_gaussian": mf.solve_gaussian(mf.Model(beta=0.5), np.zeros(2), np.eye(2), [0, 0.1]),
        "particles.simulate": particles.simulate(mf.Model(beta=1.0), particles.sample_sphere(4, 3, 0),
                                                 [0, 0.1], method="dopri5"),
        "phase_diagram": phase_diagram(n=4, d=2, betas=[1.0], times=3, t_max=1.0,
                                       realizations=4, progress=False),
        "sweep": sweep(_cell, {"a": [0.0, 1.0]}, progress=False),
        "solve_lagrangian": mf.solve_lagrangian(
            mf.Model(beta=1.0), mf.nodes.circle(lambda th: 1 + 0.1 * np.cos(th), 16), [0, 0.1]),
    }


def test_every_solver_writes_the_same_attrs_keys_and_types():
    for name, ds in results().items():
        assert set(ds.attrs) == set(RESULT_ATTRS), name
        for key, typ in RESULT_ATTRS.items():
            assert type(ds.attrs[key]) is typ, (name, key, type(ds.attrs[key]))
        assert ds.attrs["successful"] == 1 and ds.attrs["stop_reason"] == StopReason.SUCCESS.value
        json.loads(ds.attrs["settings"])
        json.loads(ds.attrs["model"])


def test_solve_max_steps_keeps_partial_results():
    circle = mf.Circle(32)
    rho0 = mf.initial.uniform_plus_modes(circle, {1: 0.1})
    with pytest.raises(mf.ResolutionError, match="max_steps=3") as info:
        mf.solve(mf.Model(beta=1.0), circle, rho0, [0, 1, 2], max_steps=3)
    ds = info.value.dataset
    assert info.value.reason is StopReason.MAX_STEPS and ds.attrs["successful"] == 0
    assert ds.time.values[-1] == pytest.approx(info.value.t) and 0 < info.value.t < 1
    ds = mf.solve(mf.Model(beta=1.0), circle, rho0, [0, 1, 2], max_steps=3, throw=False)
    assert ds.attrs["successful"] == 0 and ds.attrs["t_reached"] == pytest.approx(info.value.t)


def test_solve_interrupted_writes_and_reraises(tmp_path, monkeypatch):
    circle = mf.Circle(32)
    rho0 = mf.initial.uniform_plus_modes(circle, {1: 0.1})
    flow_cls = type(mf.make_flow(mf.Model(beta=1.0), circle))
    calls = [0]
    original = flow_cls.drift

    def drift(self, c):
        calls[0] += 1
        if calls[0] == 40:
            raise KeyboardInterrupt
        return original(self, c)

    monkeypatch.setattr(flow_cls, "drift", drift)
    monkeypatch.setattr(flow_cls, "_fused_drift", lambda self: None)
    out = tmp_path / "partial.nc"
    with pytest.raises(Interrupted) as info:
        mf.solve(mf.Model(beta=1.0), circle, rho0, np.linspace(0, 5, 6), out=out)
    ds = info.value.dataset
    assert ds.attrs["stop_reason"].startswith(StopReason.INTERRUPTED.value)
    assert out.exists() and mf.io.read_netcdf(out).attrs["successful"] == 0


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")  # the blow-up is the point
def test_particles_blow_up_stops_with_partial_finite_results():
    """USA in R^d at beta = 1 from spread tokens: |x| grows like e^{beta |x|^2}-ish and
    overflows in finite time (t ~ 0.35 from this start); the run must stop, keep finite states
    and say why: a blow-up (issue 21, meanfield.blowup), not a mere non-finite number, with a
    fixed step and with an adaptive one. From tokens three times wider (beta = 3) the rate is
    already far beyond any fixed step at t = 0: the step is named there, before a step."""
    model = mf.Model(beta=1.0, attention="unnormalized")
    x0 = 0.5 * particles.sample_gaussian(np.zeros(2), np.eye(2), 8, np.random.default_rng(0))
    t = np.linspace(0, 50, 11)
    for kw in (dict(method="rk4", dt=0.001), dict(method="dopri5")):
        with pytest.raises(particles.SimulationError) as info:
            particles.simulate(model, x0, t, geometry="euclidean", **kw)
        err = info.value
        assert err.reason is StopReason.BLOWUP and "blew up" in str(err), kw
        ds = err.dataset
        assert np.isfinite(ds.x.values).all() and ds.attrs["successful"] == 0
        assert ds.time.values[-1] == pytest.approx(err.t) and 0 < err.t < 50
    quiet = particles.simulate(model, x0, t, geometry="euclidean", dt=0.001, throw=False)
    assert quiet.attrs["successful"] == 0 and "blew up" in quiet.attrs["stop_reason"]
    wide = mf.Model(beta=3.0, attention="unnormalized")
    with pytest.raises(particles.SimulationError) as info:
        particles.simulate(wide, 6 * x0, t, geometry="euclidean", method="rk4", dt=0.01)
    assert info.value.reason is StopReason.UNSTABLE and info.value.t == 0


def test_particles_max_steps_is_a_stop_reason_not_an_exception_type():
    model = mf.Model(beta=1.0)
    x0 = particles.sample_sphere(5, 3, 1)
    ds = particles.simulate(model, x0, [0, 1, 2], method="dopri5", max_steps=4, throw=False)
    assert ds.attrs["successful"] == 0 and "max_steps=4" in ds.attrs["stop_reason"]
    assert ds.sizes["time"] >= 1 and ds.time.values[-1] == ds.attrs["t_reached"]


def test_a_step_far_too_large_stops_with_the_measured_violation():
    """RK4 with dt = 5 at beta = 4 (SA, circle): h L is beyond RK4's stability bound (and the
    energy, which must increase along the flow, decreases under the discrete map); the run
    stops saying so, with the measured value, and keeps what came before."""
    model = mf.Model(beta=4.0)
    x0 = particles.sample_sphere(32, 2, 3)
    t = np.linspace(0, 50, 11)
    with pytest.raises(particles.SimulationError,
                       match="stability bound|energy decreased") as info:
        particles.simulate(model, x0, t, method="rk4", dt=5.0)
    assert info.value.reason is StopReason.UNSTABLE
    e = info.value.dataset.energy.values
    assert np.all(np.diff(e) >= -1e-9 * np.abs(e[1:]))  # what was kept is monotone
    ok = particles.simulate(model, x0, t, method="rk4", dt=0.05)
    assert ok.attrs["successful"] == 1 and np.all(np.diff(ok.energy.values) >= 0)


def test_energy_monitor_stops_an_energy_moving_against_the_flow():
    """The energy monitor alone: SA (attraction) must increase E_beta between output times;
    a state of lower energy (tokens spread out) after a clustered one is a violation."""
    from meanfield.integrate import Stop
    from particles.monitors import EnergyMonitor

    model = mf.Model(beta=4.0)
    mon = EnergyMonitor(model, np.array([0.0, 1.0, 2.0]), memory_limit=2**24)
    theta = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    spread = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    close = np.stack([np.cos(0.1 * theta), np.sin(0.1 * theta)], axis=1)
    mon.check(1.0, close, None, None)
    with pytest.raises(Stop, match="energy decreased from .* between t = 1 and t = 2"):
        mon.check(2.0, spread, None, None)


def test_max_resolution_below_the_first_refinement_is_refused():
    """It would disable refinement without a word: say so, and how to ask for that."""
    circle = mf.Circle(32)
    with pytest.raises(ValueError, match="below the first refinement"):
        mf.solve(mf.Model(beta=1.0), circle, np.ones(32), [0, 0.1], max_resolution=48)
    ds = mf.solve(mf.Model(beta=1.0), circle, np.ones(32), [0, 0.1], max_resolution=32)
    assert ds.attrs["successful"] == 1
