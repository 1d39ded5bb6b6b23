"""The attention field of a weighted measure and its divergence: the Lagrangian solver's entry
points, with the validation of the measure.

.. autosummary::
   FieldResult
   FieldState
   weighted_field
   field_at
   check_measure
   ambient_field
   project_tangent

For ``mu = sum_j w_j delta_{x_j}`` the velocity of a point ``x`` is the attention output of
docs/equations.md section 2 with the weights ``w_j`` in place of ``1/n`` (docs/lagrangian.md
section 1), projected with ``P_x = I - x x^T`` on the sphere; the divergence that the
Lagrangian solver integrates, ``d/dt log J = div X``, comes out of the same tiled pass. The
field itself, shared with the particle system, is :mod:`meanfield.kernels.interaction`
(:func:`ambient_field`, :func:`project_tangent`, :class:`FieldResult`, :class:`FieldState`,
imported here from there); this module validates the measure and chooses between the direct
and the fast sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.arguments import nonnegative_weights
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, fastsum
from meanfield.kernels.interaction import (
    FieldResult,
    FieldState,
    ambient_field,
    fast_field_at,
    finish_field,
    project_tangent,
)

GEOMETRIES = ("sphere", "euclidean")
"""``sphere``: ``S^{d-1}`` (layer normalisation, the field projected with ``P_x``);
``euclidean``: ``R^d`` (no projection, (9.1))."""

SPHERE_TOL = 1e-10
"""Largest ``| |x_j| - 1 |`` accepted for a node on the sphere."""


# -- validation ---------------------------------------------------------------------------

def _check_model(model: Any) -> None:
    why = attention_registry.require(model.attention, "lagrangian").causal_degenerate
    if model.causal and why is not None:
        msg = (f"model: attention={model.attention!r} with causal=True is degenerate ({why}); "
               "use causal=False")
        raise ValueError(msg)
    if model.noise > 0:
        msg = (f"model.noise={model.noise!r}: the Lagrangian (characteristics) solver has no "
               "noise term; meanfield.solve (the spectral solver) is the solver that has noise")
        raise ValueError(msg)


def _as_array(value: Any, name: str) -> np.ndarray:
    try:
        a = np.array(bk.to_numpy(value), dtype=float)
    except (TypeError, ValueError):
        msg = f"{name} must be a numeric array, got {type(value).__name__}"
        raise ValueError(msg) from None
    if not np.all(np.isfinite(a)):
        bad = a[~np.isfinite(a)].ravel()[0]
        msg = f"{name} must be finite, got {bad!r} (shape {a.shape})"
        raise ValueError(msg)
    return a


def _check_nodes(x: Any, name: str, geometry: str, model: Any) -> np.ndarray:
    a = _as_array(x, name)
    if a.ndim not in (2, 3) or a.shape[-2] < 1 or a.shape[-1] < 1 or a.ndim == 3 and a.shape[0] < 1:
        msg = f"{name} must have shape (n, d) or (batch, n, d) with n, d >= 1, got {a.shape}"
        raise ValueError(msg)
    model.check_dim(a.shape[-1])
    if geometry == "sphere":
        off = np.abs(np.linalg.norm(a, axis=-1) - 1.0)
        if np.max(off) > SPHERE_TOL:
            i = np.unravel_index(np.argmax(off), off.shape)
            msg = (f"{name} must lie on the unit sphere for geometry='sphere': "
                   f"| |{name}[{', '.join(map(str, i))}]| - 1 | = {off[i]:.3g} > {SPHERE_TOL:g}")
            raise ValueError(msg)
    return a


def _check_weights(weights: Any, x: np.ndarray) -> np.ndarray:
    if weights is None:
        msg = f"weights must have shape (n,) or the batch shape {x.shape[:-1]} of x, got None"
        raise ValueError(msg)
    w = nonnegative_weights(weights, (x.shape[-2:-1], x.shape[:-1]))
    n = x.shape[-2]
    total = w.sum(axis=-1)
    if np.any(np.abs(total - 1.0) > 1e-12 * n):
        worst = np.ravel(total)[np.argmax(np.abs(np.ravel(total) - 1.0))]
        msg = (f"weights must sum to 1 (a probability measure; tolerance 1e-12 n = "
               f"{1e-12 * n:.3g}), got sum {worst!r}")
        raise ValueError(msg)
    return np.broadcast_to(w, x.shape[:-1]) if x.ndim == 3 else w[None]


def _check_labels(labels: Any, x: np.ndarray, model: Any, name: str = "labels") -> np.ndarray | None:
    if not model.causal:
        if labels is not None:
            msg = (f"{name} given for a model with causal=False: labels are the positions of "
                   "causal (masked) attention; pass labels=None or a causal model")
            raise ValueError(msg)
        return None
    if labels is None:
        msg = f"{name} missing: the model is causal (masked), each node needs a label in [0, 1]"
        raise ValueError(msg)
    lab = _as_array(labels, name)
    if lab.shape not in (x.shape[-2:-1], x.shape[:-1]):
        msg = f"{name} must have shape (n,) or {x.shape[:-1]} for x of shape {x.shape}, got {lab.shape}"
        raise ValueError(msg)
    if np.any(lab < 0) or np.any(lab > 1):
        msg = f"{name} must lie in [0, 1], got values in [{lab.min()!r}, {lab.max()!r}]"
        raise ValueError(msg)
    return np.broadcast_to(lab, x.shape[:-1]) if x.ndim == 3 else lab[None]


def _check_geometry(geometry: Any) -> None:
    if geometry not in GEOMETRIES:
        msg = f"geometry must be one of {GEOMETRIES}, got {geometry!r}"
        raise ValueError(msg)


def check_measure(model: Any, x: Any, weights: Any, *, geometry: str = "sphere",
                  labels: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Validate a weighted measure for :func:`weighted_field` (``ValueError`` naming the
    field): the model (a kind that declares ``"lagrangian"``, no noise), the geometry, the
    nodes ``x`` (finite, on the sphere for ``geometry="sphere"``), the weights (``>= 0``,
    summing to 1) and the labels of a causal model. Returns ``(x, weights (B, n), labels (B,
    n) or None)`` as float64 NumPy arrays."""
    _check_model(model)
    _check_geometry(geometry)
    xa = _check_nodes(x, "x", geometry, model)
    return xa, _check_weights(weights, xa), _check_labels(labels, xa, model)


