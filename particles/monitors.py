"""Monitors of the particle runs: what the integrator can check cheaply, so that a step far
too large for the dynamics never passes without a word.

.. autosummary::
   EnergyMonitor
   StepSizeMonitor
   STABILITY_RADIUS
   has_energy

:class:`EnergyMonitor` checks, at every output time, that the interaction energy ``E_beta``
(docs/equations.md section 2) moves the way the exact flow moves it: SA and USA with
``Q = K = I``, ``V = +I`` ascend it (USA is the gradient flow ``X' = n grad E``; SA the
gradient flow of the metric weighted by ``Z``, (3.12)), ``V = -I`` descends it. A step that
reverses it (RK4 with ``dt = 5`` at ``beta = 4``, say) stops the run with
:attr:`StopReason.UNSTABLE` and the measured violation; the results up to the last output
time that kept the energy monotone are kept. One energy costs what one velocity does, so
checking at output times costs at most one evaluation per output. (Where ``E_beta`` exceeds
the float range, ``beta`` beyond about 715, it is ``inf`` and not judged.)

:class:`StepSizeMonitor` serves every model, with or without an energy (general ``Q, K, V``,
``l2``, ``sigmoid``, ``sinkhorn``, tokens in ``R^d``): an explicit Runge–Kutta step ``h`` on
``x' = F(x)`` is stable only where ``h lambda`` lies in the scheme's stability region for the
eigenvalues ``lambda`` of the Jacobian ``J = DF`` (on the real axis ``|h lambda| <= 2.785``
for RK4, ``2`` for Euler). The monitor measures ``L``, the largest growth rate ``|J v| / |v|``
over tangent directions ``v``, by a few power iterations on finite differences of ``F``
(4 evaluations, at the start and at no more than 32 output times of a run), and compares
``h L`` with the radius: above it the scheme amplifies the fastest direction at every step
(the numbers no longer approximate the flow: measured, RK4 with ``h = 5`` at ``beta = 4``
ends with two clusters where the flow makes one), and the run stops with
:attr:`StopReason.UNSTABLE`, naming ``h L``, the radius and a step that would do, and keeping
the results up to the last output time; above half the radius (a local error of a few per cent
per step) a ``UserWarning`` says the same.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from meanfield import backend as bk
from meanfield.integrate import Stop, StopReason

from .observables import energy


def has_energy(model: Any) -> bool:
    """Whether ``E_beta`` is monotone along the exact flow of ``model`` (docs/equations.md
    section 2): SA or USA, ``Q = K = I``, ``V = +-I``, no mask, no noise."""
    return (model.attention in ("softmax", "unnormalized") and model.is_identity
            and not model.causal and model.noise == 0)


class EnergyMonitor:
    """Stops a run whose energy moves against the flow between output times.

    Args:
        model: a model with :func:`has_energy`.
        times: the output times (checked there only).
        memory_limit: for the energy's tiles.
        rtol: allowed reversal relative to ``|E|`` (round-off of the ``n^2`` sum, far below
            what a stable step changes; default ``1e-9``).
    """

    def __init__(self, model: Any, times: np.ndarray, memory_limit: int, rtol: float = 1e-9) -> None:
        self.model = model
        self.times = set(np.asarray(times, dtype=float).tolist())
        self.memory_limit = memory_limit
        self.rtol = rtol
        self.sign = model.sign
        self.last: tuple[float, np.ndarray] | None = None

    def check(self, t: float, y: np.ndarray, stage: Any, context: Any) -> None:
        if t not in self.times:
            return None
        # energy is a NumPy observable: a host copy (output times only)
        e = np.atleast_1d(energy(self.model, bk.to_numpy(y), memory_limit=self.memory_limit))
        if not np.all(np.isfinite(e)):  # beyond the float range (beta > ~715): no judgement
            self.last = None
            return None
        if self.last is not None:
            t0, e0 = self.last
            change = self.sign * (e - e0)  # >= 0 along the exact flow
            allowed = self.rtol * np.maximum(np.abs(e), np.abs(e0)) + 1e-14
            bad = change < -allowed
            if np.any(bad):
                i = int(np.argmax(-change / allowed))
                where = f" (batch {i})" if y.ndim == 3 else ""
                direction = "decreased" if self.sign > 0 else "increased"
                raise Stop(StopReason.UNSTABLE,
                           f"the energy {direction} from {e0[i]:.12g} to {e[i]:.12g} between "
                           f"t = {t0:.6g} and t = {t:.6g}{where}, against the flow: the step is "
                           "too large for the dynamics (take a smaller dt or method='dopri5')")
        self.last = (t, e)
        return None


STABILITY_RADIUS = {"rk4": 2.785, "angles": 2.785, "euler_maruyama": 2.0}
EVALUATIONS_PER_STEP = {"rk4": 4, "angles": 4, "euler_maruyama": 1}
"""Right-hand side evaluations of one step of each fixed-step scheme."""
BUDGET = 0.5
"""An output time is checked only while the monitor has spent at most this fraction of the
run's own evaluations so far (the start is always checked): cheap by construction."""
"""Half-width of the real stability interval ``[-r, 0]`` of each fixed-step scheme
(``|R(z)| <= 1``: RK4 ``2.7853``, forward Euler ``2``; Hairer & Wanner II, IV.2)."""

