"""Plots of a Lagrangian run: the nodes coloured by their density, and the gridded field.

.. autosummary::
   plot_lagrangian

One colour range (of ``log10`` density: clusters reach densities many decades above the
rest) for every panel of a figure. The gridded panels are interpolated from the moving nodes
(:func:`meanfield.lagrangian.grid.to_grid`) and say so in their titles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from meanfield.plots.figures import angle_axis, finish, new_figure
from meanfield.plots.sphere import pick_times


def _title(ds: xr.Dataset) -> str:
    model = json.loads(ds.attrs.get("model", "{}"))
    settings = json.loads(ds.attrs.get("settings", "{}"))
    d = ds.sizes["dim"]
    where = ("circle" if d == 2 else f"S^{d - 1}") if settings.get("geometry") == "sphere" else f"R^{d}"
    return (f"Lagrangian run on {where}, {ds.sizes['node']} nodes: "
            f"{model.get('attention', '?')} attention, beta = {model.get('beta', '?')}")


def _log_density(ds: xr.Dataset) -> tuple[np.ndarray, float, float]:
    rho = ds["density"].values
    logr = np.log10(np.where(rho > 0, rho, np.nan))
    finite = logr[np.isfinite(logr)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    return logr, lo, max(hi, lo + 1e-12)


FAR = 2.0
"""Grid points farther than ``FAR`` times the initial node spacing from every node are left
blank: between clusters there are no nodes, and an interpolated value there means nothing."""


def _spacing(x0: np.ndarray) -> float:
    """Median nearest-neighbour distance of the nodes ``x0`` (n, d)."""
    from scipy.spatial import cKDTree

    dist, _ = cKDTree(x0).query(x0, k=2)
    return float(np.median(dist[:, 1]))


def _blank_far(values: np.ndarray, grid_points: np.ndarray, nodes: np.ndarray, h: float
               ) -> np.ndarray:
    """``values`` (shape of the grid) with NaN where no node lies within ``FAR * h``."""
    from scipy.spatial import cKDTree

    dist, _ = cKDTree(nodes).query(grid_points.reshape(-1, nodes.shape[-1]))
    out = np.array(values, dtype=float)
    out[(dist > FAR * h).reshape(out.shape)] = np.nan
    return out


def _stopped(fig: Any, ds: xr.Dataset) -> None:
    if not ds.attrs.get("successful", 1):
        fig.text(0.01, 0.005, "stopped early: " + str(ds.attrs.get("stop_reason", ""))[:110],
                 fontsize=7)


def _handover(ax: Any, ds: xr.Dataset) -> None:
    if "handover_time" in ds:
        ax.axvline(float(ds["handover_time"]), color="r", lw=0.8, ls="--",
                   label="hand-over from the spectral run")
        ax.legend(loc="upper right", fontsize=7)


def _circle(ds: xr.Dataset, path: str | Path | None) -> Any:
    from meanfield.lagrangian.grid import to_grid

    t = ds["time"].values
    x = ds["x"].values
    theta = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
    logr, lo, hi = _log_density(ds)
    fig = new_figure(figsize=(11, 6.5))
    has_energy = "energy" in ds
    grid = fig.add_gridspec(2 if has_energy else 1, 2,
                            height_ratios=[3, 1] if has_energy else [1])
    ax_n = fig.add_subplot(grid[0, 0])
    pts = ax_n.scatter(np.repeat(t, theta.shape[1]), theta.ravel(), c=logr.ravel(), s=4,
                       cmap="viridis", vmin=lo, vmax=hi, linewidths=0)
    ax_n.set_title("nodes, coloured by their density", fontsize=10)
    ax_g = fig.add_subplot(grid[0, 1], sharey=ax_n)
    field = to_grid(ds)
    angle = field.dims[-1]
    grid_theta = field[angle].values
    gpts = np.stack([np.cos(grid_theta), np.sin(grid_theta)], axis=-1)
    h = _spacing(x[0])
    values = np.stack([_blank_far(np.log10(np.where(f > 0, f, np.nan)), gpts, xk, h)
                       for f, xk in zip(field.values, x)])
    ax_g.pcolormesh(t, grid_theta, values.T, shading="nearest", cmap="viridis",
                    vmin=lo, vmax=hi)
    ax_g.set_title("density interpolated from the nodes onto a grid\n"
                   "(blank: no node within twice the initial spacing)", fontsize=10)
    for ax in (ax_n, ax_g):
        ax.set_xlabel("t")
        _handover(ax, ds)
    angle_axis(ax_n.yaxis, r"angle $\theta$")
    fig.colorbar(pts, ax=[ax_n, ax_g], label=r"$\log_{10}$ density (one range for both)")
    if has_energy:
        ax_e = fig.add_subplot(grid[1, :])
        ax_e.plot(t, ds["energy"].values, "k.-")
        ax_e.set_xlabel("t")
        ax_e.set_ylabel(r"$E_\beta$")
    fig.suptitle(_title(ds), fontsize=10)
    _stopped(fig, ds)
    return finish(fig, path)


def _maps(ds: xr.Dataset, path: str | Path | None, times: Sequence[float] | None) -> Any:
    from meanfield.lagrangian.grid import to_grid

    idx = pick_times(ds, times)
    sphere = json.loads(ds.attrs.get("settings", "{}")).get("geometry") == "sphere"
    x = ds["x"].values
    logr, lo, hi = _log_density(ds)
    n = len(idx)
    fig = new_figure(figsize=(3.8 * n, 6.6))
    grid = fig.add_gridspec(2, n)
    d = ds.sizes["dim"]
    gridded = (sphere and d == 3) or (not sphere and d == 2)  # what to_grid draws here
    field = to_grid(ds.isel(time=idx)) if gridded else None
    h0 = _spacing(x[0])
    axes = []
    for j, i in enumerate(idx):
        kw = {"projection": "mollweide"} if sphere else {}
        ax = fig.add_subplot(grid[0, j], **kw)
        if sphere:
            lon = np.arctan2(x[i, :, 1], x[i, :, 0])
            lat = np.arcsin(np.clip(x[i, :, 2], -1, 1))
            pts = ax.scatter(lon, lat, c=logr[i], s=5, cmap="viridis", vmin=lo, vmax=hi,
                             linewidths=0)
            ax.set_xticklabels([])
            ax.grid(True, lw=0.3, alpha=0.5)
            ax.set_xlabel("longitude", fontsize=8)
            ax.set_ylabel("latitude", fontsize=8)
        else:
            pts = ax.scatter(x[i, :, 0], x[i, :, 1], c=logr[i], s=5, cmap="viridis", vmin=lo,
                             vmax=hi, linewidths=0)
            ax.set_xlabel(r"$x_1$" if d == 2 else r"$x_1$ (projection onto the first two axes)")
            ax.set_ylabel(r"$x_2$")
            ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(f"nodes, t = {ds['time'].values[i]:.4g}", fontsize=9)
        axes.append(ax)
        if field is not None:
            ax2 = fig.add_subplot(grid[1, j], **kw)
            f = field.isel(time=j)
            a, b = f.dims
            A, Bv = np.meshgrid(f[a].values, f[b].values, indexing="ij")
            if sphere:
                gp = np.stack([np.sin(A) * np.cos(Bv), np.sin(A) * np.sin(Bv), np.cos(A)], -1)
            else:
                gp = np.stack([A, Bv], axis=-1)
            values = _blank_far(np.log10(np.where(f.values > 0, f.values, np.nan)), gp,
                                x[i], h0)
            if sphere:  # (colatitude, longitude) -> (lon in [-pi, pi), lat)
                lon = np.mod(f[b].values + np.pi, 2 * np.pi) - np.pi
                order = np.argsort(lon)
                ax2.pcolormesh(lon[order], 0.5 * np.pi - f[a].values, values[:, order],
                               shading="nearest", cmap="viridis", vmin=lo, vmax=hi)
                ax2.set_xticklabels([])
                ax2.grid(True, lw=0.3, alpha=0.5)
                ax2.set_xlabel("longitude", fontsize=8)
                ax2.set_ylabel("latitude", fontsize=8)
            else:
                ax2.pcolormesh(f[a].values, f[b].values, values.T, shading="nearest",
                               cmap="viridis", vmin=lo, vmax=hi)
                ax2.set_aspect("equal", adjustable="datalim")
                ax2.set_xlabel(r"$x_1$")
                ax2.set_ylabel(r"$x_2$")
            ax2.set_title("interpolated onto a grid (blank: no node near)", fontsize=9)
            axes.append(ax2)
    fig.colorbar(pts, ax=axes, orientation="horizontal", shrink=0.6, pad=0.04,
                 label=r"$\log_{10}$ density (one colour range for all panels)")
    fig.suptitle(_title(ds), fontsize=10)
    _stopped(fig, ds)
    return finish(fig, path, dpi=110)


def plot_lagrangian(ds: xr.Dataset, path: str | Path | None = None,
                    times: Sequence[float] | None = None) -> Any:
    """Draw a :func:`meanfield.solve_lagrangian` Dataset: on the circle the nodes' angles
    against time coloured by density beside the gridded field; on ``S^2`` and in ``R^d``
    maps at the chosen ``times`` (nearest saved). Returns the Figure (written when ``path``)."""
    settings = json.loads(ds.attrs.get("settings", "{}"))
    if settings.get("geometry") == "sphere" and ds.sizes["dim"] == 2:
        return _circle(ds, path)
    return _maps(ds, path, times)


__all__ = ["plot_lagrangian"]
