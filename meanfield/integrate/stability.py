"""The step-size monitor of every fixed-step run: a step far too large for the dynamics never
passes without a word, and a step so small that the run cannot end is refused up front.

.. autosummary::
   StepSizeMonitor
   STABILITY_RADIUS
   stability_radius
   constant_steps
   check_step_count

An explicit Runge–Kutta step ``h`` on ``x' = F(x)`` is stable only where ``h lambda`` lies in
the scheme's stability region for the eigenvalues ``lambda`` of the Jacobian ``J = DF`` (on
the real axis ``|h lambda| <= 2.785`` for RK4, ``2`` for Euler; Hairer & Wanner II, IV.2).
:class:`StepSizeMonitor` measures ``L``, the largest growth rate ``|J v| / |v|`` over tangent
directions ``v``, by a few power iterations on finite differences of ``F`` (4 evaluations, at
the start and at no more than 32 output times of a run, within a budget of half the run's own
evaluations), and compares ``h L`` with the radius: above it the scheme amplifies the fastest
direction at every step (the numbers no longer approximate the flow: measured, RK4 with
``h = 5`` at ``beta = 4`` ends with two clusters where the flow makes one), and the run stops
with :attr:`StopReason.UNSTABLE`, naming ``h L``, the radius and a step that would do, and
keeping the results up to the last state accepted; above half the radius (a local error of a
few per cent per step) a ``UserWarning`` says the same.

It serves ``particles.simulate`` (fixed-step methods), :func:`meanfield.solve_lagrangian`
(fixed-step schemes) and the ensembles of :mod:`particles.ensemble` (the phase diagram and
metastability studies, with their freezing of clustered realisations: the monitor measures
the realisations still integrated). :func:`check_step_count` refuses, before any work, a step
that would need more than ``max_steps`` steps, with the estimate.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from meanfield import backend as bk
from meanfield.integrate.driver import Stop, StopReason

STABILITY_RADIUS = {"rk4": 2.785, "angles": 2.785, "euler_maruyama": 2.0, "euler": 2.0}
"""Half-width of the real stability interval ``[-r, 0]`` of each fixed-step scheme
(``|R(z)| <= 1``: RK4 ``2.7853``, forward Euler ``2``; Hairer & Wanner II, IV.2); other
tableaus: :func:`stability_radius`."""

EVALUATIONS_PER_STEP = {"rk4": 4, "angles": 4, "euler_maruyama": 1, "euler": 1}
"""Right-hand side evaluations of one step of each fixed-step scheme."""

BUDGET = 0.5
"""An output time is checked only while the monitor has spent at most this fraction of the
run's own evaluations so far (the start is always checked): cheap by construction."""

WARN_FACTOR = 0.5
"""A warning when ``h L`` exceeds this fraction of the radius (RK4's local error along the
fastest direction is then ``~ (h L)^5 / 120``, a few per cent per step); a stop above the
radius itself."""


def stability_radius(tableau: Any) -> float:
    """The real stability radius of an explicit Runge–Kutta ``tableau`` (a
    :class:`meanfield.integrate.ButcherTableau`): the largest ``r`` with ``|R(-x)| <= 1`` on
    ``[0, r]``, ``R(z) = 1 + z b^T (I - z A)^{-1} 1`` (Hairer & Wanner II, IV.2), found on a
    grid of step ``1e-3`` and refined by bisection to ``1e-9``; the values of
    :data:`STABILITY_RADIUS` for the schemes named there."""
    name = getattr(tableau, "name", None)
    if name in STABILITY_RADIUS:
        return STABILITY_RADIUS[name]
    a = np.asarray(tableau.a, dtype=float)
    b = np.asarray(tableau.b, dtype=float)
    one = np.ones(b.size)

    def amp(x: float) -> float:
        z = -x
        return abs(1.0 + z * float(b @ np.linalg.solve(np.eye(b.size) - z * a, one)))

    xs = np.arange(1e-3, 64.0, 1e-3)
    bad = next((x for x in xs if amp(float(x)) > 1.0 + 1e-12), None)
    if bad is None:
        return math.inf
    lo, hi = float(bad) - 1e-3, float(bad)
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if amp(mid) <= 1.0 + 1e-12 else (lo, mid)
    return lo


