"""Figures of PDE results (matplotlib, Agg).

.. autosummary::
   plot_circle
   plot_result
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from .io import save_png


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_circle(ds: xr.Dataset, path: str | Path) -> Path:
    """Density as a (theta, t) heat map with the energy curve beneath; written to PNG."""
    plt = _pyplot()
    fig, (ax, ax_e) = plt.subplots(
        2, 1, figsize=(7, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}, layout="constrained"
    )
    t = ds["time"].values
    theta = ds["theta"].values
    mesh = ax.pcolormesh(t, theta, ds["density"].values.T, shading="nearest", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label=r"density $\rho(\theta, t)$")
    ax.set_ylabel(r"$\theta$")
    ax.set_yticks([0, np.pi, 2 * np.pi], ["0", r"$\pi$", r"$2\pi$"])
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
    path = save_png(fig, path)
    plt.close(fig)
    return path


def plot_result(ds: xr.Dataset, path: str | Path, times: list[float] | None = None) -> Path:
    """Draw any PDE result: the circle here, the sphere domains by :mod:`meanfield.plots_sphere`."""
    if "theta" in ds["density"].dims:
        return plot_circle(ds, path)
    try:
        from .plots_sphere import plot_result as sphere_plot
    except ImportError as exc:  # pragma: no cover - present once the sphere domains land
        msg = f"no plot for a density on dims {ds['density'].dims}"
        raise ValueError(msg) from exc
    return sphere_plot(ds, path, times=times)


__all__ = ["plot_circle", "plot_result"]
