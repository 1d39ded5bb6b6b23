"""Funk–Hecke multipliers of the exponential kernel, without overflow (docs/equations.md section 3).

.. autosummary::
   sphere_area
   scaled_kernel_multipliers
   kernel_multipliers_over_beta
   constant_mode_energy_factor

For ``K_beta(t) = exp(beta t)`` on ``S^{d-1}``:
``lambda_l = (2 pi)^{d/2} beta^{1 - d/2} I_{l + d/2 - 1}(beta)``.
Everything here is computed through ``scipy.special.ive`` (``I_nu(beta) e^{-beta}``) in
logarithms, so that large ``beta`` and large ``d`` neither overflow nor lose accuracy; the
factor ``e^{beta}`` is carried separately (it cancels for softmax attention).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special


def sphere_area(d: int) -> float:
    """``|S^{d-1}| = 2 pi^{d/2} / Gamma(d/2)`` (tends to 0 as d grows)."""
    return math.exp(log_sphere_area(d))


def log_sphere_area(d: int) -> float:
    """``log |S^{d-1}|``."""
    return math.log(2.0) + 0.5 * d * math.log(math.pi) - special.gammaln(0.5 * d)


def _log_ive(nu: np.ndarray, beta: float) -> np.ndarray:
    """``log(I_nu(beta) e^{-beta})`` for ``beta > 0``, robust where ``ive`` underflows."""
    nu = np.asarray(nu, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(special.ive(nu, beta))
    large = np.isnan(out)  # scipy's ive is NaN beyond beta ~ 1.5e9 (measured)
    if np.any(large):
        out[large] = _log_ive_large(nu[large], beta)
    bad = ~np.isfinite(out)
    if np.any(bad):
        # Series leading term, I_nu(b) ~ (b/2)^nu / Gamma(nu+1) (1 + b^2/(4(nu+1)) + ...):
        # ive underflows only when nu >> beta, where the series converges fast.
        n = nu[bad]
        z = 0.25 * beta * beta
        terms = np.ones_like(n)
        acc = np.ones_like(n)
        for j in range(1, 60):
            terms = terms * z / (j * (n + j))
            acc = acc + terms
        out[bad] = n * math.log(0.5 * beta) - special.gammaln(n + 1) + np.log(acc) - beta
    return out


def _log_ive_large(nu: np.ndarray, beta: float) -> np.ndarray:
    """``log(I_nu(beta) e^{-beta})`` by Hankel's expansion (DLMF 10.40.1)::

        I_nu(b) e^{-b} ~ (2 pi b)^{-1/2} sum_k (-1)^k a_k(nu) / b^k,
        a_k(nu) = prod_{j=1..k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)

    for ``beta`` beyond the range of scipy's ``ive`` (``~1.5e9``), up to ``1e300``. The
    terms are summed until they fall below ``1e-17`` of the sum (at most 30); where
    ``4 nu^2`` is not small against ``8 beta`` (so that they would not fall) the result is
    NaN rather than a wrong number."""
    total = np.ones_like(nu)
    term = np.ones_like(nu)
    mu = 4.0 * nu * nu
    converged = np.zeros(nu.shape, dtype=bool)
    for k in range(1, 31):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * beta)
        total = total + np.where(converged, 0.0, term)
        converged |= np.abs(term) < 1e-17 * np.abs(total)
        if np.all(converged):
            break
    with np.errstate(invalid="ignore"):
        out = np.log(total) - 0.5 * (math.log(2.0 * math.pi) + math.log(beta))
    return np.where(converged & (total > 0), out, np.nan)


def scaled_kernel_multipliers(degrees: np.ndarray, beta: float, d: int) -> np.ndarray:
    """``lambda_l / |S^{d-1}| * e^{-beta}`` for each degree ``l``.

    Normalised by the area so that the uniform density ``1/|S^{d-1}|`` has
    ``(K_beta * rho_unif) = lambda_0 / |S^{d-1}|``; at ``beta = 0`` this is ``delta_{l0}``.
    ``lambda_l / |S^{d-1}| = Gamma(d/2) (2/beta)^{d/2-1} I_{l+d/2-1}(beta)``.
    """
    degrees = np.asarray(degrees, dtype=float)
    if beta == 0.0:
        return (degrees == 0).astype(float)
    nu = degrees + 0.5 * d - 1.0
    log_val = special.gammaln(0.5 * d) + (0.5 * d - 1.0) * math.log(2.0 / beta) + _log_ive(nu, beta)
    return np.exp(log_val)


def kernel_multipliers_over_beta(degrees: np.ndarray, beta: float, d: int) -> np.ndarray:
    """``lambda_l / (beta |S^{d-1}|) * e^{-beta}`` for ``l >= 1`` (0 for ``l = 0``).

    This is the multiplier of the potential ``G_beta * rho`` whose gradient is the velocity;
    its ``beta -> 0`` limit is ``1/d`` for ``l = 1`` and 0 otherwise.
    """
    degrees = np.asarray(degrees, dtype=float)
    out = np.zeros_like(degrees)
    pos = degrees > 0
    if beta == 0.0:
        out[degrees == 1] = 1.0 / d
        return out
    out[pos] = scaled_kernel_multipliers(degrees[pos], beta, d) / beta
    return out


def constant_mode_energy_factor(beta: float, d: int) -> float:
    """``(lambda_0 / |S^{d-1}| - 1) / beta`` without cancellation (``-> 0`` as beta -> 0).

    ``lambda_0/|S^{d-1}| = 0F1(; d/2; beta^2/4)``; for small ``beta`` the series
    ``beta/(2d) + beta^3/(8 d (d+2))`` is exact to round-off.
    """
    if beta == 0.0:
        return 0.0
    if beta < 2.0:
        # 0F1(; a; z) - 1 = sum_{j>=1} z^j / ((a)_j j!), z = beta^2/4, a = d/2: no cancellation.
        a, z = 0.5 * d, 0.25 * beta * beta
        term, total = 1.0, 0.0
        for j in range(1, 40):
            term *= z / ((a + j - 1) * j)
            total += term
        return total / beta
    return (exp_beta(beta) * float(scaled_kernel_multipliers(np.array([0.0]), beta, d)[0]) - 1.0) / beta


MAX_EXP_ARG = math.log(np.finfo(float).max)
"""Largest ``beta`` with ``e^beta`` finite in float64 (about 709.78)."""


def exp_beta(beta: float) -> float:
    """``e^beta``, or ``inf`` beyond :data:`MAX_EXP_ARG` (never ``OverflowError``): the factor
    the multipliers carry separately (docs/equations.md section 7)."""
    return math.exp(beta) if beta <= MAX_EXP_ARG else math.inf


def check_exp_beta(beta: float, what: str) -> None:
    """``ValueError`` naming the limit when ``what`` needs ``e^beta`` itself and it overflows."""
    if beta > MAX_EXP_ARG:
        msg = (f"beta = {beta:g} exceeds {MAX_EXP_ARG:.2f}, the largest beta for {what}: its "
               "field carries e^beta, which overflows float64 (softmax attention has no such "
               "limit; or rescale time by e^-beta)")
        raise ValueError(msg)


__all__ = [
    "MAX_EXP_ARG",
    "check_exp_beta",
    "exp_beta",
    "constant_mode_energy_factor",
    "kernel_multipliers_over_beta",
    "log_sphere_area",
    "scaled_kernel_multipliers",
    "sphere_area",
]
