"""Step-size control: tolerances live here and nowhere else.

.. autosummary::
   PIController
   ConstantStep
   ErrorPair
   rms_norm

A controller is a frozen value with two methods: ``init(y0, f0, span, order) -> (dt0,
state)`` picks the first step, and ``adapt(error, dt, order, state) -> (accept, dt_next,
state)`` is pure: it returns a new state and mutates nothing. The state is a float (the last
accepted error, for the integral term), so a controller can be shared between solves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from meanfield import backend as bk


def rms_norm(x: np.ndarray) -> float:
    """Root mean square of ``|x|``, scaled first so that huge entries do not overflow (NumPy
    or torch)."""
    xp = bk.namespace(x)
    a = xp.abs(x)
    top = float(xp.max(a)) if math.prod(a.shape) else 0.0
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * math.sqrt(float(xp.mean((a / top) ** 2)))


class ErrorPair(NamedTuple):
    """The two error estimates of one step of a scheme that has them (DOP853: ``error`` of
    5th order, ``low`` of 3rd; :attr:`meanfield.integrate.ButcherTableau.b_error_low`)."""

    error: np.ndarray
    low: np.ndarray


@dataclass(frozen=True)
class PIController:
    """Proportional–integral step-size control (Gustafsson 1991; Hairer & Wanner II, IV.2).

    The scaled error is ``||err / (atol + rtol max(|y0|, |y1|))||_rms``; a step is accepted
    when it is ``<= 1``. The next step is
    ``dt * safety * e_n^{-0.7/k} * e_{n-1}^{0.4/k}`` with ``k = error_order + 1``,
    clipped to ``[factormin, factormax] * dt`` and ``[dtmin, dtmax]``.

    ``rtol`` and ``atol`` have no defaults: say what accuracy you need. With
    ``atol_relative=True`` the absolute tolerance is ``atol * max(1, max|y0|)``, read from the
    state at each step: for states whose components grow by orders of magnitude (the spectral
    coefficients of a contracting cluster reach ``1e7``–``1e14`` times their start), so that the
    round-off of the small components, ``~1e-14 max|y|``, never sets the step.
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
    atol_relative: bool = False

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

    def _atol(self, y0: np.ndarray) -> float:
        if not self.atol_relative:
            return self.atol
        xp = bk.namespace(y0)
        return self.atol * max(1.0, float(xp.max(xp.abs(y0))) if math.prod(y0.shape) else 1.0)

    def error_norm(self, err: np.ndarray | ErrorPair, y0: np.ndarray, y1: np.ndarray) -> float:
        """The scaled error ``||err / scale||_rms``. For an :class:`ErrorPair` ``(e, e_low)``
        Hairer's DOP853 combination ``E^2 / sqrt(E^2 + 0.01 E_low^2)`` of their scaled norms
        ``E``, ``E_low`` (Hairer, Norsett & Wanner I, II.10; scipy's
        ``DOP853._estimate_error_norm``): of the order of the 5th-order estimate where the
        3rd-order one is not much larger, and of higher order where it is."""
        xp = bk.namespace(y0)
        scale = self._atol(y0) + self.rtol * xp.maximum(xp.abs(y0), xp.abs(y1))
        if not isinstance(err, ErrorPair):
            return rms_norm(err / scale)
        high, low = rms_norm(err.error / scale), rms_norm(err.low / scale)
        if high == 0.0 and low == 0.0:
            return 0.0
        if not (math.isfinite(high) and math.isfinite(low)):
            return math.inf
        return high * (high / math.hypot(high, 0.1 * low))

    def init(self, y0: np.ndarray, f0: np.ndarray, span: float, order: int) -> tuple[float, float]:
        """First step and state: Hairer, Nørsett & Wanner I (II.4)'s guess
        ``0.01 ||y0|| / ||f0||`` in the scaled norm (``1e-6 span`` when either is tiny),
        clipped to ``[dtmin, dtmax]``."""
        scale = self._atol(y0) + self.rtol * bk.namespace(y0).abs(y0)
        d0 = rms_norm(y0 / scale)
        d1 = rms_norm(f0 / scale)
        if d0 < 1e-5 or d1 < 1e-5 or not math.isfinite(d1):
            dt = 1e-6 * max(span, 1.0)
        else:
            dt = 0.01 * d0 / d1
        return self._clip(dt), 1.0

    def _clip(self, dt: float) -> float:
        if self.dtmax is not None:
            dt = min(dt, self.dtmax)
        if self.dtmin is not None:
            dt = max(dt, self.dtmin)
        return dt

    def adapt(self, error: float, dt: float, order: int, state: float) -> tuple[bool, float, float]:
        """``(accept, dt_next, state)`` for a step of size ``dt`` with scaled error ``error``
        (``order``: the order of the error estimate). Pure."""
        k = order + 1
        if not math.isfinite(error):
            return False, self._clip(dt * self.factormin), state
        accept = error <= 1.0
        if error == 0.0:
            factor = self.factormax
        elif accept:
            factor = self.safety * error ** (-self.pcoeff / k) * state ** (self.icoeff / k)
        else:
            factor = self.safety * error ** (-1.0 / k)
        factor = min(self.factormax, max(self.factormin, factor))
        return accept, self._clip(dt * factor), (max(error, 1e-4) if accept else state)


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

    def init(self, y0: np.ndarray, f0: np.ndarray, span: float, order: int) -> tuple[float, float]:
        return self.dt, 1.0

    def adapt(self, error: float, dt: float, order: int, state: float) -> tuple[bool, float, float]:
        return True, self.dt, state


__all__ = ["ConstantStep", "ErrorPair", "PIController", "rms_norm"]
