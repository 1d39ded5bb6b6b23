"""Helpers shared by the check modules: the confidence level and power-law fit of the
statistical checks, the figure helpers, and the circle's i.i.d. particle-against-PDE study.

.. autosummary::
   CI_LEVEL
   fit_power_law
   slope_ci
   geometric_sizes
   save_figure
   loglog_panel
   angle_histogram_panel
   smooth_density
   pde_at
   particles_at
   iid_distances
   hemisphere_direction

A check module imports these from here, never another check module's helpers, so that a
module that fails to import takes only its own checks down (:class:`validation.suites.BrokenModule`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy import optimize

from meanfield import fits
from validation.records import Comparison

CI_LEVEL = 0.99
"""Confidence level of the fitted slopes. With a fixed seed every check is deterministic;
the level is the fraction of seeds for which a correct implementation passes (1 in 100
fails by chance), the usual trade-off between false alarms and power."""


# -- statistics ----------------------------------------------------------------------------


def fit_power_law(n: np.ndarray, d: np.ndarray, level: float = CI_LEVEL) -> dict[str, float]:
    """:func:`meanfield.fits.fit_power_law` at the level :data:`CI_LEVEL`."""
    return fits.fit_power_law(n, d, level)


def slope_ci(what: str, fit: dict[str, float], expected: float = -0.5) -> Comparison:
    """``expected`` inside the confidence interval of a :func:`fit_power_law` slope."""
    return Comparison(f"{what}: log-log slope ({fit['level']:.0%} CI)", fit["slope"], expected,
                      kind="ci", low=fit["lo"], high=fit["hi"])


def geometric_sizes(lo: float, hi: float, count: int) -> np.ndarray:
    """About ``count`` distinct integers geometrically spaced from ``lo`` to ``hi``."""
    return np.unique(np.round(np.geomspace(lo, hi, count)).astype(int))


# -- figures -------------------------------------------------------------------------------


def save_figure(fig: Any, out_dir: Path, name: str) -> str:
    """Save ``fig`` as ``out_dir/<name>.png`` (:func:`meanfield.io.save_png`); returns the path."""
    from meanfield.io import save_png

    path = save_png(fig, Path(out_dir) / f"{name}.png", dpi=110, tight=True)
    return str(path)


def loglog_panel(ax: Any, n: np.ndarray, d: np.ndarray, fit: dict[str, float], ref: float,
                 label: str, color: str) -> None:
    """The distances ``d`` (sizes x seeds) against ``n``, their geometric means, the fitted
    power law and a dashed reference slope ``ref``."""
    ax.loglog(np.repeat(n[:, None], d.shape[1], 1).ravel(), d.ravel(), ".", color=color, alpha=0.35)
    ax.loglog(n, np.exp(np.nanmean(np.log(d), axis=1)), "o", color=color, label=f"{label} (geometric mean)")
    nn = np.geomspace(n.min(), n.max(), 50)
    ax.loglog(nn, np.exp(fit["intercept"]) * nn ** fit["slope"], "-", color=color,
              label=f"fit: slope {fit['slope']:.3f} [{fit['lo']:.3f}, {fit['hi']:.3f}]")
    mid = math.sqrt(n.min() * n.max())
    scale = np.exp(fit["intercept"]) * mid ** fit["slope"] / mid**ref
    ax.loglog(nn, scale * nn**ref, "--", color="gray", lw=1)


def angle_histogram_panel(ax: Any, snaps: tuple) -> None:
    """PDE law of the angle from the axis ``e`` (the last coordinate; ``polar_angle_density``)
    against the particles' histogram, for each ``(domain, coefficients, particles, t)`` in
    ``snaps``. The angle is the one-dimensional statistic that both ``Sphere`` and
    ``ZonalSphere`` resolve, so one panel serves both checks."""
    theta = np.linspace(0.0, np.pi, 361)
    for (dom, c, x, t), col in zip(snaps, ("C0", "C3")):
        x = np.asarray(x).reshape(-1, np.shape(x)[-1])
        ang = np.arccos(np.clip(x[:, -1] / np.linalg.norm(x, axis=1), -1.0, 1.0))
        ax.hist(ang, bins=48, range=(0, np.pi), density=True, alpha=0.35, color=col,
                label=f"particles t = {t:g} ({x.shape[0]} points)")
        ax.plot(theta, dom.polar_angle_density(c, theta), "-", color=col, lw=2,
                label=f"PDE t = {t:g}")
    ax.set_xlabel("angle from the axis e (rad)")
    ax.set_ylabel("density")
    ax.legend(fontsize=7)


# -- particles against the PDE on the circle -----------------------------------------------


def smooth_density(theta: np.ndarray) -> np.ndarray:
    """``exp(cos theta) (1 + 0.3 sin 2 theta)``: smooth, positive, far from uniform."""
    return np.exp(np.cos(theta)) * (1.0 + 0.3 * np.sin(2.0 * theta))


def pde_at(model: Any, domain: Any, rho0: Any, t_end: float) -> tuple[Any, np.ndarray, xr.Dataset]:
    """``(final domain, coefficients at t_end, Dataset)`` of a resolved solve (refinement allowed)."""
    from meanfield import solve
    from meanfield.io import domain_of

    ds = solve(model, domain, rho0, [0.0, t_end], rtol=1e-10, atol=1e-13)
    final = domain_of(ds)
    return final, final.forward(ds["density"].values[-1]), ds


def particles_at(model: Any, x0: np.ndarray, t_end: float, dt: float, rng: Any = None,
                 field_method: str = "auto") -> np.ndarray:
    """RK4, or Euler–Maruyama with ``rng`` when the model has noise; ``field_method`` as
    ``particles.simulate``'s."""
    import particles

    method = "euler_maruyama" if model.noise > 0 else "rk4"
    ds = particles.simulate(model, x0, [0.0, t_end], method=method, dt=dt, observables=False, rng=rng,
                            field_method=field_method)
    return np.asarray(ds["x"].values[-1])


