r"""Symmetry-reduced node sets: zonal measures on ``S^{d-1}`` as weighted rings (``k = 1``),
measures of the projection onto a plane or a 3-space as weighted spheres (``k = 2, 3``).

.. autosummary::
   RingNodes
   rings
   rings_from_dataset
   SubspaceNodes
   subspace

A density on ``S^{d-1}`` that depends on ``x`` only through ``s = <x, e>`` (axis ``e = e_d``,
the convention of :class:`~meanfield.domains.zonal_sphere.ZonalSphere`) stays so under the
flow of ``Q = K = V = I`` attention (docs/equations.md section 3). Such a measure is a
weighted sum of *rings* ``{x : <x, e> = s_j}`` (uniform measure on each ring): node ``j`` is
the whole ring at polar angle ``theta_j = arccos s_j``, the rest of ``x`` uniform on the
``S^{d-2}`` of radius ``sin theta_j``. The node rule is ``n``-point Gauss–Jacobi in ``s`` for
the weight ``(1 - s^2)^{(d-3)/2}`` (:func:`~meanfield.domains.zonal_sphere.gauss_jacobi_log`),
exact for ``int g(s) f(s) dA`` when ``g f`` is a polynomial of degree ``<= 2n - 1`` in ``s``,
for every ``d``: no nodes in the other ``d - 1`` dimensions (docs/lagrangian.md section 8).

``k = 2, 3`` (:func:`subspace`, docs/lagrangian.md section 11): a density that depends on
``x`` only through ``p = (x_1, ..., x_k)`` is a weighted sum of spheres ``{x : P x = p_j}``
of radius ``sqrt(1 - |p_j|^2)`` in the ``d - k`` other coordinates; the nodes ``p_j`` are a
rule on the ``k``-ball for the weight ``(1 - |p|^2)^{(d-k-2)/2}``.

Densities are kept as logarithms: per unit surface measure a probability density on
``S^{1023}`` is ``~ e^{2000}`` (``|S^{d-1}| -> 0``), beyond float64.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.special import logsumexp

from meanfield.arguments import count, read_only
from meanfield.domains.zonal_sphere import gauss_jacobi_log, sphere_rule, sphere_rule_size
from meanfield.lagrangian.node_set import ReducedNodes, Slices
from meanfield.special import log_sphere_area


def _checked_weights(weights: Any, log_density: Any,
                     shape: tuple[int, ...]) -> tuple[np.ndarray, float, np.ndarray]:
    """The weights (finite, ``>= 0``, positive sum), their sum and the log density (``< inf``,
    not NaN) of reduced nodes of ``shape``; ``ValueError`` naming the field otherwise."""
    w = np.array(weights, dtype=float)
    if w.shape != shape or not np.all(np.isfinite(w)) or np.any(w < 0):
        msg = f"weights must be finite, >= 0, of shape {shape}; got shape {w.shape}"
        raise ValueError(msg)
    total = float(w.sum())
    if not total > 0:
        msg = f"weights must have a positive sum, got {total!r}"
        raise ValueError(msg)
    ld = np.array(log_density, dtype=float)
    if ld.shape != shape or np.any(np.isnan(ld)) or np.any(ld == np.inf):
        msg = f"log_density must be < inf, not NaN, of shape {shape}; got shape {ld.shape}"
        raise ValueError(msg)
    return w, total, ld


@dataclass(frozen=True, eq=False)
class RingNodes(ReducedNodes):
    """A zonal measure on ``S^{d-1}`` as ``n`` weighted rings ``<x, e_d> = cos theta_j``.

    Args:
        theta: polar angles ``theta_j in (0, pi)`` of the rings (``s_j = cos theta_j``).
        weights: ``w_j >= 0`` summing to 1 (normalised here; the sum given is :attr:`mass`).
        log_density: ``log rho0`` at the rings, per unit surface measure on ``S^{d-1}``.
        d: ambient dimension, ``>= 3``.
        describe: how the nodes were made.
        cdf: optional ``P(s <= s_j)`` of the measure at each ring (increasing): the flow keeps
            the order of the rings, so it holds along the characteristics for every ``t``
            (the Kolmogorov distance of docs/lagrangian.md section 8).
    """

    theta: np.ndarray
    weights: np.ndarray
    log_density: np.ndarray
    d: int
    describe: str = ""
    cdf: np.ndarray | None = None
    mass: float = field(init=False)

    reduction = "rings"
    """The symmetry reduction (``solve_lagrangian`` runs its own state for it)."""
    unit = "rings"
    monitor_cost = 2  # two 0F1 logarithms per pair (measured 2.2 evaluations at d = 1024)
    query_all = True

    def __post_init__(self) -> None:
        d = count(self.d, "d", 3)
        th = np.array(self.theta, dtype=float)
        if th.ndim != 1 or th.size < 1:
            msg = f"theta must have shape (n,) with n >= 1, got shape {th.shape}"
            raise ValueError(msg)
        if not np.all(np.isfinite(th)) or np.any(th <= 0) or np.any(th >= math.pi):
            msg = (f"theta must lie in (0, pi) (a ring, not a pole), got range "
                   f"[{np.nanmin(th)!r}, {np.nanmax(th)!r}]")
            raise ValueError(msg)
        w, total, ld = _checked_weights(self.weights, self.log_density, th.shape)
        if self.cdf is not None:
            c = np.array(self.cdf, dtype=float)
            order = np.argsort(-th)  # ascending s
            if c.shape != th.shape or np.any(c < 0) or np.any(c > 1) or np.any(np.diff(c[order]) < 0):
                msg = f"cdf must be in [0, 1], increasing in s, of shape {th.shape}"
                raise ValueError(msg)
            object.__setattr__(self, "cdf", read_only(c))
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "theta", read_only(th))
        object.__setattr__(self, "weights", read_only(w / total))
        object.__setattr__(self, "log_density", read_only(ld))
        object.__setattr__(self, "mass", total)

    @property
    def n(self) -> int:
        """Number of rings."""
        return int(self.theta.size)

    def __len__(self) -> int:
        return self.n

    @property
    def s(self) -> np.ndarray:
        """``s_j = cos theta_j = <x, e_d>`` on ring ``j``."""
        return np.cos(self.theta)

    @property
    def x(self) -> np.ndarray:
        """One point per ring, ``sin theta_j e_1 + cos theta_j e_d`` (as ``ZonalSphere.points``)."""
        x = np.zeros((self.n, self.d))
        x[:, 0] = np.sin(self.theta)
        x[:, -1] = np.cos(self.theta)
        return x

    @property
    def density(self) -> np.ndarray:
        """``rho0`` per unit surface measure (``inf`` beyond float64; :attr:`log_density`)."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_density)

    @property
    def log_density_s(self) -> np.ndarray:
        """``log`` of the density of ``s`` w.r.t. ``ds`` on ``[-1, 1]`` (the ball, ``k = 1``):
        ``log rho0 + log |S^{d-2}| + (d - 3)/2 log(1 - s^2)``."""
        with np.errstate(divide="ignore"):
            return (self.log_density + log_sphere_area(self.d - 1)
                    + (self.d - 3) * np.log(np.sin(self.theta)))

    def integrate(self, g: Callable[[np.ndarray], np.ndarray] | np.ndarray) -> float:
        """``sum_j w_j g(s_j)``: the quadrature of ``int g(<x, e>) dmu`` (``g`` a callable of
        ``s`` or its values at the rings)."""
        vals = np.asarray(g(self.s) if callable(g) else g, dtype=float)
        if vals.shape != (self.n,):
            msg = f"g must give one value per ring, shape ({self.n},), got {vals.shape}"
            raise ValueError(msg)
        return float(self.weights @ vals)

    # -- the reduction's members (meanfield.lagrangian.node_set.ReducedNodes) --------------

    def engine(self, model: Any, be: Any, memory_limit: int) -> tuple[Callable[[Any], Any], Any, Any]:
        """The state ``[phi | log J]`` (:func:`meanfield.lagrangian.rings.engine`)."""
        from meanfield.lagrangian.rings import engine

        return engine(model, self, be, memory_limit)

    def assemble(self, saved: list[tuple[float, np.ndarray]], model: Any) -> Any:
        """The Dataset of a ring run (:func:`meanfield.lagrangian.rings.assemble`)."""
        from meanfield.lagrangian.rings import assemble

        return assemble(saved, model, self)

    def monitor_slices(self, weights: np.ndarray) -> Slices:
        """One coordinate, ``s`` on the interval, one slice of every ring."""
        from meanfield.lagrangian.quadrature import EXTRAPOLATE, rule_basis

        every = np.arange(self.n)
        return [("interval", [(every, rule_basis(np.asarray(self.s, dtype=float), weights,
                                                 "interval"))], EXTRAPOLATE)]

    def monitor_terms(self, model: Any, y: np.ndarray, queries: np.ndarray,
                      weights: np.ndarray, sa: bool) -> tuple[np.ndarray, np.ndarray]:
        """The ring kernel ``e^{beta s s'} 0F1(nu + 1; (beta r r' / 2)^2)`` and the ``s``
        component of the ring-averaged field (docs/lagrangian.md section 8)."""
        from meanfield.lagrangian.rings import log_hyp0f1, ring_coordinates

        s, r = ring_coordinates(y[:, 0])
        beta, nu = float(model.beta), 0.5 * (self.d - 3)
        sq, rq = s[queries, None], r[queries, None]
        w = 0.25 * (beta * rq * r[None]) ** 2
        L0 = log_hyp0f1(nu + 1, w)
        B1 = s[None] - 0.5 * beta * sq * (r * r)[None] * np.exp(log_hyp0f1(nu + 2, w) - L0) / (nu + 1)
        L = beta * sq * s[None] + L0
        K = np.exp(L - np.max(L, axis=1, keepdims=True))
        Z = K @ weights
        vals = B1 - ((K * B1) @ weights / Z)[:, None] if sa else B1
        return K, vals[:, :, None]

    @classmethod
    def examples(cls) -> tuple[RingNodes, ...]:
        """Small instances for the contract test (tests/meanfield/lagrangian/test_node_sets.py):
        a bump at the pole on ``S^2`` and on ``S^5``."""
        return (rings(lambda s: np.exp(2.0 * s), 12, 3), rings(lambda s: np.exp(3.0 * s), 10, 6))

    @classmethod
    def from_spectral(cls, spectral: Any, time: float) -> RingNodes:
        """:func:`rings_from_dataset` (the hand-over of a zonal spectral state)."""
        return rings_from_dataset(spectral, time)

    def __repr__(self) -> str:
        return f"RingNodes(n={self.n}, d={self.d}, describe={self.describe!r})"


