"""Helpers of the project's tests (imported as ``testkit``: pytest puts this folder on the path).

.. autosummary::
   assert_same_result
   figure_defects
   assert_figure_readable
   checked_figures
   interrupt_command
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import xarray as xr

RUN_SPECIFIC = ("wall_time_s", "created")
"""Result attrs that differ between two runs of the same computation."""


def assert_same_result(a: xr.Dataset, b: xr.Dataset) -> None:
    """``a`` and ``b`` are the same computation: identical data, coordinates and attrs, except
    the run-specific attrs (:data:`RUN_SPECIFIC`)."""
    a2, b2 = a.copy(), b.copy()
    a2.attrs, b2.attrs = ({k: v for k, v in ds.attrs.items() if k not in RUN_SPECIFIC}
                          for ds in (a, b))
    xr.testing.assert_identical(a2, b2)


MIN_TICK_FONT_PT = 7.0
"""Smallest tick-label font size a figure of the report can be read at (points): 6 pt labels
(the growth-rate figure of issue 21) were found too small on a 110-dpi PNG."""

OVERLAP_PX = 0.5
"""Two tick labels (or a legend and a data point) overlap when their boxes share more than
this many pixels in both directions: boxes that merely touch (shared edge, round-off of the
layout) are not a defect."""


def _renderer(fig: Any) -> Any:
    """Draw ``fig`` (on an Agg canvas if it has no drawing canvas) and return its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _exempt(ax: Any) -> str:
    """Why ``ax`` needs no x/y labels ("" when it does).

    * axis switched off (``ax.axis("off")``: a map, a 3-d sphere drawn as a picture): it has no
      ticks, so there is no scale to name;
    * a colorbar: its one scale is named by the colorbar's label, checked separately;
    * polar axes: the angle and the radius are named by the title of the figure's panel (the
      angular ticks carry their units, degrees or pi);
    * an axes without data (no lines, collections, images, patches): a legend holder or an
      empty spare panel.
    """
    if not ax.axison:
        return "axis off"
    if hasattr(ax, "_colorbar"):
        return "colorbar"
    if ax.name in ("polar", "3d"):
        return ax.name
    if not (ax.lines or ax.collections or ax.images or ax.patches):
        return "no data"
    return ""


def _named(ax: Any, which: str) -> bool:
    """``ax``'s x or y axis has a label, or shares its scale with an axes that has one (a row of
    panels with one y label, a column with one x label: the label names the shared scale)."""
    get = (lambda a: a.get_xlabel()) if which == "x" else (lambda a: a.get_ylabel())
    group = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    return any(get(a).strip() for a in group.get_siblings(ax))


def _tick_labels(axis: Any) -> list[Any]:
    """The visible, non-empty tick labels of ``axis`` that are drawn (ticks inside the view)."""
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) or 1.0
    out: list[Any] = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        loc = tick.get_loc()
        if loc is None or not lo - 1e-9 * span <= loc <= hi + 1e-9 * span:
            continue
        out.extend(t for t in (tick.label1, tick.label2)
                   if t.get_visible() and t.get_text().strip())
    return out


def _overlap(a: Any, b: Any) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > OVERLAP_PX and h > OVERLAP_PX


def _legend_covers(ax: Any, box: Any) -> int:
    """How many data points (markers of lines, scatter points) of ``ax`` lie under ``box``."""
    count = 0
    for line in ax.lines:
        if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
            continue
        xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        count += _inside(xy, box)
    from matplotlib.collections import PathCollection

    for coll in ax.collections:
        if not (isinstance(coll, PathCollection) and coll.get_visible()):
            continue
        offsets = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
        count += _inside(coll.get_offset_transform().transform(offsets), box)
    return count


def _inside(xy: np.ndarray, box: Any) -> int:
    """How many of the display points ``xy`` lie strictly inside ``box``."""
    return int(np.sum((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1)
                      & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)))


def _titles(fig: Any) -> list[Any]:
    """The figure's title texts: its suptitle and every axes' titles (left, centre, right)."""
    out = [t for t in (getattr(fig, "_suptitle", None),) if t is not None]
    for ax in fig.axes:
        out.extend(t for t in (ax.title, ax._left_title, ax._right_title))
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def figure_defects(fig: Any) -> list[str]:
    """What makes ``fig`` (a matplotlib Figure) unreadable in print; ``[]`` when nothing.

    Drawn with its own layout, each axes is checked for

    * tick labels that overlap one another on the same axis (their window extents, major and
      minor labels together: "3x10^1" printed over "4x10^1");
    * tick labels smaller than :data:`MIN_TICK_FONT_PT`;
    * an x or y axis without a label (:func:`_named`), unless the axes is exempt
      (:func:`_exempt`: axis off, colorbar, polar or 3-d, no data); a colorbar without a label;
    * a legend drawn over data points (markers of lines, scatter points);
    * two titles (the suptitle, the axes' titles) printed over each other.
    """
    renderer = _renderer(fig)
    titles = _titles(fig)
    out = [f"titles {titles[i].get_text()!r} and {titles[j].get_text()!r} overlap"
           for i, j in _overlapping(titles, renderer)]
    for k, ax in enumerate(fig.axes):
        where = f"axes {k} ({ax.get_title() or ax.get_label() or 'untitled'!r})"
        out.extend(_axes_defects(ax, where, renderer))
    return out


