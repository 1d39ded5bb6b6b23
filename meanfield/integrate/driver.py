"""The one integration loop: steps, step-size control, monitors, trackers, outputs, stops.

.. autosummary::
   integrate
   StopReason
   Stop
   Replace
   Monitor
   Solution
   Interrupted

:func:`integrate` advances ``y' = F(y)`` with a stepper (:class:`RungeKutta`,
:class:`EulerMaruyama`) under a controller (:class:`PIController`, :class:`ConstantStep`) from
``times[0]`` to ``times[-1]`` and hands the state to ``output(k, t, y, context)`` at every
output time. It ends on every path with a :class:`StopReason`:

* success, or a tracker raising :class:`FinishedSimulation` (early, still successful);
* a monitor raising :class:`Stop` (e.g. the resolution monitor of :func:`meanfield.solve`),
  after a step or, through its ``start`` method, before the first one;
* a non-finite state, ``max_steps`` attempted steps, a step below ``1e-13 |t|``;
* an overflow (:attr:`StopReason.OVERFLOW`): a non-finite field at the start, or an adaptive
  step that shrank below its minimum while its trial states stayed non-finite (the cause is
  the overflow, not the step size); numpy's overflow and invalid-value warnings inside a step
  are silenced, since the loop handles them and its stop message says so in words;
* a monitor's explanation of a non-finite state or of a collapsing step
  (``explain_non_finite``, ``explain_small_step``; e.g. the blow-up monitor of tokens in
  ``R^d``, :mod:`meanfield.integrate.blowup`: :attr:`StopReason.BLOWUP`);
* ``KeyboardInterrupt``, reported as :attr:`StopReason.INTERRUPTED` (the caller saves what it
  has and re-raises :class:`Interrupted`).

After every accepted step each monitor may also return :class:`Replace`: a new state (and
stepper, and context), e.g. the same density on a finer grid, or only the realisations of a
batch that are not yet frozen. Outputs land exactly on the output times: steps are shortened
to hit them (adaptive control), or each output interval is cut into equal steps ``<= dt``
(constant steps); with ``dense=True`` the steps ignore the output times and the outputs are
the scheme's own continuous extension where its tableau has one (``stepper.interpolates``:
DOP853, order 7), else cubic Hermite interpolants (order 3, from the states and derivatives
at both ends of a step), projected by the stepper.
"""

from __future__ import annotations

import cmath
import enum
import math
import time as _time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

import numpy as np

from meanfield.integrate.controllers import ConstantStep, PIController
from meanfield.integrate.trackers import FinishedSimulation, Tracker, fire_times


class StopReason(enum.Enum):
    """Why an integration ended; the values are readable messages."""

    SUCCESS = "reached the final time"
    FINISHED_EARLY = "a tracker ended the integration early"
    UNRESOLVED = "the grid no longer resolves the solution at the largest allowed resolution"
    MAX_STEPS = "the maximum number of steps was reached"
    STEP_TOO_SMALL = "the step size fell below its minimum"
    NON_FINITE = "the solution became non-finite"
    UNSTABLE = "a monitor found the step too large for the dynamics"
    INTERRUPTED = "interrupted by the user"
    OVERFLOW = "the computation overflowed the float64 range"
    BLOWUP = "the solution blew up"
    UNRESOLVED_NODES = "the nodes no longer resolve the measure"

    @property
    def successful(self) -> bool:
        return self in (StopReason.SUCCESS, StopReason.FINISHED_EARLY)


