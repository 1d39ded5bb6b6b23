"""The step-size bound of fixed-step particle runs (particles.monitors.StepSizeMonitor; issue 15):
a step far too large for the dynamics of a model without an energy stops the run, with the
measured ``h L`` and the scheme's bound; near the bound it warns."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from meanfield import Model
from meanfield.cli import main
from meanfield.integrate import Stop
from particles import SimulationError, simulate
from particles.monitors import STABILITY_RADIUS, StepSizeMonitor
from particles.samplers import sample_sphere


def _linear(rates: np.ndarray):
    return lambda x: x * rates  # F(x) = diag(rates) x, Jacobian diag(rates)


def test_rate_is_the_largest_eigenvalue_of_a_linear_field() -> None:
    # exact finite differences for a linear field; 40 power iterations leave (1/3)^40 of the
    # second direction: the rate equals 3 to round-off
    mon = StepSizeMonitor(_linear(np.array([-3.0, -1.0, 0.5])), "rk4", 0.1, np.array([0.0, 1.0]),
                          sphere=False, iterations=40)
    assert mon.rate(np.ones((4, 3))) == pytest.approx(3.0, rel=1e-9)


@pytest.mark.parametrize(("dt", "outcome"), [(0.5, "quiet"), (2.0, "warn"), (3.0, "stop")])
def test_thresholds_on_a_linear_field(dt: float, outcome: str) -> None:
    # L = 1: h L = 0.5 (quiet), 2 (between half the RK4 bound 1.39 and 2.785: a warning),
    # 3 (beyond the bound: Stop naming h L and the bound)
    t = np.array([0.0, dt])
    mon = StepSizeMonitor(_linear(np.array([-1.0])), "rk4", dt, t, sphere=False, iterations=5,
                          budget=math.inf)  # one step: the default budget would skip t = dt
    y = np.ones((2, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if outcome == "stop":
            with pytest.raises(Stop, match=r"h L = 3, above the stability bound 2\.785 of rk4"):
                mon.check(dt, y, None, None)
        else:
            mon.check(dt, y, None, None)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert (len(messages) == 1) == (outcome == "warn")
    if outcome == "warn":
        assert "h L = 2, near the stability bound 2.785" in messages[0]


def test_the_monitor_spends_at_most_its_budget() -> None:
    """Beyond the start, an output time is checked only while the monitor has spent at most
    BUDGET of the run's evaluations: 100 RK4 steps (400 evaluations) with 3 + 1 evaluations
    per check allow about 0.5 * 400 / 4 = 50 checks, capped at ``checks = 32``; 4 steps allow
    the start and at most one more."""
    import particles.monitors as pm

    calls = []

    def f(y: np.ndarray) -> np.ndarray:
        calls.append(1)
        return -y

    long = StepSizeMonitor(f, "rk4", 0.1, np.linspace(0, 10, 101), sphere=False, x0=np.ones((2, 1)))
    for tk in np.linspace(0.1, 10, 100):
        long.check(float(tk), np.ones((2, 1)), None, None)
    assert len(calls) <= pm.BUDGET * 400 + 4 and len(calls) >= 4 * 20
    calls.clear()
    short = StepSizeMonitor(f, "rk4", 1.0, np.linspace(0, 4, 5), sphere=False, x0=np.ones((2, 1)))
    for tk in (1.0, 2.0, 3.0, 4.0):
        short.check(tk, np.ones((2, 1)), None, None)
    assert len(calls) <= pm.BUDGET * 16 + 4


def test_judged_step_is_the_step_taken() -> None:
    # outputs every 1 with dt = 5: the engine steps h = 1 (equal steps <= dt per interval)
    mon = StepSizeMonitor(_linear(np.array([-1.0])), "rk4", 5.0, np.arange(4.0), sphere=False)
    assert set(mon.steps.values()) == {1.0}


MODELS = {
    "l2": Model(4.0, attention="l2"),
    "sigmoid": Model(4.0, attention="sigmoid"),
    "general QKV": Model(4.0, Q=np.diag([1.0, 0.5, 1.5]), K=np.eye(3),
                         V=np.array([[1.0, 0.3, 0.0], [-0.3, 1.0, 0.0], [0.0, 0.0, 0.8]])),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_without_energy_stop_at_a_step_far_too_large(name: str) -> None:
    """RK4 with dt = 5 at beta = 4 (the issue's case) for models that have no energy to watch:
    it used to run to t = 50 (two clusters instead of one for sigmoid); now it stops with the
    measured h L (measured L ~ 0.6-0.9, so h L ~ 3-4.5 > 2.785) and keeps what came before."""
    x0 = sample_sphere(32, 3, np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(SimulationError, match=r"h L = .* stability bound 2\.785") as info:
            simulate(MODELS[name], x0, np.linspace(0.0, 50.0, 11), method="rk4", dt=5.0,
                     observables=False)
    ds = info.value.dataset
    assert ds.attrs["successful"] == 0 and ds.attrs["t_reached"] < 50.0
    assert bool(np.isfinite(ds.x.values).all())


def test_tokens_in_rd_are_checked_too() -> None:
    # pure self-attention in R^d (no projection), repulsive: L grows with |x|
    x0 = np.random.default_rng(2).standard_normal((16, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = simulate(Model(1.0, value=-1), x0, np.linspace(0.0, 40.0, 5), geometry="euclidean",
                      method="rk4", dt=10.0, observables=False, throw=False)
    assert ds.attrs["successful"] == 0 and "stability bound" in ds.attrs["stop_reason"]


def test_default_steps_are_quiet() -> None:
    # the default dt = 0.01 is far inside the bound: no warning, no stop
    x0 = sample_sphere(16, 3, np.random.default_rng(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for model in MODELS.values():
            ds = simulate(model, x0, np.linspace(0.0, 2.0, 5), observables=False)
            assert ds.attrs["successful"] == 1


def test_cli_stops_and_exits_1(tmp_path, capsys) -> None:
    out = tmp_path / "p.nc"
    code = main(["particles", "--n", "16", "--d", "3", "--attention", "l2", "--dt", "5",
                 "--t-max", "50", "--times", "11", "--no-progress", "--no-observables",
                 "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert "stopped early" in err and "stability bound" in err and out.exists()


def test_radii_are_those_of_the_schemes() -> None:
    # |R(-r)| = 1 at the end of the real stability interval: RK4 and forward Euler
    z = -STABILITY_RADIUS["rk4"]
    assert abs(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24) == pytest.approx(1.0, abs=2e-3)
    assert abs(1 - STABILITY_RADIUS["euler_maruyama"]) == 1.0