def constant_steps(times: np.ndarray, dt: float, *, dense: bool = False) -> int:
    """The number of steps the engine takes with ``ConstantStep(dt)`` over ``times``: equal
    steps ``<= dt`` in each output interval, or over the whole span with ``dense``. Counted
    in floating point (``inf`` when ``dt`` underflows), so that any step can be judged."""
    t = np.asarray(times, dtype=float)
    if float(dt) <= 0:
        return math.inf  # type: ignore[return-value]
    spans = [float(t[-1] - t[0])] if dense else np.diff(t).tolist()
    total = 0.0
    for span in spans:
        ratio = span / float(dt)
        total += max(1.0, math.ceil(ratio - 1e-9)) if math.isfinite(ratio) else math.inf
    return int(total) if math.isfinite(total) else math.inf  # type: ignore[return-value]


def check_step_count(times: np.ndarray, dt: float, max_steps: int, *, dense: bool = False,
                     name: str = "dt", what: str = "") -> int:
    """Refuse, before any work, a fixed step that needs more than ``max_steps`` steps to
    reach ``times[-1]``: ``ValueError`` naming ``name``, its value, the estimated number of
    steps and what would do (``what`` says how the step was made, e.g. ``dt e^{-beta}``).
    Returns the number of steps."""
    steps = constant_steps(times, dt, dense=dense)
    if steps > max_steps:
        t = np.asarray(times, dtype=float)
        made = f" ({what})" if what else ""
        count = "an unbounded number of" if not math.isfinite(steps) else f"{float(steps):.3g}"
        msg = (f"{name} = {float(dt):.3g}{made} needs {count} steps to go from t = {t[0]:.6g} to "
               f"{t[-1]:.6g}, more than max_steps = {int(max_steps)}: the run could not finish "
               f"in reasonable time; take {name} >= {(t[-1] - t[0]) / max_steps:.3g} or a "
               "shorter time span")
        raise ValueError(msg)
    return int(steps)


