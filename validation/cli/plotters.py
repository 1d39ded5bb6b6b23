"""Drawers of the ``validation`` package's files for ``meanfield plot`` (entry-point group
``meanfield.plotters``): phase diagrams (``probability`` over ``(beta, time)``), metastability
studies (``clusters`` over ``(beta, seed, time)``), the token studies of ``meanfield tokens``
(``tokens.nc``: per-layer statistics; ``dynamics.nc``: real layers against the dynamics) and
the data of a validation check (``data.nc`` of ``meanfield validate``, marked by its
``check`` attribute: its variables, one panel each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _kind(ds: Any) -> str | None:
    names = set(ds.data_vars)
    if "n_tokens" in names:  # before "clusters": a token study has a clusters variable too
        return "tokens"
    if "toy_beta" in names:
        return "dynamics"
    if "probability" in names:
        return "phase"
    if "clusters" in names:
        return "metastability"
    if "check" in ds.attrs:
        return "check"
    return None


def accepts(ds: Any) -> bool:
    """Whether ``ds`` is one of the files this package writes (see the module docstring)."""
    return _kind(ds) is not None


def draw(ds: Any, out: Path, at: list[float] | None = None) -> None:
    """Draw ``ds`` to the PNG ``out``."""
    kind = _kind(ds)
    if kind in ("tokens", "dynamics"):
        import matplotlib.pyplot as plt

        from meanfield.io import save_png
        from validation import tokens as study

        fig = study.plot_summary(ds) if kind == "tokens" else study.plot_dynamics(ds, 0)
        try:
            save_png(fig, out, tight=True)
        finally:
            plt.close(fig)
        return
    if kind == "check":
        from meanfield.plots.dataset import plot_dataset

        plot_dataset(ds, out)
        return
    from validation.plots_phase import plot_cluster_counts, plot_phase_diagram

    if kind == "phase":
        plot_phase_diagram(ds, out)
    else:
        plot_cluster_counts(ds, out)


__all__ = ["accepts", "draw"]