def weighted_field(
    model: Any,
    x: Any,
    weights: Any,
    *,
    geometry: str = "sphere",
    labels: Any = None,
    divergence: bool = True,
    state: FieldState | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    method: str = "auto",
    field_tol: float = fastsum.FIELD_TOL,
    fast_tol: float | None = None,
) -> FieldResult:
    """The velocity and its divergence at the nodes of ``mu = sum_j w_j delta_{x_j}``
    (docs/lagrangian.md sections 1-2).

    Args:
        model: a :class:`meanfield.Model` whose attention kind declares ``"lagrangian"``
            (:mod:`meanfield.attention`); no noise.
        x: nodes, ``(n, d)`` or ``(B, n, d)``; unit vectors for ``geometry="sphere"``. A torch
            tensor computes on torch (its device and precision) and returns tensors.
        weights: ``(n,)`` or ``(B, n)``, ``>= 0``, summing to 1 (to ``1e-12 n``).
        geometry: ``"sphere"`` (``P_x F``, surface divergence) or ``"euclidean"``.
        labels: ``(n,)`` or ``(B, n)`` in ``[0, 1]`` for a causal model (node ``i`` attends to
            the nodes with label ``<= label_i``); ``None`` otherwise.
        divergence: also compute the divergence.
        state: the previous call's :attr:`FieldResult.state` (Sinkhorn warm start).
        memory_limit: bytes allowed for the temporary ``n x n`` tiles.
        method: ``"direct"`` (the tiled sum, the reference), ``"fast"`` (fast summation on
            ``S^1``/``S^2``, :mod:`meanfield.kernels.fastsum`, accurate to ``field_tol`` relative per
            point, default ``1e-10``; ``ValueError`` naming the reason where it does not apply) or ``"auto"``
            (fast where it applies and pays: :data:`meanfield.kernels.fastsum.CROSSOVER`).
        field_tol: the fast field's relative accuracy per point (docs/particles.md, "Fast
            field"; the points it cannot vouch for are recomputed), the keyword of
            ``particles.simulate`` and ``solve_lagrangian`` too.
        fast_tol: the old spelling of ``field_tol`` (accepted with a ``FutureWarning``).

    Returns:
        :class:`FieldResult`.
    """
    return field_at(model, x, x, weights, geometry=geometry, labels=labels, point_labels=labels,
                    divergence=divergence, state=state, memory_limit=memory_limit,
                    method=method,
                    field_tol=fastsum.field_tol_of(field_tol, fast_tol, "weighted_field"))


