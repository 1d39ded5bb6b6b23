"""How the particle system is stepped: steppers of :mod:`meanfield.integrate` for each method.

.. autosummary::
   METHODS
   normalize_rows
   make_stepper
   integrate_reference

The particle system runs on the project's one integration engine
(:func:`meanfield.integrate.integrate`); this module only says which stepper and controller
each ``method`` of :func:`particles.simulate` means:

* ``rk4``: classical Runge–Kutta, equal steps ``<= dt``, :func:`normalize_rows` after each;
* ``dopri5``: Dormand–Prince 5(4) under :class:`meanfield.integrate.PIController`;
* ``post_ln``: one Euler step per layer, ``x <- normalize(x + dt attn(x))`` (a Post-LN layer);
* ``angles``: the circle in angles (7.1), RK4, no projection;
* ``euler_maruyama``: the noisy system (``model.noise > 0``), weak order 1;
* ``dop853``: ``scipy.integrate.solve_ivp(method="DOP853")``, an independent reference
  (:func:`integrate_reference`), not the engine.
"""

from __future__ import annotations

import time as _time
from typing import Any, Callable

import numpy as np
from scipy.integrate import solve_ivp

from meanfield import backend as bk
from meanfield.integrate import DOPRI5 as DOPRI5
from meanfield.integrate import (
    RK4,
    ConstantStep,
    EulerMaruyama,
    PIController,
    RungeKutta,
    Solution,
    StopReason,
    get_scheme,
)

Rhs = Callable[[np.ndarray], np.ndarray]

METHODS: dict[str, dict[str, Any]] = {
    "rk4": {"dt": 0.01, "adaptive": False, "scheme": "rk4", "stochastic": False},
    "dopri5": {"dt": None, "adaptive": True, "scheme": "dopri5", "stochastic": False},
    "dop853": {"dt": None, "adaptive": True, "scheme": "scipy-DOP853", "stochastic": False},
    "post_ln": {"dt": 0.1, "adaptive": False, "scheme": "euler", "stochastic": False},
    "angles": {"dt": 0.01, "adaptive": False, "scheme": "rk4", "stochastic": False},
    "euler_maruyama": {"dt": 0.001, "adaptive": False, "scheme": "euler_maruyama",
                       "stochastic": True},
}
"""Integration methods, their default step (adaptive ones use ``rtol``, ``atol`` and ``dt``
only as a first step), whether they adapt it, the scheme they run (a Butcher tableau of
:func:`meanfield.integrate.get_scheme`, or scipy's for ``dop853``, or Euler–Maruyama) and
whether it is stochastic (the noisy system)."""


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """``x_i / |x_i|``: the projection onto ``S^{d-1}`` after each step (NumPy or torch)."""
    return x / bk.namespace(x).sqrt(bk.rows_dot(x, x))[..., None]


def normalize_rows_inplace(x: np.ndarray) -> np.ndarray:
    """:func:`normalize_rows` overwriting ``x`` (the steppers' projection: every state they
    project is a fresh array of their own)."""
    x /= bk.namespace(x).sqrt(bk.rows_dot(x, x))[..., None]
    return x


def make_stepper(method: str, f: Rhs, *, sphere: bool, rtol: float, atol: float,
                 dt: float | None, sigma: float = 0.0, rng: np.random.Generator | None = None
                 ) -> tuple[Any, PIController | ConstantStep]:
    """The stepper and controller of ``method`` for the right-hand side ``f``, as its entry of
    :data:`METHODS` says (its scheme, adaptive or a fixed step, stochastic)."""
    spec = METHODS[method]
    project = normalize_rows_inplace if sphere else None
    if spec["adaptive"]:
        return (RungeKutta(f, get_scheme(spec["scheme"]), project=project),
                PIController(rtol=rtol, atol=atol))
    if dt is None:
        msg = f"method {method!r} needs a step dt"
        raise ValueError(msg)
    if spec["stochastic"]:
        assert rng is not None
        return EulerMaruyama(f, sigma, rng, sphere=sphere), ConstantStep(dt)
    return RungeKutta(f, get_scheme(spec["scheme"]), project=project), ConstantStep(dt)


def integrate_reference(f: Rhs, x0: np.ndarray, t: np.ndarray, rtol: float, atol: float,
                        project: Rhs | None, output: Callable[[int, float, np.ndarray, Any], None]
                        ) -> Solution:
    """``solve_ivp(DOP853)`` between output times, projecting at each (between outputs the
    exact flow is tangent, so norms drift only by the local error ``~ rtol``). An
    independent implementation, for reference runs; reports like the engine."""
    start = _time.perf_counter()
    shape = x0.shape
    x = x0
    steps = nfev = 0
    output(0, float(t[0]), x, None)

    def rhs(_s: float, y: np.ndarray) -> np.ndarray:
        return f(y.reshape(shape)).ravel()

    for k in range(1, t.size):
        sol = solve_ivp(rhs, (t[k - 1], t[k]), x.ravel(), method="DOP853", rtol=rtol, atol=atol)
        steps += sol.t.size - 1
        nfev += sol.nfev
        if not sol.success or not np.all(np.isfinite(sol.y[:, -1])):
            return Solution(StopReason.NON_FINITE if sol.success else StopReason.STEP_TOO_SMALL,
                            f"solve_ivp(DOP853) failed on [{t[k-1]:.6g}, {t[k]:.6g}]: {sol.message}",
                            float(t[k - 1]), x, None, steps, steps, 0, nfev,
                            _time.perf_counter() - start)
        x = sol.y[:, -1].reshape(shape)
        if project is not None:
            x = project(x)
        output(k, float(t[k]), x, None)
    return Solution(StopReason.SUCCESS, "", float(t[-1]), x, None, steps, steps, 0, nfev,
                    _time.perf_counter() - start)


__all__ = ["DOPRI5", "METHODS", "RK4", "integrate_reference", "make_stepper", "normalize_rows",
           "normalize_rows_inplace"]
