"""Observables of a particle configuration (docs/equations.md sections 2 and 5).

.. autosummary::
   energy
   log_energy
   energies
   energy_gradient
   dissipation
   gram
   pairwise_inner_products
   inner_product_histogram
   count_clusters
   count_clusters_angles
   kuramoto_order
   mean_covariance

All take tokens ``x`` of shape ``(n, d)`` or ``(batch, n, d)``; a batch gives one value per
system (leading axis ``batch``).

Energy (Remark 3.8, with the "-1 inside the sum" convention of docs/equations.md section 2)::

    E_beta(X) = (1 / (2 beta n^2)) sum_{i,j} (e^{beta <Q x_i, K x_j>} - 1)

summed over heads (``Q = K = I`` by default); at ``beta = 0`` its limit
``(1 / (2 n^2)) sum_{i,j} <Q x_i, K x_j>`` (``|mean|^2 / 2`` for ``Q = K = I``). It is the
Lyapunov function of USA and of SA when ``Q^T K = V`` is symmetric (``+-``), docs/equations.md section 2.

At large ``beta`` (``e^{beta s}`` beyond ``e^700``) the weights are divided by ``e^c``, ``c``
a bound of the largest exponent, and the sums multiplied back once: energy, gradient and
dissipation are finite wherever their values are, and ``+-inf`` (never NaN) where they exceed
the float64 range (``E_beta ~ e^beta / (2 beta)`` beyond ``beta ~ 715``), as the PDE solver
reports them.

On ``S^1`` and ``S^2`` (SA or USA, ``Q = K = I``, no mask) the energy can also be summed in
``O(n)`` from the harmonic coefficients of the empirical measure
(:func:`meanfield.kernels.fastsum.energy`): ``method="fast"`` or ``"auto"`` (the velocity's choice,
:func:`meanfield.kernels.fastsum.use_fast`); ``"direct"``, the ``O(n^2)`` sum, is the default and the
reference. Its error is at most :func:`fast_energy_error`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from meanfield import attention as attention_registry
from meanfield.kernels.interaction import (
    EXP_SAFE,
    apply_matrix,
    energy_terms,
    exponent_bound,
    fast_energy_reason,
    times_exp,
    use_fast_energy,
)
from meanfield.kernels.tiling import (
    DEFAULT_MEMORY_LIMIT,
    Tiling,
    block_for,
    logit_tiles,
    value_columns,
    weighted_sum,
)
from particles.inputs import as_tokens, check_geometry
from particles.velocity import _as_batch, velocity


def _shape_out(x: np.ndarray, values: np.ndarray) -> Any:
    return values if x.ndim == 3 else values[0]


def _factors(model: Any, d: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ``(Q, K)`` pairs of the energy, one per head."""
    return [(Q, K) for Q, K, _ in model.matrices(d)]


ENERGY_KINDS = tuple(k.name for k in attention_registry.kinds() if k.energy is not None)
"""The attention kinds with an energy (their registry entry's ``energy``), whose energy
:func:`meanfield.kernels.fastsum.energy` sums (with ``Q = K = I``)."""


def fast_energy_error(model: Any) -> float:
    """The bound of :func:`meanfield.kernels.fastsum.energy`'s absolute error, ``2 eps e^beta`` with
    ``eps`` its coefficients' relative accuracy (``max(DEFAULT_TOL / 8, NUFFT_EPS_MIN)``,
    ``1.25e-13``): the coefficients' error enters the quadratic form twice, and the weights of
    the modes sum to at most 1 (see :func:`meanfield.kernels.fastsum.energy`); ``inf`` where
    ``e^beta`` overflows."""
    from meanfield.kernels import fastsum

    eps = max(fastsum.DEFAULT_TOL / 8, fastsum.NUFFT_EPS_MIN)
    with np.errstate(over="ignore"):
        return float(2.0 * eps * np.exp(float(model.beta)))




