"""The integration loop: accuracy, dense output, Lawson form, trackers, monitors, and every
way a run can end (success, early finish, step too small, max steps, non-finite, a monitor's
stop, interruption)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield.integrate import (
    ConstantStep,
    FinishedSimulation,
    PIController,
    Replace,
    RungeKutta,
    Stop,
    StopReason,
    TrackerBase,
    integrate,
)


class Record:
    def __init__(self):
        self.t, self.y = [], []

    def __call__(self, k, t, y, ctx):
        self.t.append(t)
        self.y.append(np.array(y, copy=True))


def run(f, y0, times, controller, scheme="dopri5", **kw):
    rec = Record()
    stepper = RungeKutta(f, scheme, linear=kw.pop("linear", None), project=kw.pop("project", None))
    sol = integrate(stepper, np.asarray(y0, float), np.asarray(times, float),
                    controller=controller, output=rec, **kw)
    return sol, rec


def rotation(y):
    return np.stack([-y[1], y[0]])


def test_adaptive_solution_lands_on_output_times_within_tolerance():
    t = np.linspace(0, 10, 7)
    sol, rec = run(rotation, [1.0, 0.0], t, PIController(rtol=1e-10, atol=1e-12))
    assert sol.reason is StopReason.SUCCESS and sol.successful and rec.t == list(t)
    exact = np.stack([np.cos(t), np.sin(t)], axis=1)
    # global error of a 1e-10 local tolerance over ~10 time units: well below 1e-8
    np.testing.assert_allclose(np.array(rec.y), exact, atol=1e-8)
    assert sol.num_accepted > 0 and sol.num_evaluations >= 6 * sol.num_accepted


@pytest.mark.parametrize(("scheme", "order"), [("rk4", 4), ("bosh3", 3), ("dopri5", 5), ("euler", 1)])
def test_fixed_step_convergence_order(scheme, order):
    """Fitted log-log slope of the error at t = 1 of y' = cos(t) y against dt."""
    dts = np.array([0.1, 0.05, 0.025, 0.0125]) if order > 1 else np.array([0.01, 0.005, 0.0025])
    errs = []
    for dt in dts:
        # autonomous form: (y, t)' = (cos(t) y, 1)
        sol, rec = run(lambda z: np.array([math.cos(z[1]) * z[0], 1.0]), [1.0, 0.0], [0, 1],
                       ConstantStep(dt), scheme=scheme)
        errs.append(abs(rec.y[-1][0] - math.exp(math.sin(1.0))))
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.25


def test_fixed_steps_cut_each_output_interval_equally():
    calls = []
    sol, rec = run(lambda y: (calls.append(1), -y)[1], [1.0], [0, 0.25, 1.0], ConstantStep(0.1),
                   scheme="euler")
    # ceil(0.25/0.1) = 3 steps, then ceil(0.75/0.1) = 8 steps; one evaluation each, plus
    # the first stage at the start
    assert sol.num_steps == 11 and sol.num_evaluations == 12 == len(calls)
    expected = (1 - 0.25 / 3) ** 3 * (1 - 0.75 / 8) ** 8
    assert rec.y[-1][0] == pytest.approx(expected, rel=1e-14)


def test_dense_output_is_third_order_hermite():
    t = np.linspace(0, 2, 41)  # 20 output times per step of 0.2: interpolated, not stepped
    errs = []
    for dt in (0.2, 0.1):
        sol, rec = run(rotation, [1.0, 0.0], t, ConstantStep(dt), scheme="rk4", dense=True)
        assert sol.num_steps == round(2 / dt) and len(rec.t) == t.size
        exact = np.stack([np.cos(t), np.sin(t)], axis=1)
        errs.append(np.max(np.abs(np.array(rec.y) - exact)))
    # RK4 and cubic Hermite interpolation both err by O(h^4): halving h divides the error
    # by 16 (12 allows for the next order); linear interpolation would give only 4
    assert errs[0] < 1e-4 and errs[0] / errs[1] > 12


