"""The interaction energy of a weighted measure, with the partition function on the way.

.. autosummary::
   has_energy
   use_fast_energy
   weighted_energy
   energy_terms

For ``mu = sum_j w_j delta_{x_j}`` (docs/equations.md sections 2 and 3, the ``-1``
convention of (3.5))::

    E_beta[mu] = (1 / (2 beta)) sum_h sum_{i,j} w_i w_j (e^{beta <Q_h x_i, K_h x_j>} - 1)
    Z_mu(x_i)  = sum_j w_j e^{beta <x_i, x_j>}

Equal weights ``1/n`` give the particle energy of Remark 3.8 (``particles.energy`` is this
function with those weights). Each tile sums ``expm1(beta s) / beta``; where ``beta |s|`` is
below ``1e-8`` the Taylor series ``s + beta s^2 / 2 + beta^2 s^3 / 6`` replaces it (relative
error below ``(beta |s|)^3 / 24``), which tends continuously to the ``beta = 0`` limit.

**Fast path** (``method="fast"``, or ``"auto"`` where the fast field pays,
:func:`use_fast_energy`): on ``S^1`` and ``S^2``, for SA and USA with ``Q = K = I``, the
energy is :func:`meanfield.kernels.fastsum.energy` (Parseval on the measure's harmonic coefficients,
``O(n + L^2 log L)``, absolute error at most ``2 eps e^beta``, ``eps = 3e-13``) and ``Z_mu`` is
the zonal sum of :mod:`meanfield.kernels.fastsum` (adjoint nonuniform transform, Funk–Hecke
multipliers, synthesis at the nodes; absolute error of ``Z`` at most ``e^beta (tail + C_Z eps
max_i Z_i e^{-beta})``, :data:`meanfield.kernels.fastsum.NUFFT_ERROR`): a Lagrangian run of ``2 10^5``
nodes then has its energy and dissipation outputs in seconds, where the tiled sum takes
``O(n^2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from meanfield import attention as attention_registry
from meanfield.kernels import fastsum
from meanfield.kernels.tiling import DEFAULT_MEMORY_LIMIT, Tiling, _logits, block_for
from meanfield.lagrangian.field import _apply


def has_energy(model: Any) -> bool:
    """Whether ``E_beta`` is monotone along the exact flow of ``model`` (docs/equations.md
    sections 2-3): a kind with an energy (SA, USA), ``Q = K = I``, ``V = +-I``, no mask, no
    noise, no feed-forward (:meth:`meanfield.attention.AttentionKind.has_energy`)."""
    return attention_registry.resolve(model.attention).has_energy(model)


def fast_energy_reason(model: Any, d: int) -> str | None:
    """Why the fast path (module docstring) does not apply (``None``: it does): it needs
    :func:`has_energy`'s model (SA or USA, ``Q = K = I``, ``V = +-I``, no mask, noise or
    feed-forward), ``beta > 0`` and ``d`` 2 or 3 (``S^1``, ``S^2``)."""
    if not has_energy(model):
        return ("the fast energy needs SA or USA with Q = K = I, V = +-I, no mask, no noise and "
                f"no feed-forward; got attention={model.attention!r}")
    if d not in (2, 3):
        return f"the fast energy is on S^1 and S^2 (d = 2 or 3), got d = {d}"
    if not float(model.beta) > 0:
        return f"beta={model.beta!r}: the fast energy needs beta > 0 (beta = 0 is a plain mean)"
    return None


def use_fast_energy(method: str, model: Any, d: int, n: int) -> bool:
    """The choice point of ``method`` (:data:`meanfield.kernels.fastsum.METHODS`) for the energy and
    ``Z_mu`` of ``n`` nodes on the sphere: ``"direct"`` never, ``"fast"`` always
    (``ValueError`` naming the reason where it does not apply), ``"auto"`` where it applies
    and the fast field pays (:func:`meanfield.kernels.fastsum.use_fast`, ``n`` points and nodes)."""
    if method not in fastsum.METHODS:
        msg = f"method must be one of {fastsum.METHODS}, got {method!r}"
        raise ValueError(msg)
    if method == "direct":
        return False
    reason = fast_energy_reason(model, d)
    if method == "fast":
        if reason is not None:
            msg = f"method='fast' does not apply to the energy: {reason}"
            raise ValueError(msg)
        return True
    return reason is None and fastsum.use_fast("auto", model, d, "sphere", n, n)


def fast_partition(model: Any, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``Z_mu(x_i) - sum_j w_j = sum_j w_j expm1(beta <x_i, x_j>)`` at the nodes ``x`` (B, n,
    d) on ``S^1``/``S^2`` (``weights`` (B, n)) by fast summation (module docstring): the
    scaled sum ``sum_j w_j e^{beta (<x_i, x_j> - 1)}`` of :mod:`meanfield.kernels.fastsum`, times
    ``e^beta``. Absolute error at most ``e^beta (tail + C_Z eps max_i Z_i e^{-beta})`` (``+inf``
    where ``e^beta`` overflows); no validation (the model must pass :func:`fast_energy_reason`)."""
    from meanfield.special import exp_beta

    B, n, d = x.shape
    plan = fastsum._plan(model, d, fastsum.DEFAULT_TOL)
    eps = max(fastsum.DEFAULT_TOL / 8, fastsum.NUFFT_EPS_MIN)
    sums = fastsum._sums_sphere if d == 3 else fastsum._sums_circle
    scale = exp_beta(float(model.beta))
    out = np.empty((B, n))
    for b in range(B):
        zs = sums(x[b], x[b], np.asarray(weights[b], dtype=float), plan.k, plan.g, plan.q, eps,
                  False, 0)[0]
        with np.errstate(over="ignore", invalid="ignore"):
            out[b] = scale * zs - float(np.sum(weights[b]))
    return out


