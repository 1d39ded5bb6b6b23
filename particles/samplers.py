"""Initial configurations of tokens.

.. autosummary::
   sample_sphere
   orthogonal
   sample_density
   sample_gaussian

Every sampler takes ``rng``: an int seed or a ``numpy.random.Generator`` (same seed, same
numbers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from particles.inputs import as_count, as_rng


def sample_sphere(n: int, d: int, rng: Any = None, batch: int | None = None) -> np.ndarray:
    """``n`` i.i.d. uniform points on ``S^{d-1}`` (normalised Gaussians).

    Returns:
        ``(n, d)``, or ``(batch, n, d)`` when ``batch`` is given.
    """
    n = as_count(n, "n")
    d = as_count(d, "d")
    shape = (n, d) if batch is None else (as_count(batch, "batch"), n, d)
    g = as_rng(rng).standard_normal(shape)
    nrm = np.linalg.norm(g, axis=-1, keepdims=True)
    return g / nrm


def orthogonal(n: int, d: int, rng: Any = None, batch: int | None = None) -> np.ndarray:
    """``n`` pairwise orthogonal unit tokens in ``R^d`` (``d >= n``), Haar-random frame.

    The start of Theorem 6.8 (docs/equations.md section 4): all ``<x_i, x_j> = 0`` for ``i != j``.
    """
    n = as_count(n, "n")
    d = as_count(d, "d")
    if d < n:
        msg = f"orthogonal tokens need d >= n, got n={n}, d={d}"
        raise ValueError(msg)
    g = as_rng(rng)
    count = 1 if batch is None else as_count(batch, "batch")
    out = np.empty((count, n, d))
    for b in range(count):
        q, r = np.linalg.qr(g.standard_normal((d, n)))
        q = q * np.sign(np.diag(r))  # Haar measure on the Stiefel manifold
        out[b] = q.T
    return out[0] if batch is None else out


def sample_density(domain: Any, rho: np.ndarray, n: int, rng: Any = None) -> np.ndarray:
    """``n`` i.i.d. tokens from a density ``rho`` given on the grid of a ``meanfield`` domain
    (delegates to ``domain.sample``); shape ``(n, d)``."""
    n = as_count(n, "n")
    rho = np.asarray(rho, dtype=float)
    if rho.shape != tuple(domain.grid_shape):
        msg = f"rho must have the domain's grid shape {tuple(domain.grid_shape)}, got {rho.shape}"
        raise ValueError(msg)
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        msg = "rho must be finite and non-negative on the grid"
        raise ValueError(msg)
    return np.asarray(domain.sample(rho, n, as_rng(rng)))


def sample_gaussian(
    mean: Any, cov: Any, n: int, rng: Any = None, batch: int | None = None
) -> np.ndarray:
    """``n`` i.i.d. tokens from ``N(mean, cov)`` in ``R^d`` (the start of the Gaussian
    reduction, docs/equations.md section 4); ``cov`` symmetric positive semi-definite.

    Returns:
        ``(n, d)``, or ``(batch, n, d)`` when ``batch`` is given.
    """
    n = as_count(n, "n")
    m = np.asarray(mean, dtype=float)
    c = np.asarray(cov, dtype=float)
    if m.ndim != 1:
        msg = f"mean must be a vector, got shape {m.shape}"
        raise ValueError(msg)
    d = m.shape[0]
    if c.shape != (d, d):
        msg = f"cov must have shape ({d}, {d}) to match mean, got {c.shape}"
        raise ValueError(msg)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(c))):
        msg = "mean and cov must be finite"
        raise ValueError(msg)
    if not np.allclose(c, c.T, rtol=1e-12, atol=1e-14 * max(1.0, float(np.abs(c).max()))):
        msg = "cov must be symmetric"
        raise ValueError(msg)
    w, U = np.linalg.eigh(0.5 * (c + c.T))
    if w.min() < -1e-12 * max(1.0, float(w.max())):
        msg = f"cov must be positive semi-definite, smallest eigenvalue {w.min():.3g}"
        raise ValueError(msg)
    L = U * np.sqrt(np.clip(w, 0.0, None))
    shape = (n, d) if batch is None else (as_count(batch, "batch"), n, d)
    z = as_rng(rng).standard_normal(shape)
    return m + z @ L.T


__all__ = ["orthogonal", "sample_density", "sample_gaussian", "sample_sphere"]
