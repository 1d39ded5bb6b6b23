"""Figures of particle runs (matplotlib, Agg backend, PNG).

.. autosummary::
   plot_circle_trajectories
   plot_sphere_trajectories
   plot_inner_product_histograms
   plot_trajectories
   plot_result

``plot_circle_trajectories`` draws the angle of every token against time, like Figure 4 of
the paper; ``plot_sphere_trajectories`` draws the paths on ``S^2``;
``plot_inner_product_histograms`` the histograms of ``<x_i, x_j>`` at a few times (Figure 1).
Each takes the ``xarray.Dataset`` of :func:`particles.simulate` (one system, or ``batch``
picks one) and writes a PNG when ``path`` is given.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import xarray as xr

from meanfield.plots.figures import angle_axis, finish, new_figure


def _ticks(values: list[float]) -> Any:
    from matplotlib.ticker import FixedLocator

    return FixedLocator(values)


def _one_system(ds: xr.Dataset, batch: int) -> np.ndarray:
    x = ds["x"]
    if "batch" in x.dims:
        if not 0 <= batch < x.sizes["batch"]:
            msg = f"batch must be in [0, {x.sizes['batch']}), got {batch}"
            raise ValueError(msg)
        x = x.isel(batch=batch)
    return np.asarray(x.transpose("time", "token", "dim").values)


def _title(ds: xr.Dataset) -> str:
    import json

    try:
        m = json.loads(ds.attrs["model"])
        return f"{m['attention']}, beta = {m['beta']:g}, n = {ds.sizes['token']}"
    except (KeyError, ValueError, TypeError):
        return f"n = {ds.sizes['token']}"


def plot_circle_trajectories(
    ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *, batch: int = 0, ax: Any = None
) -> Any:
    """Angles ``theta_i(t)`` in ``[0, 2 pi)`` against time (Figure 4 of the paper); ``d = 2``.

    Returns:
        The matplotlib figure.
    """
    x = _one_system(ds, batch)
    if x.shape[-1] != 2:
        msg = f"circle trajectories need d = 2, got d = {x.shape[-1]}"
        raise ValueError(msg)
    fig = ax.figure if ax is not None else new_figure(figsize=(6, 4))
    ax = ax if ax is not None else fig.add_subplot()
    t = ds["time"].values
    th = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
    for i in range(th.shape[1]):
        # break lines where a path wraps around 2 pi
        col = th[:, i].copy()
        col[1:][np.abs(np.diff(col)) > np.pi] = np.nan
        ax.plot(t, col, lw=0.8)
    ax.set_xlabel("t")
    angle_axis(ax.yaxis, r"$\theta_i(t)$")
    ax.set_title(_title(ds))
    return finish(fig, path)


def plot_sphere_trajectories(
    ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *, batch: int = 0
) -> Any:
    """Paths of the tokens on ``S^2`` (3-d axes, a wire sphere; start dots, end stars)."""
    x = _one_system(ds, batch)
    if x.shape[-1] != 3:
        msg = f"sphere trajectories need d = 3, got d = {x.shape[-1]}"
        raise ValueError(msg)
    fig = new_figure(figsize=(5, 5))
    ax = fig.add_subplot(projection="3d")
    u, v = np.mgrid[0 : 2 * np.pi : 24j, 0 : np.pi : 12j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v),
                      color="0.85", lw=0.4)
    for i in range(x.shape[1]):
        line = ax.plot(x[:, i, 0], x[:, i, 1], x[:, i, 2], lw=0.9)[0]
        ax.scatter(*x[0, i], color=line.get_color(), s=8)
        ax.scatter(*x[-1, i], color=line.get_color(), s=30, marker="*")
    ax.set_box_aspect((1, 1, 1))
    for axis, label in zip((ax.xaxis, ax.yaxis, ax.zaxis), ("$x_1$", "$x_2$", "$x_3$")):
        axis.set_major_locator(_ticks([-1, 0, 1]))
        axis.set_label_text(label)
    ax.set_title(_title(ds))
    return finish(fig, path)


def plot_inner_product_histograms(
    ds: xr.Dataset,
    path: str | os.PathLike[str] | None = None,
    *,
    times: int = 4,
    bins: int = 40,
    batch: int | None = None,
) -> Any:
    """Histograms of ``{<x_i(t), x_j(t)>}_{i<j}`` at ``times`` output times (Figure 1),
    pooled over the batch unless ``batch`` picks a system."""
    from particles.observables import inner_product_histogram

    x = ds["x"]
    if batch is not None and "batch" in x.dims:
        x = x.isel(batch=batch)
    idx = np.unique(np.linspace(0, ds.sizes["time"] - 1, max(1, int(times))).astype(int))
    fig = new_figure(figsize=(3 * idx.size, 2.6))
    axes = fig.subplots(1, idx.size, sharey=True, squeeze=False)
    for ax, k in zip(axes[0], idx):
        dens, edges = inner_product_histogram(x.isel(time=k).values, bins=bins)
        ax.bar(edges[:-1], dens, width=np.diff(edges), align="edge")
        ax.set_title(f"t = {float(ds['time'][k]):.3g}")
        ax.set_xlabel(r"$\langle x_i, x_j\rangle$")
    axes[0, 0].set_ylabel("density of pairs $i < j$")
    pooled = " (pooled over the batch)" if "batch" in x.dims else ""
    fig.suptitle(f"{_title(ds)}, d = {ds.sizes['dim']}{pooled}")
    return finish(fig, path)


def plot_trajectories(
    ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *, batch: int = 0
) -> Any:
    """Circle or sphere trajectories by dimension (``d = 2`` or ``3``), else the histograms."""
    d = ds.sizes["dim"]
    if d == 2:
        return plot_circle_trajectories(ds, path, batch=batch)
    if d == 3:
        return plot_sphere_trajectories(ds, path, batch=batch)
    return plot_inner_product_histograms(ds, path, batch=batch)


def plot_result(ds: xr.Dataset, path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """Draw a particle result to ``path`` (what ``meanfield plot FILE`` calls): the
    trajectories by dimension, see :func:`plot_trajectories`."""
    return plot_trajectories(ds, path, **kwargs)


__all__ = [
    "plot_circle_trajectories",
    "plot_inner_product_histograms",
    "plot_result",
    "plot_sphere_trajectories",
    "plot_trajectories",
]