def field_at(
    model: Any,
    points: Any,
    x: Any,
    weights: Any,
    *,
    geometry: str = "sphere",
    labels: Any = None,
    point_labels: Any = None,
    divergence: bool = True,
    state: FieldState | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    method: str = "auto",
    field_tol: float = fastsum.FIELD_TOL,
    fast_tol: float | None = None,
) -> FieldResult:
    """The field of ``mu = sum_j w_j delta_{x_j}`` (nodes ``x``) and its divergence at other
    ``points`` (``(p, d)`` or ``(B, p, d)``; on the sphere for ``geometry="sphere"``), with
    ``point_labels`` for a causal model; otherwise as :func:`weighted_field`. For Sinkhorn
    the potentials are those of the nodes (fixed in the point)."""
    tol = fastsum.field_tol_of(field_tol, fast_tol, "field_at")
    xa, w, klab = check_measure(model, x, weights, geometry=geometry, labels=labels)
    pa = _check_nodes(points, "points", geometry, model)
    if pa.ndim != xa.ndim or pa.shape[-1] != xa.shape[-1] or (xa.ndim == 3 and pa.shape[0] != xa.shape[0]):
        msg = f"points must match x in batch and dimension: points {pa.shape}, x {xa.shape}"
        raise ValueError(msg)
    qlab = _check_labels(point_labels, pa, model, "point_labels")
    if state is not None and not isinstance(state, FieldState):
        msg = f"state must be a FieldState (a previous FieldResult.state) or None, got {type(state).__name__}"
        raise ValueError(msg)
    batched = xa.ndim == 3
    # a torch tensor x runs on torch, on its device and in its precision (meanfield.backend)
    be = bk.get_backend(like=x, dtype=None) if bk.is_torch(x) else None
    conv = np.ascontiguousarray if be is None else be.asarray
    xb = conv(xa if batched else xa[None])
    pb = conv(pa if batched else pa[None])
    lab = None if klab is None or qlab is None else (conv(qlab), conv(klab))
    deriv = "none" if not divergence else "both" if geometry == "sphere" else "trace"
    route = fastsum.choose_fast(method, model, xb.shape[-1], geometry, pb.shape[-2],
                                xb.shape[-2], causal_labels=lab is not None,
                                backend_numpy=be is None)
    if route is not None:
        return fast_field_at(model, pb, xb, w, deriv, batched, memory_limit,
                             labels=None if qlab is None or klab is None else (qlab, klab),
                             state=state, tol=tol, route=route)
    F, tr, xdx, new_state = ambient_field(
        model, pb, xb, conv(w), labels=lab, derivatives=deriv, state=state,
        memory_limit=memory_limit)
    return finish_field(pb, F, tr, xdx, geometry, batched, new_state)


__all__ = [
    "GEOMETRIES",
    "FieldResult",
    "FieldState",
    "ambient_field",
    "check_measure",
    "field_at",
    "project_tangent",
    "weighted_field",
]