def test_lawson_form_integrates_the_linear_part_exactly():
    lam = np.array([-50.0, -0.5])
    t = np.array([0.0, 1.0])
    sol, rec = run(lambda y: np.zeros_like(y), [1.0, 2.0], t, ConstantStep(0.5), scheme="rk4",
                   linear=lam)
    np.testing.assert_allclose(rec.y[-1], np.array([1.0, 2.0]) * np.exp(lam), rtol=1e-14)


def test_projection_applies_to_accepted_states():
    sol, rec = run(lambda y: y + rotation(y), [1.0, 0.0], [0, 1], ConstantStep(0.1),
                   scheme="rk4", project=lambda y: y / np.linalg.norm(y))
    assert abs(np.linalg.norm(rec.y[-1]) - 1) < 1e-15


# -- every way to end ------------------------------------------------------------------


def blowup(y):
    return y * y  # y(t) = 1/(1 - t) from y(0) = 1


def test_step_too_small_keeps_the_last_accepted_state():
    sol, rec = run(blowup, [1.0], [0, 2], PIController(rtol=1e-8, atol=1e-10))
    assert sol.reason in (StopReason.STEP_TOO_SMALL, StopReason.NON_FINITE)
    # the step size collapses at the pole t = 1 (to within the minimum step 1e-13 * 2 and
    # the controller's error there); the state kept is finite and huge
    assert not sol.successful and 0.999 < sol.t_reached < 1.0 + 1e-6
    assert np.isfinite(sol.y).all() and sol.y[0] > 1e6
    assert rec.t == [0.0]  # no output time was reached


BLOWS_UP = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                      "ignore:invalid value encountered:RuntimeWarning")
"""NumPy's warnings of a run that blows up, which is the point of the tests so marked."""


@BLOWS_UP
def test_non_finite_state_stops_with_its_time():
    sol, _ = run(blowup, [1.0], [0, 20], ConstantStep(0.5), scheme="rk4")
    assert sol.reason is StopReason.NON_FINITE and "non-finite" in sol.message
    assert np.isfinite(sol.y).all() and sol.t_reached < 20


@BLOWS_UP
def test_non_finite_imaginary_part_stops_too():
    """Spectral states are complex: the finiteness check looks at the whole complex sum (not
    its real part, with NumPy's ComplexWarning), and a blow-up of the imaginary part stops the
    run like any other."""
    import warnings

    def imaginary_blowup(y):
        out = np.zeros_like(y)  # real part exactly 0 (1j * inf would put a NaN there)
        out.imag = y.imag * y.imag  # Im y = 1/(1 - t) blows up; Re y stays 2
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        sol = integrate(RungeKutta(imaginary_blowup, "rk4"), np.array([2.0 + 1.0j]),
                        np.array([0.0, 20.0]), controller=ConstantStep(0.5), output=Record())
    assert sol.reason is StopReason.NON_FINITE and "non-finite" in sol.message
    assert np.isfinite(sol.y).all() and sol.t_reached < 20
    assert sol.y.real[0] == 2.0


def test_max_steps():
    sol, _ = run(rotation, [1.0, 0.0], [0, 100], ConstantStep(0.1), scheme="rk4", max_steps=7)
    assert sol.reason is StopReason.MAX_STEPS and sol.num_steps == 7
    assert sol.t_reached == pytest.approx(0.7)
    assert "max_steps=7" in sol.message


class StopAt(TrackerBase):
    def __init__(self, t_stop):
        self.t_stop = t_stop

    def handle(self, t, y, ctx):
        if t >= self.t_stop:
            raise FinishedSimulation(f"done at {t}")


def test_tracker_finishes_early_and_successfully():
    sol, _ = run(rotation, [1.0, 0.0], [0, 10], ConstantStep(0.1), scheme="rk4",
                 trackers=[StopAt(0.95)])
    assert sol.reason is StopReason.FINISHED_EARLY and sol.successful
    assert sol.t_reached == pytest.approx(1.0)


class Count(TrackerBase):
    def __init__(self, interrupts):
        self.interrupts = interrupts
        self.times = []

    def handle(self, t, y, ctx):
        self.times.append(t)


