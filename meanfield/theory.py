r"""Closed forms and exact reductions the project tests against (docs/equations.md sections
3 and 4), in one place.

.. autosummary::
   growth_rate
   gamma
   gamma_rhs
   transition_time

* :func:`growth_rate`: the rate ``gamma_l`` of a perturbation ``eps Y_l`` of the uniform
  density on ``S^{d-1}`` (linear stability, section 3), for SA and USA, with sign and noise.
* :func:`gamma`, :func:`transition_time`: the common inner product ``gamma_beta(t)`` of ``n``
  orthogonal starts (Theorem 6.8, ODE (6.9) for SA, (6.10) for USA) and the time at which it
  reaches ``1 - delta`` (the phase-transition curve (6.12)).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special
from scipy.integrate import solve_ivp


def growth_rate(d: int, attention: str, beta: float, l: int | np.ndarray, sign: float = 1.0,
                noise: float = 0.0) -> float | np.ndarray:
    """``gamma_l`` of the uniform state on ``S^{d-1}`` (docs/equations.md section 3):

    USA ``l(l+d-2) Gamma(d/2) (2/beta)^{d/2-1} I_{l+d/2-1}(beta) / beta``;
    SA ``l(l+d-2) I_{l+d/2-1}(beta) / (beta I_{d/2-1}(beta))``; times ``sign``, minus
    ``noise l(l+d-2)``. Ratios of Bessel functions through ``ive`` (no overflow for SA; USA
    overflows only where ``e^beta`` does). ``l`` may be an array.
    """
    ell = np.asarray(l, dtype=float)
    nu = ell + d / 2 - 1
    lap = ell * (ell + d - 2)
    if beta == 0:  # the limit (I_nu(b) ~ (b/2)^nu / Gamma(nu + 1)): only l = 1 moves
        out = sign * np.where(ell == 1, (d - 1) / d, 0.0) - noise * lap
    else:
        if attention == "softmax":
            ratio = special.ive(nu, beta) / special.ive(d / 2 - 1, beta)
        else:
            ratio = math.gamma(d / 2) * (2 / beta) ** (d / 2 - 1) * special.iv(nu, beta)
        out = sign * lap * ratio / beta - noise * lap
    return float(out) if np.ndim(l) == 0 else out


def gamma_rhs(beta: float, n: int, attention: str) -> Callable[[float, np.ndarray], np.ndarray]:
    """The right-hand side of (6.9) (SA) or (6.10) (USA), written without overflow."""
    if attention == "softmax":  # (6.9), divided through by e^beta
        def rhs(t: float, g: np.ndarray) -> np.ndarray:
            e = np.exp(beta * (g - 1.0))
            return 2.0 * e * (1.0 - g) * ((n - 1) * g + 1.0) / (1.0 + (n - 1) * e)
    else:  # (6.10)
        def rhs(t: float, g: np.ndarray) -> np.ndarray:
            return (2.0 / n) * np.exp(beta * g) * (1.0 - g) * ((n - 1) * g + 1.0)
    return rhs


def gamma(beta: float, n: int, times: ArrayLike, attention: str = "softmax") -> np.ndarray:
    """``gamma_beta(t)``: the common inner product of ``n`` orthogonal starts (Theorem 6.8),
    ``gamma(0) = 0``; ``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-11), dense output."""
    t = np.asarray(times, dtype=float)
    if t.size == 0:
        return np.zeros(0)
    if t.max() <= 0:
        return np.zeros_like(t)
    sol = solve_ivp(gamma_rhs(float(beta), int(n), attention), (0.0, float(t.max())), [0.0],
                    method="DOP853", dense_output=True, rtol=1e-11, atol=1e-14)
    return np.clip(sol.sol(t)[0], 0.0, 1.0)


def transition_time(beta: float, n: int, delta: float, attention: str = "softmax",
                    t_max: float = 1e6) -> float:
    """The time at which ``gamma_beta`` reaches ``1 - delta``: the curve (6.12) at ``beta``;
    ``inf`` if not before ``t_max``."""
    rhs = gamma_rhs(float(beta), int(n), attention)

    def hit(t: float, g: np.ndarray) -> float:
        return g[0] - (1.0 - delta)

    hit.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(rhs, (0.0, t_max), [0.0], method="DOP853", events=hit, rtol=1e-11,
                    atol=1e-14)
    return float(sol.t_events[0][0]) if sol.t_events[0].size else math.inf


__all__ = ["gamma", "gamma_rhs", "growth_rate", "transition_time"]
