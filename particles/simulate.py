"""``simulate``: evolve tokens and return a labelled ``xarray.Dataset``.

.. autosummary::
   METHODS
   simulate
   simulate_angles

Methods (all keep tokens on ``S^{d-1}`` to round-off with ``geometry="sphere"``):

* ``rk4``: classical Runge–Kutta, fixed step ``<= dt``, projection after each step;
* ``dopri5``: adaptive Dormand–Prince 5(4), tolerances ``rtol``, ``atol``;
* ``dop853``: ``scipy.integrate.solve_ivp(method="DOP853")`` for reference runs;
* ``post_ln``: discrete layers ``x <- normalize(x + dt attn(x))`` (a Post-LN Transformer);
* ``angles``: the circle in angles, (7.1), with RK4 (``d = 2``, ``Q = K = V = I``);
* ``euler_maruyama``: the noisy system (``model.noise > 0``), weak order 1.

The result holds ``x`` (time, [batch,] token, dim), ``energy`` and ``dissipation``
(time[, batch]) and, for ``angles``, ``theta``; ``attrs`` record the model (JSON), method,
geometry, step settings and counters, so that a file alone says how it was made.
"""

from __future__ import annotations

import json
import time as _time
from typing import Any, Callable

import numpy as np
import xarray as xr

from meanfield.checks import output_times

from .angles import angle_velocity, check_angle_model, from_angles, to_angles
from .inputs import as_angles, as_count, as_rng, as_tokens, check_geometry
from .integrators import (
    DOPRI5,
    RK4,
    Stats,
    integrate_adaptive,
    integrate_euler_maruyama,
    integrate_fixed,
    integrate_post_ln,
    integrate_scipy,
    normalize_rows,
)
from .kernels import DEFAULT_MEMORY_LIMIT
from .observables import dissipation, energy
from .velocity import attention, velocity

METHODS: dict[str, dict[str, Any]] = {
    "rk4": {"dt": 0.01, "adaptive": False},
    "dopri5": {"dt": None, "adaptive": True},
    "dop853": {"dt": None, "adaptive": True},
    "post_ln": {"dt": 0.1, "adaptive": False},
    "angles": {"dt": 0.01, "adaptive": False},
    "euler_maruyama": {"dt": 0.001, "adaptive": False},
}
"""Integration methods and their defaults (``dt``: default step; adaptive ones use
``rtol``, ``atol`` and ``dt`` only as a first step)."""


def _check_method(method: str) -> str:
    if method not in METHODS:
        msg = f"method must be one of {tuple(METHODS)}, got {method!r}"
        raise ValueError(msg)
    return method


def _progress_bar(progress: bool, t: np.ndarray) -> tuple[Callable[[float], None] | None, Any]:
    if not progress:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=float(t[-1] - t[0]), unit="t", leave=False)
    last = [float(t[0])]

    def update(tk: float) -> None:
        bar.update(float(tk) - last[0])
        last[0] = float(tk)

    return update, bar


def _dataset(
    model: Any,
    t: np.ndarray,
    xs: np.ndarray,
    batched: bool,
    geometry: str,
    observables: bool,
    memory_limit: int,
) -> xr.Dataset:
    lead = ("time", "batch") if batched else ("time",)
    if observables:
        en = np.array([energy(model, xk, memory_limit=memory_limit) for xk in xs])
        dis = np.array(
            [dissipation(model, xk, geometry, memory_limit=memory_limit) for xk in xs]
        )
    else:
        en = np.full(xs.shape[: len(lead)], np.nan)
        dis = np.full(xs.shape[: len(lead)], np.nan)
    coords: dict[str, Any] = {
        "time": ("time", t, {"long_name": "time (depth in layers x step)", "units": "1"}),
        "token": ("token", np.arange(xs.shape[-2])),
        "dim": ("dim", np.arange(xs.shape[-1])),
    }
    if batched:
        coords["batch"] = ("batch", np.arange(xs.shape[1]))
    ds = xr.Dataset(
        {
            "x": (lead + ("token", "dim"), xs, {"long_name": "token positions"}),
            "energy": (lead, en.reshape(xs.shape[: len(lead)]), {
                "long_name": "E_beta (docs/equations.md section 2, -1 inside the sum)", "units": "1"}),
            "dissipation": (lead, dis.reshape(xs.shape[: len(lead)]), {
                "long_name": "dE/dt along the flow", "units": "1"}),
        },
        coords=coords,
    )
    return ds


