"""One result schema: every solver's Dataset carries the same attrs keys with the same types,
and runs that end early keep their results up to the last accepted state and say why."""

from __future__ import annotations

import json

import numpy as np
import pytest

import meanfield as mf
import particles
from meanfield.integrate import (
    RESULT_ATTRS,
    Interrupted,
    StopReason,
    check_result_attrs,
    result_attrs,
    revise_attrs,
    setting_of,
    settings_of,
)
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
        check_result_attrs(ds.attrs)


def _attrs(**change: object) -> dict:
    kw: dict = dict(title="t", solver="s", model="{}", settings={"a": 1}, scheme="rk4",
                    controller="ConstantStep", rtol=None, atol=None, dt=0.1,
                    stats={"num_steps": 2}, stop_reason=StopReason.SUCCESS.value,
                    successful=True, t_reached=1.0, wall_time_s=0.0)
    kw.update(change)
    return result_attrs(**kw)


def test_result_attrs_refuses_a_number_it_would_drop():
    """The counters are the schema's four; a solver's own number (``num_refinements``) passed
    as a counter used to vanish without a word: it belongs in ``settings``."""
    attrs = _attrs()
    assert attrs["num_steps"] == 2 and attrs["num_accepted"] == 0  # not counted: 0
    with pytest.raises(ValueError, match="num_refinements"):
        _attrs(stats={"num_steps": 2, "num_refinements": 1})


def test_solve_records_its_refinements_in_settings():
    """``solve``'s refinement count is a setting of the run (it was also passed, and dropped,
    as a counter): 32 -> 64 at least once for this start (test_circle_solver)."""
    circle = mf.Circle(32)
    rho = lambda th: np.exp(2.0 * np.cos(th)) + np.exp(2.0 * np.cos(th - 3.0))  # noqa: E731
    ds = mf.solve(mf.Model(5.0), circle, rho, [0, 1.5], rtol=1e-11, atol=1e-15)
    check_result_attrs(ds.attrs)
    assert settings_of(ds)["num_refinements"] >= 1 and "num_refinements" not in ds.attrs


def test_check_result_attrs_names_what_is_wrong():
    good = _attrs()
    check_result_attrs(good)
    hand = {k: v for k, v in good.items() if k != "meanfield_version"}
    with pytest.raises(ValueError, match=r"missing \['meanfield_version'\], extra \['version'\]"):
        check_result_attrs({**hand, "version": good["meanfield_version"]})
    with pytest.raises(ValueError, match="attrs\\['num_steps'\\] must be a int"):
        check_result_attrs({**good, "num_steps": 2.0})
    with pytest.raises(ValueError, match="successful.*0 or 1"):
        check_result_attrs({**good, "successful": 2})
    with pytest.raises(ValueError, match="settings.*JSON object"):
        check_result_attrs({**good, "settings": "[1]"})
    with pytest.raises(ValueError, match="model.*must be JSON"):
        check_result_attrs({**good, "model": "all-MiniLM-L6-v2"})


def test_revise_attrs_changes_what_it_is_told_and_keeps_the_rest():
    """A sweep's attrs made into a study's: the changes go through result_attrs again."""
    base = _attrs(stats={"num_steps": 4, "num_accepted": 3, "num_rejected": 1},
                  successful=False, stop_reason="1 of 4 cells failed")
    out = revise_attrs(base, title="study", settings={"b": 2}, stats={"num_evaluations": 9})
    check_result_attrs(out)
    assert out["title"] == "study" and json.loads(out["settings"]) == {"b": 2}
    assert (out["num_steps"], out["num_accepted"], out["num_rejected"],
            out["num_evaluations"]) == (4, 3, 1, 9)
    assert out["successful"] == 0 and out["stop_reason"] == "1 of 4 cells failed"
    assert out["dt"] == 0.1 and out["solver"] == "s"
    with pytest.raises(ValueError, match="changes must be arguments.*'version'"):
        revise_attrs(base, version="1")
    with pytest.raises(ValueError, match="missing \\['title'\\]"):
        revise_attrs({k: v for k, v in base.items() if k != "title"}, solver="x")


def test_setting_of_reads_settings_then_an_older_attribute():
    import xarray as xr

    new = xr.Dataset(attrs={"settings": json.dumps({"tolerance_resolution": 32})})
    old = xr.Dataset(attrs={"tolerance_resolution": 16})  # before it moved into settings
    assert setting_of(new, "tolerance_resolution") == 32
    assert setting_of(old, "tolerance_resolution") == 16
    assert setting_of(new, "form", "continuity") == "continuity"
    with pytest.raises(KeyError, match="form"):
        setting_of(new, "form")


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
    and say why: a blow-up (issue 21, meanfield.integrate.blowup), not a mere non-finite number, with a
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