def test_tracker_interrupt_schedules():
    t = np.linspace(0, 1, 5)
    every, outputs, interval = Count("step"), Count("output"), Count(0.3)
    sol, _ = run(rotation, [1.0, 0.0], t, ConstantStep(0.05), scheme="rk4",
                 trackers=[every, outputs, interval])
    assert len(every.times) == sol.num_accepted == 20
    np.testing.assert_allclose(outputs.times, t[1:])
    # the first accepted step at or after 0.3, 0.6, 0.9
    np.testing.assert_allclose(interval.times, [0.3, 0.6, 0.9], atol=1e-12)
    with pytest.raises(ValueError, match="interrupts must be"):
        run(rotation, [1.0, 0.0], t, ConstantStep(0.05), scheme="rk4", trackers=[Count(-1.0)])


def test_interruption_is_reported_with_the_last_accepted_state():
    calls = [0]

    def f(y):
        calls[0] += 1
        if calls[0] == 30:
            raise KeyboardInterrupt
        return rotation(y)

    sol, _ = run(f, [1.0, 0.0], [0, 10], ConstantStep(0.1), scheme="rk4")
    assert sol.reason is StopReason.INTERRUPTED and not sol.successful
    # 29 evaluations: the initial stage and 7 full steps of 4; the 8th step never finished
    assert sol.t_reached == pytest.approx(0.7) and sol.num_accepted == 7


class Limit:
    """Stops once |y| exceeds a bound; halves the state once at t >= 0.5 (Replace)."""

    def __init__(self):
        self.halved = False

    def check(self, t, y, stage, ctx):
        if not self.halved and t >= 0.5:
            self.halved = True
            return Replace(y / 2, None, None, "halved")
        if abs(y[0]) > 2.5:
            raise Stop(StopReason.UNSTABLE, f"|y| = {abs(y[0]):.3g} at t = {t:.3g}")
        return None


def test_monitor_replace_and_stop():
    rec = Record()
    stepper = RungeKutta(lambda y: y, "rk4")
    sol = integrate(stepper, np.array([1.0]), np.array([0.0, 5.0]), controller=ConstantStep(0.01),
                    output=rec, monitors=[Limit()])
    assert sol.reason is StopReason.UNSTABLE and sol.context == "halved"
    # y = e^t until 0.5, halved, then e^{t}/2 > 2.5 after t = log 5; the stop keeps the
    # last state within the bound
    assert sol.t_reached == pytest.approx(math.log(5.0), abs=0.011)
    assert abs(sol.y[0]) <= 2.5


def test_adaptive_controller_needs_an_embedded_pair():
    with pytest.raises(ValueError, match="no error estimate"):
        run(rotation, [1.0, 0.0], [0, 1], PIController(rtol=1e-6, atol=1e-9), scheme="rk4")


def test_a_monitor_start_stops_before_the_first_step():
    """A monitor's start(t0, y0, stage, context) runs before the first step: its Stop ends
    the run at t0 with its own reason and the initial state, no step taken (a step that
    would overflow at once is named, not reported as non-finite); check still runs after
    each step of a run it lets start."""
    calls = []

    class Judge:
        def __init__(self, refuse):
            self.refuse = refuse

        def start(self, t, y, stage, context):
            calls.append(("start", t))
            if self.refuse:
                raise Stop(StopReason.UNSTABLE, "h L too large at t = 0")

        def check(self, t, y, stage, context):
            calls.append(("check", t))

    sol, rec = run(blowup, [1.0], [0, 20], ConstantStep(10.0), scheme="rk4",
                   monitors=[Judge(True)])
    assert sol.reason is StopReason.UNSTABLE and "h L too large" in sol.message
    assert sol.t_reached == 0.0 and sol.num_steps == 0 and sol.y[0] == 1.0
    assert calls == [("start", 0.0)] and rec.t == [0.0]
    calls.clear()
    sol, _ = run(rotation, [1.0, 0.0], [0, 1], ConstantStep(0.5), scheme="rk4",
                 monitors=[Judge(False)])
    assert sol.successful and calls == [("start", 0.0), ("check", 0.5), ("check", 1.0)]