def weighted_energy(
    model: Any,
    x: np.ndarray,
    weights: np.ndarray,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    partition: bool = False,
    method: str = "direct",
) -> tuple[np.ndarray, np.ndarray | None]:
    """``E_beta[mu]`` for ``x`` of shape ``(B, n, d)``, ``weights`` ``(B, n)``; shape ``(B,)``,
    ``beta = 0`` included (the limit ``(1/2) sum_ij w_i w_j <Q x_i, K x_j>``).

    With ``partition=True`` also ``Z_mu(x_i) - 1 = sum_j w_j expm1(beta <Q x_i, K x_j>)``
    (first head; ``(B, n)``), from the same tiles: the SA dissipation weight.

    Where ``e^{beta s}`` would overflow (the bound :func:`exponent_bound` above
    :data:`EXP_SAFE`) the tiles sum ``e^{beta s - c}`` and scale back once
    (:func:`times_exp`): the energy is finite wherever its value fits in a float, ``+inf``
    beyond (:func:`energy_terms` gives its logarithm too).

    ``method``: ``"direct"`` (the tiled sum, the reference), ``"fast"`` or ``"auto"``
    (:func:`use_fast_energy`; the module docstring's fast path, nodes on the sphere).
    """
    terms = energy_terms(model, x, weights, memory_limit=memory_limit, partition=partition,
                         method=method)
    return terms.energy, terms.partition


@dataclass
class EnergyTerms:
    """``E_beta = plain + sum_h scaled_h e^{shift_h}`` per batch (each ``(B,)``; ``shift_h = 0``
    and ``scaled_h = 0`` where the tiles of head ``h`` were not shifted), and the partition
    function ``Z - 1`` when asked for."""

    plain: np.ndarray
    scaled: list[np.ndarray]
    shift: list[np.ndarray]
    partition: np.ndarray | None

    @property
    def energy(self) -> np.ndarray:
        """``E_beta``: ``+inf`` where it exceeds the float64 range."""
        total = self.plain.copy()
        for a, c in zip(self.scaled, self.shift):
            total += times_exp(a, c)
        return total

    @property
    def log_energy(self) -> np.ndarray:
        """``log E_beta`` as one log-sum-exp of the terms, finite wherever ``E_beta > 0``
        (at ``beta = 1e300`` too); ``-inf`` where ``E_beta = 0``, NaN where it is negative."""
        a = np.stack([np.zeros_like(self.plain), *self.shift])
        b = np.stack([self.plain, *self.scaled])
        beyond = np.any(np.isinf(a) & (b > 0), axis=0)  # beta s itself beyond float64
        a = np.where(np.isinf(a), 0.0, a)
        with np.errstate(divide="ignore"):
            value, sign = logsumexp(a, b=b, axis=0, return_sign=True)
        out = np.where(sign > 0, value, np.where(sign == 0, -np.inf, np.nan))
        return np.where(beyond, np.inf, out)