def simulate(
    model: Any,
    x0: Any,
    t: Any,
    geometry: str = "sphere",
    method: str = "rk4",
    dt: float | None = None,
    *,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    normalize: bool = False,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    observables: bool = True,
    rng: Any = None,
    max_steps: int = 1_000_000,
    progress: bool = False,
) -> xr.Dataset:
    """Evolve tokens under the model's self-attention dynamics (docs/equations.md section 2).

    Args:
        model: a :class:`meanfield.Model`.
        x0: initial tokens ``(n, d)`` or ``(batch, n, d)``.
        t: output times; ``t[0]`` is the time of ``x0``.
        geometry: ``"sphere"`` (layer normalisation) or ``"euclidean"`` (tokens in ``R^d``).
        method: one of :data:`METHODS`.
        dt: step (fixed-step methods; default from :data:`METHODS`); first step for adaptive.
        rtol, atol: tolerances of ``dopri5`` and ``dop853``.
        normalize: on the sphere, project ``x0`` onto it instead of rejecting it.
        memory_limit: bytes for the ``n x n`` attention tiles.
        observables: compute ``energy`` and ``dissipation`` at the output times (else NaN).
        rng: seed or Generator for ``euler_maruyama``.
        max_steps: bound on the steps of ``dopri5``.
        progress: show a ``tqdm`` progress bar.

    Returns:
        ``xarray.Dataset`` with ``x``, ``energy``, ``dissipation`` (and ``theta`` for
        ``angles``).
    """
    check_geometry(geometry)
    _check_method(method)
    t = output_times(t)
    x0 = as_tokens(x0, "x0", geometry=geometry, normalize=normalize, model=model)
    memory_limit = as_count(memory_limit, "memory_limit")
    batched = x0.ndim == 3
    if model.noise > 0 and method != "euler_maruyama":
        msg = f"model.noise={model.noise} > 0 needs method='euler_maruyama', got {method!r}"
        raise ValueError(msg)
    if method == "euler_maruyama" and model.noise == 0:
        msg = "method='euler_maruyama' needs model.noise > 0 (use rk4 or dopri5 otherwise)"
        raise ValueError(msg)
    if dt is None:
        dt = METHODS[method]["dt"]
    if dt is not None:
        dtf = float(dt)
        if not (np.isfinite(dtf) and dtf > 0):
            msg = f"dt must be finite and > 0, got {dt!r}"
            raise ValueError(msg)
    sphere = geometry == "sphere"
    project = normalize_rows if sphere else None
    seed = rng if isinstance(rng, (int, np.integer)) else None

    def f(x: np.ndarray) -> np.ndarray:
        return velocity(model, x, geometry, memory_limit=memory_limit, check=False)

    start = _time.perf_counter()
    update, bar = _progress_bar(progress, t)
    extra: dict[str, Any] = {}
    try:
        if method == "rk4":
            xs, stats = integrate_fixed(f, x0, t, dt, RK4, project, update)
        elif method == "dopri5":
            xs, stats = integrate_adaptive(
                f, x0, t, rtol, atol, DOPRI5, project, dt0=dt, max_steps=max_steps,
                progress=update,
            )
        elif method == "dop853":
            xs, stats = integrate_scipy(f, x0, t, rtol, atol, "DOP853", project, update)
        elif method == "post_ln":

            def attn(x: np.ndarray) -> np.ndarray:
                return attention(model, x, memory_limit=memory_limit, check=False)

            xs, stats = integrate_post_ln(attn, x0, t, dt, project, update)
        elif method == "euler_maruyama":
            xs, stats = integrate_euler_maruyama(
                f, x0, t, dt, model.noise, as_rng(rng), sphere, update
            )
        else:  # angles
            if not sphere or x0.shape[-1] != 2:
                msg = (
                    "method='angles' needs geometry='sphere' and d = 2, got "
                    f"geometry={geometry!r}, d={x0.shape[-1]}"
                )
                raise ValueError(msg)
            check_angle_model(model)
            th, stats = _integrate_angles(model, to_angles(x0), t, dt, memory_limit, update)
            xs = from_angles(th)
            extra["theta"] = th
    finally:
        if bar is not None:
            bar.close()
    wall = _time.perf_counter() - start
    ds = _dataset(model, t, xs, batched, geometry, observables, memory_limit)
    if "theta" in extra:
        lead = ("time", "batch") if batched else ("time",)
        ds["theta"] = (lead + ("token",), extra["theta"], {"long_name": "angle", "units": "rad"})
    _settings(ds, model, method, geometry, dt, rtol, atol, memory_limit, stats, wall, seed)
    return ds


