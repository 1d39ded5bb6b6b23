r"""The sphere-averaged attention field of a measure of ``p = Px`` on ``S^{d-1}`` (``k = 2, 3``).

.. autosummary::
   subspace_field
   ball_coordinates
   engine
   assemble

docs/lagrangian.md section 11 derives it; it is the ``k = 1`` ring reduction
(:mod:`meanfield.lagrangian.rings`) with the ring replaced by a sphere. For ``Q = K = V = I``
and ``x = p + r u``, ``y = p' + r' u'`` (``p, p'`` in the ``k``-ball spanned by ``e_1 .. e_k``,
``r = sqrt(1 - |p|^2)``, ``u, u'`` unit vectors orthogonal to it), the kernel averaged over the
``S^{d-k-1}`` of ``u'`` is, with ``nu = (d - k - 2)/2``, ``w = (beta r r')^2 / 4``,

.. math::  \bar k(p, p') = e^{\beta <p, p'>} F_0(w), \qquad F_j(w) = {}_0F_1(; \nu + 1 + j; w),

and for ``g`` the potential (``log Z / beta`` for SA, ``Z / beta`` for USA, ``Z(p) = sum_j
w_j kbar(p, p_j)``, times the sign of ``V``) the field and its surface divergence on
``S^{d-1}`` are

.. math::  \dot p = (I - p p^T) \nabla g, \qquad
           \mathrm{div} = \mathrm{tr}\,((I - p p^T) H) - (d - 1) <p, \nabla g>

(``H`` the Hessian of ``g`` in ``p``); the rest of ``x`` moves only radially in its sphere.
The state is ``[q | log J]`` with ``q = artanh(|p|) p/|p|`` (``|p| = tanh |q|``, ``1 - |p|^2
= 1/cosh^2 |q|``): a collapse onto a point of the unit sphere of the subspace is ``|q| ->
inf`` at a bounded rate, ``1 - |p|`` keeps its relative precision, and the map is smooth at
``p = 0`` (``tanh(a)/a`` is even), where polar coordinates would not be.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from meanfield import backend as bk
from meanfield.kernels import DEFAULT_MEMORY_LIMIT
from meanfield.lagrangian.rings import check_model as _ring_check_model
from meanfield.lagrangian.rings import log_hyp0f1
from meanfield.model import Model
from meanfield.special import log_sphere_area


def check_model(model: Model) -> str:
    """The kind of ``model`` (``"softmax"`` or ``"unnormalized"``), or ``ValueError`` naming
    why the ``k = 2, 3`` reduction does not hold for it: the rule of the rings
    (:func:`meanfield.lagrangian.rings.check_model`), the same kernel with another order."""
    try:
        return _ring_check_model(model)
    except ValueError as exc:
        msg = f"subspace nodes (k = 2, 3) hold where ring nodes do: {exc}"
        raise ValueError(msg) from None


def ball_coordinates(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, 1 - |p|^2)`` of the state ``q`` (``(n, k)``): ``p = tanh(|q|) q/|q|``, ``1 - |p|^2
    = 1/cosh^2 |q| = 4 e^{-2|q|} / (1 + e^{-2|q|})^2`` (no overflow, relative precision kept)."""
    a = np.linalg.norm(q, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(a > 1e-8, np.tanh(a) / np.where(a > 0, a, 1.0), 1.0 - a * a / 3)
    e = np.exp(-2 * a)
    return q * ratio[:, None], 4 * e / (1 + e) ** 2


def to_state(p: np.ndarray) -> np.ndarray:
    """``q = artanh(|p|) p/|p|`` (the inverse of :func:`ball_coordinates`)."""
    p = np.asarray(p, dtype=float)
    a = np.linalg.norm(p, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(a > 1e-8, np.arctanh(a) / np.where(a > 0, a, 1.0), 1.0 + a * a / 3)
    return p * ratio[:, None]


_CONTIGUOUS = 0.1
"""Where ``w >= _CONTIGUOUS b (b + 1)``, ``F_2`` comes from the contiguous relation (its
cancellation ``1 - F_1/F_0`` then costs at most a factor 10 of round-off)."""


def _kernel_functions(b: float, w: np.ndarray, *, second: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(log F_0, F_0'/F_0, F_0''/F_0)`` of ``F_0(w) = 0F1(; b; w)`` (docs/lagrangian.md
    section 11): ``F_0' = F_1/b``, ``F_0'' = F_2/(b(b+1))``, and ``F_2`` from the contiguous
    relation ``F_0 - F_1 = w F_2/(b(b+1))`` where ``w`` is not small (one ``log_hyp0f1`` less),
    its series elsewhere. ``w = 0`` everywhere (``beta = 0``): the constants ``0, 1/b,
    1/(b(b+1))``. ``second=False``: ``F_0''/F_0`` is not computed (``None``)."""
    if not np.any(w):
        return (np.zeros_like(w), np.full_like(w, 1.0 / b),
                np.full_like(w, 1.0 / (b * (b + 1))) if second else None)
    L0 = log_hyp0f1(b, w)
    G1 = np.exp(log_hyp0f1(b + 1, w) - L0)
    if not second:
        return L0, G1 / b, None
    big = w >= _CONTIGUOUS * b * (b + 1)
    g2 = np.empty_like(w)
    with np.errstate(divide="ignore", invalid="ignore"):
        g2[big] = (1.0 - G1[big]) / w[big]
    small = ~big
    if np.any(small):
        g2[small] = np.exp(log_hyp0f1(b + 2, w[small]) - L0[small]) / (b * (b + 1))
    return L0, G1 / b, g2


def pair_terms(beta: float, nu: float, pi: np.ndarray, ri2: np.ndarray, p: np.ndarray,
               r2: np.ndarray, logw: np.ndarray, *, hessian: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The per-pair quantities of a tile of targets ``pi`` (``(m, k)``, ``ri2 = 1 - |pi|^2``)
    against the nodes ``p`` (``(n, k)``, ``r2``, ``logw = log w_j``), docs/lagrangian.md
    section 11: ``(log w_j kbar(p_i, p_j), B1, hl)`` with ``B1 = grad_{p_i} log kbar / beta = p_j
    - (gamma/beta) p_i`` (shape ``(k, m, n)``, one array per coordinate) and ``hl = tr((I -
    p_i p_i^T) Hess log kbar) / beta`` (``(m, n)``; ``None`` where ``hessian`` is false: one
    ``0F1`` logarithm per pair less). Shared by :func:`subspace_field` and the quadrature monitor
    (:class:`meanfield.lagrangian.quadrature.SphereQuadratureMonitor`)."""
    k = p.shape[1]
    w = 0.25 * beta * beta * ri2[:, None] * r2[None]
    cb = 0.5 * beta * r2[None]  # c / beta, c = beta^2 r'^2 / 2 (grad w = -c p)
    L0, g1, g2 = _kernel_functions(nu + 1, w, second=hessian)
    gam = cb * g1  # gamma / beta: Hess log kbar = alpha p p^T - gamma I
    logk = beta * (pi @ p.T) + L0 + logw[None]
    B1 = p.T[:, None, :] - gam[None] * pi.T[:, :, None]
    if g2 is None:
        return logk, B1, None
    alp = beta * cb * cb * (g2 - g1 * g1)  # alpha / beta
    # tr((I - p p^T) Hess log kbar) / beta, from alpha |p|^2 r^2 - gamma (k - 1 + r^2)
    p2i = np.sum(pi * pi, axis=1)[:, None]
    hl = alp * p2i * ri2[:, None] - gam * (k - 1 + ri2[:, None])
    return logk, B1, hl


def subspace_field(model: Model, p: np.ndarray, r2: np.ndarray, weights: np.ndarray, d: int, *,
                   targets: tuple[np.ndarray, np.ndarray] | None = None,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dp/dt, surface divergence, grad g)`` of the measure ``sum_j w_j (uniform on the sphere
    {Px = p_j})`` on ``S^{d-1}`` (docs/lagrangian.md section 11), at the nodes ``p`` themselves
    or at ``targets = (p_t, 1 - |p_t|^2)``.

    Args:
        model: ``Q = K = I``, ``V = +-I``; softmax, l2 or unnormalized (:func:`check_model`).
        p: the node points ``(n, k)``; ``r2 = 1 - |p|^2`` given separately (relative precision
            near the unit sphere, :func:`ball_coordinates`).
        weights: ``w_j >= 0`` of the nodes.
        d: ambient dimension.
        targets: where to evaluate (default: the nodes).
        memory_limit: bytes of the tiles of the ``n_targets x n`` kernel.
    """
    kind = check_model(model)
    beta = float(model.beta)
    k = p.shape[1]
    nu = 0.5 * (d - k - 2)
    pt, r2t = (p, r2) if targets is None else targets
    m, n = pt.shape[0], p.shape[0]
    grad = np.empty((m, k))
    div = np.empty(m)
    rows = max(1, int(memory_limit // (8 * (14 + 3 * k) * max(n, 1))))
    with np.errstate(divide="ignore"):
        logw = np.log(weights)
    norm_t = np.linalg.norm(pt, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit_t = np.where(norm_t[:, None] > 0, pt / np.where(norm_t > 0, norm_t, 1.0)[:, None], 0.0)
    for i0 in range(0, m, rows):
        sl = slice(i0, i0 + rows)
        pi, ri2, ui = pt[sl], r2t[sl, None], unit_t[sl]
        logk, B1s, hl = pair_terms(beta, nu, pi, r2t[sl], p, r2, logw)
        if kind == "softmax":  # g = log Z / beta: grad g = <B1>, H = <Hess log kbar>/beta + beta Cov(B1)
            a = np.exp(logk - np.max(logk, axis=1, keepdims=True))
            a /= np.sum(a, axis=1, keepdims=True)
        else:  # USA: g = Z / beta, H = sum_j w_j kbar (Hess log kbar + beta^2 B1 B1^T) / beta
            a = np.exp(logk)
        # B1 = grad log kbar / beta = p' - (c/beta) g1 p, one (rows, n) array per coordinate;
        # dev = B1 - <B1> (softmax: the covariance), B1 itself (USA: the second moment)
        B1 = list(B1s)
        assert hl is not None  # hessian=True
        gi = np.stack([np.sum(a * B1[c], axis=1) for c in range(k)], axis=1)
        dev = [B1[c] - gi[:, c:c + 1] for c in range(k)] if kind == "softmax" else B1
        radial = sum(dev[c] * ui[:, c:c + 1] for c in range(k))
        # tr((I - p p^T) dev dev^T) = |dev_perp|^2 + r^2 <p/|p|, dev>^2 (no cancellation)
        second = ri2 * radial * radial
        for c in range(k):
            perp = dev[c] - radial * ui[:, c:c + 1]
            second += perp * perp
        div[sl] = np.sum(a * (hl + beta * second), axis=1)
        grad[sl] = gi
    grad *= model.sign
    div *= model.sign
    pg = np.einsum("ik,ik->i", pt, grad)
    div -= (d - 1) * pg
    return grad - pt * pg[:, None], div, grad


def state_velocity(q: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """``dq/dt`` for ``dp/dt = (I - p p^T) grad``: the radial part ``<q/|q|, grad>`` (bounded)
    and ``|q|/tanh|q|`` times the rest (docs/lagrangian.md section 11)."""
    a = np.linalg.norm(q, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(a[:, None] > 0, q / np.where(a > 0, a, 1.0)[:, None], 0.0)
        c = np.where(a > 1e-8, a / np.tanh(np.where(a > 0, a, 1.0)), 1.0 + a * a / 3)
    radial = np.einsum("ik,ik->i", unit, grad)
    return c[:, None] * grad + ((1.0 - c) * radial)[:, None] * unit


def engine(model: Model, nodes: Any, be: Any, memory_limit: int) -> tuple[Any, np.ndarray, Any]:
    """``(rhs, y0, project)`` of the state ``[q | log J]`` (shape ``(n, k + 1)``) for
    :func:`meanfield.solve_lagrangian`'s engine (no projection: ``q`` is unconstrained)."""
    check_model(model)
    if be.label() != bk.get_backend("numpy", None, "float64").label():
        msg = f"backend={be.label()!r}: subspace nodes run on numpy float64 only"
        raise ValueError(msg)
    weights = np.asarray(nodes.weights, dtype=float)
    d, k = int(nodes.d), int(nodes.k)

    def rhs(y: np.ndarray) -> np.ndarray:
        q = y[:, :k]
        p, r2 = ball_coordinates(q)
        _, div, grad = subspace_field(model, p, r2, weights, d, memory_limit=memory_limit)
        out = np.empty_like(y)
        out[:, :k] = state_velocity(q, grad)
        out[:, k] = div
        return out

    y0 = np.concatenate([to_state(nodes.p), np.zeros((nodes.n, 1))], axis=1)
    return rhs, y0, None


def assemble(saved: list[tuple[float, np.ndarray]], model: Model, nodes: Any) -> xr.Dataset:
    """The Dataset of a subspace run: ``p`` (time, node, coord), its state ``q``,
    ``log_density`` (per unit surface measure on ``S^{d-1}``, at any point of the node's
    sphere), ``log_density_p`` (of ``p`` w.r.t. Lebesgue measure on the ``k``-ball),
    ``density`` (``inf`` beyond float64), ``log_jacobian``, ``weight``, ``mass``."""
    d, k = int(nodes.d), int(nodes.k)
    tvals = np.array([t for t, _ in saved])
    ys = np.stack([y for _, y in saved])
    q, log_j = ys[:, :, :k], ys[:, :, k]
    p = np.empty_like(q)
    log_r2 = np.empty(log_j.shape)
    for i in range(tvals.size):
        p[i] = ball_coordinates(q[i])[0]
        a = np.linalg.norm(q[i], axis=1)  # log(1/cosh^2 a) without underflow
        log_r2[i] = -2 * (a + np.log1p(np.exp(-2 * a)) - math.log(2.0))
    log_rho = np.asarray(nodes.log_density)[None, :] - log_j
    log_p = log_rho + log_sphere_area(d - k) + 0.5 * (d - k - 2) * log_r2
    with np.errstate(over="ignore"):
        density = np.exp(log_rho)
        density_p = np.exp(log_p)
    w = np.asarray(nodes.weights, dtype=float)
    data: dict[str, Any] = {
        "p": (("time", "node", "coord"), p, {"long_name": "p_j(t) = P x, the node in the k-ball"}),
        "q": (("time", "node", "coord"), q, {
            "long_name": "artanh(|p_j|) p_j/|p_j|, the state of node j (docs/lagrangian.md section 11)"}),
        "log_one_minus_p2": (("time", "node"), log_r2, {
            "long_name": "log(1 - |p_j|^2), to relative precision near the unit sphere"}),
        "weight": ("node", w, {"long_name": "mass w_j of node j (constant)"}),
        "log_density": (("time", "node"), log_rho, {
            "long_name": "log rho at node j per unit surface measure on S^{d-1}, "
                         "log rho_0 - log J (docs/lagrangian.md section 11)"}),
        "density": (("time", "node"), density, {
            "long_name": "density at node j per unit surface measure on S^{d-1}",
            "note": "inf where it exceeds float64 (large d or a collapsing cluster); "
                    "log_density holds every value"}),
        "log_density_p": (("time", "node"), log_p, {
            "long_name": "log of the density of p w.r.t. Lebesgue measure on the k-ball: "
                         "log rho + log|S^{d-k-1}| + (d-k-2)/2 log(1 - |p|^2)"}),
        "density_p": (("time", "node"), density_p, {
            "long_name": "density of p w.r.t. Lebesgue measure on the k-ball",
            "note": "inf where it exceeds float64; log_density_p holds every value"}),
        "log_jacobian": (("time", "node"), log_j, {
            "long_name": "log J_j(t) w.r.t. surface measure, d/dt log J = div X"}),
        "mass": ("time", np.full(tvals.size, float(np.sum(w))), {
            "long_name": "total mass sum_j w_j (exact along characteristics)"}),
    }
    coords = {"time": ("time", tvals, {"long_name": "time", "units": "1"}),
              "node": ("node", np.arange(w.size)), "coord": ("coord", np.arange(k))}
    ds = xr.Dataset(data, coords=coords)
    ds.attrs["reduction"] = "subspace"
    ds.attrs["dimension"] = d
    ds.attrs["subspace_dimension"] = k
    return ds


__all__ = ["assemble", "ball_coordinates", "check_model", "engine", "pair_terms", "state_velocity",
           "subspace_field", "to_state"]