def rings(f: Callable[[np.ndarray], Any], n: int, d: int, *, log: bool = False) -> RingNodes:
    """Ring nodes of a zonal density ``f(<x, e_d>)`` on ``S^{d-1}`` (``d >= 3``, any size).

    ``n`` Gauss–Jacobi nodes ``s_j`` (weight ``(1 - s^2)^{(d-3)/2}``), weights
    ``w_j = f(s_j) W_j / sum_k f(s_k) W_k`` with ``W_j`` the rule for ``dA / |S^{d-1}|``:
    exact for ``int g f dA / int f dA`` when ``g f`` is a polynomial of degree ``<= 2n - 1``
    in ``s``. The density is normalised to a probability density per unit surface measure.

    Args:
        f: a callable of ``s`` (array) giving the density up to a constant factor, ``>= 0``;
            with ``log=True`` its natural logarithm (``-inf`` allowed), e.g. ``lambda s:
            kappa * s`` for von Mises–Fisher, which has no float64 form at ``d = 1024``.
        n: number of rings (``>= 1``).
        d: ambient dimension (``>= 3``).
        log: ``f`` gives ``log`` of the density.
    """
    n = count(n, "n", 1)
    d = count(d, "d", 3)
    s, log_w = gauss_jacobi_log(d, n)
    w, log_rho = _weighted(f, log, s, log_w, d, "s")
    error = start_error(f, n, d, log=log)
    _warn_unresolved_start(error, f"nodes.rings: the start is not resolved by n = {n} rings: its mass, mean "
                           f"and second moment of s differ by {error:.2g} between the rules of {n} and "
                           f"{2 * n} rings", 8, "raise n")
    return RingNodes(np.arccos(s), w, log_rho, d, cdf=_cdf(f, log, s, d),
                     describe=(f"rings: Gauss-Jacobi ({n}) in s, weight (1-s^2)^((d-3)/2), d={d}, "
                               f"start error estimate {error:.2g}"))


