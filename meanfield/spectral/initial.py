"""Initial densities on any domain (values on ``domain.grid``, mass 1).

.. autosummary::
   uniform
   uniform_plus_modes
   von_mises
   from_samples
   wrapped_cauchy
   from_array

Built only from the domain's ``points`` (Cartesian nodes), ``real_mode`` and ``integrate``,
so every domain gets them. Von Mises(–Fisher): ``rho(x) ∝ exp(kappa <x, m>)``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from meanfield.domains.base import Domain, check_density


def uniform(domain: Domain) -> np.ndarray:
    """``1 / |S^{d-1}|``."""
    return domain.uniform()


def uniform_plus_modes(domain: Domain, modes: Mapping[Any, float]) -> np.ndarray:
    """``1/|S| + sum_key amplitude * real_mode(key)`` (circle: ``{3: 1e-3}`` adds
    ``1e-3 cos 3 theta``; ``{-2: ...}`` a sine). Checked non-negative."""
    rho = domain.uniform().copy()
    for key, amp in modes.items():
        rho = rho + float(amp) * domain.real_mode(key)
    return check_density(domain, rho)


def _unit(v: Any, d: int, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.ndim == 0 and d == 2:  # an angle on the circle
        v = np.array([np.cos(v), np.sin(v)])
    if v.shape != (d,):
        msg = f"{name} must be a unit vector in R^{d} (or an angle on the circle), got {v!r}"
        raise ValueError(msg)
    norm = np.linalg.norm(v)
    if not norm > 0:
        msg = f"{name} must be non-zero"
        raise ValueError(msg)
    return v / norm


def von_mises(
    domain: Domain,
    centers: Sequence[Any] | Any,
    kappas: Sequence[float] | float,
    weights: Sequence[float] | None = None,
) -> np.ndarray:
    """A mixture of von Mises–Fisher densities ``C(kappa) exp(kappa <x, m>)``.

    Args:
        centers: one center or a list (unit vectors in ``R^d``; angles on the circle).
        kappas: concentration(s) ``kappa >= 0``, one or one per center.
        weights: mixture weights (normalised), default equal.
    """
    d = domain.d
    single = np.ndim(centers) == 0 or (np.ndim(centers) == 1 and d > 2 and len(centers) == d)
    cs = [centers] if single else list(centers)
    ks = np.broadcast_to(np.asarray(kappas, dtype=float), (len(cs),))
    if np.any(~np.isfinite(ks)) or np.any(ks < 0):
        msg = f"kappas must be finite and >= 0, got {kappas!r}"
        raise ValueError(msg)
    w = np.ones(len(cs)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (len(cs),) or np.any(w < 0) or not w.sum() > 0:
        msg = f"weights must be {len(cs)} non-negative numbers with a positive sum, got {weights!r}"
        raise ValueError(msg)
    pts = domain.points
    rho = np.zeros(domain.grid_shape)
    for center, kappa, wi in zip(cs, ks, w / w.sum()):
        m = _unit(center, d, "center")
        # exp(kappa (<x,m> - 1)) keeps large kappa finite; normalised below per component.
        comp = np.exp(kappa * (pts @ m - 1.0))
        rho += wi * comp / domain.integrate(comp)
    return check_density(domain, rho)


def wrapped_cauchy(domain: Domain, r: float, phi: float = 0.0) -> np.ndarray:
    """Poisson kernel ``(1 - r^2) / (2 pi (1 - 2 r cos(theta - phi) + r^2))`` (circle).

    On ``S^{d-1}`` the family ``((1 - |w|^2)/|x - w|^2)^{d-1}`` with ``w = r e``, ``e`` the
    direction of ``phi`` (an angle on the circle, a unit vector otherwise); docs/equations.md section 4.
    """
    if not 0 <= r < 1:
        msg = f"r must be in [0, 1), got {r!r}"
        raise ValueError(msg)
    d = domain.d
    e = _unit(phi, d, "phi") if (d > 2 or np.ndim(phi) > 0) else np.array([np.cos(phi), np.sin(phi)])
    w = r * e
    diff = domain.points - w
    rho = ((1 - r * r) / np.sum(diff * diff, axis=-1)) ** (d - 1)
    return check_density(domain, rho)


def from_samples(domain: Domain, x: np.ndarray, kappa: float | None = None) -> np.ndarray:
    """A smooth density from points ``x`` (shape (n, d)): the von Mises–Fisher kernel
    density estimate ``(1/n) sum_i C(kappa) exp(kappa <x, x_i>)``, computed spectrally
    (Funk–Hecke): the empirical coefficients times ``lambda_l(kappa) / lambda_0(kappa)``.
    On a reduced domain (zonal) this is the estimate averaged over the symmetry.

    ``kappa`` defaults to a rule of thumb ``n^{2/(d+3)}`` (bandwidth ``~ n^{-1/(d+3)}``),
    capped so that the kernel is resolved by the grid.
    """
    x = np.asarray(x, dtype=float)
    d = domain.d
    if x.ndim == 1 and d == 2:
        x = np.stack([np.cos(x), np.sin(x)], axis=-1)
    if x.ndim != 2 or x.shape[1] != d or x.shape[0] < 1:
        msg = f"samples must have shape (n, {d}) with n >= 1, got {x.shape}"
        raise ValueError(msg)
    if not np.all(np.isfinite(x)):
        msg = "samples contain non-finite values"
        raise ValueError(msg)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = x.shape[0]
    lmax = float(np.max(domain.degrees))
    cap = (lmax / 6.0) ** 2  # kernel width ~ 1/sqrt(kappa) spans >= 6 grid degrees
    kappa = min(n ** (2.0 / (d + 3)), cap) if kappa is None else float(kappa)
    if not kappa > 0:
        msg = f"kappa must be > 0, got {kappa!r}"
        raise ValueError(msg)
    lam = domain.scaled_kernel_multipliers(kappa)
    c = domain.project(x) * (lam / lam.flat[0])
    rho = domain.backward(c)
    # truncation of the kernel's series can leave round-off-sized negative values
    return check_density(domain, np.maximum(rho, 0.0))


def from_array(domain: Domain, values: Any) -> np.ndarray:
    """A user's array, checked (finite, non-negative, positive mass) and normalised."""
    return check_density(domain, values)


__all__ = ["from_array", "from_samples", "uniform", "uniform_plus_modes", "von_mises", "wrapped_cauchy"]