def _settings(
    ds: xr.Dataset,
    model: Any,
    method: str,
    geometry: str,
    dt: float | None,
    rtol: float,
    atol: float,
    memory_limit: int,
    stats: Stats,
    wall: float,
    seed: Any,
) -> None:
    """Fill ``attrs`` with JSON strings and numbers only (NetCDF-safe)."""
    from meanfield import __version__

    settings: dict[str, Any] = {
        "method": method,
        "geometry": geometry,
        "memory_limit": int(memory_limit),
    }
    if dt is not None:
        settings["dt"] = float(dt)
    if METHODS[method]["adaptive"]:
        settings["rtol"] = float(rtol)
        settings["atol"] = float(atol)
    if seed is not None:
        settings["seed"] = int(seed)
    ds.attrs.update(settings)
    ds.attrs.update(
        {
            "model": model.to_json(),
            "settings": json.dumps(settings),
            "num_steps": int(stats.steps),
            "num_rejected": int(stats.rejected),
            "num_evaluations": int(stats.evaluations),
            "wall_time": float(wall),
            "package": "particles",
            "version": __version__,
        }
    )


def _integrate_angles(
    model: Any,
    theta0: np.ndarray,
    t: np.ndarray,
    dt: float,
    memory_limit: int,
    update: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, Stats]:
    def g(th: np.ndarray) -> np.ndarray:
        return angle_velocity(model, th, memory_limit=memory_limit)

    th, stats = integrate_fixed(g, theta0, t, dt, RK4, None, update)
    return th, stats


def simulate_angles(
    model: Any,
    theta0: Any,
    t: Any,
    dt: float = 0.01,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> xr.Dataset:
    """The circle in angles, (7.1) (USA) or its softmax form, with RK4.

    Args:
        model: a :class:`meanfield.Model` with ``Q = K = V = I``.
        theta0: initial angles ``(n,)`` or ``(batch, n)``.
        t: output times (``t[0]`` the time of ``theta0``).
        dt: fixed step.

    Returns:
        ``xarray.Dataset`` with ``theta`` (time, [batch,] token; unwrapped, not reduced mod
        ``2 pi``) and ``x`` (the points ``(cos, sin)``), ``energy``, ``dissipation``.
    """
    check_angle_model(model)
    t = output_times(t)
    th0 = as_angles(theta0, "theta0")
    start = _time.perf_counter()
    th, stats = _integrate_angles(model, th0, t, dt, memory_limit)
    wall = _time.perf_counter() - start
    xs = from_angles(th)
    batched = th0.ndim == 2
    ds = _dataset(model, t, xs, batched, "sphere", True, memory_limit)
    lead = ("time", "batch") if batched else ("time",)
    ds["theta"] = (lead + ("token",), th, {"long_name": "angle", "units": "rad"})
    _settings(ds, model, "angles", "sphere", dt, 0.0, 0.0, memory_limit, stats, wall, None)
    return ds


__all__ = ["METHODS", "simulate", "simulate_angles"]
