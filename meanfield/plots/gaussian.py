"""Figures of a Gaussian solution (docs/equations.md section 4; ``docs/gaussian.md``).

.. autosummary::
   plot_ellipses
   plot_eigenvalues
   save_png

Both take the Dataset of :func:`meanfield.gaussian.solve_gaussian` and return a
``matplotlib.figure.Figure`` drawn without pyplot (Agg canvas, no global state).
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import xarray as xr
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from meanfield.io import save_png  # re-exported: the Gaussian CLI and checks write figures with it


def _figure(figsize: tuple[float, float]) -> tuple[Figure, Any]:
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _pick_times(n: int, count: int) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, n - 1, min(count, n))).astype(int))


def _check(ds: xr.Dataset) -> None:
    if "mean" not in ds or "cov" not in ds:
        msg = "expected a Dataset with 'mean' (time, dim) and 'cov' (time, dim, dim_)"
        raise ValueError(msg)


def plot_ellipses(ds: xr.Dataset, *, dims: Sequence[int] | None = None, count: int = 8,
                  nsigma: float = 1.0, ax: Any = None) -> Figure:
    """Covariance ellipses ``(x - m)^T Sigma^{-1} (x - m) = nsigma^2`` at ``count`` times.

    For ``d = 2`` by default; ``dims = (i, j)`` draws the marginal on coordinates ``i, j``
    for any ``d``. Colour encodes time; the line is the path of the mean.
    """
    _check(ds)
    d = ds.sizes["dim"]
    if dims is None:
        if d != 2:
            msg = f"ellipses need d = 2 (got d = {d}); pass dims=(i, j) for a marginal"
            raise ValueError(msg)
        dims = (0, 1)
    i, j = (int(k) for k in dims)
    if not (0 <= i < d and 0 <= j < d and i != j):
        msg = f"dims must be two distinct coordinates in 0..{d - 1}, got {tuple(dims)}"
        raise ValueError(msg)
    if ax is None:
        fig, ax = _figure((5.0, 4.5))
    else:
        fig = ax.figure
    times = ds["time"].values
    means = ds["mean"].values[:, [i, j]]
    covs = ds["cov"].values[:, [i, j]][:, :, [i, j]]
    cmap = colormaps["viridis"]
    angle = np.linspace(0.0, 2.0 * math.pi, 200)
    circle = np.stack([np.cos(angle), np.sin(angle)])
    span = max(times[-1] - times[0], np.finfo(float).tiny)
    for k in _pick_times(len(times), count):
        lam, vec = np.linalg.eigh(covs[k])
        axes = vec * np.sqrt(np.clip(lam, 0.0, None))  # columns: the semi-axes
        pts = means[k][:, None] + nsigma * axes @ circle
        colour = cmap((times[k] - times[0]) / span)
        ax.plot(pts[0], pts[1], color=colour, lw=1.5, label=f"t = {times[k]:.3g}")
    ax.plot(means[:, 0], means[:, 1], "k.-", lw=0.8, ms=2, label="mean")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(f"x_{i}")
    ax.set_ylabel(f"x_{j}")
    ax.set_title(f"{nsigma:g}-sigma ellipses of N(m(t), Sigma(t))")
    ax.legend(fontsize="small", loc="best")
    return fig


def plot_eigenvalues(ds: xr.Dataset, *, log: bool = True, ax: Any = None) -> Figure:
    """The eigenvalues of ``Sigma(t)`` against time (any ``d``); a blow-up time, when the
    Dataset records one, is marked by a vertical line."""
    _check(ds)
    if ax is None:
        fig, ax = _figure((5.5, 4.0))
    else:
        fig = ax.figure
    times = ds["time"].values
    lam = np.linalg.eigvalsh(ds["cov"].values)
    for k in range(lam.shape[1]):
        ax.plot(times, lam[:, k], lw=1.5, label=f"lambda_{k + 1}")
    if log and np.all(lam > 0):
        ax.set_yscale("log")
    t_star = json.loads(ds.attrs.get("settings", "{}")).get("blowup_time")
    if t_star is not None and np.isfinite(float(t_star)):
        ax.axvline(float(t_star), color="k", ls="--", lw=1,
                   label=f"blow-up t* = {float(t_star):.4g}")
    ax.set_xlabel("t")
    ax.set_ylabel("eigenvalues of Sigma(t)")
    ax.set_title("covariance spectrum")
    ax.legend(fontsize="small", loc="best")
    return fig


__all__ = ["plot_eigenvalues", "plot_ellipses", "save_png"]
