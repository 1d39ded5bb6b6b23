"""The one end of a run (meanfield.integrate.finish), the step-size monitor shared by every
fixed-step solver (meanfield.integrate.stability) and the refusal of a step that could not
finish (issue 21, items 1 and 2)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
import particles
from meanfield.gaussian import BlowUpError, GaussianFlowError
from meanfield.integrate import (
    RK4,
    ButcherTableau,
    IntegrationError,
    Interrupted,
    Solution,
    StopReason,
    check_result_attrs,
    check_step_count,
    finish,
    mark_unsuccessful,
    run_attrs,
    stability_radius,
)
from meanfield.io import read_netcdf
from particles import SimulationError


class Failed(IntegrationError):
    pass


def _sol(reason: StopReason, t: float = 0.5, detail: str = "") -> Solution:
    return Solution(reason=reason, detail=detail, t_reached=t, y=np.zeros(1), context=None)


def _ds(successful: bool) -> xr.Dataset:
    return xr.Dataset({"y": ("time", [0.0, 1.0])}, attrs={"successful": int(successful)})


def test_run_attrs_take_how_the_run_ended_from_the_engine():
    """One helper writes the end of every run's attrs: counters, message, success, time."""
    sol = Solution(reason=StopReason.MAX_STEPS, detail="max_steps=3", t_reached=0.25,
                   y=np.zeros(1), context=None, num_steps=3, num_accepted=2, num_rejected=1,
                   num_evaluations=19, wall_time_s=0.5)
    attrs = run_attrs(sol, title="t", solver="s", model="{}", settings={"k": 1}, scheme="rk4",
                      controller="ConstantStep", rtol=None, atol=None, dt=0.1)
    check_result_attrs(attrs)
    assert (attrs["num_steps"], attrs["num_accepted"], attrs["num_rejected"],
            attrs["num_evaluations"]) == (3, 2, 1, 19)
    assert attrs["stop_reason"] == f"{StopReason.MAX_STEPS.value}: max_steps=3"
    assert attrs["successful"] == 0 and attrs["t_reached"] == 0.25
    assert attrs["wall_time_s"] == 0.5 and attrs["dt"] == 0.1 and np.isnan(attrs["rtol"])


def test_mark_unsuccessful_keeps_an_earlier_reason():
    ok = {"successful": 1, "stop_reason": StopReason.SUCCESS.value}
    mark_unsuccessful(ok, "interrupted during the PDE peaks")
    assert ok == {"successful": 0, "stop_reason": "interrupted during the PDE peaks"}
    mark_unsuccessful(ok, "the trajectories of 1 beta(s) failed")
    assert ok["successful"] == 0 and ok["stop_reason"] == (
        "interrupted during the PDE peaks; the trajectories of 1 beta(s) failed")


def test_success_returns_and_writes(tmp_path):
    ds = _ds(True)
    out = tmp_path / "r.nc"
    assert finish(_sol(StopReason.SUCCESS), ds, name="run", out=out) is ds
    assert read_netcdf(out).attrs["successful"] == 1


def test_interrupt_writes_then_raises_interrupted(tmp_path):
    out = tmp_path / "r.nc"
    with pytest.raises(Interrupted, match=r"run interrupted at t = 0\.5; partial results "
                                          r"written to .*r\.nc") as info:
        finish(_sol(StopReason.INTERRUPTED), _ds(False), name="run", out=out, throw=False)
    assert info.value.dataset.attrs["successful"] == 0 and out.exists()


def test_failure_raises_the_callers_error_or_returns_the_partial_result():
    ds = _ds(False)
    with pytest.raises(Failed, match=r"^run: the maximum number of steps was reached: "
                                     r"max_steps=3; results are kept up to t = 0\.5$") as info:
        finish(_sol(StopReason.MAX_STEPS, detail="max_steps=3"), ds, name="run", error=Failed)
    assert info.value.dataset is ds and info.value.t == 0.5
    assert info.value.reason is StopReason.MAX_STEPS
    assert finish(_sol(StopReason.MAX_STEPS), ds, name="run", error=Failed, throw=False) is ds
    # nothing to keep (an ensemble cell): where it stopped, said once
    with pytest.raises(Failed, match=r"^cell: the solution became non-finite: x; it stopped at "
                                     r"t = 0\.5$"):
        finish(_sol(StopReason.NON_FINITE, detail="x"), None, name="cell", error=Failed)


def test_errors_pickle_whole():
    """A Dask worker's failed cell reaches the client with its reason and time."""
    err = pickle.loads(pickle.dumps(Failed("m", None, 2.0, StopReason.UNSTABLE)))
    assert type(err) is Failed and str(err) == "m" and err.reason is StopReason.UNSTABLE
    assert err.t == 2.0
    intr = pickle.loads(pickle.dumps(Interrupted("i", 3)))
    assert type(intr) is Interrupted and intr.dataset == 3


def test_solvers_share_the_end_of_run():
    """solve_gaussian's errors are IntegrationErrors with a reason (exit 1 on the command
    line), as solve's, solve_lagrangian's and particles'."""
    assert issubclass(GaussianFlowError, IntegrationError)
    q = np.array([[1.0, 0.5], [-0.3, 0.8]])
    k = np.array([[0.9, -0.2], [0.4, 1.1]])
    model = mf.Model(beta=0.7, Q=q, K=k)
    with pytest.raises(BlowUpError, match="finite-time blow-up") as info:
        mf.solve_gaussian(model, np.zeros(2), np.eye(2), [0.0, 100.0])
    assert info.value.reason is StopReason.BLOWUP and info.value.dataset is info.value.partial
    assert info.value.dataset.attrs["successful"] == 0


