"""Figures of PDE results on the sphere domains (matplotlib, Agg).

.. autosummary::
   plot_result
   plot_sphere
   plot_zonal
   pick_times

:class:`~meanfield.domains.sphere.Sphere` results (``density`` on ``time, colatitude,
longitude``) are drawn as Mollweide maps at a few times; :class:`~meanfield.domains.
zonal_sphere.ZonalSphere` results (``density`` on ``time, s``) as profiles against
``s = <x, e>``. Both add the energy curve (docs/equations.md (3.5)) beneath.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from meanfield.plots.figures import finish, new_figure


def pick_times(ds: xr.Dataset, times: Sequence[float] | None = None, most: int = 4) -> list[int]:
    """Indices of the saved times nearest to ``times`` (default: ``most`` evenly spread,
    first and last included)."""
    t = ds["time"].values
    if times is None or len(times) == 0:
        k = min(most, t.size)
        return sorted({int(round(i)) for i in np.linspace(0, t.size - 1, k)})
    out = []
    for want in times:
        want = float(want)
        if not np.isfinite(want) or want < t[0] - 1e-12 or want > t[-1] + 1e-12:
            msg = f"times: {want!r} is outside the saved range [{t[0]:g}, {t[-1]:g}]"
            raise ValueError(msg)
        out.append(int(np.argmin(np.abs(t - want))))
    return sorted(set(out))


def _title(ds: xr.Dataset) -> str:
    """Domain and model; a grid the resolution monitor refined says so (``lmax=32, refined to
    128``: the run started at the first value and ended at the second)."""
    model = json.loads(ds.attrs.get("model", "{}"))
    settings = json.loads(ds.attrs.get("settings", "{}"))
    domain = settings.get("domain", {})
    start = settings.get("initial_domain", {})

    def value(k: str, v: Any) -> str:
        if k in start and start[k] != v:
            return f"{k}={start[k]}, refined to {v}"
        return f"{k}={v}"

    where = ", ".join(value(k, v) for k, v in domain.items() if k not in ("name", "nthreads"))
    return (
        f"{domain.get('name', '?')} ({where}): {model.get('attention', '?')} attention, "
        f"beta = {model.get('beta', '?')}, value = {model.get('value', '?')}, "
        f"noise = {model.get('noise', '?')}"
    )


def _energy(ax, ds: xr.Dataset, marks: Sequence[int]) -> None:
    t = ds["time"].values
    ax.plot(t, ds["energy"].values, "k.-")
    for i in marks:
        ax.axvline(t[i], color="0.7", lw=0.8, zorder=0)
    ax.set_xlabel("t")
    ax.set_ylabel(r"$E_\beta$")


def _stopped(fig, ds: xr.Dataset) -> None:
    if not ds.attrs.get("successful", 1):
        fig.text(0.01, 0.01, "stopped early: " + str(ds.attrs.get("stop_reason", ""))[:110], fontsize=7)


def plot_sphere(ds: xr.Dataset, path: str | Path | None = None,
                times: Sequence[float] | None = None) -> Any:
    """Mollweide maps of the density at the chosen times (nearest saved; one colour range
    for all), energy beneath; the Figure (written to ``path`` when given)."""
    idx = pick_times(ds, times)
    theta = ds["colatitude"].values
    phi = ds["longitude"].values
    lon = np.mod(phi + np.pi, 2 * np.pi) - np.pi  # to [-pi, pi) for the projection
    order = np.argsort(lon)
    lat = 0.5 * np.pi - theta
    n = len(idx)
    fig = new_figure(figsize=(4.2 * n, 4.6))
    # the layout places the suptitle ~2 px into the Mollweide panels' titles: more room
    fig.get_layout_engine().set(h_pad=0.08)
    grid = fig.add_gridspec(2, n, height_ratios=[2.2, 1])
    shown = ds["density"].values[idx]
    vmin, vmax = float(shown.min()), float(shown.max())
    axes = []
    for j, i in enumerate(idx):
        ax = fig.add_subplot(grid[0, j], projection="mollweide")
        rho = ds["density"].values[i][:, order]
        mesh = ax.pcolormesh(lon[order], lat, rho, shading="nearest", cmap="viridis",
                             vmin=vmin, vmax=vmax)
        ax.set_xticks(np.radians([-120, -60, 0, 60, 120]), ["", "", "", "", ""])
        ax.grid(True, lw=0.3, color="w", alpha=0.5)
        ax.set_xlabel("longitude", fontsize=8)
        ax.set_ylabel("latitude", fontsize=8)
        if j:
            ax.set_yticklabels([])
        ax.set_title(f"t = {ds['time'].values[i]:.4g}", fontsize=10)
        axes.append(ax)
    fig.colorbar(mesh, ax=axes, orientation="horizontal", shrink=0.6, pad=0.04,
                 label=r"density $\rho$ (one colour range for all panels)")
    _energy(fig.add_subplot(grid[1, :]), ds, idx)
    fig.suptitle(_title(ds), fontsize=10)
    _stopped(fig, ds)
    return finish(fig, path, dpi=110)


def plot_zonal(ds: xr.Dataset, path: str | Path | None = None,
               times: Sequence[float] | None = None) -> Any:
    """The profile ``rho(s)`` at the chosen times (log scale when it spans > 2 decades);
    the Figure (written to ``path`` when given)."""
    idx = pick_times(ds, times, most=6)
    s = ds["s"].values
    fig = new_figure(figsize=(7, 6))
    ax, ax_e = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 1]})
    from matplotlib import colormaps

    colors = colormaps["viridis"](np.linspace(0, 0.9, len(idx)))
    values = ds["density"].values[idx]
    for color, i, rho in zip(colors, idx, values):
        ax.plot(s, rho, ".-", color=color, ms=3, label=f"t = {ds['time'].values[i]:.4g}")
    positive = values[values > 0]
    if positive.size and np.all(values > 0) and positive.max() > 100 * positive.min():
        ax.set_yscale("log")
    ax.set_xlabel(r"$s = \langle x, e \rangle$")
    ax.set_ylabel(r"density $\rho$ (per unit surface measure)")
    ax.set_xlim(-1, 1)
    ax.legend(fontsize=8)
    ax.set_title(_title(ds), fontsize=9)
    _energy(ax_e, ds, idx)
    _stopped(fig, ds)
    return finish(fig, path)


def plot_result(ds: xr.Dataset, path: str | Path | None = None,
                times: Sequence[float] | None = None) -> Any:
    """Draw a sphere (Mollweide maps) or zonal (profiles) result to a PNG at ``path``."""
    dims = tuple(ds["density"].dims)
    if dims == ("time", "colatitude", "longitude"):
        return plot_sphere(ds, path, times)
    if dims == ("time", "s"):
        return plot_zonal(ds, path, times)
    msg = f"plot_result draws sphere or zonal results; density has dims {dims}"
    raise ValueError(msg)


__all__ = ["pick_times", "plot_result", "plot_sphere", "plot_zonal"]