def energy_terms(
    model: Any,
    x: np.ndarray,
    weights: np.ndarray,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    partition: bool = False,
    method: str = "direct",
) -> EnergyTerms:
    """The tiles of :func:`weighted_energy`, kept apart so that both ``E_beta`` and
    ``log E_beta`` follow (:class:`EnergyTerms`): docs/equations.md (3.5), -1 convention.

    ``method``: as :func:`weighted_energy`. The fast energy is one term (``plain``); where it
    is not finite and positive (``e^beta`` beyond float64, or round-off below 0 where ``E`` is
    near 0) the tiled sum replaces it."""
    B, n, d = x.shape
    if use_fast_energy(method, model, d, n):
        e = np.atleast_1d(fastsum.energy(model, x, weights))
        if np.all(np.isfinite(e)) and np.all(e > 0):
            z = fast_partition(model, x, weights) if partition else None
            return EnergyTerms(e, [], [], z)
    beta = float(model.beta)
    total = np.zeros(B)
    scaled: list[np.ndarray] = []
    shifts: list[np.ndarray] = []
    z = np.zeros((B, n)) if partition else None
    tiling = Tiling(memory_limit, buffers=2, block=block_for(d))
    for head, (Q, K, _) in enumerate(model.matrices(d)):
        q, k = _apply(Q, x), _apply(K, x)
        if beta == 0.0:  # the limit of expm1(beta s) / beta: s; Z - 1 = 0
            mq, mk = (np.einsum("bn,bnd->bd", weights, a) for a in (q, k))
            total += np.sum(mq * mk, axis=-1) / 2.0
            continue
        kt = np.ascontiguousarray(np.swapaxes(k, 1, 2))
        shift = exponent_bound(beta, q, k)
        head_scaled, head_shift = np.zeros(B), np.full(B, -np.inf)
        for bs, rs in tiling.tiles(B, n, n):
            S = _logits(q[bs, rs], kt[bs], np.empty((bs.stop - bs.start, rs.stop - rs.start, n)))
            if np.any(shift[bs] > EXP_SAFE):  # e^{beta s - c}, scaled back by e^c once
                # c: the tile's largest exponent (not the bound: at beta = 1e300 the round-off
                # of s alone moves beta s by ~1e284), merged into the head's running log-sum-exp
                with np.errstate(over="ignore", invalid="ignore"):  # beta s beyond float64
                    S *= beta
                    c = S.max(axis=(1, 2))
                    S -= c[:, None, None]
                    np.exp(S, out=S)
                bad = np.isnan(S)  # inf - inf: c = +inf (then E = log E = inf), the largest
                if np.any(bad):  # entries count 1; c = -inf (every weight 0), they count 0
                    S[bad] = np.broadcast_to((c == np.inf)[:, None, None], S.shape)[bad]
                rows = np.einsum("brm,bm->br", S, weights[bs])
                mass = weights[bs].sum(axis=1)
                part = np.einsum("br,br->b", rows, weights[bs, rs]) / (2.0 * beta)
                top = np.maximum(head_shift[bs], c)
                with np.errstate(invalid="ignore"):  # inf - inf where top = inf: see below
                    head_scaled[bs] = (head_scaled[bs] * np.nan_to_num(np.exp(head_shift[bs] - top))
                                       + part * np.nan_to_num(np.exp(c - top), nan=1.0))
                head_shift[bs] = top
                total[bs] -= weights[bs, rs].sum(axis=1) * mass / (2.0 * beta)
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
            total[bs] += np.einsum("br,br->b", rows, weights[bs, rs]) / 2.0
            if z is not None and head == 0:
                z[bs, rs] = rows * beta
        scaled.append(head_scaled)
        shifts.append(np.where(head_shift == -np.inf, 0.0, head_shift))  # unshifted: e^0
    return EnergyTerms(total, scaled, shifts, z)


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
    with np.errstate(over="ignore"):  # inf: beyond float64, shifted all the same
        nq = np.sqrt(np.einsum("bnd,bnd->bn", q, q)).max(axis=1)
        nk = np.sqrt(np.einsum("bnd,bnd->bn", k, k)).max(axis=1)
        return beta * nq * nk


__all__ = ["EXP_SAFE", "EnergyTerms", "energy_terms", "exponent_bound", "fast_energy_reason",
           "fast_partition", "has_energy", "times_exp", "use_fast_energy", "weighted_energy"]
