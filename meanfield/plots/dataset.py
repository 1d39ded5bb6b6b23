"""A figure of any Dataset, for ``meanfield plot`` files that have no figure of their own.

.. autosummary::
   plot_dataset
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from meanfield.plots.figures import finish, new_figure


def plot_dataset(ds: xr.Dataset, path: str | Path | None = None, *, limit: int = 6) -> Any:
    """Any Dataset: its first ``limit`` numeric variables of one or two dimensions, a line
    against the first dimension or an image, one panel each, titled with the file's title.
    For the files of this tool that have no figure of their own (a check's ``data.nc``)."""
    names = [str(k) for k, v in ds.data_vars.items()
             if v.ndim in (1, 2) and np.issubdtype(v.dtype, np.number) and v.size > 0][:limit]
    if not names:
        msg = "nothing to draw: no numeric variable of one or two dimensions"
        raise ValueError(msg)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig = new_figure(figsize=(4.2 * cols, 3.3 * rows))
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, name in zip(axes, names):
        v = ds[name]
        dim0 = v.dims[0]
        x = ds[dim0].values if dim0 in ds.coords else np.arange(v.shape[0])
        if v.ndim == 1:
            ax.plot(x, v.values, ".-")
            ax.set_xlabel(str(dim0))
            ax.set_ylabel(name)
        else:
            mesh = ax.pcolormesh(np.asarray(v.values, dtype=float).T, shading="nearest")
            fig.colorbar(mesh, ax=ax, label=name)
            ax.set_xlabel(f"{dim0} (index)")
            ax.set_ylabel(f"{v.dims[1]} (index)")
        ax.set_title(name, fontsize=9)
    for ax in axes[len(names):]:
        ax.set_axis_off()
    fig.suptitle(str(ds.attrs.get("title", "")) or "dataset", fontsize=10)
    return finish(fig, path)


__all__ = ["plot_dataset"]
