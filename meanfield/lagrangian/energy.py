"""The interaction energy of a weighted measure, with the partition function on the way.

.. autosummary::
   has_energy
   weighted_energy

For ``mu = sum_j w_j delta_{x_j}`` (docs/equations.md sections 2 and 3, the ``-1``
convention of (3.5))::

    E_beta[mu] = (1 / (2 beta)) sum_h sum_{i,j} w_i w_j (e^{beta <Q_h x_i, K_h x_j>} - 1)
    Z_mu(x_i)  = sum_j w_j e^{beta <x_i, x_j>}

Equal weights ``1/n`` give the particle energy of Remark 3.8 (``particles.energy`` is this
function with those weights). Each tile sums ``expm1(beta s) / beta``; where ``beta |s|`` is
below ``1e-8`` the Taylor series ``s + beta s^2 / 2 + beta^2 s^3 / 6`` replaces it (relative
error below ``(beta |s|)^3 / 24``), which tends continuously to the ``beta = 0`` limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import DEFAULT_MEMORY_LIMIT, Tiling, _logits, block_for
from .field import _apply


def has_energy(model: Any) -> bool:
    """Whether ``E_beta`` is monotone along the exact flow of ``model`` (docs/equations.md
    sections 2-3): SA or USA, ``Q = K = I``, ``V = +-I``, no mask, no noise, no feed-forward."""
    return (model.attention in ("softmax", "unnormalized") and model.is_identity
            and not model.causal and model.noise == 0
            and getattr(model, "feedforward", None) is None)


def weighted_energy(
    model: Any,
    x: np.ndarray,
    weights: np.ndarray,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    partition: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``E_beta[mu]`` for ``x`` of shape ``(B, n, d)``, ``weights`` ``(B, n)``; shape ``(B,)``,
    ``beta = 0`` included (the limit ``(1/2) sum_ij w_i w_j <Q x_i, K x_j>``).

    With ``partition=True`` also ``Z_mu(x_i) - 1 = sum_j w_j expm1(beta <Q x_i, K x_j>)``
    (first head; ``(B, n)``), from the same tiles: the SA dissipation weight.

    Where ``e^{beta s}`` would overflow (the bound :func:`exponent_bound` above
    :data:`EXP_SAFE`) the tiles sum ``e^{beta s - c}`` and scale back once
    (:func:`times_exp`): the energy is finite wherever its value fits in a float, ``+inf``
    beyond.
    """
    B, n, d = x.shape
    beta = float(model.beta)
    total = np.zeros(B)
    shifted = np.zeros(B)  # contributions of the shifted tiles, already divided by 2 beta
    z = np.zeros((B, n)) if partition else None
    tiling = Tiling(memory_limit, buffers=2, block=block_for(d))
    for head, (Q, K, _) in enumerate(model.matrices(d)):
        q, k = _apply(Q, x), _apply(K, x)
        if beta == 0.0:  # the limit of expm1(beta s) / beta: s; Z - 1 = 0
            mq, mk = (np.einsum("bn,bnd->bd", weights, a) for a in (q, k))
            total += np.sum(mq * mk, axis=-1)
            continue
        kt = np.ascontiguousarray(np.swapaxes(k, 1, 2))
        shift = exponent_bound(beta, q, k)
        for bs, rs in tiling.tiles(B, n, n):
            S = _logits(q[bs, rs], kt[bs], np.empty((bs.stop - bs.start, rs.stop - rs.start, n)))
            if np.any(shift[bs] > EXP_SAFE):  # e^{beta s - c}, scaled back by e^c once
                c = shift[bs]
                S *= beta
                S -= c[:, None, None]
                np.exp(S, out=S)
                rows = np.einsum("brm,bm->br", S, weights[bs])
                mass = weights[bs].sum(axis=1)
                part = np.einsum("br,br->b", rows, weights[bs, rs])
                shifted[bs] += (times_exp(part / (2.0 * beta), c)
                                - weights[bs, rs].sum(axis=1) * mass / (2.0 * beta))
                if z is not None and head == 0:
                    z[bs, rs] = times_exp(rows, c[:, None]) - mass[:, None]
                continue
            if beta * np.max(np.abs(S), initial=0.0) < 1e-8:
                S2 = S * S
                S += S2 * (beta / 2) + S2 * S * (beta * beta / 6)
            else:
                S *= beta
                np.expm1(S, out=S)
                S /= beta
            rows = np.einsum("brm,bm->br", S, weights[bs])
            total[bs] += np.einsum("br,br->b", rows, weights[bs, rs])
            if z is not None and head == 0:
                z[bs, rs] = rows * beta
    return total / 2.0 + shifted, z


def times_exp(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a e^c`` as ``sign(a) e^{log|a| + c}``: finite wherever the product is (``e^c``
    alone may overflow), ``+-inf`` beyond the float range."""
    with np.errstate(over="ignore", divide="ignore"):
        return np.sign(a) * np.exp(np.log(np.abs(a)) + c)


EXP_SAFE = 700.0
"""Exponents above this (``e^700 ~ 1e304``) are shifted before ``exp``."""


def exponent_bound(beta: float, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """A bound ``beta max_i |q_i| max_j |k_j| >= beta s_ij`` per batch (Cauchy–Schwarz): the
    exponent that the weights are divided by when they would overflow."""
    nq = np.sqrt(np.einsum("bnd,bnd->bn", q, q)).max(axis=1)
    nk = np.sqrt(np.einsum("bnd,bnd->bn", k, k)).max(axis=1)
    return beta * nq * nk


__all__ = ["EXP_SAFE", "exponent_bound", "has_energy", "times_exp", "weighted_energy"]
