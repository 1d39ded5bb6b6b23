r"""Distances between densities and particles (docs/equations.md section 6).

.. autosummary::
   w1_particles
   w1_density_particles
   w1_densities
   kernel_distance
   kernel_distance_particles
   kernel_distance_particle_sets
   weighted_kernel_distance
   kernel_self_term

On the circle the Wasserstein-1 distance is exact (docs/equations.md section 6):

.. math::  W_1(\mu, \nu) = \min_c \int_0^{2\pi} |F_\mu(\theta) - F_\nu(\theta) - c|\, d\theta,

with ``F`` the CDFs from ``theta = 0``. The minimising ``c`` is a median of
``G = F_mu - F_nu`` for the uniform measure on ``[0, 2 pi)``. Between particle sets ``G`` is
piecewise constant and the formula is evaluated exactly. With a density, ``G`` is smooth
between the particles (the density's CDF is the exact CDF of its truncated Fourier series);
it is integrated by Gauss–Legendre quadrature on every interval between consecutive
particles and nodes of a grid finer than the density's, and every interval on which
``G - c`` changes sign is split at its root first, so the kink of ``|G - c|`` never sits
inside a quadrature panel (the result is exact to round-off for band-limited densities).

The kernel distance ``||mu - nu||_beta^2 = iint e^{beta <x,y>} d(mu-nu) d(mu-nu)
= sum_l lambda_l sum_m |mu_lm - nu_lm|^2`` works on every domain: from the coefficients
(``domain.project`` for the particles, then ``domain.kernel_distance``), or exactly from the
particles' Gram matrix (``method="exact"``; needed on :class:`ZonalSphere`, whose
``project`` only sees the rotation-averaged measure).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from meanfield.arguments import finite
from meanfield.domains.base import Domain
from meanfield.domains.circle import Circle

_TWO_PI = 2.0 * np.pi
_GL_NODES = 8
"""Gauss–Legendre nodes per panel: exact for polynomials of degree 15 (the panels are far
shorter than the density's shortest wavelength, so its CDF is integrated to round-off)."""


# -- helpers -------------------------------------------------------------------------------


def _angles(x: Any, name: str) -> np.ndarray:
    """Angles in ``[0, 2 pi)`` of points given as (n, 2), (B, n, 2) or angles (n,), (B, n)."""
    x = np.asarray(x, dtype=float)
    if x.ndim >= 2 and x.shape[-1] == 2:
        th = np.arctan2(x[..., 1], x[..., 0])
    elif x.ndim in (1, 2):
        th = x
    else:
        msg = f"{name} must be points (n, 2), (batch, n, 2) or angles (n,), (batch, n); got shape {x.shape}"
        raise ValueError(msg)
    if th.shape[-1] < 1:
        msg = f"{name} must hold at least one particle, got shape {x.shape}"
        raise ValueError(msg)
    return np.mod(finite(th, name), _TWO_PI)


def _check_circle(domain: Domain) -> None:
    """W_1 uses the circle's own spectral CDF (:meth:`Circle.cdf`): a circle-only metric."""
    if not isinstance(domain, Circle):
        msg = f"W_1 is implemented on the circle only, got domain {domain!r}; use kernel_distance"
        raise ValueError(msg)


def _coefficients(domain: Domain, rho: Any, name: str, kind: str = "auto") -> np.ndarray:
    """Coefficients from grid values (``domain.grid_shape``) or coefficients (as ``forward``).

    ``kind`` is ``"values"``, ``"coefficients"`` or ``"auto"`` (by shape; an error where the
    two shapes coincide, as on :class:`ZonalSphere`).
    """
    if kind not in ("auto", "values", "coefficients"):
        msg = f"kind must be 'auto', 'values' or 'coefficients', got {kind!r}"
        raise ValueError(msg)
    rho = np.asarray(rho)
    coef_shape = np.shape(domain.forward(domain.uniform()))
    grid_shape = tuple(domain.grid_shape)
    finite(rho, name)
    if kind == "auto":
        if grid_shape == coef_shape and not np.iscomplexobj(rho):
            msg = (
                f"{name}: on {domain!r} grid values and coefficients both have shape "
                f"{grid_shape}; pass kind='values' or kind='coefficients'"
            )
            raise ValueError(msg)
        kind = "values" if rho.shape == grid_shape and not np.iscomplexobj(rho) else "coefficients"
    if kind == "values":
        if rho.shape != grid_shape:
            msg = f"{name} must be grid values of shape {grid_shape} on {domain!r}, got shape {rho.shape}"
            raise ValueError(msg)
        return domain.forward(rho.astype(float))
    if rho.shape != coef_shape:
        msg = (
            f"{name} must be grid values of shape {grid_shape} or coefficients of "
            f"shape {coef_shape} on {domain!r}, got shape {rho.shape}"
        )
        raise ValueError(msg)
    return rho


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cw = np.cumsum(w)
    i = int(np.searchsorted(cw, 0.5 * cw[-1]))
    return float(v[min(i, v.size - 1)])


def _circle_cdf(domain: Any, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``F(theta)`` of a probability density (normalised by its mass), in chunks."""
    mass = _TWO_PI * float(np.real(c[0]))
    if not mass > 0:
        msg = f"the density must have positive mass, got {mass:.3g}"
        raise ValueError(msg)
    step = max(1, 2**22 // max(domain.N // 2, 1))
    out = np.empty(theta.shape)
    flat, res = theta.ravel(), out.ravel()
    for s in range(0, flat.size, step):
        res[s : s + step] = domain.cdf(c, flat[s : s + step])
    return out / mass


def _circle_density(c: np.ndarray, theta: np.ndarray) -> np.ndarray:
    k = np.arange(c.size)
    mass = _TWO_PI * float(np.real(c[0]))
    vals = np.real(np.exp(1j * np.multiply.outer(theta, k[1:])) @ c[1:])
    return (np.real(c[0]) + 2 * vals) / mass


def _w1_core(
    breaks: np.ndarray,
    jump: np.ndarray,
    smooth: list[tuple[Any, np.ndarray, float]],
) -> float:
    """``min_c int |G - c|`` with ``G = sum_signs F_density + (piecewise constant part)``.

    Args:
        breaks: sorted interval ends in ``[0, 2 pi]`` (first 0, last 2 pi).
        jump: the piecewise constant part of ``G`` on each interval (``len(breaks) - 1``).
        smooth: ``(domain, coefficients, sign)`` of densities whose CDFs enter ``G``.
    """
    a, b = breaks[:-1], breaks[1:]
    keep = b > a
    a, b, jump = a[keep], b[keep], jump[keep]
    if not smooth:
        length = b - a
        cval = _weighted_median(jump, length)
        return float(np.sum(length * np.abs(jump - cval)))

    def G(theta: np.ndarray, const: np.ndarray) -> np.ndarray:
        out = np.broadcast_to(const, theta.shape).astype(float).copy()
        for dom, coef, sign in smooth:
            out += sign * _circle_cdf(dom, coef, theta)
        return out

    def dG(theta: np.ndarray) -> np.ndarray:
        out = np.zeros(theta.shape)
        for _, coef, sign in smooth:
            out += sign * _circle_density(coef, theta)
        return out

    xg, wg = np.polynomial.legendre.leggauss(_GL_NODES)

    def panels(lo: np.ndarray, hi: np.ndarray, const: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        half, mid = 0.5 * (hi - lo), 0.5 * (hi + lo)
        nodes = mid[:, None] + half[:, None] * xg[None, :]
        return G(nodes, const[:, None]), half[:, None] * wg[None, :]

    vals, wts = panels(a, b, jump)
    cval = _weighted_median(vals.ravel(), wts.ravel())
    ga, gb = G(a, jump), G(b, jump)  # G is monotone on each panel (no jumps inside)

    def roots(cv: float) -> tuple[np.ndarray, np.ndarray]:
        """Panels on which ``G - cv`` changes sign, and the roots there."""
        cross = (ga - cv) * (gb - cv) < 0
        lo, hi, cj = a[cross].copy(), b[cross].copy(), jump[cross]
        sa = np.sign(ga[cross] - cv)
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            left = np.sign(G(mid, cj) - cv) == sa
            lo, hi = np.where(left, mid, lo), np.where(left, hi, mid)
        root = 0.5 * (lo + hi)
        for _ in range(2):
            d = dG(root)
            safe = np.where(d == 0, 1.0, d)
            root = np.clip(root - np.where(d != 0, (G(root, cj) - cv) / safe, 0.0), a[cross], b[cross])
        return cross, root

    # Newton on c for f'(c) = |{G < c}| - |{G > c}| = 0, f''(c) = 2 sum 1/|G'(root)|
    for _ in range(3):
        cross, root = roots(cval)
        below = np.where((ga < cval) & (gb <= cval) & ~cross, b - a, 0.0).sum()
        up = ga[cross] < cval  # increasing through the root
        below += np.sum(np.where(up, root - a[cross], b[cross] - root))
        fprime = 2.0 * below - _TWO_PI
        curv = 2.0 * np.sum(1.0 / np.maximum(np.abs(dG(root)), 1e-300)) if root.size else 0.0
        if curv <= 0 or abs(fprime) < 1e-15:
            break
        cval = cval - fprime / curv
    cross, root = roots(cval)
    a2 = np.concatenate([a[~cross], a[cross], root])
    b2 = np.concatenate([b[~cross], root, b[cross]])
    j2 = np.concatenate([jump[~cross], jump[cross], jump[cross]])
    vals, wts = panels(a2, b2, j2)
    return float(np.sum(wts * np.abs(vals - cval)))


def _count_below(sorted_th: np.ndarray, theta: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_th, theta, side="right") / sorted_th.size


# -- Wasserstein-1 on the circle -----------------------------------------------------------


def w1_particles(x: Any, y: Any) -> float | np.ndarray:
    """Exact ``W_1`` on the circle between two empirical measures (docs/equations.md section 6).

    Args:
        x, y: points (n, 2) or angles (n,); a batch (B, n, 2) / (B, n) gives B distances
            (``x`` and ``y`` batched alike, or one of them unbatched).
    """
    tx, ty = _angles(x, "x"), _angles(y, "y")
    if tx.ndim == 2 or ty.ndim == 2:
        B = tx.shape[0] if tx.ndim == 2 else ty.shape[0]
        tx2 = tx if tx.ndim == 2 else np.broadcast_to(tx, (B,) + tx.shape)
        ty2 = ty if ty.ndim == 2 else np.broadcast_to(ty, (B,) + ty.shape)
        if tx2.shape[0] != ty2.shape[0]:
            msg = f"batch sizes differ: x has {tx2.shape[0]}, y has {ty2.shape[0]}"
            raise ValueError(msg)
        return np.array([w1_particles(a, b) for a, b in zip(tx2, ty2)])
    sx, sy = np.sort(tx), np.sort(ty)
    breaks = np.concatenate([[0.0], np.sort(np.concatenate([sx, sy])), [_TWO_PI]])
    mid = 0.5 * (breaks[:-1] + breaks[1:])
    jump = _count_below(sx, mid) - _count_below(sy, mid)
    return _w1_core(breaks, jump, [])


def _panel_grid(domain: Any) -> np.ndarray:
    m = max(4 * domain.N, 256)
    return _TWO_PI * np.arange(m + 1) / m


def w1_density_particles(domain: Domain, rho: Any, x: Any, *, kind: str = "auto") -> float | np.ndarray:
    """Exact ``W_1`` on the circle between a density and an empirical measure.

    Args:
        domain: a :class:`~meanfield.domains.circle.Circle`.
        rho: the density: grid values (shape ``(N,)``) or coefficients (``(N//2 + 1,)``);
            normalised to mass 1 here.
        x: points (n, 2) or angles (n,); a batch (B, n, 2) / (B, n) gives B distances.
        kind: how to read ``rho``: ``"values"``, ``"coefficients"`` or ``"auto"`` (by shape).
    """
    _check_circle(domain)
    c = _coefficients(domain, rho, "rho", kind)
    th = _angles(x, "x")
    if th.ndim == 2:
        return np.array([w1_density_particles(domain, c, t, kind="coefficients") for t in th])
    sx = np.sort(th)
    breaks = np.unique(np.concatenate([_panel_grid(domain), sx]))
    mid = 0.5 * (breaks[:-1] + breaks[1:])
    jump = -_count_below(sx, mid)
    return _w1_core(breaks, jump, [(domain, c, 1.0)])


def w1_densities(domain: Domain, rho_a: Any, rho_b: Any) -> float:
    """``W_1`` on the circle between two densities (grid values or coefficients)."""
    _check_circle(domain)
    ca = _coefficients(domain, rho_a, "rho_a")
    cb = _coefficients(domain, rho_b, "rho_b")
    breaks = _panel_grid(domain)
    return _w1_core(breaks, np.zeros(breaks.size - 1), [(domain, ca, 1.0), (domain, cb, -1.0)])


# -- kernel distance -----------------------------------------------------------------------


def _check_beta(beta: float) -> float:
    beta = float(beta)
    if not np.isfinite(beta) or beta < 0:
        msg = f"beta must be finite and >= 0, got {beta!r}"
        raise ValueError(msg)
    return beta


def kernel_distance(domain: Domain, a: Any, b: Any, beta: float, *, kind: str = "auto") -> float:
    """``||mu - nu||_beta`` (docs/equations.md section 6) between two densities on ``domain``
    (grid values or coefficients, as ``kind`` says)."""
    beta = _check_beta(beta)
    return domain.kernel_distance(_coefficients(domain, a, "a", kind), _coefficients(domain, b, "b", kind),
                                  beta)


def _points(domain: Domain, x: Any) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    d = domain.d
    if d == 2 and x.ndim in (1, 2) and not (x.ndim == 2 and x.shape[-1] == 2):
        th = x
        x = np.stack([np.cos(th), np.sin(th)], axis=-1)
    if x.ndim not in (2, 3) or x.shape[-1] != d:
        msg = f"x must be points of shape (n, {d}) or (batch, n, {d}) on {domain!r}, got {x.shape}"
        raise ValueError(msg)
    return finite(x, "x") / np.linalg.norm(x, axis=-1, keepdims=True)


def _gram_mean(x: np.ndarray, y: np.ndarray, beta: float) -> float:
    """``mean_{i,j} e^{beta(<x_i, y_j> - 1)}`` in row blocks."""
    total = 0.0
    for s in range(0, x.shape[0], 2048):
        g = x[s : s + 2048] @ y.T
        total += float(np.sum(np.exp(beta * (g - 1.0))))
    return total / (x.shape[0] * y.shape[0])


def kernel_distance_particles(
    domain: Domain, rho: Any, x: Any, beta: float, *, method: str = "auto", kind: str = "auto"
) -> float | np.ndarray:
    """``||mu - mu_n||_beta`` between a density and the empirical measure of ``x``.

    Args:
        domain: any domain.
        rho: grid values or coefficients of the density (normalised to mass 1 here).
        x: points (n, d) or a batch (B, n, d) (angles allowed on the circle).
        beta: the kernel's inverse temperature.
        method: ``"project"`` (``domain.project`` then ``domain.kernel_distance``; the
            truncation drops ``sum_{l > lmax} lambda_l``, negligible once ``lmax >> beta``),
            ``"exact"`` (Gram matrix: ``iint K dmu_n dmu_n - 2 int K*mu dmu_n + iint K dmu dmu``,
            cost ``O(n^2)``), or ``"auto"`` (``exact`` on domains whose ``project`` averages
            over a symmetry, ``Domain.symmetry_reduced``, like :class:`ZonalSphere`;
            ``project`` otherwise).
        kind: how to read ``rho``: ``"values"``, ``"coefficients"`` or ``"auto"`` (by shape).
    """
    beta = _check_beta(beta)
    if method not in ("auto", "project", "exact"):
        msg = f"method must be 'auto', 'project' or 'exact', got {method!r}"
        raise ValueError(msg)
    c = _coefficients(domain, rho, "rho", kind)
    c = c / (domain.mass(c))
    pts = _points(domain, x)
    if pts.ndim == 3:
        return np.array([kernel_distance_particles(domain, c, p, beta, method=method, kind="coefficients")
                         for p in pts])
    if method == "auto":
        method = "exact" if domain.symmetry_reduced else "project"
    if method == "project":
        return domain.kernel_distance(c, domain.project(pts), beta)
    lam = domain.scaled_kernel_multipliers(beta)  # lambda_l e^{-beta}
    pot = domain.values_at(lam * c, pts)  # (K * mu)(x_i) e^{-beta}
    sq = _gram_mean(pts, pts, beta) - 2.0 * float(np.mean(pot)) + domain.inner(c, lam * c)
    return float(np.sqrt(max(sq, 0.0) * np.exp(beta)))


def kernel_distance_particle_sets(x: Any, y: Any, beta: float) -> float:
    """``||mu_x - mu_y||_beta`` between two empirical measures in any ``d`` (Gram matrices)."""
    beta = _check_beta(beta)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        msg = f"x and y must be points (n, d) and (m, d) with one d, got {x.shape} and {y.shape}"
        raise ValueError(msg)
    sq = _gram_mean(x, x, beta) + _gram_mean(y, y, beta) - 2.0 * _gram_mean(x, y, beta)
    return float(np.sqrt(max(sq, 0.0) * np.exp(beta)))


def weighted_kernel_distance(x: Any, w: Any, y: Any, v: Any = None, *, beta: float = 1.0,
                             geometry: str = "sphere", xx: float | None = None) -> float:
    """``||mu - nu||_k`` (maximum mean discrepancy) between ``mu = sum_j w_j delta_{x_j}`` and
    ``nu = sum_k v_k delta_{y_k}`` (``v`` default: equal weights), from Gram matrices:
    ``w^T K_xx w + v^T K_yy v - 2 w^T K_xy v``.

    The kernel is ``e^{beta(<x, y> - 1)}`` on the sphere (the kernel of
    :func:`kernel_distance` times ``e^{-beta}``, docs/equations.md section 6: with equal
    weights this is :func:`kernel_distance_particle_sets` times ``e^{-beta/2}``) and the
    Gaussian ``e^{-beta |x - y|^2 / 2}`` in ``R^d`` (positive definite on all of ``R^d``).
    ``xx``: ``w^T K_xx w`` when already known (:func:`kernel_self_term`), for many ``y``
    against one ``x``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.asarray(w, dtype=float)
    v = np.full(y.shape[0], 1.0 / y.shape[0]) if v is None else np.asarray(v, dtype=float)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        msg = f"x and y must be points (n, d) and (m, d) with one d, got {x.shape} and {y.shape}"
        raise ValueError(msg)
    if w.shape != (x.shape[0],) or v.shape != (y.shape[0],):
        msg = (f"w and v must have one weight per point, got {w.shape} for x {x.shape}, {v.shape} for "
               f"y {y.shape}")
        raise ValueError(msg)
    if geometry not in ("sphere", "euclidean"):
        msg = f"geometry must be 'sphere' or 'euclidean', got {geometry!r}"
        raise ValueError(msg)

    if xx is None:
        xx = kernel_self_term(x, w, beta=beta, geometry=geometry)
    sq = xx + v @ _gram(y, y, beta, geometry) @ v - 2.0 * w @ _gram(x, y, beta, geometry) @ v
    return float(math.sqrt(max(float(sq), 0.0)))


def _gram(a: np.ndarray, b: np.ndarray, beta: float, geometry: str) -> np.ndarray:
    """The Gram matrix of :func:`weighted_kernel_distance`'s kernel between ``a`` and ``b``."""
    if geometry == "sphere":
        return np.exp(beta * (a @ b.T - 1.0))
    sq = np.sum(a * a, 1)[:, None] + np.sum(b * b, 1)[None, :] - 2.0 * a @ b.T
    return np.exp(-0.5 * beta * np.maximum(sq, 0.0))


def kernel_self_term(x: Any, w: Any, *, beta: float = 1.0, geometry: str = "sphere") -> float:
    """``w^T K_xx w``, the self term of :func:`weighted_kernel_distance`."""
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    return float(w @ _gram(x, x, beta, geometry) @ w)


__all__ = [
    "kernel_distance",
    "kernel_distance_particle_sets",
    "kernel_distance_particles",
    "kernel_self_term",
    "w1_densities",
    "w1_density_particles",
    "w1_particles",
    "weighted_kernel_distance",
]
