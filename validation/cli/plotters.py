"""Drawers of the ``validation`` package's files for ``meanfield plot`` (entry-point group
``meanfield.plotters``): phase diagrams (``probability`` over ``(beta, time)``) and
metastability studies (``clusters`` over ``(beta, seed, time)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def accepts(ds: Any) -> bool:
    """Whether ``ds`` is a phase diagram or a metastability study."""
    return "probability" in ds.data_vars or "clusters" in ds.data_vars


def draw(ds: Any, out: Path, at: list[float] | None = None) -> None:
    """Draw ``ds`` to the PNG ``out``: the heat map, or the cluster counts and dwell times."""
    from validation.plots_phase import plot_cluster_counts, plot_phase_diagram

    if "probability" in ds.data_vars:
        plot_phase_diagram(ds, out)
    else:
        plot_cluster_counts(ds, out)


__all__ = ["accepts", "draw"]
