"""Hooks called by the solver: progress bars, early stops.

.. autosummary::
   Tracker
   ProgressTracker
   SteadyStateTracker
   FinishedSimulation

A tracker has ``initialize(t0, t_end)``, ``handle(t, c, domain)`` (after each accepted step)
and ``finalize(info)``. Raising :class:`FinishedSimulation` from ``handle`` ends the solve
early and successfully (the stop reason says so).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class FinishedSimulation(StopIteration):
    """Raised by a tracker to end a solve early (not an error)."""


class Tracker(Protocol):
    def initialize(self, t0: float, t_end: float) -> None: ...

    def handle(self, t: float, c: np.ndarray, domain: Any) -> None: ...

    def finalize(self, info: dict[str, Any]) -> None: ...


class ProgressTracker:
    """A tqdm progress bar over simulated time (on in the CLI, off in library calls)."""

    def __init__(self, desc: str = "solve", leave: bool = True) -> None:
        self.desc = desc
        self.leave = leave
        self._bar = None
        self._t = 0.0

    def initialize(self, t0: float, t_end: float) -> None:
        from tqdm.auto import tqdm

        self._t = t0
        self._bar = tqdm(total=float(t_end - t0), desc=self.desc, unit="t", leave=self.leave,
                         bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g} [{elapsed}<{remaining}]")

    def handle(self, t: float, c: np.ndarray, domain: Any) -> None:
        if self._bar is not None:
            self._bar.update(t - self._t)
            self._bar.set_postfix(N=domain.resolution, refresh=False)
        self._t = t

    def finalize(self, info: dict[str, Any]) -> None:
        if self._bar is not None:
            self._bar.close()


class SteadyStateTracker:
    """Stops the solve once ``max|c(t) - c(t_prev)| / (t - t_prev) < rate_tol`` (relative)."""

    def __init__(self, rate_tol: float = 1e-10) -> None:
        self.rate_tol = rate_tol
        self._prev: tuple[float, np.ndarray] | None = None

    def initialize(self, t0: float, t_end: float) -> None:
        self._prev = None

    def handle(self, t: float, c: np.ndarray, domain: Any) -> None:
        if self._prev is not None and self._prev[1].shape == c.shape and t > self._prev[0]:
            rate = np.max(np.abs(c - self._prev[1])) / (t - self._prev[0]) / np.max(np.abs(c))
            if rate < self.rate_tol:
                msg = f"steady state reached at t = {t:.6g} (relative rate {rate:.2e})"
                raise FinishedSimulation(msg)
        self._prev = (t, c.copy())

    def finalize(self, info: dict[str, Any]) -> None:
        pass


__all__ = ["FinishedSimulation", "ProgressTracker", "SteadyStateTracker", "Tracker"]
