"""The velocity field of the particle system (docs/equations.md section 2).

.. autosummary::
   attention
   velocity
   project_tangent

``attention(model, x)`` is the un-projected sum over heads ``sum_h sum_j A^h_ij V_h x_j``
(with the weights of the model's attention kind, see :mod:`meanfield.kernels`);
``velocity`` applies ``P_x^perp`` on the sphere (SA (2.3), USA, multi-head (2.7)) and nothing
in ``R^d`` (pure self-attention (9.1)). The sign ``value = -1`` (repulsion) is folded into
``V`` by :meth:`meanfield.Model.matrices`; ``beta = 0`` needs no special case (all weights
``e^0 = 1``). Inputs ``(n, d)`` or ``(batch, n, d)``; the work is matrix products on tiles
of at most ``memory_limit`` bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meanfield import backend as bk
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, Kernel, Tiling, fastsum
from meanfield.kernels.interaction import ambient_field, apply_matrix, fast_field_at, project_tangent
from particles.inputs import as_tokens, check_geometry


def _as_batch(x: Any) -> Any:
    return x if x.ndim == 3 else x[None]


def _checked(model: Any, x: Any, check: bool) -> Any:
    """Tokens as a C-ordered array of their backend (NumPy: float64 unless float32 was
    given; torch: as given), validated (on a host copy for torch) when ``check``."""
    if not bk.is_torch(x):
        single = getattr(x, "dtype", None) == np.float32
        if check:
            x = as_tokens(x, "x", model=model)
        return np.ascontiguousarray(x, dtype=np.float32 if single else float)
    if check:
        as_tokens(bk.to_numpy(x), "x", model=model)
    return x.contiguous()


def attention(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, check: bool = True
) -> np.ndarray:
    """``sum_h sum_j A^h_ij V_h x_j`` (before projection), shape of ``x``: the field of the
    empirical measure (:func:`meanfield.kernels.interaction.ambient_field`, equal weights).

    Args:
        model: a :class:`meanfield.Model`.
        x: tokens, ``(n, d)`` or ``(batch, n, d)``.
        memory_limit: bytes allowed for the ``n x n`` tiles.
        check: validate ``x`` (shape, finiteness, dimension); the integrators skip it.
    """
    x = _checked(model, x, check)
    xb = _as_batch(x)
    out = ambient_field(model, xb, xb, feedforward=False, memory_limit=memory_limit)[0]
    return out if x.ndim == 3 else out[0]


def attention_weights(
    model: Any, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT
) -> np.ndarray:
    """The weight matrices ``A_ij`` of every kind (rows as in docs/equations.md section 2), for tests
    and plots at moderate ``n``: ``([batch,] n, n)``, with a leading ``heads`` axis when the
    model has more than one head. (The attention applied to the identity matrix.)"""
    x = as_tokens(x, "x", model=model)
    kernel = Kernel.from_model(model)
    tiling = Tiling(memory_limit)
    xb = _as_batch(x)
    B, n, _ = xb.shape
    eye = np.broadcast_to(np.eye(n), (B, n, n))
    out = [
        kernel.apply(apply_matrix(Q, xb), apply_matrix(K, xb), eye, tiling)
        for Q, K, _ in model.matrices(xb.shape[-1])
    ]
    W = np.stack(out) if len(out) > 1 else out[0][None]
    W = W if x.ndim == 3 else W[:, 0]
    return W if len(out) > 1 else W[0]


def velocity(
    model: Any,
    x: np.ndarray,
    geometry: str = "sphere",
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    check: bool = True,
    method: str = "auto",
    field_tol: float = fastsum.FIELD_TOL,
    fast_tol: float | None = None,
) -> np.ndarray:
    """The right-hand side ``x_i'`` of docs/equations.md section 2 (SA (2.3), USA, (2.7), (2.8), (9.1)).

    Args:
        model: a :class:`meanfield.Model` (attention kind, ``beta``, ``Q, K, V`` or heads,
            sign, causal mask).
        x: tokens, ``(n, d)`` or ``(batch, n, d)``.
        geometry: ``"sphere"`` projects with ``P_{x_i}^perp``; ``"euclidean"`` does not.
        memory_limit: bytes allowed for the temporary ``n x n`` attention tiles.
        check: validate ``x`` (the integrators validate once and skip it).
        method: ``"direct"`` (the tiled sum, the reference), ``"fast"`` (fast summation on
            ``S^1``/``S^2``, :mod:`meanfield.kernels.fastsum`; ``ValueError`` naming the reason where it
            does not apply) or ``"auto"`` (fast where it applies and pays, the measured
            crossover :data:`meanfield.kernels.fastsum.CROSSOVER`).
        field_tol: the fast field's relative accuracy per point (default
            :data:`meanfield.kernels.fastsum.FIELD_TOL`, ``1e-10``; points it cannot vouch for
            are recomputed), the keyword of ``simulate`` and ``solve_lagrangian`` too.
        fast_tol: the old spelling of ``field_tol`` (accepted with a ``FutureWarning``).

    Returns:
        An array of the shape of ``x``.
    """
    check_geometry(geometry)
    tol = fastsum.field_tol_of(field_tol, fast_tol, "particles.velocity")
    x = _checked(model, x, check)
    xb = _as_batch(x)
    n, d = xb.shape[-2:]
    route = fastsum.choose_fast(method, model, d, geometry, n, n, backend_numpy=bk.is_numpy(xb))
    if route is not None:
        return (_fast_velocity(model, xb, memory_limit, tol, route)
                .astype(x.dtype, copy=False).reshape(x.shape))
    a = ambient_field(model, xb, xb, memory_limit=memory_limit)[0]  # (2.8): inside P
    a = a if x.ndim == 3 else a[0]
    if geometry == "sphere":
        return project_tangent(x, a)
    return a


def _fast_velocity(model: Any, xb: np.ndarray, memory_limit: int,
                   tol: float = fastsum.FIELD_TOL,
                   route: fastsum.FastRoute | None = None) -> np.ndarray:
    """:func:`velocity` by fast summation (float64), the points it cannot vouch for by the
    direct sum (:func:`meanfield.kernels.interaction.fast_field_at` with ``weights=None``: equal
    weights, causal by index)."""
    x64 = np.ascontiguousarray(xb, dtype=float)
    return fast_field_at(model, x64, x64, None, "none", True, memory_limit, tol=tol,
                         route=route).velocity


__all__ = ["attention", "attention_weights", "project_tangent", "velocity"]
