"""Time integrators for the particle system, written against a right-hand side ``f(x)``.

.. autosummary::
   ButcherTableau
   RK4
   DOPRI5
   Stats
   normalize_rows
   integrate_fixed
   integrate_adaptive
   integrate_scipy
   integrate_post_ln
   integrate_euler_maruyama

Every integrator takes the initial state, the output times ``t`` (``t[0]`` the initial time)
and a ``project`` map applied after every step (:func:`normalize_rows` on the sphere, which
keeps ``|x_i| = 1`` to round-off; ``None`` in ``R^d``). Steps are shortened so that every
output time is hit exactly. They return the states at ``t`` (shape ``(len(t),) + x0.shape``)
and :class:`Stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from meanfield.checks import output_times
from scipy.integrate import solve_ivp

Rhs = Callable[[np.ndarray], np.ndarray]
Projection = Callable[[np.ndarray], np.ndarray] | None


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta scheme, checked on construction (row sums of ``a`` equal
    ``c``, weights sum to 1, error weights to 0).

    Attributes:
        name: short name.
        c, a, b: nodes, coefficients (lower triangular), weights.
        b_error: ``b - b_hat`` of the embedded pair (``None``: fixed step only).
        order: order of ``b``; ``error_order``: order of the embedded solution.
        citation: where the coefficients come from.
    """

    name: str
    c: tuple[float, ...]
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    order: int
    b_error: tuple[float, ...] | None = None
    error_order: int | None = None
    citation: str = ""

    def __post_init__(self) -> None:
        s = len(self.b)
        if len(self.c) != s or len(self.a) != s:
            msg = f"tableau {self.name}: c, a, b must have {s} stages"
            raise ValueError(msg)
        for i, row in enumerate(self.a):
            if len(row) != i or abs(sum(row) - self.c[i]) > 1e-14:
                msg = f"tableau {self.name}: row {i} of a must have {i} entries summing to c[{i}]"
                raise ValueError(msg)
        if abs(sum(self.b) - 1.0) > 1e-14:
            msg = f"tableau {self.name}: weights b must sum to 1"
            raise ValueError(msg)
        if self.b_error is not None and (len(self.b_error) != s or abs(sum(self.b_error)) > 1e-14):
            msg = f"tableau {self.name}: b_error must have {s} entries summing to 0"
            raise ValueError(msg)

    @property
    def stages(self) -> int:
        return len(self.b)


RK4 = ButcherTableau(
    name="rk4",
    c=(0.0, 0.5, 0.5, 1.0),
    a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
    order=4,
    citation="Kutta (1901); Hairer, Norsett, Wanner, Solving ODEs I, Table 1.2",
)
"""The classical fourth-order Runge–Kutta method."""

_D5_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_D5_BHAT = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)

