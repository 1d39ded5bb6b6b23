"""The attention field of a weighted measure and its divergence, in one tiled pass.

.. autosummary::
   FieldResult
   FieldState
   weighted_field
   field_at
   ambient_field
   project_tangent

For ``mu = sum_j w_j delta_{x_j}`` the velocity of a point ``x`` is the attention output of
docs/equations.md section 2 with the weights ``w_j`` in place of ``1/n`` (docs/lagrangian.md
section 1), projected with ``P_x = I - x x^T`` on the sphere. The divergence that the
Lagrangian solver integrates, ``d/dt log J = div X``, is the surface divergence
``div_S(P_x F) = tr DF - x^T DF x - (d - 1) <x, F>`` on ``S^{d-1}`` and ``tr DF`` in ``R^d``;
``tr DF`` and ``x^T DF x`` are closed-form kernel-weighted sums (docs/lagrangian.md section 2)
computed in the same pass over the ``n x n`` weights as the velocity, by extra value columns
and one elementwise product per tile (:meth:`meanfield.kernels.rows._RowKernel.apply`).

The particle velocity (:func:`particles.velocity`) is :func:`ambient_field` with ``weights =
None``: equal weights, the index order as the causal mask, no divergence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.arguments import nonnegative_weights
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, Kernel, Sinkhorn, Softmax, Tiling, fastsum, prefix_mass

GEOMETRIES = ("sphere", "euclidean")
"""``sphere``: ``S^{d-1}`` (layer normalisation, the field projected with ``P_x``);
``euclidean``: ``R^d`` (no projection, (9.1))."""

SPHERE_TOL = 1e-10
"""Largest ``| |x_j| - 1 |`` accepted for a node on the sphere."""


@dataclass(frozen=True)
class FieldState:
    """What one evaluation hands to the next (a warm start).

    Args:
        potentials: Sinkhorn column potentials ``g`` ``(B, n)`` of the weighted scaling, one
            per head, or ``None`` (other kinds, or a cold start).
    """

    potentials: tuple[np.ndarray, ...] | None = None


@dataclass(frozen=True)
class FieldResult:
    """The field of a weighted measure at its nodes (or at given points).

    Args:
        velocity: ``P_x F(x)`` on the sphere, ``F(x)`` in ``R^d``; the shape of ``x``.
        divergence: ``div_S`` on the sphere, ``div`` in ``R^d``: shape ``(n,)`` or
            ``(B, n)``; ``None`` when not asked for.
        state: the warm start for the next call (:class:`FieldState`).
        fast: what the fast field used (:class:`meanfield.kernels.fastsum.FastSettings`: tolerance,
            band limit, error estimate, points corrected), ``None`` for the direct sum.
    """

    velocity: np.ndarray
    divergence: np.ndarray | None
    state: FieldState
    fast: fastsum.FastSettings | None = None


# -- activations of the feed-forward term (2.8) and their derivatives -------------------

def _phi(z: Any) -> Any:
    return bk.namespace(z).exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _tanh(z: Any) -> Any:
    return bk.namespace(z).tanh(z)


_DERIVATIVES: dict[str, Callable[[Any], Any]] = {
    "relu": lambda z: bk.namespace(z).astype(z > 0, z.dtype),
    "tanh": lambda z: 1.0 - _tanh(z) ** 2,
    "sigmoid": lambda z: 0.25 * (1.0 - _tanh(0.5 * z) ** 2),
    "gelu": lambda z: 0.5 * (1.0 + bk.erf(z / math.sqrt(2.0))) + z * _phi(z),
}
"""``sigma'`` for each activation of :data:`meanfield.model.ACTIVATIONS` (relu: ``1[z > 0]``,
the derivative almost everywhere)."""


# -- small helpers ----------------------------------------------------------------------

def _is_eye(m: np.ndarray) -> bool:
    return bool(np.array_equal(m, np.eye(m.shape[0])))


def _apply(m: np.ndarray, x: Any) -> Any:
    """Rows ``x_i -> m x_i`` for ``x`` (B, n, d) (NumPy or torch; ``m`` NumPy), skipping
    ``m = +-I``."""
    if _is_eye(m):
        return x
    if _is_eye(-m):
        return -x
    return x @ bk.like(x, m.T)


_dot = bk.rows_dot


def project_tangent(x: Any, y: Any) -> Any:
    """``P_x y = y - <x, y> x`` row by row (``x`` unit vectors)."""
    return y - _dot(x, y)[..., None] * x


def _kernel(model: Any, solver: str, causal: bool) -> tuple[Any, Sinkhorn | None]:
    """The row kernel of the model's kind, and for Sinkhorn the kernel that finds its
    potentials (the field is then softmax with the potentials as a column bias)."""
    kind = attention_registry.require(model.attention, solver)
    kernel = Kernel.registry[kind.name](model.beta, causal, **model.parameters)
    if isinstance(kernel, Sinkhorn):
        return Softmax(model.beta), kernel
    return kernel, None


# -- the field ----------------------------------------------------------------------------

def ambient_field(
    model: Any,
    points: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    labels: tuple[np.ndarray, np.ndarray] | None = None,
    derivatives: str = "none",
    feedforward: bool = True,
    state: FieldState | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, FieldState]:
    """The un-projected field ``F`` (sum over heads, plus the feed-forward term) at
    ``points`` of the measure ``sum_j w_j delta_{nodes_j}``, and its derivative sums. No
    validation (the callers validate).

    Args:
        model: a :class:`meanfield.Model`.
        points, nodes: ``(B, n, d)`` and ``(B, m, d)``.
        weights: ``(B, m)``, summing to 1; ``None``: the particle system (equal weights
            ``1/m``, ``causal`` by index, the ``particles`` kernels).
        labels: ``(point labels (B, n), node labels (B, m))`` of the causal mask (with
            ``weights`` only).
        derivatives: ``"none"``, ``"trace"`` (``tr DF``) or ``"both"`` (``tr DF`` and
            ``x^T DF x``).
        feedforward: add the feed-forward term (2.8) of the model.
        state: warm start (Sinkhorn potentials).
        memory_limit: bytes for the ``n x m`` tiles.

    Returns:
        ``(F, tr DF or None, x^T DF x or None, state)``.
    """
    B, n, d = points.shape
    xp = bk.namespace(points)
    dev = bk.device_of(points)
    tiling = Tiling(memory_limit)
    particles = weights is None
    if particles and derivatives != "none":
        msg = "ambient_field: derivatives need weights (the Lagrangian solver's measure)"
        raise ValueError(msg)
    kernel, sinkhorn = _kernel(model, "particles" if particles else "lagrangian",
                               model.causal and particles)
    heads = model.matrices(d)
    warm = None if state is None else state.potentials
    if warm is not None and (len(warm) != len(heads) or warm[0].shape != nodes.shape[:2]):
        warm = None  # another node set: a cold start
    potentials = []
    trace = derivatives != "none"
    both = derivatives == "both"
    kw: dict[str, Any] = {}
    if not particles:
        kw["weights"] = weights
        if labels is not None:
            kw["labels"] = labels
        if not kernel.normalized:
            kw["mass"] = (bk.like(points, prefix_mass(*(bk.to_numpy(a) for a in (weights, *labels))))  # type: ignore[misc]
                          if labels is not None
                          else xp.broadcast_to(xp.sum(weights, axis=1)[:, None], (B, n)))
    F = xp.zeros((B, n, d), dtype=points.dtype, device=dev)
    tr = xp.zeros((B, n), dtype=points.dtype, device=dev) if trace else None
    xdx = xp.zeros((B, n), dtype=points.dtype, device=dev) if both else None
    for h, (Q, K, V) in enumerate(heads):
        q, k, v = _apply(Q, points), _apply(K, nodes), bk.contiguous(_apply(V, nodes))
        if sinkhorn is not None:  # potentials of the nodes, fixed in the point
            qn = q if points is nodes else _apply(Q, nodes)
            g = sinkhorn.as_softmax(qn, k, tiling, weights=weights,
                                    g0=None if warm is None else warm[h])[1]
            potentials.append(g)
            kw["bias"] = g
        if not trace:
            F += kernel.apply(q, k, v, tiling, **kw)
            continue
        Mm = Q.T @ K  # grad_x of the logit: beta M x_k
        same = 1.0 if np.array_equal(Mm, V) else -1.0 if np.array_equal(Mm, -V) else 0.0
        Mx = _apply(Mm, nodes)
        s1 = _dot(v, Mx)[..., None]  # <V x_k, M x_k>
        extra = xp.concat([Mx, s1], axis=-1) if kernel.normalized and not same else s1
        second = None if not both else (same if same else (points, v))
        out, eo, so = kernel.apply(q, k, v, tiling, extra=extra, second=second, **kw)
        F += out
        if kernel.normalized:  # DF = beta sum_k a_k V x_k (M x_k - M xbar)^T
            Mbar = same * out if same else eo[..., :d]
            tr += model.beta * (eo[..., -1] - _dot(out, Mbar))  # type: ignore[operator]
            if both:
                xdx += so - model.beta * _dot(points, out) * _dot(points, Mbar)  # type: ignore[operator]
        else:  # DF = beta sum_k w_k phi'(s_k) V x_k (M x_k)^T / mass
            tr += model.beta * eo[..., 0]  # type: ignore[operator]
            if both:
                xdx += so  # type: ignore[operator]
    if feedforward and model.feedforward is not None:
        w, a, b = model.feedforward
        z = points @ bk.like(points, a.T) + bk.like(points, b)
        F += model.feedforward_term(points)
        if trace:  # D(w sigma(a x + b)) = w diag(sigma'(z)) a
            ds = _DERIVATIVES[model.activation](z)
            tr += ds @ bk.like(points, np.einsum("lp,pl->l", a, w))  # type: ignore[operator]
            if both:
                xdx += bk.einsum("bnl,bnl,bnl->bn", points @ bk.like(points, w), ds,  # type: ignore[operator]
                                 z - bk.like(points, b))
    return F, tr, xdx, FieldState(tuple(potentials) if potentials else None)


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


def _finish(
    points: np.ndarray, F: np.ndarray, tr: np.ndarray | None, xdx: np.ndarray | None,
    geometry: str, batched: bool, state: FieldState,
) -> FieldResult:
    if geometry == "sphere":
        vel = project_tangent(points, F)
        div = None if tr is None else tr - xdx - (points.shape[-1] - 1) * _dot(points, F)  # type: ignore[operator]
    else:
        vel, div = F, tr
    if not batched:
        vel = vel[0]
        div = None if div is None else div[0]
    return FieldResult(vel, div, state)


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
    fast_tol: float = fastsum.DEFAULT_TOL,
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
            ``S^1``/``S^2``, :mod:`meanfield.kernels.fastsum`, accurate to ``1e-12`` relative per
            point; ``ValueError`` naming the reason where it does not apply) or ``"auto"``
            (fast where it applies and pays: :data:`meanfield.kernels.fastsum.CROSSOVER`).
        fast_tol: the fast field's relative accuracy per point (docs/particles.md, "Fast
            field"; the points it cannot vouch for are recomputed directly).

    Returns:
        :class:`FieldResult`.
    """
    return field_at(model, x, x, weights, geometry=geometry, labels=labels, point_labels=labels,
                    divergence=divergence, state=state, memory_limit=memory_limit,
                    method=method, fast_tol=fast_tol)


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
    fast_tol: float = fastsum.DEFAULT_TOL,
) -> FieldResult:
    """The field of ``mu = sum_j w_j delta_{x_j}`` (nodes ``x``) and its divergence at other
    ``points`` (``(p, d)`` or ``(B, p, d)``; on the sphere for ``geometry="sphere"``), with
    ``point_labels`` for a causal model; otherwise as :func:`weighted_field`. For Sinkhorn
    the potentials are those of the nodes (fixed in the point)."""
    fastsum.check_tol(fast_tol)
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
    if fastsum.use_fast(method, model, xb.shape[-1], geometry, pb.shape[-2], xb.shape[-2],
                        causal_labels=lab is not None, backend_numpy=be is None):
        return _fast_field(model, pb, xb, w, deriv, batched, memory_limit,
                           labels=None if qlab is None or klab is None else (qlab, klab),
                           state=state, tol=fast_tol)
    F, tr, xdx, new_state = ambient_field(
        model, pb, xb, conv(w), labels=lab, derivatives=deriv, state=state,
        memory_limit=memory_limit)
    return _finish(pb, F, tr, xdx, geometry, batched, new_state)