# -- stability radii and the step-count refusal ----------------------------------------------


def test_stability_radius_of_a_tableau():
    """|R(-r)| = 1 at the end of the real stability interval: RK4's tabulated 2.785 (2.7853
    computed), Heun's second-order method 2 (R(z) = 1 + z + z^2/2), Kutta's third-order
    method 2.5127 (R(z) = 1 + z + z^2/2 + z^3/6; Hairer & Wanner II, IV.2)."""
    assert stability_radius(RK4) == 2.785
    plain_rk4 = ButcherTableau("my-rk4", RK4.c, RK4.a, RK4.b, None, 4, 0, "")
    assert stability_radius(plain_rk4) == pytest.approx(2.785293, abs=1e-6)
    heun = ButcherTableau("heun", np.array([0.0, 1.0]), np.array([[0.0, 0.0], [1.0, 0.0]]),
                          np.array([0.5, 0.5]), None, 2, 0, "")
    assert stability_radius(heun) == pytest.approx(2.0, abs=1e-8)
    kutta3 = ButcherTableau("kutta3", np.array([0.0, 0.5, 1.0]),
                            np.array([[0, 0, 0], [0.5, 0, 0], [-1.0, 2.0, 0]], float),
                            np.array([1 / 6, 2 / 3, 1 / 6]), None, 3, 0, "")
    assert stability_radius(kutta3) == pytest.approx(2.512745, abs=1e-6)


def test_check_step_count():
    t = np.array([0.0, 1.0, 3.0])
    assert check_step_count(t, 0.5, 10) == 6  # 2 + 4 equal steps
    assert check_step_count(t, 0.7, 10, dense=True) == 5  # ceil(3 / 0.7)
    with pytest.raises(ValueError, match=r"dt = 1e-09 needs 3e\+09 steps to go from t = 0 to 3, "
                                         r"more than max_steps = 1000000.*take dt >= 3e-06"):
        check_step_count(t, 1e-9, 1_000_000)
    with pytest.raises(ValueError, match="an unbounded number of steps"):
        check_step_count(t, 1e-320 * 1e-10, 10)  # underflows to 0


def test_particles_refuse_a_step_that_cannot_finish():
    """The issue's particles --dt 1e-9: it ran for ever with no estimate."""
    x0 = particles.sample_sphere(4, 3, 0)
    with pytest.raises(ValueError, match=r"dt = 1e-09 needs 1e\+10 steps.*max_steps"):
        particles.simulate(mf.Model(beta=1.0), x0, [0.0, 10.0], method="rk4", dt=1e-9)


# -- solve_lagrangian ------------------------------------------------------------------------

NODES = mf.nodes.circle(lambda th: 1 + 0.3 * np.cos(th) + 0.2 * np.sin(3 * th), 64)


def test_lagrangian_fixed_step_is_watched():
    """The issue's solve_lagrangian(scheme='rk4', dt=5) at beta = 4 on 64 circle nodes (another
    start): it reported success with positions off by 2.0; now it stops with the measured
    h L (about 3.4 here) above RK4's bound, keeping the states before. dt = 1 (h L about 0.7)
    runs quietly."""
    model = mf.Model(beta=4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(mf.LagrangianError, match=r"h L = .*above the stability bound "
                                                     r"2\.785 of rk4: take dt <= .* or "
                                                     r"scheme='dopri5'") as info:
            mf.solve_lagrangian(model, NODES, [0.0, 5.0, 10.0], scheme="rk4", dt=5.0)
    assert info.value.reason is StopReason.UNSTABLE
    assert info.value.dataset.attrs["successful"] == 0 and info.value.t < 10.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        # the step-size monitor is quiet; the quadrature monitor may speak (64 nodes at beta = 4
        # near t = 6: P = 1e-2, docs/lagrangian.md section 10; the mean 3e-3 off 512 nodes at
        # t = 10, measured)
        warnings.filterwarnings("ignore", message=".*no longer resolve the measure")
        ds = mf.solve_lagrangian(model, NODES, [0.0, 5.0, 10.0], scheme="rk4", dt=1.0)
    assert ds.attrs["successful"] == 1


def test_lagrangian_refusals():
    model = mf.Model(beta=4.0)
    with pytest.raises(ValueError, match="nodes must be a meanfield.lagrangian.nodes.Nodes .* got ndarray"):
        mf.solve_lagrangian(model, np.zeros((4, 2)), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"dt = 1e-09 needs 1e\+10 steps"):
        mf.solve_lagrangian(model, NODES, [0.0, 10.0], scheme="rk4", dt=1e-9)


def test_particles_message_is_unchanged():
    """particles.simulate keeps its message (the monitor moved to meanfield.integrate)."""
    x0 = particles.sample_sphere(32, 3, np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(SimulationError, match=r"^particles: a monitor found the step too "
                                                  r"large .*h L = .*, above the stability bound "
                                                  r"2\.785 of rk4: take dt <= .* or "
                                                  r"method='dopri5'"):
            particles.simulate(mf.Model(4.0, attention="l2"), x0, np.linspace(0, 50, 11),
                               method="rk4", dt=5.0, observables=False)
