"""Step-size control: tolerances live here and nowhere else.

.. autosummary::
   PIController
   ConstantStep
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


def rms_norm(x: np.ndarray) -> float:
    """Root mean square of ``|x|``, scaled first so that huge entries do not overflow."""
    a = np.abs(x)
    top = float(np.max(a)) if a.size else 0.0
    if top == 0.0 or not np.isfinite(top):
        return top
    return top * float(np.sqrt(np.mean((a / top) ** 2)))


@dataclass(frozen=True)
class PIController:
    """Proportional–integral step-size control (Gustafsson 1991; Hairer & Wanner II, IV.2).

    The scaled error is ``||err / (atol + rtol max(|y0|, |y1|))||_rms``; a step is accepted
    when it is ``<= 1``. The next step is
    ``dt * safety * e_n^{-0.7/k} * e_{n-1}^{0.4/k}`` with ``k = error_order + 1``,
    clipped to ``[factormin, factormax] * dt`` and ``[dtmin, dtmax]``.

    ``rtol`` and ``atol`` have no defaults: say what accuracy you need.
    """

    rtol: float
    atol: float
    safety: float = 0.9
    factormin: float = 0.2
    factormax: float = 10.0
    dtmin: float | None = None
    dtmax: float | None = None
    pcoeff: float = 0.7
    icoeff: float = 0.4

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                msg = f"{name} must be a finite number >= 0, got {v!r}"
                raise ValueError(msg)
        if self.rtol == 0 and self.atol == 0:
            msg = "rtol and atol cannot both be 0"
            raise ValueError(msg)
        if not 0 < self.safety <= 1:
            msg = f"safety must be in (0, 1], got {self.safety!r}"
            raise ValueError(msg)

    adaptive = True

    def error_norm(self, err: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> float:
        scale = self.atol + self.rtol * np.maximum(np.abs(y0), np.abs(y1))
        return rms_norm(err / scale)

    def init(self) -> dict[str, Any]:
        return {"prev_error": 1.0}

    def adapt(self, error: float, dt: float, order: int, state: dict[str, Any]) -> tuple[bool, float]:
        """``(accept, dt_next)`` for a step of size ``dt`` with scaled error ``error``."""
        k = order + 1
        accept = error <= 1.0
        if error == 0.0:
            factor = self.factormax
        elif accept:
            factor = self.safety * error ** (-self.pcoeff / k) * state["prev_error"] ** (self.icoeff / k)
        else:
            factor = self.safety * error ** (-1.0 / k)
        factor = min(self.factormax, max(self.factormin, factor))
        if accept:
            state["prev_error"] = max(error, 1e-4)
        dt_next = dt * factor
        if self.dtmax is not None:
            dt_next = min(dt_next, self.dtmax)
        if self.dtmin is not None:
            dt_next = max(dt_next, self.dtmin)
        return accept, dt_next


@dataclass(frozen=True)
class ConstantStep:
    """A fixed step ``dt`` (for schemes without an error estimate, or convergence studies)."""

    dt: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.dt) and self.dt > 0):
            msg = f"dt must be finite and > 0, got {self.dt!r}"
            raise ValueError(msg)

    adaptive = False
    rtol = None
    atol = None

    def init(self) -> dict[str, Any]:
        return {}

    def adapt(self, error: float, dt: float, order: int, state: dict[str, Any]) -> tuple[bool, float]:
        return True, self.dt


__all__ = ["ConstantStep", "PIController", "rms_norm"]