def _fast_field(model: Any, pb: np.ndarray, xb: np.ndarray, w: np.ndarray | None, deriv: str,
                batched: bool, memory_limit: int, *,
                labels: tuple[np.ndarray, np.ndarray] | None = None,
                state: FieldState | None = None,
                tol: float = fastsum.DEFAULT_TOL) -> FieldResult:
    """:func:`field_at` by fast summation (:func:`meanfield.kernels.fastsum.fast_field` for the zonal
    kernels, :func:`meanfield.kernels.fastsum_general.general_field` otherwise); the points whose
    error estimate exceeds the tolerance by the direct sum. ``w=None``: the particle system
    (equal weights, causal by index)."""
    from meanfield.kernels.fastsum_general import general_field

    d = xb.shape[-1]
    B, m = xb.shape[:2]
    divergence = deriv != "none"
    if fastsum.zonal_reason(model, d, causal_labels=labels is not None) is None:
        wz = np.full((B, m), 1.0 / m) if w is None else w

        def direct(pts: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray | None]:
            F, tr, xdx, st = ambient_field(model, pts, xb[b : b + 1], wz[b : b + 1],
                                           derivatives=deriv, memory_limit=memory_limit)
            r = _finish(pts, F, tr, xdx, "sphere", True, st)
            return r.velocity, r.divergence

        vel, div, settings = fastsum.fast_field(model, pb, xb, w, divergence=divergence,
                                                tol=tol, direct=direct)
        new_state = FieldState()
    else:
        # the direct fallback: the weighted field (particles: weights 1/m, the index as labels,
        # the same weights and mask as the particle kernels); Sinkhorn warm-started from the
        # fast potentials (softmax with a column bias: a constant shift of g cancels)
        wd = np.full((B, m), 1.0 / m) if w is None else w
        index = w is None and model.causal
        pots: dict[int, tuple[np.ndarray, ...]] = {}

        def direct_at(b: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            pts = pb[b : b + 1, idx]
            lab = None
            if labels is not None:
                lab = (labels[0][b : b + 1, idx], labels[1][b : b + 1])
            elif index:
                lab = (idx[None].astype(float), np.arange(m, dtype=float)[None])
            st = FieldState(pots[b]) if b in pots else None
            F, tr, xdx, _ = ambient_field(model, pts, xb[b : b + 1], wd[b : b + 1], labels=lab,
                                          derivatives=deriv, state=st, memory_limit=memory_limit)
            r = _finish(pts, F, tr, xdx, "sphere", True, FieldState())
            return r.velocity, r.divergence

        def keep(b: int, potentials: tuple[np.ndarray, ...]) -> None:
            pots[b] = tuple(g[None] for g in potentials)

        warm = None if state is None else state.potentials
        if warm is not None and (len(warm) != len(model.matrices(d)) or warm[0].shape != (B, m)):
            warm = None
        vel, div, settings, potentials = general_field(
            model, pb, xb, w, divergence=divergence, labels=labels, potentials=warm,
            tol=tol, direct=direct_at, keep=keep)
        new_state = FieldState(potentials)
    if not batched:
        vel = vel[0]
        div = None if div is None else div[0]
    return FieldResult(vel, div, new_state, settings)


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