DOPRI5 = ButcherTableau(
    name="dopri5",
    c=(0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0),
    a=(
        (),
        (1 / 5,),
        (3 / 40, 9 / 40),
        (44 / 45, -56 / 15, 32 / 9),
        (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
        (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
        (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
    ),
    b=_D5_B,
    b_error=tuple(p - q for p, q in zip(_D5_B, _D5_BHAT)),
    order=5,
    error_order=4,
    citation="Dormand & Prince (1980), J. Comput. Appl. Math. 6, 19-26",
)
"""Dormand–Prince 5(4), local extrapolation (the 5th-order solution is propagated)."""


@dataclass
class Stats:
    """Counters of one integration."""

    steps: int = 0
    rejected: int = 0
    evaluations: int = 0


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """``x_i / |x_i|``: the projection onto ``S^{d-1}`` after each step."""
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def rk_step(
    f: Rhs, x: np.ndarray, h: float, tab: ButcherTableau
) -> tuple[np.ndarray, np.ndarray | None]:
    """One explicit RK step: the new state and (for embedded pairs) the error estimate."""
    ks: list[np.ndarray] = []
    for i in range(tab.stages):
        xi = x
        for aij, kj in zip(tab.a[i], ks):
            if aij:
                xi = xi + (h * aij) * kj
        ks.append(f(xi))
    xn = x + h * sum(bi * ki for bi, ki in zip(tab.b, ks) if bi)
    err = None
    if tab.b_error is not None:
        err = h * sum(ei * ki for ei, ki in zip(tab.b_error, ks) if ei)
    return xn, err


def _check_times(t: np.ndarray) -> None:
    output_times(t)


def _positive(value: float, name: str) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        msg = f"{name} must be finite and > 0, got {value!r}"
        raise ValueError(msg)
    return v


def _fixed_steps(
    step: Callable[[np.ndarray, float], np.ndarray],
    x0: np.ndarray,
    t: np.ndarray,
    dt: float,
    evaluations_per_step: int,
    progress: Callable[[float], None] | None,
) -> tuple[np.ndarray, Stats]:
    """Drive ``x <- step(x, h)``: each output interval ``[t_k, t_{k+1}]`` is cut into
    ``ceil(len / dt)`` equal steps (``h <= dt``); states saved at every ``t_k``."""
    t = np.asarray(t, dtype=float)
    _check_times(t)
    dt = _positive(dt, "dt")
    out = np.empty((t.size,) + x0.shape)
    out[0] = x0
    x = x0
    stats = Stats()
    for k in range(1, t.size):
        span = t[k] - t[k - 1]
        m = max(1, math.ceil(span / dt - 1e-9))
        h = span / m
        for _ in range(m):
            x = step(x, h)
            stats.steps += 1
            stats.evaluations += evaluations_per_step
        out[k] = x
        if progress is not None:
            progress(t[k])
    return out, stats


def integrate_fixed(
    f: Rhs,
    x0: np.ndarray,
    t: np.ndarray,
    dt: float,
    tableau: ButcherTableau = RK4,
    project: Projection = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    """Fixed-step RK: each interval ``[t_k, t_{k+1}]`` is cut into ``ceil(len / dt)`` equal
    steps (``<= dt``); ``project`` after every step."""
    def step(x: np.ndarray, h: float) -> np.ndarray:
        x, _err = rk_step(f, x, h, tableau)
        return x if project is None else project(x)

    return _fixed_steps(step, x0, t, dt, tableau.stages, progress)


def integrate_adaptive(
    f: Rhs,
    x0: np.ndarray,
    t: np.ndarray,
    rtol: float,
    atol: float,
    tableau: ButcherTableau = DOPRI5,
    project: Projection = None,
    dt0: float | None = None,
    max_steps: int = 1_000_000,
    safety: float = 0.9,
    factormin: float = 0.2,
    factormax: float = 5.0,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    """Adaptive embedded RK (default Dormand–Prince 5(4)) with the elementary controller
    ``h <- h min(factormax, max(factormin, safety err^{-1/(q+1)}))``, ``q`` the error order,
    ``err`` the RMS of ``e / (atol + rtol max(|x|, |x_new|))`` over all entries (Hairer,
    Norsett, Wanner I, II.4). Steps end exactly on output times; ``project`` after every
    accepted step."""
    t = np.asarray(t, dtype=float)
    _check_times(t)
    rtol = _positive(rtol, "rtol")
    atol = _positive(atol, "atol")
    if tableau.b_error is None:
        msg = f"tableau {tableau.name} has no embedded error estimate"
        raise ValueError(msg)
    q = tableau.error_order or tableau.order - 1
    out = np.empty((t.size,) + x0.shape)
    out[0] = x0
    x = x0
    stats = Stats()
    tc = float(t[0])
    h = dt0
    if h is None:  # Hairer's starting guess, simplified
        f0 = f(x)
        stats.evaluations += 1
        sc = atol + rtol * np.abs(x)
        d0 = float(np.sqrt(np.mean((x / sc) ** 2)))
        d1 = float(np.sqrt(np.mean((f0 / sc) ** 2)))
        h = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h = _positive(h, "dt")
    for k in range(1, t.size):
        while tc < t[k]:
            if stats.steps + stats.rejected >= max_steps:
                msg = f"max_steps={max_steps} reached at t={tc:.6g} before t={t[k]:.6g}"
                raise RuntimeError(msg)
            last = tc + h >= t[k] * (1 - 1e-14)
            hh = t[k] - tc if last else h
            xn, e = rk_step(f, x, hh, tableau)
            stats.evaluations += tableau.stages
            sc = atol + rtol * np.maximum(np.abs(x), np.abs(xn))
            err = float(np.sqrt(np.mean((e / sc) ** 2)))
            if not math.isfinite(err):
                err = math.inf
            if err == 0:
                fac = factormax
            else:
                fac = min(factormax, max(factormin, safety * err ** (-1 / (q + 1))))
            if err <= 1.0:
                x = project(xn) if project is not None else xn
                tc = float(t[k]) if last else tc + hh
                stats.steps += 1
                # a step shortened to land on t[k] says little about the size to come
                h = max(h, hh * fac) if last and hh < h else hh * fac
            else:
                stats.rejected += 1
                h = hh * min(1.0, fac)
                if h < 1e-14 * max(1.0, abs(tc)):
                    msg = f"step size underflow at t={tc:.6g} (h={h:.3g}); the solution blows up?"
                    raise RuntimeError(msg)
        out[k] = x
        if progress is not None:
            progress(t[k])
    return out, stats


def integrate_scipy(
    f: Rhs,
    x0: np.ndarray,
    t: np.ndarray,
    rtol: float,
    atol: float,
    method: str = "DOP853",
    project: Projection = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    """A reference run with ``scipy.integrate.solve_ivp`` (default DOP853), one call per
    output interval, projecting at every output time (between outputs the exact flow is
    tangent, so norms drift only by the local error, ``~ rtol``)."""
    t = np.asarray(t, dtype=float)
    _check_times(t)
    rtol = _positive(rtol, "rtol")
    atol = _positive(atol, "atol")
    shape = x0.shape
    out = np.empty((t.size,) + shape)
    out[0] = x0
    x = x0
    stats = Stats()

    def rhs(_s: float, y: np.ndarray) -> np.ndarray:
        return f(y.reshape(shape)).ravel()

    for k in range(1, t.size):
        sol = solve_ivp(rhs, (t[k - 1], t[k]), x.ravel(), method=method, rtol=rtol, atol=atol)
        if not sol.success:
            msg = f"solve_ivp({method}) failed on [{t[k-1]:.6g}, {t[k]:.6g}]: {sol.message}"
            raise RuntimeError(msg)
        x = sol.y[:, -1].reshape(shape)
        if project is not None:
            x = project(x)
        stats.steps += sol.t.size - 1
        stats.evaluations += sol.nfev
        out[k] = x
        if progress is not None:
            progress(t[k])
    return out, stats


def _layers(t: np.ndarray, h: float) -> np.ndarray:
    """Numbers of layers ``(t_k - t_0) / h``, which must be integers."""
    steps = (t - t[0]) / h
    layers = np.rint(steps)
    if np.any(np.abs(steps - layers) > 1e-9 * np.maximum(1.0, layers)):
        msg = f"output times t must be t[0] + (whole number of layers) * dt, with dt={h!r}"
        raise ValueError(msg)
    return layers.astype(int)


def integrate_post_ln(
    attn: Rhs,
    x0: np.ndarray,
    t: np.ndarray,
    dt: float,
    project: Projection = normalize_rows,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    """Discrete Post-LN layers ``x <- normalize(x + dt attn(x))`` (docs/equations.md section 2); one layer
    per ``dt`` of time; ``t`` must be whole numbers of layers. With ``project=None``: plain
    residual layers ``x <- x + dt attn(x)``."""
    t = np.asarray(t, dtype=float)
    _check_times(t)
    dt = _positive(dt, "dt")
    layers = _layers(t, dt)
    out = np.empty((t.size,) + x0.shape)
    out[0] = x0
    x = x0
    stats = Stats()
    for k in range(1, t.size):
        for _ in range(layers[k] - layers[k - 1]):
            x = x + dt * attn(x)
            if project is not None:
                x = project(x)
            stats.steps += 1
            stats.evaluations += 1
        out[k] = x
        if progress is not None:
            progress(t[k])
    return out, stats


def integrate_euler_maruyama(
    f: Rhs,
    x0: np.ndarray,
    t: np.ndarray,
    dt: float,
    sigma: float,
    rng: np.random.Generator,
    sphere: bool = True,
    progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    """Noise ``sigma`` (generator ``sigma Delta`` of the density, docs/equations.md section 3):
    ``x <- normalize(x + dt f(x) + sqrt(2 sigma dt) P_x^perp xi)`` on the sphere (weak order 1:
    the normalisation supplies the Ito drift ``-(d-1) sigma x`` of spherical Brownian motion),
    ``x + dt f(x) + sqrt(2 sigma dt) xi`` in ``R^d``."""
    def step(x: np.ndarray, h: float) -> np.ndarray:
        xi = rng.standard_normal(x.shape) * math.sqrt(2.0 * sigma * h)
        if sphere:
            xi = xi - np.sum(x * xi, axis=-1, keepdims=True) * x
        x = x + h * f(x) + xi
        return normalize_rows(x) if sphere else x

    return _fixed_steps(step, x0, t, dt, 1, progress)


__all__ = [
    "DOPRI5",
    "RK4",
    "ButcherTableau",
    "Stats",
    "integrate_adaptive",
    "integrate_euler_maruyama",
    "integrate_fixed",
    "integrate_post_ln",
    "integrate_scipy",
    "normalize_rows",
    "rk_step",
]