def _overlapping(texts: list[Any], renderer: Any) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, of ``texts`` whose window extents overlap."""
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if _overlap(boxes[i], boxes[j])]


def _tick_defects(axis: Any, name: str, where: str, renderer: Any) -> list[str]:
    """Overlapping and too small tick labels of ``axis`` (``name``: "x" or "y")."""
    labels = _tick_labels(axis)
    out = [f"{where}: {name} tick labels {labels[i].get_text()!r} and "
           f"{labels[j].get_text()!r} overlap" for i, j in _overlapping(labels, renderer)]
    small = sorted({t.get_fontsize() for t in labels if t.get_fontsize() < MIN_TICK_FONT_PT})
    if small:
        out.append(f"{where}: {name} tick labels of {small[0]:g} pt "
                   f"(< {MIN_TICK_FONT_PT:g} pt)")
    return out


def _axes_defects(ax: Any, where: str, renderer: Any) -> list[str]:
    """The defects of one axes (see :func:`figure_defects`), each message starting with
    ``where``: an unlabelled colorbar, then (if the axis is drawn) tick labels, axis labels and
    a legend over data."""
    out: list[str] = []
    if hasattr(ax, "_colorbar"):
        cb = ax._colorbar
        if not (cb.ax.get_ylabel() or cb.ax.get_xlabel()).strip():
            out.append(f"{where}: colorbar without a label")
    if not ax.axison:
        return out
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        out.extend(_tick_defects(axis, name, where, renderer))
    if not _exempt(ax):
        out.extend(f"{where}: no {name} label" for name in "xy" if not _named(ax, name))
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        covered = _legend_covers(ax, legend.get_window_extent(renderer))
        if covered:
            out.append(f"{where}: the legend covers {covered} data point(s)")
    return out

def assert_figure_readable(fig: Any) -> None:
    """Raise ``AssertionError`` listing :func:`figure_defects` of ``fig`` when there are any."""
    defects = figure_defects(fig)
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    assert not defects, f"figure {title!r}: " + "; ".join(defects)


@contextmanager
def checked_figures() -> Iterator[list[str]]:
    """Within the block, every figure written through :func:`meanfield.files.save_png` (where
    every figure of the package is written: :func:`meanfield.plots.figures.finish`, the validation
    checks, the CLI) is first checked by :func:`assert_figure_readable` (a check of
    :data:`meanfield.files.FIGURE_CHECKS`, removed on exit); yields the list of the paths
    written."""
    from meanfield.files import FIGURE_CHECKS

    written: list[str] = []

    def check(fig: Any, path: Any) -> None:
        assert_figure_readable(fig)
        written.append(str(path))

    FIGURE_CHECKS.append(check)
    try:
        yield written
    finally:
        FIGURE_CHECKS.remove(check)


def interrupt_command(argv: list[str], wait_for: bytes | re.Pattern[bytes], *, after_s: float = 0.0,
                      timeout: float = 120.0) -> tuple[int, str]:
    """Ctrl-C as a terminal sends it: run ``meanfield ARGV`` in a child process whose SIGINT
    handler is Python's default (asserted in the child: a background job of a non-interactive
    shell inherits SIG_IGN, and a test that signals such a process proves nothing), send SIGINT
    ``after_s`` seconds after ``wait_for`` (bytes, or a compiled pattern) appears on its
    stderr (the child prints ``started`` there after its imports); return its exit code and
    its whole stderr. Fails (``AssertionError``) if the child ends or ``timeout`` passes
    first."""
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path

    import meanfield

    child = ("import signal, sys\n"
             "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
             "from meanfield.cli import main\n"
             "print('started', file=sys.stderr, flush=True)\n"
             f"sys.exit(main({argv!r}))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(meanfield.__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", child], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    found = wait_for.search if isinstance(wait_for, re.Pattern) else (lambda b: wait_for in b)
    seen, deadline = b"", time.monotonic() + timeout
    while not found(seen):
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk or time.monotonic() > deadline:
            proc.kill()
            msg = f"the child ended or timed out before {wait_for!r}: {seen[-500:]!r}"
            raise AssertionError(msg)
        seen += chunk
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, (seen + stderr).decode()

__all__ = ["MIN_TICK_FONT_PT", "RUN_SPECIFIC", "assert_figure_readable", "assert_same_result",
           "checked_figures", "figure_defects", "interrupt_command"]