def energy(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, method: str = "direct"
) -> float | np.ndarray:
    """``E_beta(X)`` of docs/equations.md section 2 (``(batch,)`` for a batch), ``beta = 0`` included:
    the energy of the empirical measure, :func:`meanfield.kernels.interaction.weighted_energy`
    with the weights ``1/n`` (tiled ``expm1(beta s) / beta``, the Taylor series where ``beta
    |s| < 1e-8``, shifted exponents where ``e^{beta s}`` would overflow); ``method``: see
    :func:`energies`."""
    return energies(model, x, memory_limit=memory_limit, method=method)[0]


def log_energy(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, method: str = "direct"
) -> float | np.ndarray:
    """``log E_beta(X)`` (``(batch,)`` for a batch): finite where ``E_beta`` exceeds the
    float64 range (``beta`` beyond ~710 on the sphere, up to ``1e300``), one log-sum-exp of
    the shifted tiles (:class:`meanfield.kernels.interaction.EnergyTerms`); ``-inf`` where
    ``E_beta = 0``, NaN where ``E_beta < 0``."""
    return energies(model, x, memory_limit=memory_limit, method=method)[1]


def energies(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, method: str = "direct"
) -> tuple[Any, Any]:
    """``(E_beta(X), log E_beta(X))`` from one pass over the tiles (:func:`energy`,
    :func:`log_energy`).

    ``method``: ``"direct"`` (the tiled ``O(n^2)`` sum, the reference), ``"fast"`` (tokens on
    ``S^1``/``S^2``: :func:`meanfield.kernels.fastsum.energy`, ``O(n)``, absolute error at most
    :func:`fast_energy_error`; ``ValueError`` where it does not apply or the tokens are off the
    sphere) or ``"auto"`` (fast where the velocity would be, :func:`use_fast_energy`, and the
    tokens are unit vectors). A batch whose fast energy is not finite and positive (``e^beta``
    beyond float64, or round-off below 0 where ``E`` is near 0) is summed directly."""
    x = as_tokens(x, "x", model=model)
    xb = _as_batch(x)
    B, n, d = xb.shape
    if use_fast_energy(method, model, d, n):
        off = float(np.max(np.abs(np.linalg.norm(xb, axis=-1) - 1.0))) if n else 0.0
        if off > 1e-12 and method == "fast":
            msg = f"method='fast' needs tokens on the sphere: max ||x_i| - 1| = {off:.3g} > 1e-12"
            raise ValueError(msg)
        if off <= 1e-12:
            from meanfield.kernels import fastsum

            e = np.atleast_1d(fastsum.energy(model, xb))
            if np.all(np.isfinite(e)) and np.all(e > 0):
                return _shape_out(x, e), _shape_out(x, np.log(e))
    terms = energy_terms(model, xb, np.full((B, n), 1.0 / n), memory_limit=memory_limit)
    return _shape_out(x, terms.energy), _shape_out(x, terms.log_energy)


def energy_gradient(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT
) -> np.ndarray:
    """Euclidean gradient ``d E_beta / d x_i`` (shape of ``x``)::

        (1 / (2 n^2)) sum_h sum_j (e^{beta s_ij} Q^T K x_j + e^{beta s_ji} K^T Q x_j)

    with ``s_ij = <Q x_i, K x_j>`` (valid at ``beta = 0``, where ``e^0 = 1``).
    """
    x = as_tokens(x, "x", model=model)
    grad, shift = _scaled_gradient(model, _as_batch(x), memory_limit)
    if np.any(shift):
        grad = times_exp(grad, shift[:, None, None])
    return grad if x.ndim == 3 else grad[0]


