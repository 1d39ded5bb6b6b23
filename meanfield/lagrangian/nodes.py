r"""Weighted node sets: the quadratures of an initial measure that start a Lagrangian run.

.. autosummary::
   Nodes
   circle
   sphere
   zonal
   rings
   subspace
   gaussian
   from_samples
   from_dataset
   with_labels

A node set is the discrete probability measure ``mu = sum_j w_j delta_{x_j}`` (docs/lagrangian.md)
with, at each node, the value ``rho0(x_j)`` of the density it discretises (w.r.t. surface
measure on ``S^{d-1}``, Lebesgue measure in ``R^d``). The weights are ``w_j = rho0(x_j)
omega_j`` for a quadrature rule ``(x_j, omega_j)``, so that for smooth ``f``

.. math::  \sum_j w_j f(x_j) \approx \int f \, d\mu_0 = \int f \rho_0 \, dA

with the accuracy of the rule, which is spectral for the rules below:

* :func:`circle`: the trapezoid rule on ``N`` equispaced angles; exact when ``f rho0`` is a
  trigonometric polynomial of degree ``< N``.
* :func:`sphere`: Gauss–Legendre in ``cos(colatitude)`` (``lmax + 1`` rings) times the
  trapezoid rule in longitude (``nphi >= 2 lmax + 2`` points): the grid of
  :class:`~meanfield.domains.sphere.Sphere`; exact when ``f rho0`` is a polynomial of degree
  ``<= 2 lmax + 1`` on ``S^2``.
* :func:`zonal`: for a density of ``s = <x, e_d>`` on ``S^{d-1}``: Gauss–Jacobi in ``s``
  (weight ``(1 - s^2)^{(d-3)/2}``, the grid of :class:`~meanfield.domains.zonal_sphere.ZonalSphere`)
  times a product rule on the ``S^{d-2}`` of directions orthogonal to ``e_d``.
* :func:`gaussian`: the Gauss–Hermite tensor rule for ``N(m, Sigma)`` in ``R^d``; exact for
  polynomials of degree ``<= 2 per_dim - 1`` in each variable.
* :func:`from_samples`: equal weights ``1/n`` (Monte Carlo), density unknown (NaN) unless given.

Every constructor checks its input and raises ``ValueError`` naming the bad argument.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.special import roots_hermitenorm, roots_legendre

from meanfield.arguments import count, finite, nonnegative_weights, read_only
from meanfield.domains import Circle, Domain, NodeRule, Sphere, ZonalSphere
from meanfield.domains.zonal_sphere import check_zonal_size, sphere_rule, sphere_rule_size
from meanfield.lagrangian.node_set import NodeSet
from meanfield.lagrangian.nodes_reduced import RingNodes, SubspaceNodes, rings, subspace

GEOMETRIES = ("sphere", "euclidean")
"""``sphere``: nodes on ``S^{d-1}`` (layer normalisation); ``euclidean``: nodes in ``R^d``."""

SPHERE_TOL = 1e-10
"""Largest ``| |x| - 1 |`` accepted for nodes on the sphere (round-off of user data); the
accepted nodes are then normalised exactly."""



@dataclass(frozen=True, eq=False)
class Nodes(NodeSet):
    """A weighted node set ``mu = sum_j w_j delta_{x_j}``, a probability measure.

    Args:
        x: node positions, shape ``(n, d)``; on ``S^{d-1}`` when ``geometry="sphere"``.
        weights: ``w_j >= 0``, shape ``(n,)``, with a positive finite sum; they are
            normalised to sum 1 (the sum given is kept as :attr:`mass`).
        density: the density ``rho0(x_j)`` of the measure at each node, shape ``(n,)``,
            ``>= 0`` (w.r.t. surface measure on spheres, Lebesgue in ``R^d``). All NaN
            means unknown, allowed only for equal weights (samples).
        geometry: ``"sphere"`` or ``"euclidean"``.
        labels: optional position labels in ``[0, 1]``, shape ``(n,)`` (causal/masked
            attention: node ``i`` attends to the nodes with ``label_j <= label_i``).
        describe: how the nodes were made (for a result's ``attrs``).
    """

    x: np.ndarray
    weights: np.ndarray
    density: np.ndarray
    geometry: str = "sphere"
    labels: np.ndarray | None = None
    describe: str = ""
    mass: float = field(init=False)
    """The sum of the weights as given (before normalisation)."""

    def __post_init__(self) -> None:
        x = np.array(self.x, dtype=float)
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            msg = f"x must have shape (n, d) with n, d >= 1, got shape {x.shape}"
            raise ValueError(msg)
        finite(x, "x")
        n, d = x.shape
        if self.geometry not in GEOMETRIES:
            msg = f"geometry must be one of {GEOMETRIES}, got {self.geometry!r}"
            raise ValueError(msg)
        if self.geometry == "sphere":
            if d < 2:
                msg = f"x: nodes on a sphere need d >= 2 coordinates, got d={d}"
                raise ValueError(msg)
            r = np.linalg.norm(x, axis=1)
            off = float(np.max(np.abs(r - 1.0)))
            if off > SPHERE_TOL:
                j = int(np.argmax(np.abs(r - 1.0)))
                msg = (f"x: node {j} is off the unit sphere (|x| = {r[j]:.12g}; "
                       f"max ||x| - 1| = {off:.3g} > {SPHERE_TOL:g})")
                raise ValueError(msg)
            x = x / r[:, None]
        w = nonnegative_weights(self.weights, ((n,),))
        total = float(w.sum())
        if not (total > 0 and math.isfinite(total)):
            msg = f"weights must have a positive finite sum, got {total!r}"
            raise ValueError(msg)
        rho = np.array(self.density, dtype=float)
        if rho.shape != (n,):
            msg = f"density must have shape ({n},) (one per node of x), got {rho.shape}"
            raise ValueError(msg)
        nan = np.isnan(rho)
        if np.all(nan):
            if not np.all(w == w[0]):
                msg = "density: an unknown (NaN) density is allowed only for equal weights (samples)"
                raise ValueError(msg)
        else:
            finite(rho, "density")
            if np.any(rho < 0):
                msg = f"density must be >= 0, got min {float(rho.min()):.3g}"
                raise ValueError(msg)
        labels = self.labels
        if labels is not None:
            labels = np.array(labels, dtype=float)
            if labels.shape != (n,):
                msg = f"labels must have shape ({n},) (one per node of x), got {labels.shape}"
                raise ValueError(msg)
            finite(labels, "labels")
            if np.any(labels < 0) or np.any(labels > 1):
                msg = f"labels must lie in [0, 1], got range [{labels.min():.3g}, {labels.max():.3g}]"
                raise ValueError(msg)
            labels = read_only(labels)
        if not isinstance(self.describe, str):
            msg = f"describe must be a str, got {type(self.describe).__name__}"
            raise ValueError(msg)
        object.__setattr__(self, "x", read_only(x))
        object.__setattr__(self, "weights", read_only(w / total))
        object.__setattr__(self, "density", read_only(rho))
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "mass", total)

    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.x.shape[0])

    @property
    def d(self) -> int:
        """Ambient dimension."""
        return int(self.x.shape[1])

    def __len__(self) -> int:
        return self.n

    def integrate(self, f: Callable[[np.ndarray], np.ndarray] | np.ndarray) -> float:
        """``sum_j w_j f(x_j)``: the quadrature of ``int f dmu`` (``f`` a callable of the
        ``(n, d)`` positions, or its values at the nodes)."""
        vals = np.asarray(f(self.x) if callable(f) else f, dtype=float)
        if vals.shape != (self.n,):
            msg = f"f must give one value per node, shape ({self.n},), got {vals.shape}"
            raise ValueError(msg)
        return float(self.weights @ vals)

    def __repr__(self) -> str:
        lab = "" if self.labels is None else ", labelled"
        return f"Nodes(n={self.n}, d={self.d}, geometry={self.geometry!r}{lab}, describe={self.describe!r})"


# -- densities on a domain's grid ------------------------------------------------------------


def _density_on(domain: Domain, rho: Any, like: Callable[[tuple[int, ...]], Domain | None]) -> np.ndarray:
    """``rho`` (a callable of ``domain.grid`` or an array on the grid of ``domain`` or of
    another resolution of it, ``like(shape)``) on ``domain.grid``, normalised to mass 1 and
    clipped at 0 (``check_density`` of :mod:`meanfield.solve` accepts negatives down to
    ``1e-10 max rho``). Arrays of another resolution are carried over spectrally
    (``forward``, ``prolong``, ``backward``)."""
    from meanfield.domains.base import check_density

    if callable(rho):  # evaluated as check_density does, then broadcast (rho may ignore a coordinate)
        grid = domain.grid
        vals = rho(*np.meshgrid(*grid, indexing="ij", sparse=True)) if isinstance(grid, tuple) else rho(grid)
        arr = np.asarray(vals, dtype=float)
        if arr.ndim == len(domain.grid_shape):
            try:
                arr = np.broadcast_to(arr, domain.grid_shape)
            except ValueError:
                pass  # check_density names the shape
        rho = arr
    else:
        arr = np.asarray(rho, dtype=float)
        if arr.ndim > 0 and arr.shape != domain.grid_shape:
            source = like(arr.shape)
            if source is None:
                msg = (f"rho0: an array must lie on a {type(domain).__name__} grid "
                       f"(shape {domain.grid_shape} here), got shape {arr.shape}")
                raise ValueError(msg)
            finite(arr, "rho0")
            arr = domain.backward(domain.prolong(source.forward(arr), source))
        rho = arr
    vals = check_density(domain, rho)
    return np.maximum(vals, 0.0)


def _rule_nodes(domain: Domain, rho: Any, like: Callable[[tuple[int, ...]], Domain | None],
                rule: NodeRule) -> Nodes:
    """The nodes of ``domain``'s :meth:`~meanfield.domains.base.Domain.node_rule` ``rule``,
    weighted by ``rho`` (:func:`_density_on`): ``w_j = rho(cell_j) omega_j``."""
    vals = _density_on(domain, rho, like).reshape(-1)
    dens = vals if rule.cell is None else vals[rule.cell]
    return Nodes(rule.x, dens * rule.omega, dens, "sphere", describe=rule.describe)


def circle(rho: Any, N: int) -> Nodes:
    """Trapezoid nodes on ``S^1``: ``x_j = (cos theta_j, sin theta_j)``, ``theta_j = 2 pi j/N``,
    ``w_j = rho(theta_j) 2 pi / N`` (``rho`` normalised: ``int rho d theta = 1``).

    Exact (to round-off) for ``int f rho`` when ``f rho`` is a trigonometric polynomial of
    degree ``< N``; geometric convergence for analytic ``f rho``.

    Args:
        rho: a callable of the angle (the :class:`~meanfield.domains.circle.Circle` grid),
            or values on the grid of any ``Circle`` (interpolated spectrally to ``N``).
        N: the number of nodes (even, ``>= 8``, as for ``Circle``).
    """
    domain = Circle(N)

    def like(shape: tuple[int, ...]) -> Domain | None:
        ok = len(shape) == 1 and shape[0] >= 8 and shape[0] % 2 == 0
        return Circle(shape[0]) if ok else None

    return _rule_nodes(domain, rho, like, domain.node_rule())


def sphere(rho: Any, lmax: int) -> Nodes:
    """Gauss–Legendre x trapezoid nodes on ``S^2``: the grid of ``Sphere(lmax)``
    (``lmax + 1`` Gauss–Legendre colatitudes, ``nphi >= 2 lmax + 2`` longitudes), weights
    ``w_j = rho(x_j) omega_j`` with the grid's quadrature weights ``omega_j``.

    Exact (to round-off) for ``int f rho dA`` when ``f rho`` is a polynomial of degree
    ``<= 2 lmax + 1`` on ``S^2``.

    Args:
        rho: a callable of ``(colatitude, longitude)`` (broadcast over the grid), or values
            on the grid of any ``Sphere`` (interpolated spectrally to ``lmax``).
        lmax: the band limit of the rule (``>= 3``).
    """
    domain = Sphere(lmax)

    def like(shape: tuple[int, ...]) -> Domain | None:
        if len(shape) != 2 or shape[0] < 4:
            return None
        src = Sphere(shape[0] - 1)
        return src if src.grid_shape == shape else None

    return _rule_nodes(domain, rho, like, domain.node_rule())


def zonal(rho: Any, d: int, degree: int, angular: int | None = None) -> Nodes:
    """Nodes for a zonal density ``rho(<x, e_d>)`` on ``S^{d-1}`` (``d >= 3``).

    ``x = s_j e_d + sqrt(1 - s_j^2) (u_k, 0)``: the ``degree + 1`` Gauss–Jacobi nodes ``s_j``
    of ``ZonalSphere(d, degree)`` (exact in ``s`` to degree ``2 degree + 1``) times
    :func:`sphere_rule` on ``S^{d-2}`` exact to degree ``angular`` (default ``2 degree + 1``),
    weights ``rho(s_j) W_j v_k / |S^{d-2}|``. Exact for ``int f rho dA`` when ``f`` is a
    polynomial of degree ``<= angular`` with ``deg f + deg rho <= 2 degree + 1``. For ``d = 3``
    this is the rule of :func:`sphere` with ``2 degree + 2`` longitudes. The node count,
    ``(degree + 1) x`` that of the ``S^{d-2}`` rule, grows like ``degree^{d-1}``: meant for
    small ``d``; refused with the figure before building when it does not fit in memory
    (:func:`check_zonal_size`). :func:`rings` is the exact reduction for any ``d``.

    Args:
        rho: a callable of ``s`` (the ``ZonalSphere`` grid) or values on the grid of any
            ``ZonalSphere(d, .)`` (interpolated spectrally).
        d: ambient dimension.
        degree: the Gauss–Jacobi rule has ``degree + 1`` nodes.
        angular: degree of exactness of the rule on ``S^{d-2}``.
    """
    domain = ZonalSphere(d, degree)

    def like(shape: tuple[int, ...]) -> Domain | None:
        return ZonalSphere(domain.d, shape[0] - 1) if len(shape) == 1 and shape[0] >= 3 else None

    rule = domain.node_rule(angular)  # refused here, before any work, when it does not fit
    return _rule_nodes(domain, rho, like, rule)


def gaussian(mean: Any, cov: Any, per_dim: int) -> Nodes:
    """Gauss–Hermite tensor nodes for ``N(mean, cov)`` in ``R^d``: ``x = mean + L z``
    (``cov = L L^T``, Cholesky), ``z`` the ``per_dim^d`` products of the roots of the
    probabilists' Hermite polynomial ``He_{per_dim}``, weights the products of its
    Gauss weights (normalised), density the Gaussian density at the node (Lebesgue).

    Exact for ``E f(X)`` when ``f`` is a polynomial of degree ``<= 2 per_dim - 1`` in each
    variable of ``z``. Meant for ``d <= 3`` (``per_dim^d`` nodes).
    """
    m = np.array(mean, dtype=float)
    if m.ndim != 1 or m.size < 1:
        msg = f"mean must be a 1-d array of length d >= 1, got shape {m.shape}"
        raise ValueError(msg)
    finite(m, "mean")
    d = m.size
    S = np.array(cov, dtype=float)
    if S.shape != (d, d):
        msg = f"cov must have shape ({d}, {d}) to match mean, got {S.shape}"
        raise ValueError(msg)
    finite(S, "cov")
    if not np.allclose(S, S.T, rtol=1e-12, atol=1e-14 * float(np.max(np.abs(S)))):
        msg = "cov must be symmetric"
        raise ValueError(msg)
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        msg = f"cov must be positive definite (eigenvalues {np.linalg.eigvalsh(S)})"
        raise ValueError(msg) from None
    per_dim = count(per_dim, "per_dim", 1)
    z1, w1 = roots_hermitenorm(per_dim)
    grids = np.meshgrid(*([z1] * d), indexing="ij")
    z = np.stack([g.reshape(-1) for g in grids], axis=-1)
    wgrid = np.meshgrid(*([w1 / math.sqrt(2 * math.pi)] * d), indexing="ij")
    w = np.prod(np.stack([g.reshape(-1) for g in wgrid], axis=-1), axis=-1)
    x = m + z @ L.T
    log_det_L = float(np.sum(np.log(np.diag(L))))
    dens = np.exp(-0.5 * np.sum(z * z, axis=1) - 0.5 * d * math.log(2 * math.pi) - log_det_L)
    return Nodes(x, w, dens, "euclidean",
                 describe=f"gaussian: Gauss-Hermite tensor grid, per_dim={per_dim}, d={d}")


def from_samples(x: Any, geometry: str = "sphere", density: Any = None,
                 labels: Any = None) -> Nodes:
    """Equal weights ``1/n`` on samples ``x`` (n, d) (a Monte Carlo quadrature); ``density``
    the density at the samples when known, else NaN."""
    arr = np.asarray(x, dtype=float)
    n = arr.shape[0] if arr.ndim >= 1 else 0
    dens = np.full(n, np.nan) if density is None else density
    return Nodes(arr, np.full(n, 1.0 / max(n, 1)), dens, geometry, labels=labels,
                 describe=f"samples: n={n}, equal weights")


def _settings_geometry(ds: Any) -> str | None:
    try:
        geometry = json.loads(ds.attrs.get("settings", "{}")).get("geometry")
    except (TypeError, ValueError, AttributeError):
        return None
    return geometry if geometry in GEOMETRIES else None


def from_dataset(ds: Any, time: float | None = None, resolution: int | None = None) -> Nodes:
    """Nodes of the density of a :func:`meanfield.solve` Dataset at a saved ``time`` (default:
    the last): the domain's own rule at the Dataset's final resolution (circle: trapezoid;
    sphere: Gauss–Legendre x trapezoid; zonal: :func:`zonal`), or at ``resolution`` when
    given (the density carried over spectrally).

    A Lagrangian Dataset (``x (time, node, dim)``, ``weight (node)``, ``density (time,
    node)``, ``label (node)`` if labelled) gives its nodes at that time, to go on from there
    (geometry from ``attrs["settings"]``, else ``sphere`` when every ``|x| = 1``)."""
    from meanfield.io import domain_of

    if "density" not in getattr(ds, "data_vars", {}) or "time" not in ds.dims:
        msg = "ds must be a Dataset of meanfield.solve with a density (time, ...) variable"
        raise ValueError(msg)
    times = np.asarray(ds["time"].values, dtype=float)
    if time is None:
        k = times.size - 1
    else:
        k = int(np.argmin(np.abs(times - float(time))))
        if not abs(times[k] - float(time)) <= 1e-9 * (1.0 + abs(float(time))):
            msg = (f"time={time!r} is not a saved time of the Dataset (saved: {times.size} times "
                   f"in [{times[0]:g}, {times[-1]:g}])")
            raise ValueError(msg)
    where = f"; from the Dataset at time {times[k]:g}"
    if "x" in ds.data_vars and "weight" in ds.data_vars:  # a Lagrangian run: its nodes as they are
        x = np.asarray(ds["x"].isel(time=k).transpose("node", "dim").values, dtype=float)
        dens = np.asarray(ds["density"].isel(time=k).values, dtype=float)
        labels = np.asarray(ds["label"].values, dtype=float) if "label" in ds.data_vars else None
        geometry = _settings_geometry(ds)
        if geometry is None:
            on_sphere = np.all(np.abs(np.linalg.norm(x, axis=1) - 1) <= SPHERE_TOL)
            geometry = "sphere" if on_sphere else "euclidean"
        return Nodes(x, np.asarray(ds["weight"].values, dtype=float), dens, geometry, labels=labels,
                     describe=f"Lagrangian nodes{where}")
    domain = domain_of(ds)
    rho = np.asarray(ds["density"].isel(time=k).values, dtype=float)
    res = domain.resolution if resolution is None else count(resolution, "resolution", 1)
    target = domain.with_resolution(res)
    try:
        rule = target.node_rule()
    except ValueError as exc:
        msg = f"ds: {exc}"
        raise ValueError(msg) from exc

    def like(shape: tuple[int, ...]) -> Domain | None:
        return domain if shape == domain.grid_shape else None

    out = _rule_nodes(target, rho, like, rule)
    return Nodes(out.x, out.weights, out.density, out.geometry, describe=out.describe + where)


def with_labels(nodes: Nodes, labels: Any, rule: str = "gauss") -> Nodes:
    """Nodes with position labels in ``[0, 1]`` (causal/masked attention).

    ``labels`` an array ``(n,)``: one label per node. ``labels = m`` (an int): the product
    quadrature of space x label, the label uniform on ``[0, 1]``: ``m`` label nodes ``t_k``
    (``rule="gauss"``: Gauss–Legendre mapped to ``[0, 1]``; ``"midpoint"``: ``(k + 1/2)/m``)
    with weights ``v_k`` (sum 1); every spatial node repeated per label (label-major: node
    ``k n + j`` is ``(x_j, t_k)``), weights ``w_j v_k``, density unchanged (the label's
    density is 1).
    """
    if isinstance(labels, (int, np.integer)) and not isinstance(labels, bool):
        m = count(labels, "labels", 1)
        if rule == "gauss":
            t, v = roots_legendre(m)
            t, v = (t + 1.0) / 2.0, v / 2.0
        elif rule == "midpoint":
            t, v = (np.arange(m) + 0.5) / m, np.full(m, 1.0 / m)
        else:
            msg = f"rule must be 'gauss' or 'midpoint', got {rule!r}"
            raise ValueError(msg)
        n = nodes.n
        return Nodes(np.tile(nodes.x, (m, 1)), (v[:, None] * nodes.weights[None, :]).reshape(-1),
                     np.tile(nodes.density, m), nodes.geometry, labels=np.repeat(t, n),
                     describe=f"{nodes.describe}; x {m} labels ({rule})")
    return Nodes(nodes.x, nodes.weights, nodes.density, nodes.geometry, labels=labels,
                 describe=f"{nodes.describe}; labelled")


__all__ = ["GEOMETRIES", "SPHERE_TOL", "Nodes", "RingNodes", "SubspaceNodes", "circle", "from_dataset",
           "from_samples", "gaussian", "check_zonal_size", "rings", "sphere", "sphere_rule",
           "sphere_rule_size", "subspace", "with_labels", "zonal"]