START_TOL = 1e-3
"""The start's quadrature error (:func:`start_error`) above which :func:`rings` warns. The
reduced flow is exact for the discrete measure of the rings; the estimate says how far that
measure is from the density ``f`` asked for, and every comparison with ``f``'s flow inherits
it. Below ``1e-3`` it is the user's accuracy choice (recorded in ``describe``, hence in the
run's settings; the d = 4, 5 field tests use 7 rings at ``~3e-6``); above, the moments of
the start are visibly wrong (the concentrated starts the rings miss give ``O(1)``)."""


def _warn_unresolved_start(error: float, what: str, section: int, remedy: str) -> None:
    """A ``UserWarning`` (at the caller of the node constructor) where the start's error estimate
    ``error`` exceeds :data:`START_TOL`: ``what`` the estimate in words."""
    if error > START_TOL:
        warnings.warn(f"{what} (the estimate of the start's quadrature error, above START_TOL = "
                      f"{START_TOL:g}; docs/lagrangian.md section {section}): {remedy}",
                      UserWarning, stacklevel=3)


def start_error(f: Callable[[np.ndarray], Any], n: int, d: int, *, log: bool = False) -> float:
    """The embedded estimate of the quadrature error of the start of :func:`rings`: the largest
    of ``|M_n / M_2n - 1|`` (``M`` the mass ``int f dA``), ``|E_n[s] - E_2n[s]|`` and
    ``|E_n[s^2] - E_2n[s^2]|`` between the Gauss–Jacobi rules of ``n`` and ``2 n`` rings (the
    finer rule's error is far below the coarser one's for a smooth ``f``, so the difference
    estimates the ``n``-ring rule's error). A density concentrated where the ``n`` rings do
    not reach (they lie within ``|s| <~ sqrt(4 n / d)``) gives an ``O(1)`` estimate."""
    return _moment_difference(f, log, [gauss_jacobi_log(d, m) for m in (n, 2 * n)])