def _scaled_gradient(model: Any, xb: np.ndarray, memory_limit: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(g, c)`` with ``grad E = e^c g`` per batch: ``c = 0`` unless the weights
    ``e^{beta s}`` would overflow (``beta`` beyond ~700 on the sphere), then ``c`` is the
    largest exponent bound of :func:`meanfield.kernels.interaction.exponent_bound`, so that
    ``g`` is finite."""
    B, n, d = xb.shape
    beta = model.beta
    grad = np.zeros_like(xb)
    tiling = Tiling(memory_limit, buffers=2, block=block_for(d))
    pairs = [(apply_matrix(Q, xb), apply_matrix(K, xb), Q, K) for Q, K in _factors(model, d)]
    shift = np.zeros(B)
    for q, k, _, _ in pairs:
        shift = np.maximum(shift, exponent_bound(beta, q, k))
    shift = np.where(shift > EXP_SAFE, shift, 0.0)
    for q, k, Q, K in pairs:
        kq = k @ Q  # rows (Q^T K x_j)^T
        symmetric = np.array_equal(Q, K)
        qk = q @ K  # rows (K^T Q x_j)^T
        kt = np.swapaxes(k, 1, 2)
        head = np.zeros_like(xb)
        kqc = value_columns(kq)
        for bs, rs, S in logit_tiles(q, kt, tiling):
            S *= beta
            if np.any(shift[bs]):
                S -= shift[bs, None, None]
            np.exp(S, out=S)
            head[bs, rs] += weighted_sum(S, kq[bs], None if kqc is None else kqc[:, bs])
            if not symmetric:
                head[bs] += np.matmul(np.swapaxes(S, 1, 2), qk[bs, rs])
        # Q = K: s_ij = s_ji and Q^T K = K^T Q, so both sums agree
        grad += 2.0 * head if symmetric else head
    grad /= 2.0 * n * n
    return grad, shift


def dissipation(
    model: Any,
    x: np.ndarray,
    geometry: str = "sphere",
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> float | np.ndarray:
    """``dE/dt = sum_i <grad_i E, x_i'>`` along the model's own flow (exact chain rule).

    For ``Q = K = I``, ``V = value I`` this equals the identities of docs/equations.md section 2:
    ``value (1/n) sum_i |x_i'|^2`` (USA) and ``value (1/n) sum_i |x_i'|^2 Z(x_i)`` (SA); the
    tests check both. For any model it is the exact rate of change of :func:`energy`.
    """
    check_geometry(geometry)
    x = as_tokens(x, "x", model=model)
    g, shift = _scaled_gradient(model, _as_batch(x), memory_limit)
    v = _as_batch(velocity(model, x, geometry, memory_limit=memory_limit, check=False))
    out = np.sum(g * v, axis=(-2, -1))
    if np.any(shift):  # +-inf only where dE/dt itself leaves the float range
        out = times_exp(out, shift)
    return out if x.ndim == 3 else float(out[0])


def partition(model: Any, x: np.ndarray) -> np.ndarray:
    """``Z_{mu_n}(x_i) = (1/n) sum_k e^{beta <x_i, x_k>}`` (``Q = K = I``), shape ``(..., n)``."""
    x = as_tokens(x, "x")
    G = gram(x)
    return np.mean(np.exp(model.beta * G), axis=-1)


def gram(x: np.ndarray) -> np.ndarray:
    """The Gram matrix ``<x_i, x_j>``: ``(n, n)`` or ``(batch, n, n)``."""
    x = as_tokens(x, "x")
    return x @ np.swapaxes(x, -1, -2)


def pairwise_inner_products(x: np.ndarray) -> np.ndarray:
    """``<x_i, x_j>`` for ``i < j``: ``(n(n-1)/2,)`` or ``(batch, n(n-1)/2)`` (Figure 1)."""
    G = gram(x)
    i, j = np.triu_indices(G.shape[-1], k=1)
    return G[..., i, j]


def inner_product_histogram(
    x: np.ndarray, bins: int = 50, range: tuple[float, float] = (-1.0, 1.0)  # noqa: A002
) -> tuple[np.ndarray, np.ndarray]:
    """Histogram (a density) of ``{<x_i, x_j>}_{i < j}``, pooled over a batch (Figure 1).

    Returns:
        ``(density, edges)`` as ``numpy.histogram`` with ``density=True``.
    """
    if int(bins) < 1:
        msg = f"bins must be >= 1, got {bins!r}"
        raise ValueError(msg)
    vals = pairwise_inner_products(x).ravel()
    if vals.size == 0:
        msg = "inner_product_histogram needs n >= 2 tokens"
        raise ValueError(msg)
    return np.histogram(np.clip(vals, *range), bins=int(bins), range=range, density=True)


def count_clusters(x: np.ndarray, threshold: float = 1e-3) -> int | np.ndarray:
    """Number of clusters: connected components of the graph linking ``i`` and ``j`` when
    ``<x_i, x_j> >= 1 - threshold`` (unit tokens; docs/equations.md section 5 uses ``delta = 1e-3``).

    Args:
        x: tokens ``(n, d)`` or ``(batch, n, d)``.
        threshold: ``delta`` in ``(0, 2]``.
    """
    if not (0.0 < float(threshold) <= 2.0):
        msg = f"threshold must lie in (0, 2], got {threshold!r}"
        raise ValueError(msg)
    x = as_tokens(x, "x")
    G = gram(x)
    Gb = G if G.ndim == 3 else G[None]
    counts = np.array(
        [connected_components(csr_matrix(g >= 1.0 - threshold), directed=False)[0] for g in Gb]
    )
    return counts if x.ndim == 3 else int(counts[0])


def count_clusters_angles(theta: np.ndarray, delta: float = 1e-3) -> np.ndarray:
    """Clusters of angles (last axis: tokens): components of ``cos(theta_i - theta_j) >= 1 -
    delta``.

    On the circle these components are the runs of sorted angles whose consecutive gaps are
    at most ``a = arccos(1 - delta)``, so their number is the number of circular gaps ``> a``
    (1 if there is none): the same count as :func:`count_clusters` of the points
    ``(cos theta_i, sin theta_i)``, in ``O(n log n)`` instead of ``O(n^2)``.
    """
    if not 0 < delta <= 2:
        msg = f"delta must lie in (0, 2], got {delta!r}"
        raise ValueError(msg)
    s = np.sort(np.mod(theta, 2 * np.pi), axis=-1)
    gaps = np.diff(s, axis=-1, append=s[..., :1] + 2 * np.pi)
    big = np.count_nonzero(gaps > math.acos(1 - delta), axis=-1)
    return np.maximum(big, 1)


def kuramoto_order(x: np.ndarray) -> float | np.ndarray:
    """``r = |(1/n) sum_i x_i|`` (on the circle ``|(1/n) sum_i e^{i theta_i}|``)."""
    x = as_tokens(x, "x")
    r = np.linalg.norm(x.mean(axis=-2), axis=-1)
    return r if x.ndim == 3 else float(r)


def mean_covariance(x: np.ndarray, ddof: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Empirical mean ``(..., d)`` and covariance ``(..., d, d)`` of the tokens.

    Args:
        ddof: ``1`` (default) for the unbiased estimate, ``0`` for the plug-in one.
    """
    x = as_tokens(x, "x")
    n = x.shape[-2]
    if n - ddof < 1:
        msg = f"mean_covariance needs n > ddof, got n={n}, ddof={ddof}"
        raise ValueError(msg)
    m = x.mean(axis=-2)
    c = x - m[..., None, :]
    cov = np.swapaxes(c, -1, -2) @ c / (n - ddof)
    return m, cov


__all__ = [
    "ENERGY_KINDS",
    "fast_energy_error",
    "fast_energy_reason",
    "use_fast_energy",
    "count_clusters",
    "count_clusters_angles",
    "dissipation",
    "energies",
    "energy",
    "energy_gradient",
    "gram",
    "inner_product_histogram",
    "kuramoto_order",
    "log_energy",
    "mean_covariance",
    "pairwise_inner_products",
    "partition",
]