class Stop(Exception):
    """Raised by a monitor to end the integration with ``reason`` (results are kept)."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class IntegrationError(RuntimeError):
    """A run that ended before its final time; ``.dataset`` holds the results up to ``.t``
    (the last state it accepted), ``.reason`` says why; ``.handled_out``, the file the raiser
    has already dealt with (written the results to, or said why not), which no caller must
    write again (``None``: none)."""

    handled_out: str | None = None

    def __init__(self, msg: str, dataset: Any, t: float, reason: StopReason) -> None:
        super().__init__(msg)
        self.dataset = dataset
        self.t = t
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (a Dask worker's cell)
        return (_restore, (type(self), str(self)), self.__dict__)


class Interrupted(KeyboardInterrupt):
    """``KeyboardInterrupt`` that carries the partial result (``.dataset``, maybe ``None``) and
    the file already dealt with (``.handled_out``, as :class:`IntegrationError`'s)."""

    def __init__(self, msg: str, dataset: Any = None, *, handled_out: str | None = None) -> None:
        super().__init__(msg)
        self.dataset = dataset
        self.handled_out = handled_out

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), str(self)), self.__dict__)


def _restore(cls: type[BaseException], msg: str) -> BaseException:
    """An exception of ``cls`` with message ``msg`` whose attributes come from pickle's state:
    every subclass of :class:`IntegrationError` and :class:`Interrupted` pickles whole,
    whatever its ``__init__`` takes."""
    return cls.__new__(cls, msg)


@dataclass
class Replace:
    """A monitor's request to go on from another state (same time).

    ``stage`` is the stepper's first stage at ``y`` if the monitor can supply it (else it is
    recomputed); ``stepper`` and ``context`` replace the current ones when given."""

    y: np.ndarray
    stage: np.ndarray | None = None
    stepper: Any = None
    context: Any = None


class Monitor(Protocol):
    """Checked after every accepted step: return ``None`` (go on) or :class:`Replace`, or
    raise :class:`Stop`. A monitor may also define ``explain_non_finite(t, y, h)`` and
    ``explain_small_step(t, y, h)``, called before the loop stops on a non-finite state or a
    step below its minimum, which raise :class:`Stop` with a more precise reason than
    :attr:`StopReason.NON_FINITE` or :attr:`StopReason.STEP_TOO_SMALL` (or return to leave
    it at that). A monitor with a method ``start(t0, y0, stage, context)`` is also asked
    before the first step, where a :class:`Stop` ends the run at ``t0`` with its own reason
    (a step that would overflow at once is judged before it is taken)."""

    def check(self, t: float, y: np.ndarray, stage: np.ndarray | None, context: Any
              ) -> Replace | None: ...


@dataclass
class Solution:
    """How an integration ended (the states themselves went to ``output``)."""

    reason: StopReason
    detail: str
    t_reached: float
    y: np.ndarray
    context: Any
    num_steps: int = 0
    num_accepted: int = 0
    num_rejected: int = 0
    num_evaluations: int = 0
    wall_time_s: float = 0.0

    @property
    def successful(self) -> bool:
        return self.reason.successful

    @property
    def message(self) -> str:
        return self.reason.value + (f": {self.detail}" if self.detail else "")

    def stats(self) -> dict[str, int]:
        """Step counters, for a result's ``attrs``."""
        return {"num_steps": self.num_steps, "num_accepted": self.num_accepted,
                "num_rejected": self.num_rejected, "num_evaluations": self.num_evaluations}


Output = Callable[[int, float, np.ndarray, Any], None]


def _explain(monitors: list[Any], hook: str, t: float, y: Any, h: float) -> None:
    """Let the monitors that define ``hook`` (``explain_non_finite``, ``explain_small_step``)
    replace a generic stop by a precise one: they raise :class:`Stop` or return."""
    for mon in monitors:
        explain = getattr(mon, hook, None)
        if explain is not None:
            explain(t, y, h)


