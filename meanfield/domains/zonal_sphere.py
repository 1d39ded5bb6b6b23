r"""Axisymmetric densities on ``S^{d-1}`` (any ``d >= 3``): a Gegenbauer basis in ``s = <x, e>``.

.. autosummary::
   ZonalSphere

A zonal density ``rho(x) = f(<x, e>)`` (axis ``e = e_d``, the last coordinate) stays zonal
under the flow, so the PDE of docs/equations.md section 3 becomes one-dimensional in ``s in [-1, 1]``.
With ``alpha = (d - 2)/2`` the surface measure is ``dA = |S^{d-2}| (1 - s^2)^{alpha - 1/2} ds``
and the degree-``l`` zonal harmonic is the Gegenbauer polynomial ``C_l^alpha(s)``. We store

.. math::  f(s) = \frac{1}{|S^{d-1}|} \sum_{l=0}^{L} c_l Q_l(s), \qquad
           Q_l = \sqrt{N(d, l)}\, C_l^\alpha(s) / C_l^\alpha(1),

``N(d, l) = (2l + d - 2) (l + d - 3)! / (l! (d - 2)!)`` the dimension of the degree-``l``
harmonics; the ``Q_l`` are orthonormal for ``dA / |S^{d-1}|`` (``Q_0 = 1``). The factor
``1/|S^{d-1}|`` makes ``c_0`` the mass and keeps every coefficient of a probability density
of order one for any ``d`` (``|S^{d-1}|`` is ``1e-150`` at ``d = 256``, and so densities are
``1e150``): absolute tolerances and energies mean the same in every dimension. Parseval's
weights are all ``1/|S^{d-1}|``; at ``d = 3`` the ``c_l`` are ``4 pi`` times the ``m = 0``
coefficients of :class:`Sphere`. ``Q_l`` comes from its three-term recurrence
``s Q_l = b_{l+1} Q_{l+1} + b_l Q_{l-1}``, ``b_l^2 = l (l + 2 alpha - 1) / (4 (l + alpha)
(l + alpha - 1))``, which is stable and free of Gamma-function overflow for any ``d``; the
Gauss–Jacobi nodes are the eigenvalues of its Jacobi matrix (Golub–Welsch) and the weights
the Christoffel numbers ``|S^{d-1}| / sum_l Q_l(s_j)^2`` (computed with rescaling, so ``d``
and the number of nodes may be in the thousands).

Gradient: ``grad f = f'(s) (e - s x) = f'(s) sqrt(1 - s^2) u``, one component along the unit
vector ``u`` towards ``e``. Divergence in weak form, ``int Q_l div F dA = -int grad Q_l . F``,
exact for the quadratic terms on the 3/2-rule grid.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, Callable

import numpy as np
from scipy.linalg import eigh_tridiagonal
from scipy.special import gammaln

from meanfield.arguments import count
from meanfield.domains.base import Domain, NodeRule
from meanfield.domains.geometry import SphereGeometry
from meanfield.special import log_sphere_area, sphere_area

_MIN_LOG_AREA = -650.0  # |S^{d-1}| > e^-650 ~ 1e-282: densities 1/|S| stay below 1e282
_ROUNDOFF = 3e-13  # relative l2 error of coefficients (measured <= 4e-14; ZonalSphere.roundoff)


def log_harmonic_dimension(d: int, l: np.ndarray) -> np.ndarray:
    """``log N(d, l)``, the dimension of the spherical harmonics of degree ``l`` on ``S^{d-1}``."""
    l = np.asarray(l, dtype=float)
    return np.log(2 * l + d - 2) + gammaln(l + d - 2) - gammaln(l + 1) - gammaln(d - 1)


def _recurrence(d: int, n: int) -> np.ndarray:
    """``b_1 .. b_n`` of ``s Q_l = b_{l+1} Q_{l+1} + b_l Q_{l-1}`` (orthonormal Gegenbauer)."""
    a = 0.5 * (d - 2)
    l = np.arange(1, n + 1, dtype=float)
    return np.sqrt(l * (l + 2 * a - 1) / (4 * (l + a) * (l + a - 1)))


def gegenbauer_table(d: int, s: np.ndarray, degree: int, derivative: bool = False) -> Any:
    """``Q_l(s)`` for ``l = 0..degree``, shape ``s.shape + (degree + 1,)``; with
    ``derivative=True`` also ``Q_l'(s)`` (a pair)."""
    s = np.asarray(s, dtype=float)
    b = _recurrence(d, degree + 1)
    q = np.empty(s.shape + (degree + 1,))
    dq = np.empty_like(q) if derivative else None
    q[..., 0] = 1.0
    if dq is not None:
        dq[..., 0] = 0.0
    if degree >= 1:
        q[..., 1] = s / b[0]
        if dq is not None:
            dq[..., 1] = 1.0 / b[0]
    for l in range(1, degree):
        q[..., l + 1] = (s * q[..., l] - b[l - 1] * q[..., l - 1]) / b[l]
        if dq is not None:
            dq[..., l + 1] = (q[..., l] + s * dq[..., l] - b[l - 1] * dq[..., l - 1]) / b[l]
    return (q, dq) if derivative else q


