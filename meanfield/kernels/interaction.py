"""The field and energy of a weighted measure of points: what the particle system and the
Lagrangian solver both integrate.

.. autosummary::
   ambient_field
   project_tangent
   apply_matrix
   fast_field_at
   finish_field
   FieldResult
   FieldState
   weighted_energy
   energy_terms
   EnergyTerms
   has_energy
   use_fast_energy
   fast_partition

**The field.** For ``mu = sum_j w_j delta_{x_j}`` the velocity of a point ``x`` is the
attention output of docs/equations.md section 2 with the weights ``w_j`` in place of ``1/n``
(docs/lagrangian.md section 1), projected with ``P_x = I - x x^T`` on the sphere
(:func:`project_tangent`). The divergence that the Lagrangian solver integrates, ``d/dt log J
= div X``, is the surface divergence ``div_S(P_x F) = tr DF - x^T DF x - (d - 1) <x, F>`` on
``S^{d-1}`` and ``tr DF`` in ``R^d``; ``tr DF`` and ``x^T DF x`` are closed-form
kernel-weighted sums (docs/lagrangian.md section 2) computed in the same pass over the ``n x
n`` weights as the velocity, by extra value columns and one elementwise product per tile
(:meth:`meanfield.kernels.rows._RowKernel.apply`). The particle velocity
(:func:`particles.velocity`) is :func:`ambient_field` with ``weights = None``: equal weights,
the index order as the causal mask, no divergence. :func:`fast_field_at` is the same field by
fast summation (:mod:`meanfield.kernels.fastsum`, :mod:`meanfield.kernels.fastsum_general`).

**The energy** (docs/equations.md sections 2 and 3, the ``-1`` convention of (3.5))::

    E_beta[mu] = (1 / (2 beta)) sum_h sum_{i,j} w_i w_j (e^{beta <Q_h x_i, K_h x_j>} - 1)
    Z_mu(x_i)  = sum_j w_j e^{beta <x_i, x_j>}

Equal weights ``1/n`` give the particle energy of Remark 3.8 (``particles.energy`` is this
function with those weights). Each tile sums ``expm1(beta s) / beta``; where ``beta |s|`` is
below ``1e-8`` the Taylor series ``s + beta s^2 / 2 + beta^2 s^3 / 6`` replaces it (relative
error below ``(beta |s|)^3 / 24``), which tends continuously to the ``beta = 0`` limit.

**Fast path** (``method="fast"``, or ``"auto"`` where the fast field pays,
:func:`use_fast_energy`): on ``S^1`` and ``S^2``, for SA and USA with ``Q = K = I``, the
energy is :func:`meanfield.kernels.fastsum.energy` (Parseval on the measure's harmonic coefficients,
``O(n + L^2 log L)``, absolute error at most ``2 eps e^beta``, ``eps = max(tol / 8,
NUFFT_EPS_MIN)``, ``1.25e-13`` at the default) and ``Z_mu`` is
the zonal sum of :mod:`meanfield.kernels.fastsum` (adjoint nonuniform transform, Funk–Hecke
multipliers, synthesis at the nodes; absolute error of ``Z`` at most ``e^beta (tail + C_Z eps
max_i Z_i e^{-beta})``, :data:`meanfield.kernels.fastsum.NUFFT_ERROR`): a Lagrangian run of ``2 10^5``
nodes then has its energy and dissipation outputs in seconds, where the tiled sum takes
``O(n^2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import logsumexp

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.kernels import fastsum
from meanfield.kernels.base import kernel_class, prefix_mass
from meanfield.kernels.rows import Softmax
from meanfield.kernels.sinkhorn import Sinkhorn
from meanfield.kernels.tiling import DEFAULT_MEMORY_LIMIT, Tiling, block_for, logit_tiles


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


def apply_matrix(m: np.ndarray, x: Any) -> Any:
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
    kernel = kernel_class(kind)(model.beta, causal, **model.parameters)
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
        q, k, v = apply_matrix(Q, points), apply_matrix(K, nodes), bk.contiguous(apply_matrix(V, nodes))
        if sinkhorn is not None:  # potentials of the nodes, fixed in the point
            qn = q if points is nodes else apply_matrix(Q, nodes)
            g = sinkhorn.potentials(qn, k, tiling, weights=weights,
                                    g0=None if warm is None else warm[h])[1]
            potentials.append(g)
            kw["bias"] = g
        if not trace:
            F += kernel.apply(q, k, v, tiling, **kw)
            continue
        Mm = Q.T @ K  # grad_x of the logit: beta M x_k
        same = 1.0 if np.array_equal(Mm, V) else -1.0 if np.array_equal(Mm, -V) else 0.0
        Mx = apply_matrix(Mm, nodes)
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


# -- the field by fast summation, and the end of an evaluation ------------------------

def finish_field(
    points: np.ndarray, F: np.ndarray, tr: np.ndarray | None, xdx: np.ndarray | None,
    geometry: str, batched: bool, state: FieldState,
) -> FieldResult:
    """The :class:`FieldResult` of the sums of :func:`ambient_field` at ``points`` (B, n, d):
    ``P_x F`` and the surface divergence ``tr DF - x^T DF x - (d - 1) <x, F>`` on the sphere,
    ``F`` and ``tr DF`` in ``R^d`` (module docstring); the batch axis dropped unless
    ``batched``."""
    if geometry == "sphere":
        vel = project_tangent(points, F)
        div = None if tr is None else tr - xdx - (points.shape[-1] - 1) * _dot(points, F)  # type: ignore[operator]
    else:
        vel, div = F, tr
    if not batched:
        vel = vel[0]
        div = None if div is None else div[0]
    return FieldResult(vel, div, state)


def fast_field_at(model: Any, pb: np.ndarray, xb: np.ndarray, w: np.ndarray | None, deriv: str,
                  batched: bool, memory_limit: int, *,
                  labels: tuple[np.ndarray, np.ndarray] | None = None,
                  state: FieldState | None = None,
                  tol: float = fastsum.FIELD_TOL,
                  route: fastsum.FastRoute | None = None) -> FieldResult:
    """The field of ``sum_j w_j delta_{xb_j}`` at the points ``pb`` (both ``(B, ., d)``,
    float64, on the sphere), with the derivative sums ``deriv`` of :func:`ambient_field`, as
    :func:`meanfield.lagrangian.field_at` gives it, by fast summation
    (:func:`meanfield.kernels.fastsum.fast_field` for the zonal kernels,
    :func:`meanfield.kernels.fastsum_general.general_field` otherwise); the points whose error
    estimate exceeds the tolerance by the direct sum. ``w=None``: the particle system (equal
    weights, causal by index). ``route``: the caller's :func:`meanfield.kernels.fastsum.choose_fast`
    (asked here where not given)."""
    from meanfield.kernels.fastsum_general import general_field

    d = xb.shape[-1]
    B, m = xb.shape[:2]
    divergence = deriv != "none"
    if route is None:
        route = fastsum.fast_route(model, d, causal_labels=labels is not None)
    if route.path == "zonal":
        wz = np.full((B, m), 1.0 / m) if w is None else w

        def direct(pts: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray | None]:
            F, tr, xdx, st = ambient_field(model, pts, xb[b : b + 1], wz[b : b + 1],
                                           derivatives=deriv, memory_limit=memory_limit)
            r = finish_field(pts, F, tr, xdx, "sphere", True, st)
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
            r = finish_field(pts, F, tr, xdx, "sphere", True, FieldState())
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


# -- the energy -------------------------------------------------------------------------

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
    """The choice point of ``method`` (:data:`meanfield.kernels.fastsum.FIELD_METHODS`) for the energy and
    ``Z_mu`` of ``n`` nodes on the sphere: ``"direct"`` never, ``"fast"`` always
    (``ValueError`` naming the reason where it does not apply), ``"auto"`` where it applies
    and the fast field pays (:func:`meanfield.kernels.fastsum.use_fast`, ``n`` points and nodes)."""
    if method not in fastsum.FIELD_METHODS:
        msg = f"method must be one of {fastsum.FIELD_METHODS}, got {method!r}"
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
    scaled sum ``sum_j w_j e^{beta (<x_i, x_j> - 1)}`` (:func:`meanfield.kernels.fastsum.zonal_sums`), times
    ``e^beta``. Absolute error at most ``e^beta (tail + C_Z eps max_i Z_i e^{-beta})`` (``+inf``
    where ``e^beta`` overflows); no validation (the model must pass :func:`fast_energy_reason`)."""
    from meanfield.special import exp_beta

    zs = fastsum.zonal_sums(model, x, weights)
    scale = exp_beta(float(model.beta))
    out = np.empty(zs.shape)
    for b in range(x.shape[0]):
        with np.errstate(over="ignore", invalid="ignore"):
            out[b] = scale * zs[b] - float(np.sum(weights[b]))
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
        q, k = apply_matrix(Q, x), apply_matrix(K, x)
        if beta == 0.0:  # the limit of expm1(beta s) / beta: s; Z - 1 = 0
            mq, mk = (np.einsum("bn,bnd->bd", weights, a) for a in (q, k))
            total += np.sum(mq * mk, axis=-1) / 2.0
            continue
        kt = np.ascontiguousarray(np.swapaxes(k, 1, 2))
        shift = exponent_bound(beta, q, k)
        head_scaled, head_shift = np.zeros(B), np.full(B, -np.inf)
        for bs, rs, S in logit_tiles(q, kt, tiling):
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


__all__ = [
    "EXP_SAFE",
    "EnergyTerms",
    "FieldResult",
    "FieldState",
    "ambient_field",
    "apply_matrix",
    "energy_terms",
    "exponent_bound",
    "fast_energy_reason",
    "fast_field_at",
    "fast_partition",
    "finish_field",
    "has_energy",
    "project_tangent",
    "times_exp",
    "use_fast_energy",
    "weighted_energy",
]
