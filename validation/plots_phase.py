"""Figures of the phase diagram and of metastability (Figures 3 and 4 of the paper).

.. autosummary::
   plot_phase_diagram
   plot_trajectories
   plot_cluster_counts

Each function takes the Dataset of :func:`validation.phase_diagram.phase_diagram` or of
:mod:`validation.metastability` and returns the Figure (written to ``path`` as PNG when
given; see :mod:`meanfield.plots.figures`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import xarray as xr

from meanfield.plots.figures import angle_axis, finish, new_figure

_COLOURBAR = {
    "probability": r"$P(\langle x_1(t), x_2(t)\rangle \geq 1 - \delta)$",
    "pair_probability": r"fraction of pairs with $\langle x_i, x_j\rangle \geq 1 - \delta$",
    "mean_inner_product": r"mean $\langle x_1(t), x_2(t)\rangle$",
}
"""Colour-bar labels of the phase diagram's variables (mathematical notation)."""


def plot_phase_diagram(ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *,
                       variable: str = "probability") -> Any:
    """Heat map of ``variable`` over ``(t, beta)`` with the curve (6.12) and ``t_half``.

    One panel per dimension ``d`` when the Dataset has a ``d`` dimension.
    """
    panels = [ds.isel(d=i) for i in range(ds.sizes["d"])] if "d" in ds.dims else [ds]
    fig = new_figure(figsize=(5.2 * len(panels), 4))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, p in zip(axes[0], panels):
        t, b = p["time"].values, p["beta"].values
        mesh = ax.pcolormesh(t, b, p[variable].transpose("beta", "time").values,
                             cmap="RdBu_r", vmin=0, vmax=1, shading="nearest", rasterized=True)
        curve = p["transition_time"].values
        order = np.argsort(b)
        ax.plot(curve[order], b[order], "k-", lw=1.5, label=r"$\Gamma_{\infty,\delta}$ (6.12)")
        if "t_half" in p:  # black-edged markers: visible on light and dark cells alike
            ax.plot(p["t_half"].values[order], b[order], "o", ms=3.5, mfc="yellow", mec="k",
                    mew=0.5, label=r"first $t$ with $P \geq 1/2$")
        ax.set_xlim(t.min(), t.max())
        ax.set_ylim(b.min(), b.max())
        ax.set_xlabel("t")
        ax.set_ylabel(r"$\beta$")
        dval = int(p["d"]) if "d" in p.coords else ""
        settings = json.loads(ds.attrs.get("settings", "{}"))
        delta = settings.get("delta", "")
        ax.set_title(f"d = {dval}, n = {settings.get('n', '')}, "
                     f"{settings.get('attention', '')}, $\\delta$ = {delta:g}"
                     if delta != "" else f"d = {dval}")
        ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
        fig.colorbar(mesh, ax=ax, label=_COLOURBAR.get(variable, variable))
    return finish(fig, path)


def plot_trajectories(ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *,
                      snapshots: tuple[float, ...] = (2.5, 18.0, 30.0)) -> Any:
    """Angles against time, one panel per ``beta``, and the circle at ``snapshots`` (Fig. 4).

    ``ds`` has ``theta`` on ``(beta, time, token)``.
    """
    betas = ds["beta"].values
    snaps = [s for s in snapshots if ds["time"].min() <= s <= ds["time"].max()]
    fig = new_figure(figsize=(4.5 + 1.9 * len(snaps), 3.0 * len(betas)))
    grid = fig.add_gridspec(len(betas), 1 + len(snaps), width_ratios=[3] + [1] * len(snaps))
    t = ds["time"].values
    for r, beta in enumerate(betas):
        theta = ds["theta"].sel(beta=beta).transpose("time", "token").values
        ax = fig.add_subplot(grid[r, 0])
        wrapped = np.mod(theta, 2 * np.pi)
        jump = np.abs(np.diff(wrapped, axis=0, prepend=wrapped[:1])) > np.pi
        ax.plot(t, np.where(jump, np.nan, wrapped), lw=0.6, alpha=0.7)  # no wrap-around lines
        for s in snaps:
            ax.axvline(s, color="grey", lw=0.6, ls="--")
        angle_axis(ax.yaxis, rf"$\theta_i(t)$, $\beta$ = {beta:g}")
        ax.set_xlabel("t")
        for c, s in enumerate(snaps):
            k = int(np.argmin(np.abs(t - s)))
            sub = fig.add_subplot(grid[r, 1 + c])
            circle = np.linspace(0, 2 * np.pi, 200)
            sub.plot(np.cos(circle), np.sin(circle), color="0.8", lw=0.8)
            sub.plot(np.cos(theta[k]), np.sin(theta[k]), "o", ms=3, color="C3")
            sub.set_aspect("equal")
            sub.set_axis_off()
            sub.set_title(f"t = {t[k]:g}", fontsize=8)
    return finish(fig, path)


def plot_cluster_counts(ds: xr.Dataset, path: str | os.PathLike[str] | None = None, *,
                        max_state: int = 8) -> Any:
    """Cluster count against time (median and quartiles over seeds; the PDE's peak count if
    present) and the distribution of the time spent with ``k <= max_state`` clusters."""
    betas = ds["beta"].values
    fig = new_figure(figsize=(10, 2.8 * len(betas)))
    axes = fig.subplots(len(betas), 2, squeeze=False)
    t = ds["time"].values
    for r, beta in enumerate(betas):
        c = ds["clusters"].sel(beta=beta).transpose("seed", "time").values
        ax = axes[r, 0]
        for s in range(min(c.shape[0], 20)):
            ax.step(t, c[s], where="post", lw=0.5, alpha=0.4)
        q = np.percentile(c, [25, 50, 75], axis=0)
        ax.step(t, q[1], where="post", color="k", lw=1.5, label="median")
        ax.fill_between(t, q[0], q[2], step="post", color="k", alpha=0.15, label="quartiles")
        if "pde_peaks" in ds:
            pk = ds["pde_peaks"].sel(beta=beta)
            ax.step(pk["pde_time"], pk, where="post", color="C3", lw=1.5, label="PDE peaks")
        ax.set_ylim(0.5, max(2.0, float(c.max()) + 0.5))  # counts: a linear axis
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("t")
        ax.set_ylabel(rf"clusters, $\beta$ = {beta:g}")
        ax.legend(fontsize=8)
        ax = axes[r, 1]
        dwell = ds["dwell"].sel(beta=beta)
        ks = dwell["clusters_state"].values
        data = [dwell.sel(clusters_state=k).values for k in ks]
        keep = [i for i, v in enumerate(data) if np.any(v > 0) and ks[i] <= max_state]
        if keep:
            ax.boxplot([data[i][data[i] > 0] for i in keep], positions=ks[keep], widths=0.6)
        ax.set_xlabel("number of clusters")
        ax.set_ylabel("time spent (seeds with > 0)")
    return finish(fig, path)


__all__ = ["plot_cluster_counts", "plot_phase_diagram", "plot_trajectories"]
