"""Fitted laws: the one power-law fit of the project (convergence rates are judged by fitted
slopes with confidence intervals, never by single numbers).

.. autosummary::
   fit_power_law
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def fit_power_law(n: np.ndarray, d: np.ndarray, level: float = 0.99) -> dict[str, float]:
    """Least-squares fit ``log d = a + s log n`` over all samples, with the ``level``
    confidence interval ``[lo, hi]`` of ``s`` (Student t, ``len - 2`` degrees of freedom).

    Each sample is one point: when ``n^{-s} d`` has an ``n``-independent law (e.g. ``sqrt(n)``
    times a sampling error) the residuals are i.i.d. and the ordinary-least-squares interval
    applies. Non-finite samples are dropped; at least 3 must remain.

    Returns:
        ``slope``, ``intercept``, ``stderr``, ``lo``, ``hi``, ``level``, ``samples``.
    """
    if not 0 < level < 1:
        msg = f"level must lie in (0, 1), got {level!r}"
        raise ValueError(msg)
    x = np.log(np.asarray(n, dtype=float)).ravel()
    y = np.log(np.asarray(d, dtype=float)).ravel()
    if x.shape != y.shape:
        msg = f"n and d must have the same number of samples, got {x.size} and {y.size}"
        raise ValueError(msg)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        msg = f"fit_power_law needs at least 3 finite samples, got {x.size}"
        raise ValueError(msg)
    res = stats.linregress(x, y)
    half = stats.t.ppf(0.5 + level / 2, x.size - 2) * res.stderr
    return {"slope": float(res.slope), "intercept": float(res.intercept),
            "stderr": float(res.stderr), "lo": float(res.slope - half),
            "hi": float(res.slope + half), "level": float(level), "samples": int(x.size)}


__all__ = ["fit_power_law"]