def subspace_start_error(f: Callable[[np.ndarray], Any], n: int, d: int, k: int,
                         angular: int | None = None, *,
                         log: bool = False) -> float:
    """The estimate of :func:`start_error` for :func:`subspace`: mass, mean and second moments of
    ``p`` (largest entry) between :func:`subspace_rule` with ``n`` radial nodes and degree
    ``angular`` and the rule of ``2 n`` radial nodes and degree ``2 angular + 1`` (the default
    ``4 n - 1`` doubles with ``n``)."""
    deg = 4 * n - 1 if angular is None else angular
    return _moment_difference(f, log, [subspace_rule(n, d, k, deg), subspace_rule(2 * n, d, k, 2 * deg + 1)])


def _moment_difference(f: Callable[[np.ndarray], Any], log: bool,
                       rules: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """``max(|M_1/M_2 - 1|, |E_1[y] - E_2[y]|, |E_1[y y^T] - E_2[y y^T]|)`` of the density ``f``
    (its logarithm with ``log``) between two rules ``(y, log W)`` of the same measure."""
    out = []
    for y, log_w in rules:
        vals = np.asarray(f(y), dtype=float)
        with np.errstate(divide="ignore"):
            logf = vals if log else np.log(np.maximum(vals, 0.0))
        lm = float(logsumexp(logf + log_w))
        w = np.exp(logf + log_w - lm)
        yy = np.asarray(y, dtype=float).reshape(w.size, -1)
        out.append((lm, w @ yy, yy.T @ (w[:, None] * yy)))
    (l1, m1, q1), (l2, m2, q2) = out
    return max(abs(math.expm1(l1 - l2)), float(np.max(np.abs(m1 - m2))), float(np.max(np.abs(q1 - q2))))


def rings_from_dataset(ds: Any, time: float | None = None) -> RingNodes:
    """Ring nodes of the density of a :func:`meanfield.solve` Dataset on a ``ZonalSphere`` at a
    saved ``time`` (default: the last): the Gauss–Jacobi grid of its final resolution, one
    ring per grid node, the density per unit area as saved (negative round-off clipped to 0)
    and ``P(s <= s_j)`` of the band-limited density. The hand-over of
    ``solve(..., continue_lagrangian=True)`` on a zonal domain (no product rule on
    ``S^{d-2}``, whose node count grows like ``degree^{d-1}``)."""
    from meanfield.domains import ZonalSphere
    from meanfield.io import domain_of

    domain = domain_of(ds)
    if not isinstance(domain, ZonalSphere):
        msg = f"ds: ring nodes need a ZonalSphere Dataset, got the domain {domain!r}"
        raise ValueError(msg)
    times = np.asarray(ds["time"].values, dtype=float)
    k = times.size - 1 if time is None else int(np.argmin(np.abs(times - float(time))))
    if time is not None and not abs(times[k] - float(time)) <= 1e-9 * (1.0 + abs(float(time))):
        msg = f"time={time!r} is not a saved time of the Dataset (saved: {times.size} times)"
        raise ValueError(msg)
    rho = np.maximum(np.asarray(ds["density"].isel(time=k).values, dtype=float), 0.0)
    s, log_w = gauss_jacobi_log(domain.d, rho.size)
    coeffs = domain.forward(rho)

    def f(u: np.ndarray) -> np.ndarray:
        return np.maximum(domain.evaluate(coeffs, u), 0.0)

    with np.errstate(divide="ignore"):
        log_rho = np.log(rho)
    w = rho * np.exp(log_w)
    return RingNodes(np.arccos(s), w, log_rho - math.log(w.sum()), domain.d, cdf=_cdf(f, False, s, domain.d),
                     describe=f"rings of ZonalSphere({domain.d}, {rho.size - 1}) at time {times[k]:g}")


_CDF_POINTS = 32  # Gauss-Legendre points per gap between rings



def _weighted(f: Callable[[np.ndarray], Any], log: bool, pts: np.ndarray, log_w: np.ndarray,
              d: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The normalised weights ``w_j = f(pts_j) W_j / sum`` of a reduced rule with log weights
    ``log W_j``, and the log density per unit area of ``S^{d-1}`` at the nodes; ``f`` checked
    (``ValueError`` naming ``f``, the value and the node ``name = pts_j``)."""
    vals = np.asarray(f(pts), dtype=float)
    if vals.shape != log_w.shape:
        msg = f"f must give one value per node {name}, shape {log_w.shape}, got {vals.shape}"
        raise ValueError(msg)
    if log:
        bad = np.isnan(vals) | (vals == np.inf)
        if np.any(bad):
            msg = f"f (log density) must be finite or -inf, got {vals[bad][0]!r} at {name} = {pts[bad][0]}"
            raise ValueError(msg)
        logf = vals
    else:
        if not np.all(np.isfinite(vals)) or np.any(vals < 0):
            i = int(np.argmax(~np.isfinite(vals) | (vals < 0)))
            msg = f"f must be finite and >= 0, got {vals[i]!r} at {name} = {pts[i]}"
            raise ValueError(msg)
        with np.errstate(divide="ignore"):
            logf = np.log(vals)
    log_mass = float(logsumexp(logf + log_w))
    if not math.isfinite(log_mass):
        msg = "f: the density has no mass on the nodes (all zero)"
        raise ValueError(msg)
    return np.exp(logf + log_w - log_mass), logf - log_mass - log_sphere_area(d)

def _cdf(f: Callable[[np.ndarray], Any], log: bool, s: np.ndarray, d: int) -> np.ndarray:
    """``P(s' <= s_j)`` for the density ``f(s') (1 - s'^2)^{(d-3)/2}`` on ``[-1, 1]``: a
    32-point Gauss–Legendre rule on each gap between rings (and to the poles), in logarithms.
    A gap is narrower than the scale on which the (resolved) density varies, so the rule is
    at round-off there; at the poles (weight ``(1 - s^2)^{(d-3)/2}``, a root singularity for
    even ``d``) the gap's mass is below ``w_1`` of the Gauss–Jacobi rule."""
    from scipy.special import roots_legendre

    x, wx = roots_legendre(_CDF_POINTS)
    edges = np.concatenate([[-1.0], s, [1.0]])
    a, b = edges[:-1, None], edges[1:, None]
    u = 0.5 * (b - a) * x[None] + 0.5 * (b + a)
    vals = np.asarray(f(u.ravel()), dtype=float).reshape(u.shape)
    with np.errstate(divide="ignore"):
        logf = vals if log else np.log(vals)
        terms = logf + 0.5 * (d - 3) * np.log1p(-u * u) + np.log(0.5 * (b - a) * wx[None])
    gaps = logsumexp(terms, axis=1)
    cum = np.exp(np.logaddexp.accumulate(gaps) - logsumexp(gaps))
    return np.clip(cum[:-1], 0.0, 1.0)




# -- k = 2, 3: measures of the projection onto span(e_1, ..., e_k) --------------------------

SUBSPACE_MAX_NODES = 100_000
"""Most nodes :func:`subspace` builds: the reduced field is a sum over all pairs, ``n^2``
kernel values per evaluation (``1e10`` at this size, minutes per step on a few cores)."""


@dataclass(frozen=True, eq=False)
class SubspaceNodes(ReducedNodes):
    """A measure on ``S^{d-1}`` that depends on ``x`` only through ``p = (x_1, ..., x_k)``,
    ``k = 2, 3``, as ``n`` weighted spheres ``{x : Px = p_j}`` (uniform measure on each, of
    radius ``sqrt(1 - |p_j|^2)`` in the other ``d - k`` coordinates; docs/lagrangian.md
    section 11).

    Args:
        p: points ``(n, k)`` of the open unit ``k``-ball.
        weights: ``w_j >= 0`` summing to 1 (normalised here; the sum given is :attr:`mass`).
        log_density: ``log rho0`` at the nodes, per unit surface measure on ``S^{d-1}``.
        d: ambient dimension, ``>= k + 2``.
        describe: how the nodes were made.
    """

    p: np.ndarray
    weights: np.ndarray
    log_density: np.ndarray
    d: int
    describe: str = ""
    mass: float = field(init=False)

    reduction = "subspace"
    """The symmetry reduction (``solve_lagrangian`` runs its own state for it)."""

    def __post_init__(self) -> None:
        p = np.array(self.p, dtype=float)
        if p.ndim != 2 or p.shape[0] < 1 or p.shape[1] not in (2, 3):
            msg = f"p must have shape (n, k) with n >= 1 and k = 2 or 3, got shape {p.shape}"
            raise ValueError(msg)
        k = p.shape[1]
        d = count(self.d, "d", k + 2)
        norm = np.linalg.norm(p, axis=1)
        if not np.all(np.isfinite(p)) or np.any(norm >= 1):
            msg = f"p must lie in the open unit ball, got |p| up to {np.nanmax(norm)!r}"
            raise ValueError(msg)
        w, total, ld = _checked_weights(self.weights, self.log_density, norm.shape)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "p", read_only(p))
        object.__setattr__(self, "weights", read_only(w / total))
        object.__setattr__(self, "log_density", read_only(ld))
        object.__setattr__(self, "mass", total)

    @property
    def n(self) -> int:
        """Number of nodes (spheres)."""
        return int(self.p.shape[0])

    @property
    def k(self) -> int:
        """Dimension of the subspace."""
        return int(self.p.shape[1])

    def __len__(self) -> int:
        return self.n

    @property
    def x(self) -> np.ndarray:
        """One point per node, ``p_j + sqrt(1 - |p_j|^2) e_d``, shape ``(n, d)``."""
        x = np.zeros((self.n, self.d))
        x[:, :self.k] = self.p
        x[:, -1] = np.sqrt(np.maximum(1.0 - np.sum(self.p * self.p, axis=1), 0.0))
        return x

    @property
    def density(self) -> np.ndarray:
        """``rho0`` per unit surface measure (``inf`` beyond float64; :attr:`log_density`)."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_density)

    @property
    def log_density_p(self) -> np.ndarray:
        """``log`` of the density of ``p`` w.r.t. Lebesgue measure on the ``k``-ball:
        ``log rho0 + log |S^{d-k-1}| + (d - k - 2)/2 log(1 - |p|^2)``."""
        with np.errstate(divide="ignore"):
            return (self.log_density + log_sphere_area(self.d - self.k)
                    + 0.5 * (self.d - self.k - 2) * np.log1p(-np.sum(self.p * self.p, axis=1)))

    def integrate(self, g: Callable[[np.ndarray], np.ndarray] | np.ndarray) -> float:
        """``sum_j w_j g(p_j)``: the quadrature of ``int g(Px) dmu`` (``g`` a callable of ``p``,
        shape ``(n, k)``, or its values at the nodes)."""
        vals = np.asarray(g(self.p) if callable(g) else g, dtype=float)
        if vals.shape != (self.n,):
            msg = f"g must give one value per node, shape ({self.n},), got {vals.shape}"
            raise ValueError(msg)
        return float(self.weights @ vals)

    # -- the reduction's members (meanfield.lagrangian.node_set.ReducedNodes) --------------

    def engine(self, model: Any, be: Any, memory_limit: int) -> tuple[Callable[[Any], Any], Any, Any]:
        """The state ``[q | log J]`` (:func:`meanfield.lagrangian.subspace.engine`)."""
        from meanfield.lagrangian.subspace import engine

        return engine(model, self, be, memory_limit)

    def assemble(self, saved: list[tuple[float, np.ndarray]], model: Any) -> Any:
        """The Dataset of a subspace run (:func:`meanfield.lagrangian.subspace.assemble`)."""
        from meanfield.lagrangian.subspace import assemble

        return assemble(saved, model, self)

    def monitor_slices(self, weights: np.ndarray) -> Slices:
        """The coordinates of a subspace rule (:func:`subspace_rule`, a product of a
        Gauss–Jacobi rule in ``|p|^2`` and one on ``S^{k-1}``) and their slices: the radius
        ``|p|`` (interval; in ``|p|`` the integrand at ``beta = 0``, ``p_j - X`` and its
        square, is of degree ``<= 2``, in ``|p|^2`` it would not be a polynomial), the angle
        (``k = 2``, circle) or the polar angle ``theta`` of the ``S^2`` rule's shared latitudes
        and the longitude (``k = 3``, both trigonometric: ``p`` is of degree 1 in each). A
        slice: the nodes where the other coordinates are fixed, its basis that of its own
        weights. None where the nodes are not such a product."""
        from meanfield.lagrangian.quadrature import EXTRAPOLATE, EXTRAPOLATE_PARITY, rule_basis

        p = np.asarray(self.p, dtype=float)
        rho = np.linalg.norm(p, axis=1)
        u = p / rho[:, None]
        coords: list[tuple[np.ndarray, str]] = [(rho, "interval"),
                                                 (np.mod(np.arctan2(u[:, 1], u[:, 0]), 2 * np.pi), "circle")]
        extrapolate = [EXTRAPOLATE_PARITY, EXTRAPOLATE]
        if p.shape[1] == 3:
            coords.insert(1, (np.arccos(np.clip(u[:, 2], -1.0, 1.0)), "circle"))
            extrapolate.insert(1, EXTRAPOLATE_PARITY)
        labels = []
        for values, _ in coords:  # the index of each node's value of each coordinate
            order = np.argsort(values, kind="stable")
            step = np.diff(values[order]) > 1e-9
            lab = np.empty(values.size, dtype=int)
            lab[order] = np.concatenate([[0], np.cumsum(step)])
            labels.append(lab)
        sizes = [int(lab.max()) + 1 for lab in labels]
        distinct = np.unique(np.stack(labels, axis=1), axis=0).shape[0]
        if int(np.prod(sizes)) != p.shape[0] or distinct != p.shape[0]:
            return []
        lo, hi = float(np.min(rho)), float(np.max(rho))
        if hi > lo:
            coords[0] = (2.0 * (rho - lo) / (hi - lo) - 1.0, "interval")
        out: Slices = []
        for axis, (y, kind) in enumerate(coords):
            others = np.ravel_multi_index([labels[o] for o in range(len(coords)) if o != axis],
                                          [sizes[o] for o in range(len(coords)) if o != axis])
            width: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
            for key in np.unique(others):
                idx = np.flatnonzero(others == key)
                if np.sum(weights[idx]) > 0:
                    q = rule_basis(y[idx], weights[idx], kind)
                    width.setdefault(q.shape[1], []).append((idx, q))
            # slices of the same number of degrees stacked: (slices, nodes) and (slices, nodes, m)
            out.append((kind, [(np.stack([i for i, _ in sl]), np.stack([q for _, q in sl]))
                               for sl in width.values()], extrapolate[axis]))
        return out

    def monitor_terms(self, model: Any, y: np.ndarray, queries: np.ndarray,
                      weights: np.ndarray, sa: bool) -> tuple[np.ndarray, np.ndarray]:
        """The sphere-pair kernel and the ``k`` components of the averaged field
        (:func:`meanfield.lagrangian.subspace.pair_terms`, docs/lagrangian.md section 11)."""
        from meanfield.lagrangian.subspace import ball_coordinates, pair_terms

        k = y.shape[1] - 1
        p, r2 = ball_coordinates(y[:, :k])
        logk, B1, _ = pair_terms(float(model.beta), 0.5 * (self.d - k - 2), p[queries], r2[queries],
                                 p, r2, np.zeros(p.shape[0]), hessian=False)
        K = np.exp(logk - np.max(logk, axis=1, keepdims=True))
        Z = K @ weights
        vals = np.moveaxis(B1, 0, 2)  # (queries, nodes, k)
        if sa:
            vals = vals - (np.einsum("qn,qnc->qc", K * weights, vals) / Z[:, None])[:, None, :]
        return K, vals

    @classmethod
    def examples(cls) -> tuple[SubspaceNodes, ...]:
        """Small instances for the contract test: a bump in the plane of ``e_1, e_2`` on
        ``S^4`` (``k = 2``) and in ``e_1, e_2, e_3`` on ``S^5`` (``k = 3``)."""
        return (subspace(lambda p: np.exp(2.0 * p[:, 0]), 4, 5, 2),
                subspace(lambda p: np.exp(2.0 * p[:, 0]), 3, 6, 3))

    def __repr__(self) -> str:
        return f"SubspaceNodes(n={self.n}, k={self.k}, d={self.d}, describe={self.describe!r})"


def jacobi_rule_log(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """``n``-point Gauss–Jacobi rule on ``[0, 1]`` for the weight ``(1 - t)^a t^b``, normalised
    (Golub–Welsch: nodes the eigenvalues of the Jacobi matrix, weights the squared first
    components of its eigenvectors, so no ``2^{a+b+1}`` or Beta function that leaves float64
    for ``a`` in the hundreds): ``(t, log w)`` with ``sum w = 1``, ``t`` ascending."""
    from scipy.linalg import eigh_tridiagonal

    n = count(n, "n", 1)
    m = np.arange(n, dtype=float)
    ab = a + b
    # the recurrence of the Jacobi polynomials P^(a, b) on [-1, 1] (weight (1-x)^a (1+x)^b)
    diag = np.empty(n)
    diag[0] = (b - a) / (ab + 2)
    mm = m[1:]
    diag[1:] = (b * b - a * a) / ((2 * mm + ab) * (2 * mm + ab + 2))
    off = (2 / (2 * mm + ab)) * np.sqrt(mm * (mm + a) * (mm + b) * (mm + ab)
                                        / ((2 * mm + ab - 1) * (2 * mm + ab + 1)))
    if n == 1:
        x, v = diag.copy(), np.ones((1, 1))
    else:
        x, v = eigh_tridiagonal(diag, off)
    with np.errstate(divide="ignore"):
        log_w = 2 * np.log(np.abs(v[0]))
    log_w -= logsumexp(log_w)
    return 0.5 * (1.0 + x), log_w


def subspace_rule(n: int, d: int, k: int, angular: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The node rule of :func:`subspace`: points ``(N, k)`` of the ``k``-ball and the logarithms
    of weights summing to 1, for the weight ``(1 - |p|^2)^{(d-k-2)/2}``.

    ``p = sqrt(t) u``: ``n`` Gauss–Jacobi nodes in ``t = |p|^2`` (weight ``(1 - t)^nu t^{k/2-1}``,
    ``nu = (d-k-2)/2``; ``dp = |p|^{k-1} d|p| du = t^{k/2-1} dt du / 2``) times a rule on
    ``S^{k-1}`` exact to degree ``angular`` (default ``4 n - 1``): the trapezoid rule on
    ``angular + 1`` angles (``k = 2``), :func:`meanfield.lagrangian.nodes.sphere_rule` (``k = 3``). A
    polynomial of degree ``D <= angular`` in ``p`` averaged over directions is a polynomial of
    degree ``<= D/2`` in ``t``: the rule is exact for degree ``min(angular, 4 n - 1)``.
    """
    t, log_wt = jacobi_rule_log(n, 0.5 * (d - k - 2), 0.5 * k - 1.0)
    deg = 4 * n - 1 if angular is None else count(angular, "angular", 0)
    if k == 2:
        m = deg + 1
        ang = 2 * np.pi * (np.arange(m) + 0.5) / m
        u, wu = np.stack([np.cos(ang), np.sin(ang)], axis=-1), np.full(m, 1.0 / m)
    else:
        u, wu = sphere_rule(3, deg)
        wu = wu / wu.sum()
    pts = np.sqrt(t)[:, None, None] * u[None, :, :]
    log_w = log_wt[:, None] + np.log(wu)[None, :]
    return pts.reshape(-1, k), log_w.reshape(-1)


def subspace_size(n: int, k: int, angular: int | None = None) -> int:
    """The number of nodes of ``subspace_rule(n, d, k, angular)``, without building it."""
    n = count(n, "n", 1)
    deg = 4 * n - 1 if angular is None else count(angular, "angular", 0)
    return n * (deg + 1 if k == 2 else sphere_rule_size(3, deg))


def subspace(f: Callable[[np.ndarray], Any], n: int, d: int, k: int, *, angular: int | None = None,
             log: bool = False) -> SubspaceNodes:
    """Subspace nodes of a density ``f(p)``, ``p = (x_1, ..., x_k)``, on ``S^{d-1}``
    (``k = 2, 3``; ``d >= k + 2``, any size; docs/lagrangian.md section 11).

    :func:`subspace_rule` (``n`` radial Gauss–Jacobi nodes times an angular rule exact to degree
    ``angular``, default ``4 n - 1``), weights ``w_j = f(p_j) W_j / sum_i f(p_i) W_i`` with
    ``W_j`` the rule for ``dA / |S^{d-1}|``; the density normalised to a probability density per
    unit surface measure. Refused before building when the node count exceeds
    :data:`SUBSPACE_MAX_NODES` or the memory.

    Args:
        f: a callable of ``p`` (array ``(N, k)``) giving the density up to a constant factor,
            ``>= 0``; with ``log=True`` its natural logarithm (``-inf`` allowed), e.g.
            ``lambda p: kappa * p[:, 0]`` for von Mises–Fisher about ``e_1``.
        n: radial nodes (``>= 1``).
        d: ambient dimension (``>= k + 2``).
        k: dimension of the subspace, 2 or 3.
        angular: degree of the angular rule (``k = 2``: ``angular + 1`` angles).
        log: ``f`` gives ``log`` of the density.
    """
    from meanfield.memory import check_memory

    if isinstance(k, bool) or k not in (2, 3):
        msg = f"k must be 2 or 3 (k = 1: meanfield.lagrangian.nodes.rings), got {k!r}"
        raise ValueError(msg)
    n = count(n, "n", 1)
    d = count(d, "d", k + 2)
    size = subspace_size(n, k, angular)
    what = f"nodes.subspace(n={n}, d={d}, k={k}, angular={angular}): {size:.4g} nodes"
    if size > SUBSPACE_MAX_NODES:
        msg = (f"{what}, more than {SUBSPACE_MAX_NODES} (the field sums over all {float(size) ** 2:.3g} "
               "pairs at every evaluation): lower n or angular")
        raise ValueError(msg)
    # the rule and state (4k + 8 numbers a node) and one point in R^d per node (SubspaceNodes.x,
    # which solve_lagrangian reads and checks once)
    check_memory(float(size) * (4 * k + 8 + d) * 8, what, "lower n or angular")
    p, log_w = subspace_rule(n, d, k, angular)
    w, log_rho = _weighted(f, log, p, log_w, d, "p")
    error = subspace_start_error(f, n, d, k, angular, log=log)
    _warn_unresolved_start(error, f"nodes.subspace: the start is not resolved by {size} nodes: its mass, "
                           f"mean and second moments of p differ by {error:.2g} from the rule of twice "
                           "the radial nodes and degree", 11, "raise n or angular")
    rule = "trapezoid" if k == 2 else "sphere_rule"
    return SubspaceNodes(p, w, log_rho, d, describe=(
        f"subspace k={k}: Gauss-Jacobi ({n}) in |p|^2 x {rule} degree "
        f"{4 * n - 1 if angular is None else angular}, weight (1-|p|^2)^((d-k-2)/2), d={d}, "
        f"start error estimate {error:.2g}"))


__all__ = ["SUBSPACE_MAX_NODES", "RingNodes", "SubspaceNodes", "jacobi_rule_log", "rings",
           "rings_from_dataset", "start_error", "subspace", "subspace_rule", "subspace_size",
           "subspace_start_error"]