def gauss_jacobi(d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n``-point Gauss quadrature for ``dA`` on zonal functions of ``S^{d-1}``:
    nodes ``s_j`` (ascending) and weights with ``sum_j w_j g(s_j) = int g(<x,e>) dA(x)``,
    exact for polynomials ``g`` of degree ``<= 2n - 1``."""
    s, log_w = gauss_jacobi_log(d, n)
    return s, np.exp(log_w + log_sphere_area(d))


def gauss_jacobi_log(d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The rule of :func:`gauss_jacobi` for the normalised measure ``dA / |S^{d-1}|``: nodes
    and the logarithms of weights summing to 1, for any ``d >= 2`` (no ``|S^{d-1}|``, which
    underflows float64 beyond ``d ~ 800``); ``d >= 3``."""
    b = _recurrence(d, n - 1)
    s = eigh_tridiagonal(np.zeros(n), b, eigvals_only=True) if n > 1 else np.zeros(1)
    s = np.clip(np.sort(s), -1.0, 1.0)
    # Christoffel numbers 1 / sum_{l<n} Q_l(s)^2 for the normalised measure, with the
    # recurrence rescaled (log of the scale carried) so that huge Q_l do not overflow.
    q0, q1 = np.ones(n), s / b[0] if n > 1 else np.zeros(n)
    total = 1.0 + q1**2
    logscale = np.zeros(n)
    for l in range(1, n - 1):
        q0, q1 = q1, (s * q1 - b[l - 1] * q0) / b[l]
        total = total + q1**2
        big = np.abs(q1) > 1e100
        if np.any(big):
            q0[big] *= 1e-100
            q1[big] *= 1e-100
            total[big] *= 1e-200
            logscale[big] += 100 * math.log(10.0)
    return s, -np.log(total) - 2 * logscale


def sphere_rule(k: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """A product rule on ``S^{k-1}`` exact for polynomials of degree ``<= degree``: points
    ``(n, k)`` and weights summing to ``|S^{k-1}|``.

    ``k = 2``: the trapezoid rule on ``degree + 1`` angles. ``k >= 3``: ``ceil((degree+1)/2)``
    Gauss–Jacobi nodes in the last coordinate ``s`` (weight ``(1-s^2)^{(k-3)/2}``) times the
    rule on ``S^{k-2}`` scaled by ``sqrt(1 - s^2)`` (a polynomial of degree ``p`` in ``x``,
    averaged over ``S^{k-2}``, is a polynomial of degree ``<= p`` in ``s``).
    """
    k = count(k, "k", 2)
    degree = count(degree, "degree", 0)
    if k == 2:
        m = degree + 1
        th = 2 * np.pi * np.arange(m) / m
        return np.stack([np.cos(th), np.sin(th)], axis=-1), np.full(m, 2 * np.pi / m)
    s, ws = gauss_jacobi(k, (degree + 2) // 2)
    u, wu = sphere_rule(k - 1, degree)
    r = np.sqrt(np.maximum(1.0 - s * s, 0.0))
    pts = np.concatenate([r[:, None, None] * u[None, :, :],
                          np.broadcast_to(s[:, None, None], (s.size, u.shape[0], 1))], axis=-1)
    w = ws[:, None] * wu[None, :] / sphere_area(k - 1)
    return pts.reshape(-1, k), w.reshape(-1)


def sphere_rule_size(k: int, degree: int) -> int:
    """The number of points of ``sphere_rule(k, degree)``, without building it (an exact
    integer: ``degree + 1`` for ``k = 2``, times ``(degree + 2) // 2`` per dimension above)."""
    k = count(k, "k", 2)
    degree = count(degree, "degree", 0)
    return (degree + 1) * ((degree + 2) // 2) ** (k - 2)


_ZONAL_BYTES_PER_COORD = 8 * 4  # x, its broadcast product, the normalised copy, a field pass


def check_zonal_size(d: int, degree: int, angular: int) -> None:
    """Refuse :meth:`ZonalSphere.node_rule` (:func:`meanfield.lagrangian.nodes.zonal`) before building it
    when its ``(degree + 1) x sphere_rule_size(d - 1, angular)`` nodes of ``d`` coordinates do
    not fit in the available memory (:func:`meanfield.memory.check_memory`): ``ValueError``
    with the node count, the estimate and the way out (fewer degrees, or
    :func:`meanfield.lagrangian.nodes.rings`, ``degree + 1`` nodes in any ``d``)."""
    from meanfield.memory import check_memory

    n = (degree + 1) * sphere_rule_size(d - 1, angular)
    check_memory(float(n) * d * _ZONAL_BYTES_PER_COORD,
                 f"nodes.zonal(d={d}, degree={degree}, angular={angular}): {n:.4g} nodes "
                 f"({degree + 1} x {sphere_rule_size(d - 1, angular):.4g} on S^{d - 2})",
                 "lower degree or angular, or use meanfield.lagrangian.nodes.rings (the exact zonal "
                 "reduction, one node per ring: docs/lagrangian.md section 8)")


class ZonalSphere(Domain):
    """Zonal (axisymmetric) densities on ``S^{d-1}``, Gegenbauer degree ``<= degree``.

    Args:
        d: ambient dimension, an integer ``>= 3`` (up to about 400, where ``|S^{d-1}|``
            would leave the float range; densities are per unit surface measure).
        degree: largest polynomial degree ``L >= 2`` in ``s``.

    Attributes:
        grid: the ``L + 1`` Gauss–Jacobi nodes ``s_j = <x_j, e>`` (ascending), weight
            ``(1 - s^2)^{(d-3)/2}``.
    """

    name = "zonal"
    dims = ("s",)
    symmetry_reduced = True
    lagrangian_reduction = "rings"
    low_modes = (1, 2, 3, 4)

    def __init__(self, d: int, degree: int) -> None:
        d = count(d, "d", 3)
        self.degree = count(degree, "degree", 2)
        if log_sphere_area(d) < _MIN_LOG_AREA:
            msg = (
                f"d={d} is too large: |S^(d-1)| = e^{log_sphere_area(d):.0f} leaves the "
                "float64 range of a density per unit surface measure"
            )
            raise ValueError(msg)
        self._geometry = SphereGeometry(d)
        self.npoints = self.degree + 1
        self.npoints_padded = (3 * self.degree + 3) // 2  # 2n - 1 >= 3L: exact cubic terms

    # -- description ---------------------------------------------------------------------

    @property
    def geometry(self) -> SphereGeometry:
        return self._geometry

    @property
    def resolution(self) -> int:
        return self.degree

    def with_resolution(self, resolution: int) -> ZonalSphere:
        return ZonalSphere(self.d, resolution)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "d": self.d, "degree": self.degree}

    @cached_property
    def _nodes(self) -> tuple[np.ndarray, np.ndarray]:
        return gauss_jacobi(self.d, self.npoints)

    @cached_property
    def _nodes_padded(self) -> tuple[np.ndarray, np.ndarray]:
        return gauss_jacobi(self.d, self.npoints_padded)

    @property
    def grid(self) -> np.ndarray:
        return self._nodes[0]

    @property
    def coords(self) -> dict[str, np.ndarray]:
        return {"s": self.grid}

    @property
    def padded_grid(self) -> np.ndarray:
        return self._nodes_padded[0]

    @cached_property
    def points(self) -> np.ndarray:
        """One point per node: ``sqrt(1 - s^2) e_1 + s e_d``."""
        s = self.grid
        x = np.zeros((s.size, self.d))
        x[:, 0] = np.sqrt(1.0 - s**2)
        x[:, -1] = s
        return x

    @property
    def weights(self) -> np.ndarray:
        return self._nodes[1]

    @property
    def padded_weights(self) -> np.ndarray:
        return self._nodes_padded[1]

    @cached_property
    def degrees(self) -> np.ndarray:
        return np.arange(self.degree + 1, dtype=float)

    @cached_property
    def parseval_weights(self) -> np.ndarray:
        return np.full(self.degree + 1, 1.0 / self.area)

    @property
    def point_count(self) -> int:
        return self.npoints

    @property
    def transform_bytes(self) -> float:
        """The dense Gegenbauer matrices (a few of ``L x 3L/2``: six counted)."""
        G = self.npoints
        return 8.0 * 6 * G * 1.5 * G

    def node_rule(self, angular: int | None = None) -> NodeRule:
        """``x = s_j e_d + sqrt(1 - s_j^2) (u_k, 0)``: the grid's Gauss–Jacobi nodes ``s_j``
        times :func:`sphere_rule` on ``S^{d-2}`` exact to degree ``angular`` (default
        ``2 degree + 1``), weights ``W_j v_k / |S^{d-2}|`` (:func:`meanfield.lagrangian.nodes.zonal`);
        refused before it is built when it does not fit in memory (:func:`check_zonal_size`)."""
        angular = 2 * self.degree + 1 if angular is None else count(angular, "angular", 0)
        check_zonal_size(self.d, self.degree, angular)
        u, wu = sphere_rule(self.d - 1, angular)
        s, W = self.grid, self.weights
        r = np.sqrt(np.maximum(1.0 - s * s, 0.0))
        x = np.concatenate([r[:, None, None] * u[None],
                            np.broadcast_to(s[:, None, None], (s.size, u.shape[0], 1))],
                           axis=-1).reshape(-1, self.d)
        omega = (W[:, None] * wu[None, :] / sphere_area(self.d - 1)).reshape(-1)
        cell = np.repeat(np.arange(s.size), u.shape[0])
        return NodeRule(x, omega, cell,
                        f"zonal: Gauss-Jacobi ({self.degree + 1}) x S^{self.d - 2} product rule "
                        f"(degree {angular}, {u.shape[0]} points), d={self.d}")

    @classmethod
    def from_options(cls, resolution: int, d: int) -> ZonalSphere:
        """``ZonalSphere(d, resolution)``."""
        return cls(d, resolution)

    @classmethod
    def examples(cls) -> tuple[ZonalSphere, ...]:
        return (cls(3, 8), cls(8, 20), cls(64, 24))

    @property
    def min_spacing(self) -> float:
        """``pi / (degree + 1)``: ``f(cos theta)`` is a trigonometric polynomial of degree
        ``L`` in the geodesic angle ``theta``, resolved uniformly."""
        return math.pi / (self.degree + 1)

    # -- transforms ----------------------------------------------------------------------

    @cached_property
    def _synthesis(self) -> np.ndarray:
        return gegenbauer_table(self.d, self.grid, self.degree)

    @cached_property
    def _analysis(self) -> np.ndarray:
        # c_l = int f Q_l dA  (Gauss quadrature, exact for degree <= 2L + 1)
        return np.ascontiguousarray((self._synthesis * self.weights[:, None]).T)

    @cached_property
    def _padded_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s, w = self._nodes_padded
        q, dq = gegenbauer_table(self.d, s, self.degree, derivative=True)
        grad = dq * np.sqrt(1.0 - s**2)[:, None]
        div = np.ascontiguousarray((grad * (-w)[:, None]).T)  # -int grad Q_l . F dA
        return q, grad, div

    def _coefficients(self, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c)
        if c.shape != (self.degree + 1,):
            msg = f"expected {self.degree + 1} coefficients for degree={self.degree}, got shape {c.shape}"
            raise ValueError(msg)
        return np.real(c)

    def forward(self, f: np.ndarray) -> np.ndarray:
        f = np.asarray(f, dtype=float)
        if f.shape != (self.npoints,):
            msg = f"expected values on the {self.npoints}-point grid, got shape {f.shape}"
            raise ValueError(msg)
        return self._analysis @ f

    @cached_property
    def _inv_area(self) -> float:
        return 1.0 / self.area

    def mass(self, c: np.ndarray) -> float:
        """``int rho dA = c_0`` (the basis is ``Q_l / |S^{d-1}|``)."""
        return float(np.real(np.asarray(c).flat[0]))

    def backward(self, c: np.ndarray) -> np.ndarray:
        out = self._synthesis @ self._coefficients(c)
        out *= self._inv_area
        return out

    def synthesize_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Values on the 3/2-rule nodes (into ``out``, shape ``(npoints_padded,)``, if given)."""
        out = np.matmul(self._padded_tables[0], self._coefficients(c), out=out)
        out *= self._inv_area
        return out

    def gradient_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``f'(s) sqrt(1 - s^2)``: the component along the unit vector towards ``e``
        (shape ``(1, npoints_padded)``; into ``out`` if given)."""
        if out is None:
            out = np.empty((1, self.npoints_padded))
        np.matmul(self._padded_tables[1], self._coefficients(c), out=out[0])
        out *= self._inv_area
        return out

    def divergence_padded(self, flux: np.ndarray) -> np.ndarray:
        flux = np.asarray(flux, dtype=float)
        if flux.shape != (1, self.npoints_padded):
            msg = f"expected a zonal tangent field of shape (1, {self.npoints_padded}), got {flux.shape}"
            raise ValueError(msg)
        return self._padded_tables[2] @ flux[0]

    @staticmethod
    def dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return u[0] * v[0]

    def evaluate(self, c: np.ndarray, s: np.ndarray) -> np.ndarray:
        """``f(s) = sum c_l Q_l(s)`` at arbitrary ``s`` in ``[-1, 1]``."""
        return gegenbauer_table(self.d, s, self.degree) @ self._coefficients(c) * self._inv_area

    def values_at(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values at points ``x`` (n, d): :meth:`evaluate` at ``s = <x, e>``."""
        return self.evaluate(c, self.axis_coordinate(x))

    def prolong(self, c: np.ndarray, coarse: Domain) -> np.ndarray:
        """Coefficients of ``coarse`` on this domain (zero-padded, or truncated)."""
        if not isinstance(coarse, ZonalSphere) or coarse.d != self.d:
            msg = f"cannot prolong from {coarse!r} to {self!r}"
            raise ValueError(msg)
        out = np.zeros(self.degree + 1)
        m = min(out.size, np.shape(c)[-1])
        out[:m] = np.real(np.asarray(c)[:m])
        return out

    def real_mode(self, key: Any) -> np.ndarray:
        """``Q_l(s)`` on the grid (``key = l``): the zonal harmonic of degree ``l``, mean
        square 1 over the sphere (``Q_0 = 1``)."""
        l = int(key)
        if not 0 <= l <= self.degree:
            msg = f"mode l={key!r} is not resolved (need 0 <= l <= degree={self.degree})"
            raise ValueError(msg)
        return self._synthesis[:, l].copy()

    def zonal_multipliers(self, kernel: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``lambda_l = int W(<x, e>) C_l^alpha(<x, e>)/C_l^alpha(1) dA`` (Funk–Hecke, docs/equations.md
        section 3) by Gauss–Jacobi quadrature on ``4 (degree + 1) + 1024`` nodes."""
        t, w = gauss_jacobi(self.d, 4 * (self.degree + 1) + 1024)
        vals = np.asarray(kernel(t), dtype=float)
        q = gegenbauer_table(self.d, t, self.degree)
        scale = np.exp(-0.5 * log_harmonic_dimension(self.d, self.degrees))
        return ((w * vals) @ q) * scale

    # -- resolution ----------------------------------------------------------------------

    def tail(self, c: np.ndarray) -> float:
        """Largest ``|c_l|`` among the top third of degrees, relative to the largest ``|c_l|``.

        Not relative to ``c_0`` (the base rule): a concentrated density has
        ``c_l ~ Q_l(s*) ~ sqrt(N(d, l))``, up to ``1e7 c_0`` at ``d = 64`` (docs/sphere.md,
        "Concentrated starts"), and the round-off floor of every coefficient is ``eps max|c|``,
        so a tail measured against ``c_0`` stops on round-off. Against ``max|c|`` it is the
        relative size of the last resolved terms for every ``d``."""
        a = np.abs(np.real(np.asarray(c)))
        top = self.degrees > (2 * self.degree) / 3
        return float(np.max(a[top]) / np.max(a))

    def conditioning(self, c: np.ndarray, tol: float = 1e-6) -> str | None:
        """Whether the state ``c`` is still a density in float64 (the conditioning limit of
        the Gegenbauer basis), a sentence if not, else ``None``.

        The grid values ``rho = backward(c)`` are checked with the solver's own weights
        ``W_j``: their negative mass ``sum_j W_j max(-rho_j, 0)``, and that of the values
        re-synthesised from their re-analysis ``backward(forward(rho))`` (robust to nodes of
        negligible weight, unlike a pointwise test whose round-off bound :meth:`roundoff` can
        exceed the density itself there) and the drift of the mass under re-analysis,
        ``|forward(rho)_0 - c_0|``, each relative to ``c_0``. For a density both are at
        round-off, measured ``~ 3e-14 max|c_l| / c_0`` (the coefficients' round-off,
        :meth:`roundoff`): ``tol = 1e-6`` of the mass is reached near ``max|c_l| ~ 3e7 c_0``;
        beyond, the state is no longer known as a density (at ``d = 64``, ``kappa = 32`` the
        coefficients reach ``1e13 c_0`` by ``t = 1.5``) and the run stops before it."""
        c = np.real(np.asarray(c))
        c0 = float(c[0])
        rho = self.backward(c)
        again = self.forward(rho)  # the re-analysis a reader of the stored density does
        # sum_j W_j rho_j = c_0; the negative mass of the values and of their re-synthesis
        negative = max(float(np.sum(self.weights * np.maximum(-r, 0.0)))
                       for r in (rho, self.backward(again)))
        drift = abs(float(again[0]) - c0)
        growth = float(np.max(np.abs(c))) / abs(c0) if c0 != 0 else math.inf
        if not (c0 > 0 and negative <= tol * c0 and drift <= tol * c0):
            return (f"state is no longer a density in float64 (the conditioning limit of the "
                    f"Gegenbauer basis): negative mass {negative:.3g}, mass drift under "
                    f"re-analysis {drift:.3g} against c_0 = {c0:.6g} (tolerance {tol:g}); "
                    f"max|c_l|/c_0 = {growth:.3g}")
        return None

    def roundoff(self, c: np.ndarray) -> np.ndarray:
        """Round-off bound of :meth:`backward` at each node:
        ``3e-13 ||c||_2 sqrt(sum_l Q_l(s_j)^2) / |S^{d-1}| = 3e-13 ||c||_2 / sqrt(|S^{d-1}| w_j)``.

        Coefficients carry an absolute error ``delta c`` of a few ``1e-14 ||c||_2`` (measured:
        ``3e-15`` to ``2e-14`` after analysis and after a thousand solver steps), so by
        Cauchy–Schwarz (Christoffel: ``sum_{l<=L} Q_l(s_j)^2 = |S^{d-1}| / w_j``) a value at
        a node of tiny weight ``w_j`` is only known to this size: at ``d = 64``, degree 384,
        ``3e-13 sqrt(|S| / w_j)`` reaches ``1e23`` times the largest value. A grid value is
        negative beyond round-off only where ``backward(c) + roundoff(c) < 0``."""
        norm = float(np.linalg.norm(np.real(np.asarray(c))))
        return (_ROUNDOFF * norm * self._inv_area) * self._christoffel_root

    @cached_property
    def _christoffel_root(self) -> np.ndarray:
        # sqrt(sum_l Q_l(s_j)^2) from the table (w_j itself underflows at d = 256)
        return np.linalg.norm(self._synthesis, axis=1)

    def degree_needed(self, c: np.ndarray, tail_tol: float = 1e-10) -> int:
        """Estimated degree at which :meth:`tail` of ``c`` would fall to ``tail_tol``.

        The envelope ``e_l = max_{k >= l} |c_k| / max|c|`` is fitted by a straight line in
        ``log e_l`` over the upper half of the degrees and extrapolated to ``tail_tol``; the
        tail is read on the top third, so the answer is ``1.5`` times that degree. Decay of an
        analytic density is geometric or faster, so the straight line overestimates (a safe
        guess). Without decay in the upper half, ``2 * degree`` (all that can be said)."""
        if not 0 < tail_tol < 1:
            msg = f"tail_tol must be in (0, 1), got {tail_tol!r}"
            raise ValueError(msg)
        a = np.abs(np.real(np.asarray(c)))
        if self.tail(c) <= tail_tol:
            return self.degree
        env = np.maximum.accumulate(a[::-1])[::-1] / np.max(a)
        l = self.degrees[self.degree // 2 :]
        y = np.log(np.maximum(env[self.degree // 2 :], 1e-300))
        slope, icept = np.polyfit(l, y, 1)
        if not slope < 0:
            return 2 * self.degree
        l_star = (math.log(tail_tol) - icept) / slope
        return max(self.degree + 1, math.ceil(1.5 * l_star))

    # -- particles -----------------------------------------------------------------------

    def axis_coordinate(self, x: np.ndarray) -> np.ndarray:
        """``s = <x, e>`` of points ``x`` (n, d), or ``s`` itself given as (n,)."""
        x = np.asarray(x, dtype=float)
        if x.ndim == 1:
            s = x
        elif x.ndim == 2 and x.shape[1] == self.d:
            r = np.linalg.norm(x, axis=1)
            if np.any(r == 0):
                msg = "points must be nonzero"
                raise ValueError(msg)
            s = x[:, -1] / r
        else:
            msg = f"points must have shape (n, {self.d}) or (n,) values of s, got {x.shape}"
            raise ValueError(msg)
        if not np.all(np.isfinite(s)) or np.any(np.abs(s) > 1 + 1e-12):
            msg = "s = <x, e> must be finite and in [-1, 1]"
            raise ValueError(msg)
        return np.clip(s, -1.0, 1.0)

    def project(self, x: np.ndarray) -> np.ndarray:
        """``c_l = (1/n) sum_i Q_l(<x_i, e>)``: the coefficients of the empirical
        measure averaged over rotations about ``e`` (docs/equations.md section 6)."""
        s = self.axis_coordinate(x)
        c = np.zeros(self.degree + 1)
        for start in range(0, s.size, 8192):
            c += gegenbauer_table(self.d, s[start : start + 8192], self.degree).sum(axis=0)
        return c / s.size

    def polar_angle_density(self, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Density of the angle ``theta = arccos <x, e>`` under the density ``c``:
        ``p(theta) = |S^{d-2}| sin^{d-2}(theta) f(cos theta)`` (it integrates to the mass over
        ``[0, pi]``; the area factor is taken in logs, so any supported ``d`` works)."""
        theta = np.asarray(theta, dtype=float)
        with np.errstate(divide="ignore"):
            log_measure = log_sphere_area(self.d - 1) + (self.d - 2) * np.log(np.sin(theta))
        return self.evaluate(c, np.cos(theta)) * np.exp(log_measure)

    def marginal_cdf(self, c: np.ndarray, npoints: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(theta, F)``: the law of the geodesic angle ``theta = arccos s`` from ``e``,
        ``F(theta) = P(angle <= theta)``, on a fine grid (``f`` clipped at 0; trapezoid rule
        for ``f(cos theta) sin^{d-2} theta``)."""
        n = npoints or max(32 * (self.degree + 1), 8192)
        theta = np.linspace(0.0, np.pi, n)
        f = np.maximum(self.evaluate(c, np.cos(theta)), 0.0)
        with np.errstate(divide="ignore"):
            logsin = (self.d - 2) * np.log(np.sin(theta))
        dens = f * np.exp(logsin - np.max(logsin[np.isfinite(logsin)]))
        F = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]))])
        if F[-1] <= 0:
            msg = "cannot sample from a density of non-positive mass"
            raise ValueError(msg)
        return theta, F / F[-1]

    def sample(self, rho: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. points (n, d): ``s`` by inverting the marginal CDF (linear
        interpolation on a fine grid), then a uniform direction orthogonal to ``e``."""
        n = count(n, "n", 0)
        theta, F = self.marginal_cdf(self.forward(rho))
        th = np.interp(rng.random(n), F, theta)
        u = rng.standard_normal((n, self.d - 1))
        u /= np.linalg.norm(u, axis=1)[:, None]
        return np.concatenate([np.sin(th)[:, None] * u, np.cos(th)[:, None]], axis=1)


__all__ = ["ZonalSphere", "check_zonal_size", "gauss_jacobi", "gauss_jacobi_log", "gegenbauer_table",
           "log_harmonic_dimension", "sphere_rule", "sphere_rule_size"]
