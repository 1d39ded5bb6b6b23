r"""Closed forms and exact reductions the project tests against (docs/equations.md sections
3 and 4), in one place.

.. autosummary::
   growth_rate
   gamma
   gamma_rhs
   transition_time
   mobius_mean
   mobius_path
   mobius_log_density
   mobius_theta

* :func:`growth_rate`: the rate ``gamma_l`` of a perturbation ``eps Y_l`` of the uniform
  density on ``S^{d-1}`` (linear stability, section 3), for SA and USA, with sign and noise.
* :func:`gamma`, :func:`transition_time`: the common inner product ``gamma_beta(t)`` of ``n``
  orthogonal starts (Theorem 6.8, ODE (6.9) for SA, (6.10) for USA) and the time at which it
  reaches ``1 - delta`` (the phase-transition curve (6.12)).
* :func:`mobius_path`, :func:`mobius_log_density`, :func:`mobius_theta`, :func:`mobius_mean`:
  the exact ``beta = 0`` solution of section 4 on ``S^{d-1}``, the Möbius family
  ``rho_w = ((1 - |w|^2) / |x - w|^2)^{d-1} / |S^{d-1}|`` with ``w = omega e``, and the exact
  path of every point (docs/lagrangian.md section 9 derives the closed forms).
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


def _check_omega(omega: ArrayLike) -> np.ndarray:
    w = np.asarray(omega, dtype=float)
    if not np.all((w >= 0) & (w < 1)):
        msg = f"omega must lie in [0, 1) (the Möbius parameter |w|), got {omega!r}"
        raise ValueError(msg)
    return w


def mobius_mean(omega: ArrayLike, d: int) -> np.ndarray:
    """``m(omega) = <int x rho_w dA, e>`` of the Möbius density with ``w = omega e`` on
    ``S^{d-1}`` (docs/equations.md section 4):
    ``m = (d - 1)/d z 2F1(1/2, 1; d/2 + 1; z^2)``, ``z = 2 omega / (1 + omega^2)``
    (docs/lagrangian.md section 9; ``m = omega`` at ``d = 2``)."""
    w = _check_omega(omega)
    return _mobius_mean_q((1 - w) / (1 + w), d)


_Q_SMALL = 1e-4  # below it 1 - m = 2q^2/(1+q^2) (d-1)/(d-3) + O(q^4): O(q^4) < 1e-16


def _mobius_mean_q(q: np.ndarray, d: int) -> np.ndarray:
    """``m`` in terms of ``q = (1 - omega)/(1 + omega)``. Near collapse (``q < 1e-4``,
    ``d >= 6``) ``1 - m = (1 - z) E[(1 - u)/(1 + z u)]`` with ``1 - z = 2 q^2/(1 + q^2)`` and
    ``E[(1 - u)/(1 + u)] = (d - 1)/(d - 3)`` (``u`` the axis coordinate of a uniform point),
    the remainder ``O((1 - z)^2)``; scipy's ``hyp2f1`` is NaN at ``z = 1`` for large ``d``."""
    q = np.asarray(q, dtype=float)
    z = (1 - q * q) / (1 + q * q)  # 2 omega / (1 + omega^2)
    out = (d - 1) / d * z * special.hyp2f1(0.5, 1.0, d / 2 + 1, z * z)
    if d >= 6:
        out = np.where(q < _Q_SMALL, 1 - 2 * q * q / (1 + q * q) * (d - 1) / (d - 3), out)
    return out


def mobius_path(omega0: float, d: int, times: ArrayLike) -> np.ndarray:
    """``log q(t)``, ``q = (1 - omega)/(1 + omega)``, of the ``beta = 0`` Möbius solution
    started at ``omega0``: ``d log q/dt = -m(omega)`` (from ``w' = (1 + |w|^2) m/2 - <w, m> w``,
    docs/equations.md section 4), ``omega = (1 - q)/(1 + q)``. ``log q`` keeps ``1 - omega``
    to relative precision through collapse. ``solve_ivp`` (DOP853, rtol 1e-13, atol 1e-13)."""
    _check_omega(omega0)
    t = np.asarray(times, dtype=float)
    lq0 = math.log((1 - omega0) / (1 + omega0))

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        return np.array([-float(_mobius_mean_q(np.exp(y[0]), d))])

    if t.size == 0 or t.max() <= 0:
        return np.full(t.shape, lq0)
    sol = solve_ivp(rhs, (0.0, float(t.max())), [lq0], method="DOP853", dense_output=True,
                    rtol=1e-13, atol=1e-13)
    return np.where(t <= 0, lq0, sol.sol(np.maximum(t, 0.0))[0])


def mobius_log_density(theta: ArrayLike, log_q: ArrayLike, d: int) -> np.ndarray:
    """``log rho_w`` per unit surface measure at polar angle ``theta`` (``s = cos theta``),
    ``w = omega e``, ``q = (1 - omega)/(1 + omega) = exp(log_q)``: with ``1 - s = 2
    sin^2(theta/2)``, ``|x - w|^2 = (1 - omega)^2 + 2 omega (1 - s)``, so
    ``log rho = (d - 1) log((1 - omega^2) / |x - w|^2) - log |S^{d-1}|`` without cancellation."""
    from .special import log_sphere_area

    th = np.asarray(theta, dtype=float)
    q = np.exp(np.asarray(log_q, dtype=float))
    one_m = 2 * q / (1 + q)  # 1 - omega
    omega = (1 - q) / (1 + q)
    dist2 = one_m ** 2 + 4 * omega * np.sin(th / 2) ** 2
    return (d - 1) * (np.log(one_m * (2 - one_m)) - np.log(dist2)) - log_sphere_area(d)


def mobius_theta(theta0: ArrayLike, log_q0: float, log_q: ArrayLike) -> np.ndarray:
    """The exact path of a point at ``beta = 0`` in the Möbius family: ``tan(theta/2) =
    tan(theta0/2) q / q0`` (the flow maps one Möbius density onto another by the Möbius map of
    the axis, docs/lagrangian.md section 9)."""
    th0 = np.asarray(theta0, dtype=float)
    ratio = np.exp(np.asarray(log_q, dtype=float) - log_q0)
    return 2 * np.arctan(np.tan(th0 / 2) * ratio)


__all__ = ["gamma", "gamma_rhs", "growth_rate", "mobius_log_density", "mobius_mean", "mobius_path",
           "mobius_theta", "transition_time"]