class StepSizeMonitor:
    """Warns, or stops, when a fixed step is too large for the Jacobian of the dynamics.

    Args:
        f: the right-hand side ``F(x)`` the scheme steps.
        method: a key of :data:`STABILITY_RADIUS` (the name in the messages).
        dt: the largest step; each output interval is cut into equal steps ``<= dt`` (the
            engine's constant steps), and the step of the interval just done is the one judged.
        times: the output times.
        sphere: tokens on the sphere (directions tangent to it; the projection removes the
            normal ones).
        checks: at most this many output times are checked, spread evenly.
        budget: an output time is checked only while the monitor has spent at most this
            fraction of the run's own evaluations so far (:data:`BUDGET`); the start is always
            checked, and once a step was found near the bound (a warning) every chosen output
            time is (a run of a few large steps would otherwise never be judged again).
            ``math.inf``: every chosen output time.
        iterations: power iterations per check.
        x0: the initial state, checked (with the first interval's step) at the first check.
        dense: the engine's ``dense=True`` steps (equal steps over the whole span, outputs
            interpolated): each chosen output time is checked at the first step that reaches it.
        radius: the stability radius, when ``method`` is not in :data:`STABILITY_RADIUS`
            (:func:`stability_radius` of the tableau).
        tangent: ``tangent(x, v)``, the directions measured (default: ``v``, or its part
            tangent to the sphere at the rows of ``x`` with ``sphere``).
        stop_factor: the run stops where ``h L`` exceeds this fraction of the radius (``1``:
            the stability bound itself; :data:`WARN_FACTOR` for the ensembles, whose
            statistics a local error of a few per cent per step already spoils: measured, RK4
            with ``h L`` about 2 on the phase diagram at ``beta = 1`` gave a probability of
            0.22 where ``dt = 0.3`` gives 1.0); a warning above :data:`WARN_FACTOR` below it.
        advice: what else to do, added to the message (``"method='dopri5'"``; ``None``: only
            the step).
    """

    def __init__(self, f: Callable[[Any], Any], method: str, dt: float,
                 times: np.ndarray, *, sphere: bool, checks: int = 32, iterations: int = 3,
                 x0: Any = None, budget: float = BUDGET, dense: bool = False,
                 radius: float | None = None,
                 tangent: Callable[[Any, Any], Any] | None = None, stop_factor: float = 1.0,
                 advice: str | None = "method='dopri5'") -> None:
        self.f = f
        self.stop_factor = float(stop_factor)
        self.advice = advice
        self.tangent = tangent
        self.method = method
        if radius is None and method not in STABILITY_RADIUS:
            msg = (f"method {method!r} has no stability radius in STABILITY_RADIUS "
                   f"{sorted(STABILITY_RADIUS)}: give radius (stability_radius(tableau))")
            raise ValueError(msg)
        self.radius = STABILITY_RADIUS[method] if radius is None else float(radius)
        self.per_step = EVALUATIONS_PER_STEP.get(method, 4)
        self.dt = float(dt)
        t = np.asarray(times, dtype=float)
        picks = np.unique(np.linspace(1, t.size - 1, min(checks, t.size - 1)).round().astype(int))
        if dense:
            h = (t[-1] - t[0]) / max(1, math.ceil((t[-1] - t[0]) / self.dt - 1e-9))
            self.steps = {float(t[k]): h for k in picks}
        else:
            self.steps = {float(t[k]): self._step(t[k] - t[k - 1]) for k in picks}
        self._due = sorted(self.steps)
        self._slack = 1e-9 * max(1.0, abs(float(t[-1])))
        self.budget = budget
        self.spent = 0
        self.accepted = 0  # the engine calls check after every accepted step
        first = self.steps.get(float(t[1]), self._step(t[1] - t[0])) if dense else self._step(t[1] - t[0])
        self._start = None if x0 is None else (float(t[0]), first, x0)
        self.sphere = sphere
        self.iterations = iterations
        self.rng = np.random.default_rng(0)  # the same directions in every run: repeatable
        self.warned = False
        self.worst: tuple[float, float] | None = None  # (h L, t) of the largest check

    def _step(self, span: float) -> float:
        return span / max(1, math.ceil(span / self.dt - 1e-9))

    def _tangent(self, x: Any, v: Any) -> Any:
        if self.tangent is not None:
            return self.tangent(x, v)
        if not self.sphere:
            return v
        return v - bk.rows_dot(x, v)[..., None] * x

    def rate(self, x: Any, fx: Any = None) -> float:
        """``L``: the largest ``|J v| / |v|`` found by power iteration from a random tangent
        direction (finite differences of relative size ``max(1e-6, sqrt(eps))``, ``eps`` the
        machine epsilon of ``x``'s dtype: ``1e-6`` in float64, ``3.5e-4`` in float32, where
        the round-off ``eps |F| / step`` of a smaller step would swamp ``J v``; a lower bound
        of ``||J||`` that converges to the largest eigenvalue in modulus). ``x``: a NumPy
        array or a torch tensor; the start direction is drawn on the host, the same on every
        backend. An empty state (every realisation of an ensemble frozen) has ``L = 0``."""
        size = math.prod(x.shape)
        if size == 0:
            return 0.0
        xp = bk.namespace(x)
        f0 = self.f(x) if fx is None else fx
        self.spent += self.iterations + (fx is None)
        v = self._tangent(x, bk.like(x, self.rng.standard_normal(tuple(x.shape))))
        scale = max(math.sqrt(float(xp.mean(x * x))), 1e-300)
        rel = max(1e-6, math.sqrt(float(xp.finfo(x.dtype).eps)))
        L = 0.0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # judged below
            for _ in range(self.iterations):
                nv = math.sqrt(float(xp.sum(v * v)))
                if not nv > 0:
                    return L if math.isfinite(nv) else math.inf
                eps = rel * scale * math.sqrt(size) / nv
                jv = self._tangent(x, (self.f(x + eps * v) - f0) / eps)
                L = math.sqrt(float(xp.sum(jv * jv))) / nv
                if not math.isfinite(L):  # inf: the Jacobian overflows; NaN: the field is not finite
                    return L
                v = jv
        return L

    def start(self, t: float, y: Any, stage: Any, context: Any) -> None:
        """Judge ``x0`` with the first step before it is taken (the engine's hook): a step
        whose first stage already overflows ends with this monitor's message, not with a
        non-finite state."""
        if self._start is not None:
            t0, h0, x0 = self._start
            self._start = None
            self._judge(t0, h0, x0, None)

    def check(self, t: float, y: Any, stage: Any, context: Any) -> None:
        self.accepted += 1
        self.start(t, y, stage, context)  # a caller's loop without the engine's start hook
        due = None
        while self._due and t >= self._due[0] - self._slack:
            due = self._due.pop(0)
        # near the bound (warned) every chosen output time is checked, whatever the budget
        over = self.spent > self.budget * self.per_step * self.accepted
        if due is None or (over and not self.warned):
            return None
        fx = stage if getattr(stage, "shape", None) == y.shape else None
        self._judge(t, self.steps[due], y, fx)
        return None

    def _judge(self, t: float, h: float, y: Any, fx: Any) -> None:
        hL = h * self.rate(y, fx)
        if math.isnan(hL):  # a field already non-finite: the engine's check names it
            return
        if self.worst is None or hL > self.worst[0]:
            self.worst = (hL, t)
        if hL <= WARN_FACTOR * self.radius:
            return
        limit = self.stop_factor * self.radius
        safe = WARN_FACTOR * limit / (hL / h)  # half the limit: L grows as clusters form
        stop = hL > limit
        if self.stop_factor == 1.0 or not stop:
            where = "above" if hL > self.radius else "near"
            bound = f"{where} the stability bound {self.radius:g} of {self.method}"
        else:
            bound = (f"above {limit:.3g}, {self.stop_factor:g} times the stability bound "
                     f"{self.radius:g} of {self.method} (the limit of an ensemble: its local "
                     "error there, a few per cent per step, spoils the statistics)")
        if math.isfinite(hL):
            text = (f"at t = {t:.6g} the step h = {h:.3g} times the largest rate of the dynamics "
                    f"L = {hL / h:.3g} (the Jacobian's, measured) is h L = {hL:.3g}, {bound}: take "
                    f"dt <= {safe:.3g}" + (f" or {self.advice}" if self.advice else ""))
        else:
            text = (f"at t = {t:.6g} the largest rate of the dynamics (the Jacobian's) overflows "
                    f"the float range, so no fixed step h = {h:.3g} is within the stability bound "
                    f"{self.radius:g} of {self.method}"
                    + (f": use {self.advice}" if self.advice else ""))
        stop_or_warn_once(self, stop, StopReason.UNSTABLE, text)


def stop_or_warn_once(monitor: Any, stop: bool, reason: StopReason, text: str) -> None:
    """A monitor's verdict: :class:`Stop` with ``reason`` and ``text`` when ``stop``, else a
    ``UserWarning`` with ``text`` the first time only (``monitor.warned`` records it)."""
    if stop:
        raise Stop(reason, text)
    if not monitor.warned:
        monitor.warned = True
        warnings.warn(text, UserWarning, stacklevel=3)


__all__ = ["BUDGET", "EVALUATIONS_PER_STEP", "STABILITY_RADIUS", "WARN_FACTOR", "StepSizeMonitor",
           "check_step_count", "constant_steps", "stability_radius", "stop_or_warn_once"]
