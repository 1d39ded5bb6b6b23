"""Hooks called by the integration loop, on schedules of their own.

.. autosummary::
   Tracker
   Interrupts
   ProgressTracker
   FinishedSimulation

A tracker has ``initialize(t0, t_end)``, ``handle(t, y, context)`` and ``finalize(info)``,
and an ``interrupts`` value that says when ``handle`` runs (as py-pde's trackers do):
``"step"`` (after every accepted step), ``"output"`` (at the output times), or a number
``dt`` (every ``dt`` of simulated time, at the first accepted step at or past each multiple).
Raising :class:`FinishedSimulation` from ``handle`` ends the integration early and
successfully (the stop reason says so).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Protocol, Union

import numpy as np

Interrupts = Union[str, float]
"""``"step"``, ``"output"`` or an interval ``dt > 0`` of simulated time."""


class FinishedSimulation(StopIteration):
    """Raised by a tracker to end an integration early (not an error)."""


class Tracker(Protocol):
    interrupts: Interrupts

    def initialize(self, t0: float, t_end: float) -> None: ...

    def handle(self, t: float, y: np.ndarray, context: Any) -> None: ...

    def finalize(self, info: dict[str, Any]) -> None: ...


class TrackerBase:
    """A tracker that does nothing, every step: subclass it and override what you need."""

    interrupts: Interrupts = "step"

    def initialize(self, t0: float, t_end: float) -> None:
        pass

    def handle(self, t: float, y: np.ndarray, context: Any) -> None:
        pass

    def finalize(self, info: dict[str, Any]) -> None:
        pass


def fire_times(tracker: Tracker, times: np.ndarray) -> Callable[[float], bool]:
    """The schedule of ``tracker``: a function of the time of an accepted step that says
    whether ``handle`` runs then."""
    every = tracker.interrupts
    if every == "step":
        return lambda t: True
    if every == "output":
        marks = iter(np.asarray(times, dtype=float)[1:])
    else:
        interval = float(every)
        if not (math.isfinite(interval) and interval > 0):
            msg = f"interrupts must be 'step', 'output' or a number > 0, got {every!r}"
            raise ValueError(msg)
        t0 = float(times[0])
        marks = (t0 + interval * k for k in range(1, 1 + math.ceil((times[-1] - t0) / interval)))
    nxt = [next(marks, math.inf)]

    def fire(t: float) -> bool:
        if t < nxt[0] * (1 - 1e-12):
            return False
        while nxt[0] <= t * (1 + 1e-12):
            nxt[0] = next(marks, math.inf)
        return True

    return fire


class ProgressTracker(TrackerBase):
    """A tqdm progress bar over simulated time (on in the CLI, off in library calls)."""

    interrupts: Interrupts = "step"

    def __init__(self, desc: str = "solve", leave: bool = True,
                 postfix: Callable[[Any], dict] | None = None) -> None:
        self.desc = desc
        self.leave = leave
        self.postfix = postfix
        self._bar: Any = None
        self._t = 0.0

    def initialize(self, t0: float, t_end: float) -> None:
        from tqdm.auto import tqdm

        self._t = t0
        self._bar = tqdm(total=float(t_end - t0), desc=self.desc, unit="t", leave=self.leave,
                         bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g} [{elapsed}<{remaining}]")

    def handle(self, t: float, y: np.ndarray, context: Any) -> None:
        if self._bar is not None:
            self._bar.update(t - self._t)
            if self.postfix is not None:
                self._bar.set_postfix(self.postfix(context), refresh=False)
        self._t = t

    def finalize(self, info: dict[str, Any]) -> None:
        if self._bar is not None:
            self._bar.close()


__all__ = ["FinishedSimulation", "Interrupts", "ProgressTracker", "Tracker",
           "TrackerBase", "fire_times"]
