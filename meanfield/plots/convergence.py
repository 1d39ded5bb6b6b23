"""Figures of self-convergence studies (:func:`meanfield.spectral.convergence.self_convergence`).

.. autosummary::
   plot_convergence
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from meanfield.integrate.schema import setting_of
from meanfield.plots.figures import finish, new_figure


def _positive(values: np.ndarray) -> np.ndarray:
    """Values for a log axis: non-positive and non-finite ones as NaN (gaps)."""
    v = np.asarray(values, dtype=float).copy()
    v[~(np.isfinite(v) & (v > 0))] = np.nan
    return v


def plot_convergence(ds: xr.Dataset, path: str | Path | None = None) -> Any:
    """Left: the L² difference of each resolution to the next, against the resolution (one
    line per output time after the start, log scale); right: the same for the tolerance
    study against ``rtol`` (log–log), with the slope-1 reference. A study that could compare
    nothing says so on the figure (:func:`meanfield.spectral.convergence.diagnose`)."""
    from meanfield.spectral.convergence import diagnose

    fig = new_figure(figsize=(10, 4.2))
    ax_r, ax_q = fig.subplots(1, 2)
    times = ds["time"].values
    res = ds["resolution"].values
    colours = [f"C{k % 10}" for k in range(times.size)]
    for i in range(1, times.size) if times.size > 1 else range(times.size):
        d = _positive(ds["difference_resolution"].values[:, i])
        if np.any(np.isfinite(d)):
            ax_r.semilogy(res, d, "o-", color=colours[i], label=f"t = {times[i]:.3g}")
    ax_r.set_xscale("log", base=2)
    ax_r.set_xticks(res, [str(int(r)) for r in res])
    ax_r.set_xlabel("resolution R (compared with 2R)")
    ax_r.set_ylabel(r"$\|u_R - u_{2R}\|_{L^2}$")
    ax_r.set_title("resolution study")
    if ds.sizes.get("tolerance", 0):
        tol = ds["tolerance"].values
        for i in range(1, times.size) if times.size > 1 else range(times.size):
            d = _positive(ds["difference_tolerance"].values[:, i])
            if np.any(np.isfinite(d)):
                ax_q.loglog(tol, d, "s-", color=colours[i], label=f"t = {times[i]:.3g}")
        ref = _positive(ds["difference_tolerance"].values[:, -1])
        k = np.flatnonzero(np.isfinite(ref))
        if k.size:
            ax_q.loglog(tol, ref[k[0]] * tol / tol[k[0]], "k--", lw=0.8, label="slope 1")
        ax_q.set_xlabel("rtol (compared with the next, tighter one)")
        ax_q.set_ylabel("L² difference")
        ax_q.set_title(f"tolerance study at resolution {setting_of(ds, 'tolerance_resolution', '?')}")
    else:
        ax_q.set_axis_off()
        ax_q.text(0.5, 0.5, "no tolerance study", ha="center", va="center",
                  transform=ax_q.transAxes)
    for ax in (ax_r, ax_q):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    problem = diagnose(ds)
    if problem:
        ax_r.text(0.02, 0.02, "\n".join(_wrap(problem, 60)[:6]), transform=ax_r.transAxes,
                  fontsize=7, va="bottom", color="C3")
    model = json.loads(ds.attrs.get("model", "{}"))
    dom = json.loads(ds.attrs.get("domain", "{}"))
    where = " ".join([str(dom.get("name", "?"))] + [f"{k} = {v}" for k, v in dom.items()
                                                    if k not in ("name", "threads", "nthreads")])
    fig.suptitle(f"self-convergence: {model.get('attention', '?')} attention, "
                 f"beta = {model.get('beta', '?')}, {where}", fontsize=10)
    return finish(fig, path)


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


__all__ = ["plot_convergence"]