def iid_distances(setup: dict[str, Any], seed: int, quantile: bool = False) -> dict[str, Any]:
    """``W_1`` and kernel distances (sizes x seeds) between the PDE at ``setup["t"]`` and
    particles started i.i.d. (or at the quantiles, one seed) from :func:`smooth_density`;
    ``setup``: ``model``, ``domain``, ``t``, ``n``, ``seeds``, ``dt`` and optionally
    ``field_method``. Also the snapshots of the histogram panel."""
    from meanfield.metrics import kernel_distance_particles, w1_density_particles

    model, domain, t_end = setup["model"], setup["domain"], setup["t"]
    rho0 = smooth_density(domain.grid)
    rho0 = rho0 / domain.integrate(rho0)
    fdom, c_t, _ = pde_at(model, domain, smooth_density, t_end)
    ns = setup["n"]
    seeds = 1 if quantile else setup["seeds"]
    rng = np.random.default_rng(seed)
    w1 = np.full((ns.size, seeds), np.nan)
    kd = np.full((ns.size, seeds), np.nan)
    for i, n in enumerate(ns):
        if quantile:
            x0 = domain.quantiles(rho0, int(n))[None]
        else:
            x0 = np.stack([domain.sample(rho0, int(n), rng) for _ in range(seeds)])
        # a setup without "field_method" (circle.noise_meanfield_iid's) sums as simulate chooses
        xt = particles_at(model, x0, t_end, setup["dt"], rng, setup.get("field_method", "auto"))
        w1[i] = w1_density_particles(fdom, c_t, xt, kind="coefficients")
        kd[i] = kernel_distance_particles(fdom, c_t, xt, model.beta, kind="coefficients")
    return {"w1": w1, "kernel": kd, "snapshots": (rho0, x0, fdom.backward(c_t), fdom.grid, xt)}


# -- geometry -------------------------------------------------------------------------------


def hemisphere_direction(x: np.ndarray) -> tuple[np.ndarray, float]:
    """``(w, margin)``: the unit ``w`` maximising ``min_i <x_i, w>`` over the box
    ``|w_k| <= 1`` (a linear program), and that minimum after normalising ``w``. The points lie
    in the open hemisphere about ``w`` iff ``margin > 0``."""
    n, d = x.shape
    cost = np.zeros(d + 1)
    cost[-1] = -1.0  # maximise s subject to <x_i, w> >= s
    res = optimize.linprog(cost, A_ub=np.hstack([-x, np.ones((n, 1))]), b_ub=np.zeros(n),
                           bounds=[(-1.0, 1.0)] * d + [(None, None)])
    norm = float(np.linalg.norm(res.x[:d])) if res.success else 0.0
    if norm == 0.0:  # 0 is in the convex hull: no hemisphere
        return np.zeros(d), -np.inf
    w = res.x[:d] / norm
    return w, float(np.min(x @ w))


__all__ = [
    "CI_LEVEL",
    "angle_histogram_panel",
    "fit_power_law",
    "geometric_sizes",
    "hemisphere_direction",
    "iid_distances",
    "loglog_panel",
    "particles_at",
    "pde_at",
    "save_figure",
    "slope_ci",
    "smooth_density",
]
