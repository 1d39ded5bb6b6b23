"""Figures of PDE results (matplotlib, Agg).

.. autosummary::
   plot_circle
   plot_result
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xarray as xr

from meanfield.plots.figures import angle_axis, finish, new_figure


def plot_circle(ds: xr.Dataset, path: str | Path | None = None) -> Any:
    """Density as a (theta, t) heat map with the energy curve beneath; the Figure (written
    to ``path`` as PNG when given)."""
    fig = new_figure(figsize=(7, 6))
    ax, ax_e = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    t = ds["time"].values
    theta = ds["theta"].values
    mesh = ax.pcolormesh(t, theta, ds["density"].values.T, shading="nearest", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label=r"density $\rho(\theta, t)$")
    angle_axis(ax.yaxis, r"$\theta$")
    model = json.loads(ds.attrs.get("model", "{}"))
    ax.set_title(
        f"{model.get('attention', '?')} attention, beta = {model.get('beta', '?')}, "
        f"value = {model.get('value', '?')}, noise = {model.get('noise', '?')}"
    )
    ax_e.plot(t, ds["energy"].values, "k.-")
    ax_e.set_xlabel("t")
    ax_e.set_ylabel(r"$E_\beta$")
    if not ds.attrs.get("successful", 1):
        ax.text(0.01, 0.98, "stopped early: " + str(ds.attrs.get("stop_reason", ""))[:80],
                transform=ax.transAxes, va="top", color="w", fontsize=8)
    return finish(fig, path)


def plot_result(ds: xr.Dataset, path: str | Path | None = None, times: list[float] | None = None) -> Any:
    """Draw any PDE result: the circle here, the sphere domains by :mod:`meanfield.plots.sphere`."""
    if "theta" in ds["density"].dims:
        return plot_circle(ds, path)
    from meanfield.plots.sphere import plot_result as sphere_plot

    return sphere_plot(ds, path, times=times)


__all__ = ["plot_circle", "plot_result"]