def _finite(y: Any) -> bool:
    """Whether every entry of ``y`` is finite: one pass (NaN and inf propagate to the sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return cmath.isfinite(complex(y.sum()))


def _hermite(s: float, h: float, y0: np.ndarray, f0: np.ndarray, y1: np.ndarray,
             f1: np.ndarray) -> np.ndarray:
    s2, s3 = s * s, s * s * s
    return ((2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * h * f0
            + (-2 * s3 + 3 * s2) * y1 + (s3 - s2) * h * f1)


class _Run:
    """The state of one :func:`integrate` call: the last accepted ``(t, y, stage)``, the stepper
    and context (a monitor may swap both), the controller's state, the next output index and
    the step counters. :func:`integrate` reads ``t`` and ``y`` whatever way the run ends."""

    def __init__(self, stepper: Any, y0: np.ndarray, times: np.ndarray, *,
                 controller: PIController | ConstantStep, output: Output, max_steps: int,
                 monitors: list[Any], trackers: list[Tracker],
                 step_bound: Callable[[], float] | None, dense: bool, context: Any) -> None:
        self.times = times
        self.t0, self.t_end = float(times[0]), float(times[-1])
        self.adaptive = bool(controller.adaptive)
        if self.adaptive and not stepper.adaptive:
            msg = f"scheme {stepper.name!r} has no error estimate: use controller=ConstantStep(dt)"
            raise ValueError(msg)
        self.stepper, self.controller, self.output = stepper, controller, output
        self.max_steps, self.monitors, self.trackers = max_steps, monitors, trackers
        self.step_bound, self.dense, self.context = step_bound, dense, context
        self.y: np.ndarray = y0
        self.t = self.t0
        self.stage: Any = None
        self.stats = {"steps": 0, "accepted": 0, "rejected": 0}
        self.evaluations = -stepper.evaluations  # counted across steppers a monitor may swap in
        self.schedule = [fire_times(tr, times) for tr in trackers]
        self.dt, self.cstate = 0.0, 1.0  # set by begin
        self.min_dt = 1e-13 * max(abs(self.t0), abs(self.t_end), 1e-300)
        self.k_out = 1
        self.overflowed = False  # the last trial step was rejected with a non-finite state

    def begin(self, dt0: float | None) -> bool:
        """Start the trackers, output ``times[0]``, evaluate the first stage and choose the first
        step; return whether the field is non-finite at the start."""
        for tr in self.trackers:
            tr.initialize(self.t0, self.t_end)
        self.output(0, self.t0, self.y, self.context)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # checked by start
            self.stage = self.stepper.init(self.y)
        start_overflow = self.stage is not None and not _finite(self.stage)
        if self.adaptive:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a huge field
                self.dt, self.cstate = self.controller.init(self.y, self.stage, self.t_end - self.t0,
                                                            self.stepper.error_order)
            if dt0 is not None:
                self.dt = float(dt0)
        else:
            assert isinstance(self.controller, ConstantStep)
            self.dt, self.cstate = float(self.controller.dt), 1.0
        if self.dense and not self.adaptive:  # equal steps over the whole span
            nsteps = max(1, math.ceil((self.t_end - self.t0) / self.dt - 1e-9))
            self.dt = (self.t_end - self.t0) / nsteps
        return start_overflow

    def start(self, start_overflow: bool) -> None:
        """Stop on a non-finite field at the start; else ask the monitors with a ``start``
        method (before the first step: a step too large is named, not overflowed)."""
        if start_overflow:
            raise Stop(StopReason.OVERFLOW, f"the field is non-finite at the start, t = {self.t:.6g} "
                       "(e.g. e^{beta <x, y>} beyond float64)")
        for mon in self.monitors:
            start = getattr(mon, "start", None)
            if start is not None:
                start(self.t0, self.y, self.stage, self.context)

    def step_size(self, target: float) -> float:
        """The next step towards ``target``: the controller's (bounded by ``step_bound``) and
        shortened to land on it, or an equal division of the output interval into steps
        ``<= dt`` (constant steps)."""
        t = self.t
        if self.adaptive or self.dense:
            h = min(self.dt, target - t)
            if self.step_bound is not None:
                h = min(h, self.step_bound())
            if target - (t + h) < 1e-10 * h:
                h = target - t
        else:  # equal steps <= dt across the output interval
            span = target - float(self.times[self.k_out - 1])
            m = max(1, math.ceil(span / self.dt - 1e-9))
            h = min(span / m, target - t)
            if target - (t + h) < 1e-9 * h:
                h = target - t
        return h

    def check_step(self, h: float, target: float) -> None:
        """Stop on a step below its minimum (an overflow if the last trial was non-finite, else
        the monitors' explanation or :attr:`StopReason.STEP_TOO_SMALL`) or on ``max_steps``."""
        t = self.t
        if h < self.min_dt and target - t > self.min_dt:
            if self.overflowed:
                raise Stop(StopReason.OVERFLOW, f"the step shrank to dt = {h:.3g} at t = "
                           f"{t:.6g} and still gave a non-finite state (a field beyond "
                           "float64)")
            _explain(self.monitors, "explain_small_step", t, self.y, h)
            raise Stop(StopReason.STEP_TOO_SMALL, f"dt = {h:.3g} at t = {t:.6g}")
        if self.stats["steps"] >= self.max_steps:
            raise Stop(StopReason.MAX_STEPS, f"max_steps={self.max_steps} reached at t = {t:.6g}")

    def rejected(self, err: Any, h: float, y_new: np.ndarray) -> bool:
        """Let an adaptive controller judge the trial step (and choose the next ``dt``); return
        whether it rejected it."""
        controller = self.controller
        if not isinstance(controller, PIController):
            return False
        with np.errstate(over="ignore", invalid="ignore"):
            error = controller.error_norm(err, self.y, y_new)
        accept, self.dt, self.cstate = controller.adapt(error, h, self.stepper.error_order, self.cstate)
        if not accept:
            self.stats["rejected"] += 1
            self.overflowed = not _finite(y_new)
        return not accept

    def output_dense(self, t_new: float, y_new: np.ndarray, stage_new: Any) -> None:
        """Output every time in ``(t, t_new]`` by the stepper's own interpolant of the step
        where it has one (``interpolates``), else by cubic Hermite interpolation across it."""
        times, t_end, t = self.times, self.t_end, self.t
        own = bool(getattr(self.stepper, "interpolates", False))
        while self.k_out < len(times) and times[self.k_out] <= t_new + 1e-12 * max(1.0, abs(t_end)):
            s = min(max((float(times[self.k_out]) - t) / (t_new - t), 0.0), 1.0)
            yi = (self.stepper.interpolate(s) if own
                  else _hermite(s, t_new - t, self.y, self.stage, y_new, stage_new))
            self.output(self.k_out, float(times[self.k_out]), self.stepper.project(yi), self.context)
            self.k_out += 1

    def ask_monitors(self, t_new: float, y_new: np.ndarray, stage_new: Any) -> tuple[np.ndarray, Any]:
        """Check every monitor on the accepted state; apply their :class:`Replace` (state, stepper,
        context). A :class:`Stop` here keeps ``(t, y)``: the last state accepted before."""
        for mon in self.monitors:
            rep = mon.check(t_new, y_new, stage_new, self.context)
            if rep is not None:
                y_new = rep.y
                if rep.stepper is not None:
                    self.evaluations += self.stepper.evaluations - rep.stepper.evaluations
                    self.stepper = rep.stepper
                if rep.context is not None:
                    self.context = rep.context
                stage_new = rep.stage if rep.stage is not None else self.stepper.init(y_new)
        return y_new, stage_new

    def fire_trackers(self) -> None:
        """Hand the current state to every tracker whose schedule fires at ``t``."""
        for tr, fire in zip(self.trackers, self.schedule):
            if fire(self.t):
                tr.handle(self.t, self.y, self.context)

    def advance(self) -> None:
        """Attempt one step towards the next target (the next output time, or ``times[-1]`` with
        dense output); if it is accepted, move to it, output, and ask monitors and trackers."""
        target = self.t_end if self.dense else float(self.times[self.k_out])
        h = self.step_size(target)
        self.check_step(h, target)
        self.stats["steps"] += 1
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # checked below
            y_new, err, stage_new = self.stepper.step(self.y, h, self.stage)
        if self.rejected(err, h, y_new):
            return
        t = self.t
        if not _finite(y_new):
            _explain(self.monitors, "explain_non_finite", t, self.y, h)
            raise Stop(StopReason.NON_FINITE, f"non-finite state in the step from t = {t:.6g} "
                       f"to {t + h:.6g}; results are kept up to t = {t:.6g}")
        self.overflowed = False
        t_new = target if h == target - t else t + h
        y_new = self.stepper.project(y_new)
        self.stats["accepted"] += 1
        if stage_new is None:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                stage_new = self.stepper.init(y_new)  # non-finite: the next step stops
        if self.dense:
            self.output_dense(t_new, y_new, stage_new)
        y_new, stage_new = self.ask_monitors(t_new, y_new, stage_new)
        self.t, self.y, self.stage = t_new, y_new, stage_new
        self.fire_trackers()
        if not self.dense and self.t == target:
            self.output(self.k_out, self.t, self.y, self.context)
            self.k_out += 1

    def solution(self, reason: StopReason, detail: str, wall0: float) -> Solution:
        """How the run ended, with its counters."""
        stats = self.stats
        return Solution(
            reason=reason, detail=detail, t_reached=self.t, y=self.y, context=self.context,
            num_steps=stats["steps"], num_accepted=stats["accepted"], num_rejected=stats["rejected"],
            num_evaluations=self.evaluations + self.stepper.evaluations,
            wall_time_s=_time.perf_counter() - wall0,
        )


def integrate(
    stepper: Any,
    y0: np.ndarray,
    times: np.ndarray,
    *,
    controller: PIController | ConstantStep,
    output: Output,
    dt0: float | None = None,
    max_steps: int = 1_000_000,
    monitors: Iterable[Monitor] = (),
    trackers: Iterable[Tracker] = (),
    step_bound: Callable[[], float] | None = None,
    dense: bool = False,
    context: Any = None,
) -> Solution:
    """Integrate from ``times[0]`` (state ``y0``) to ``times[-1]``; see the module docstring.

    Args:
        stepper: ``init(y) -> stage``, ``step(y, h, stage) -> (y_new, error, stage_new)``,
            ``project(y)``, ``error_order``, ``adaptive``, ``evaluations``.
        times: strictly increasing output times (checked by the caller).
        controller: step-size control; an adaptive one needs an adaptive stepper.
        output: called as ``output(k, times[k], y, context)`` for each output time reached
            (``y`` may be reused afterwards: copy it to keep it).
        dt0: first step (default: the controller's guess).
        max_steps: bound on attempted steps.
        monitors: checked after every accepted step (:class:`Monitor`).
        trackers: hooks with interrupt schedules (:mod:`meanfield.integrate.trackers`).
        step_bound: a bound on the next step read before each step (a CFL condition).
        dense: interpolate outputs instead of stepping onto them (needs ``stage`` to be the
            derivative ``F(y)``, i.e. no linear part), by the stepper's ``interpolate(theta)``
            where its ``interpolates`` is true, else by cubic Hermite.
        context: passed to ``output``, trackers and monitors (e.g. the current domain).
    """
    wall0 = _time.perf_counter()
    run = _Run(stepper, y0, times, controller=controller, output=output, max_steps=max_steps,
               monitors=list(monitors), trackers=list(trackers), step_bound=step_bound,
               dense=dense, context=context)
    start_overflow = run.begin(dt0)
    reason, detail = StopReason.SUCCESS, ""
    try:
        run.start(start_overflow)
        while run.k_out < len(times):
            run.advance()
    except Stop as exc:
        reason, detail = exc.reason, exc.detail
    except FinishedSimulation as exc:
        reason, detail = StopReason.FINISHED_EARLY, str(exc)
    except KeyboardInterrupt:
        reason, detail = StopReason.INTERRUPTED, f"interrupted at t = {run.t:.6g}"
    finally:
        for tr in run.trackers:
            tr.finalize({"reason": reason, "t": run.t, **run.stats})
    return run.solution(reason, detail, wall0)


__all__ = ["IntegrationError", "Interrupted", "Monitor", "Replace", "Solution", "Stop", "StopReason",
           "integrate"]
