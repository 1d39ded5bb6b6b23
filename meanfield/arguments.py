"""Input checks shared by the PDE solvers and the particle system.

.. autosummary::
   output_times
   count
   finite
   nonnegative_weights

Each raises ``ValueError`` with a message that names the argument and its value.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def output_times(t: Any, name: str = "t") -> np.ndarray:
    """``t`` as a non-empty, finite, strictly increasing 1-d float array (``t[0]``: start)."""
    try:
        times = np.atleast_1d(np.asarray(t, dtype=float))
    except (TypeError, ValueError):
        msg = f"{name} must be an array of output times, got {type(t).__name__}"
        raise ValueError(msg) from None
    if times.ndim != 1 or times.size < 1:
        msg = f"{name} must be a non-empty 1-d array of output times, got shape {times.shape}"
        raise ValueError(msg)
    finite(times, name)
    if np.any(np.diff(times) <= 0):
        msg = f"{name} must be strictly increasing ({name}[0] is the start time)"
        raise ValueError(msg)
    return times


def finite(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` itself when every entry is finite, else ``ValueError`` naming ``name`` and how
    many entries are NaN or inf."""
    ok = np.isfinite(a)
    if not np.all(ok):
        msg = f"{name} contains {int(np.size(ok) - np.count_nonzero(ok))} non-finite value(s) (NaN or inf)"
        raise ValueError(msg)
    return a


def count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (not a bool), else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        msg = f"{name} must be an integer, got {value!r}"
        raise ValueError(msg)
    if value < minimum:
        msg = f"{name} must be >= {minimum}, got {name}={value}"
        raise ValueError(msg)
    return int(value)


def nonnegative_weights(value: Any, shapes: tuple[tuple[int, ...], ...], name: str = "weights"
                        ) -> np.ndarray:
    """Quadrature weights as a float array of one of ``shapes``, finite and ``>= 0``, else
    ``ValueError`` naming ``name`` (the shape expected, the count of non-finite entries, the
    most negative entry)."""
    w = np.array(value, dtype=float)
    if w.shape not in shapes:
        want = " or ".join(str(s) for s in shapes)
        msg = f"{name} must have shape {want}, got {w.shape}"
        raise ValueError(msg)
    finite(w, name)
    if np.any(w < 0):
        msg = f"{name} must be >= 0, got min {float(w.min()):.3g}"
        raise ValueError(msg)
    return w


def read_only(a: Any) -> np.ndarray:
    """A float64 copy of ``a`` that cannot be written (the arrays of frozen node sets)."""
    out = np.array(a, dtype=float)
    out.setflags(write=False)
    return out


__all__ = ["count", "finite", "nonnegative_weights", "output_times", "read_only"]
