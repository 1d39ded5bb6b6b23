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


# -- the repulsive case: sharp configurations (Section 9.1, Theorem 9.2) --------------------

DESIGN_STRENGTHS: dict[str, str] = {
    "simplex": "n = d + 1: a spherical 2-design; n < d + 1: centred only (strength 1)",
    "cross-polytope": "n = 2d, the points +-e_i: a spherical 3-design",
    "icosahedron": "n = 12, d = 3: a spherical 5-design",
    "polygon": "d = 2, the regular n-gon: a spherical (n - 1)-design",
}
"""The known sharp configurations of docs/equations.md section 4 (repulsive case) and the
strength ``t`` of each as a spherical design (Definition 9.1 of the paper)."""


def sharp_configuration(kind: str, n: int, d: int) -> tuple[np.ndarray, int]:
    """The points of a known sharp configuration on ``S^{d-1}`` and its design strength ``t``.

    ``kind`` is a key of :data:`DESIGN_STRENGTHS`: ``"simplex"`` (``2 <= n <= d + 1``, inner
    products ``-1/(n-1)``), ``"cross-polytope"`` (``n = 2d``, inner products ``-1, 0``),
    ``"icosahedron"`` (``n = 12, d = 3``, inner products ``-1, +-1/sqrt(5)``), ``"polygon"``
    (``d = 2``, inner products ``cos(2 pi k/n)``). By Theorem 9.2 (Cohn–Kumar) these are the
    global minimisers of the repulsive energy ``H_beta`` at every ``beta > 0``.

    Raises:
        ValueError: an unknown ``kind``, or ``(n, d)`` outside its range.
    """
    if kind not in DESIGN_STRENGTHS:
        msg = f"kind must be one of {tuple(DESIGN_STRENGTHS)}, got {kind!r}"
        raise ValueError(msg)
    ok = {"simplex": 2 <= n <= d + 1, "cross-polytope": n == 2 * d and d >= 2,
          "icosahedron": (n, d) == (12, 3), "polygon": d == 2 and n >= 3}[kind]
    if not ok:
        msg = f"no {kind} with n = {n} points on S^{d - 1} (d = {d}): {DESIGN_STRENGTHS[kind]}"
        raise ValueError(msg)
    x = np.zeros((n, d))
    if kind == "simplex":  # e_i - mean in R^n, written in an orthonormal basis of the hyperplane
        c = np.eye(n) - 1.0 / n
        q = np.linalg.svd(c)[2][: n - 1]
        x[:, : n - 1] = c @ q.T
        strength = 2 if n == d + 1 else 1
    elif kind == "cross-polytope":
        x[:d] = np.eye(d)
        x[d:] = -np.eye(d)
        strength = 3
    elif kind == "icosahedron":
        phi = (1 + math.sqrt(5)) / 2
        rows = [(0.0, a, b * phi) for a in (-1, 1) for b in (-1, 1)]
        x[:] = [r[k:] + r[:k] for r in rows for k in range(3)]
        strength = 5
    else:
        a = 2 * np.pi * np.arange(n) / n
        x[:] = np.c_[np.cos(a), np.sin(a)]
        strength = n - 1
    return x / np.linalg.norm(x, axis=1, keepdims=True), strength


def zonal_polynomial(l: int, d: int, t: ArrayLike) -> np.ndarray:
    """``P_l(t) = C_l^alpha(t) / C_l^alpha(1)``, ``alpha = (d-2)/2`` (docs/equations.md section 3):
    the degree-``l`` zonal harmonic of ``S^{d-1}`` normalised to ``P_l(1) = 1``; on the circle
    (``d = 2``) the limit ``T_l(t) = cos(l arccos t)``."""
    t = np.asarray(t, dtype=float)
    if d == 2:
        return special.eval_chebyt(l, t)
    alpha = (d - 2) / 2
    return special.eval_gegenbauer(l, alpha, t) / special.eval_gegenbauer(l, alpha, 1.0)


def design_sums(x: ArrayLike, lmax: int) -> np.ndarray:
    """``S_l = (1/n^2) sum_{i,j} P_l(<x_i, x_j>)`` for ``l = 1..lmax`` (points ``x``, ``(n, d)``).

    By the addition theorem ``S_l = |S^{d-1}| / (n^2 N_l) sum_m |sum_i Y_lm(x_i)|^2 >= 0``
    (``N_l`` the dimension of the degree-``l`` harmonics), so ``S_l = 0`` for ``1 <= l <= t``
    exactly when the points are a spherical ``t``-design (Definition 9.1)."""
    x = np.asarray(x, dtype=float)
    g = np.clip(x @ x.T, -1.0, 1.0)
    return np.array([zonal_polynomial(l, x.shape[1], g).mean() for l in range(1, lmax + 1)])



__all__ = ["DESIGN_STRENGTHS", "design_sums", "gamma", "gamma_rhs", "growth_rate", "sharp_configuration",
           "transition_time", "zonal_polynomial"]