WARN_FACTOR = 0.5
"""A warning when ``h L`` exceeds this fraction of the radius (RK4's local error along the
fastest direction is then ``~ (h L)^5 / 120``, a few per cent per step); a stop above the
radius itself."""


class StepSizeMonitor:
    """Warns, or stops, when a fixed step is too large for the Jacobian of the dynamics.

    Args:
        f: the right-hand side ``F(x)`` the scheme steps.
        method: a key of :data:`STABILITY_RADIUS`.
        dt: the largest step; each output interval is cut into equal steps ``<= dt`` (the
            engine's constant steps), and the step of the interval just done is the one judged.
        times: the output times.
        sphere: tokens on the sphere (directions tangent to it; the projection removes the
            normal ones).
        checks: at most this many output times are checked, spread evenly.
        budget: an output time is checked only while the monitor has spent at most this
            fraction of the run's own evaluations so far (:data:`BUDGET`); the start is always
            checked. ``math.inf``: every chosen output time.
        iterations: power iterations per check.
        x0: the initial state, checked (with the first interval's step) at the first check.
    """

    def __init__(self, f: Callable[[np.ndarray], np.ndarray], method: str, dt: float,
                 times: np.ndarray, *, sphere: bool, checks: int = 32, iterations: int = 3,
                 x0: np.ndarray | None = None, budget: float = BUDGET) -> None:
        self.f = f
        self.method = method
        self.radius = STABILITY_RADIUS[method]
        self.dt = float(dt)
        t = np.asarray(times, dtype=float)
        picks = np.unique(np.linspace(1, t.size - 1, min(checks, t.size - 1)).round().astype(int))
        self.steps = {float(t[k]): self._step(t[k] - t[k - 1]) for k in picks}
        # the run's own evaluations up to each output time (for the budget)
        per_step = EVALUATIONS_PER_STEP[method]
        done = np.cumsum([0] + [math.ceil(span / self.dt - 1e-9) for span in np.diff(t)])
        self.run_evaluations = {float(tk): per_step * int(s) for tk, s in zip(t, done)}
        self.budget = budget
        self.spent = 0
        self.start = None if x0 is None else (float(t[0]), self._step(t[1] - t[0]), x0)
        self.sphere = sphere
        self.iterations = iterations
        self.rng = np.random.default_rng(0)  # the same directions in every run: repeatable
        self.warned = False
        self.worst: tuple[float, float] | None = None  # (h L, t) of the largest check

    def _step(self, span: float) -> float:
        return span / max(1, math.ceil(span / self.dt - 1e-9))

    def _tangent(self, x: Any, v: Any) -> Any:
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
        backend."""
        xp = bk.namespace(x)
        f0 = self.f(x) if fx is None else fx
        self.spent += self.iterations + (fx is None)
        v = self._tangent(x, bk.like(x, self.rng.standard_normal(tuple(x.shape))))
        scale = max(math.sqrt(float(xp.mean(x * x))), 1e-300)
        rel = max(1e-6, math.sqrt(float(xp.finfo(x.dtype).eps)))
        size = math.prod(x.shape)
        L = 0.0
        for _ in range(self.iterations):
            nv = math.sqrt(float(xp.sum(v * v)))
            if not nv > 0:
                return L
            eps = rel * scale * math.sqrt(size) / nv
            jv = self._tangent(x, (self.f(x + eps * v) - f0) / eps)
            L = math.sqrt(float(xp.sum(jv * jv))) / nv
            v = jv
        return L

    def check(self, t: float, y: np.ndarray, stage: Any, context: Any) -> None:
        if self.start is not None:
            t0, h0, x0 = self.start
            self.start = None
            self._judge(t0, h0, x0, None)
        h = self.steps.get(t)
        if h is None or self.spent > self.budget * self.run_evaluations.get(t, 0):
            return None
        fx = stage if getattr(stage, "shape", None) == y.shape else None
        self._judge(t, h, y, fx)
        return None

    def _judge(self, t: float, h: float, y: np.ndarray, fx: np.ndarray | None) -> None:
        hL = h * self.rate(y, fx)
        if self.worst is None or hL > self.worst[0]:
            self.worst = (hL, t)
        if hL <= WARN_FACTOR * self.radius:
            return
        safe = WARN_FACTOR * self.radius / (hL / h)
        where = "above" if hL > self.radius else "near"
        text = (f"at t = {t:.6g} the step h = {h:.3g} times the largest rate of the dynamics "
                f"L = {hL / h:.3g} (the Jacobian's, measured) is h L = {hL:.3g}, {where} the "
                f"stability bound {self.radius:g} of {self.method}: take dt <= {safe:.3g} or "
                "method='dopri5'")
        if hL > self.radius:
            raise Stop(StopReason.UNSTABLE, text)
        if not self.warned:
            self.warned = True
            warnings.warn(text, UserWarning, stacklevel=2)


__all__ = ["BUDGET", "EVALUATIONS_PER_STEP", "STABILITY_RADIUS", "WARN_FACTOR", "EnergyMonitor", "StepSizeMonitor", "has_energy"]
