"""The one convention of the project's plot functions.

.. autosummary::
   new_figure
   subplots
   finish

Every plot function builds a :class:`matplotlib.figure.Figure` directly (no ``pyplot``: no
global state, no backend switched on import, nothing to close), draws into it, writes it to
``path`` when one is given (atomically, :func:`meanfield.io.save_png`), and returns it, so
that a notebook shows it and a script may save it again.
"""

from __future__ import annotations

import os
from typing import Any

from .io import save_png


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


def finish(fig: Any, path: str | os.PathLike[str] | None, *, dpi: int = 120) -> Any:
    """Write ``fig`` to ``path`` as PNG when ``path`` is given; return ``fig``."""
    if path is not None:
        save_png(fig, path, dpi=dpi)
    return fig


__all__ = ["finish", "new_figure", "subplots"]
