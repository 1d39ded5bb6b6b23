"""The one convention of the project's plot functions.

.. autosummary::
   new_figure
   subplots
   finish
   angle_axis
   plain_log_ticks

Every plot function builds a :class:`matplotlib.figure.Figure` directly (no ``pyplot``: no
global state, no backend switched on import, nothing to close), draws into it, writes it to
``path`` when one is given (atomically, :func:`meanfield.io.save_png`), and returns it, so
that a notebook shows it and a script may save it again.
"""

from __future__ import annotations

import os
from typing import Any

from meanfield.io import save_png


def new_figure(**kwargs: Any) -> Any:
    """A fresh ``Figure(**kwargs)`` (``layout="constrained"`` unless given)."""
    from matplotlib.figure import Figure

    kwargs.setdefault("layout", "constrained")
    return Figure(**kwargs)


def subplots(*args: Any, figsize: tuple[float, float] | None = None, **kwargs: Any
             ) -> tuple[Any, Any]:
    """``(fig, axes)`` like ``pyplot.subplots``, on a :func:`new_figure`."""
    fig = new_figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def angle_axis(axis: Any, label: str | None = None) -> None:
    """An angle axis in ``[0, 2 pi]`` (``ax.xaxis`` or ``ax.yaxis``): limits ``[0, 2 pi]`` and
    ticks at multiples of ``pi / 2`` labelled ``0, pi/2, pi, 3pi/2, 2pi``; ``label`` sets the
    axis label."""
    import numpy as np

    ticks = np.pi * np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    names = ["0", r"$\pi/2$", r"$\pi$", r"$3\pi/2$", r"$2\pi$"]
    if axis.axis_name == "x":
        axis.axes.set_xlim(0, 2 * np.pi)
    else:
        axis.axes.set_ylim(0, 2 * np.pi)
    axis.set_ticks(ticks, names)
    if label is not None:
        axis.set_label_text(label)


def plain_log_ticks(axis: Any, values: Any) -> None:
    """A log axis (``ax.xaxis`` or ``ax.yaxis``) whose data span less than a few decades: major
    ticks at ``values`` (the sizes measured, say) written plainly (``32``, ``64``), no minor
    labels. Matplotlib's default labels minor ticks of such an axis as ``3x10^1``,
    ``4x10^1``, ..., which collide."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    values = np.unique(np.asarray(values, dtype=float))
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def finish(fig: Any, path: str | os.PathLike[str] | None, *, dpi: int = 120) -> Any:
    """Write ``fig`` to ``path`` when ``path`` is given (in the format its extension names,
    :func:`meanfield.io.save_png`); return ``fig``."""
    if path is not None:
        save_png(fig, path, dpi=dpi)
    return fig


__all__ = ["angle_axis", "finish", "new_figure", "plain_log_ticks", "subplots"]
