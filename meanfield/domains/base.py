"""The contract every spectral domain fulfils.

.. autosummary::
   Domain
   FusedDrift

A domain is a spectral basis with its grid on a space whose geometry
(:class:`~meanfield.domains.geometry.SphereGeometry`: area, Laplacian spectrum, Funk–Hecke
multipliers) it composes rather than reimplements. The flow (:mod:`meanfield.spectral.flow`) and the
solver are written once against this interface; everything they call is declared here,
either abstract or with a documented default, so that nothing is probed with ``hasattr``:

* ``forward(f) -> c`` and ``backward(c) -> f`` between grid values and coefficients, with
  ``f = sum_j c_j B_j``;
* ``degrees`` (the degree ``l`` of each stored coefficient), from which ``geometry`` gives the
  Funk–Hecke multipliers of a zonal kernel and the Laplacian ``-l(l+d-2)``;
* ``parseval_weights`` such that ``int f g dA = sum_j w_j Re(c_j(f) conj(c_j(g)))``;
* dealiased products: ``synthesize_padded``, ``gradient_padded`` (both writing into an
  ``out=`` work buffer when given) and ``divergence_padded`` act on a finer (3/2-rule)
  quadrature grid with weights ``padded_weights``;
* optional fast paths with defaults that compose the above: ``synthesize_with_gradient_padded``
  and ``fused_drift``;
* particles: ``values_at``, ``project`` and ``sample``; refinement: ``with_resolution`` and
  ``prolong``; files: ``state`` and :meth:`Domain.from_state`;
* the resolution monitor's last word: :meth:`Domain.conditioning` (default: every state of
  the basis is a density in float64);
* the solver's users: ``point_count`` (and ``transform_bytes``) for the memory estimate of
  :mod:`meanfield.memory`, :meth:`Domain.node_rule` for the Lagrangian continuation of a
  spectral result (:func:`meanfield.lagrangian.nodes.from_dataset`) or
  :attr:`Domain.lagrangian_reduction` where the continuation runs a symmetry reduction
  instead, :meth:`Domain.from_options` for the command line (``--resolution``, ``--d``) and
  :meth:`Domain.examples`, the small instances the contract test runs. The last three methods
  refuse by name unless a domain defines them.

``tests/meanfield/domains/test_domain_contract.py`` checks the examples of every domain in
``Domain.registry`` against this contract (a registered domain without examples fails it);
docs/extending.md says how to add one.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from meanfield.arguments import finite
from meanfield.domains.geometry import SphereGeometry


class FusedDrift(Protocol):
    """A domain's own evaluation of the drift ``-div(rho X)`` (see :meth:`Domain.fused_drift`)."""

    evaluate: Callable[[np.ndarray], np.ndarray]
    """Coefficients ``c`` to the coefficients of ``-div(rho X)`` (a new array)."""

    def max_speed(self) -> float:
        """``max |X|`` (componentwise) of the last evaluation."""
        ...


@dataclass(frozen=True)
class NodeRule:
    """A quadrature of ``S^{d-1}`` built on a domain's grid (:meth:`Domain.node_rule`):
    ``sum_j omega_j f(x_j) ~ int f dA``. Node ``j`` carries the density value of grid node
    ``cell[j]`` (flat index; ``None``: node ``j`` is grid node ``j``), so that the weights of
    a density ``rho`` on the grid are ``rho[cell] omega`` (docs/lagrangian.md)."""

    x: np.ndarray
    """Nodes, shape ``(n, d)`` (unit vectors)."""
    omega: np.ndarray
    """Quadrature weights w.r.t. surface measure, shape ``(n,)``."""
    cell: np.ndarray | None
    """Grid node (flat index) of each node, or ``None`` for the grid itself."""
    describe: str
    """The rule in words (``Nodes.describe``)."""


class Domain(ABC):
    """A spectral basis with its grid (abstract).

    Subclasses register themselves by ``name`` so that :meth:`from_state` can rebuild any
    domain from the JSON written into a result's ``attrs``.
    """

    name: ClassVar[str]
    """Short name used in files and on the command line (``circle``, ``sphere``, ...)."""
    dims: ClassVar[tuple[str, ...]]
    """Names of the grid dimensions in results (``("theta",)``, ...)."""
    registry: ClassVar[dict[str, type[Domain]]] = {}
    symmetry_reduced: ClassVar[bool] = False
    """True when the basis holds only the functions invariant under a symmetry (the zonal
    functions of :class:`~meanfield.domains.zonal_sphere.ZonalSphere`), so that
    :meth:`project` gives the symmetrised empirical measure, not the empirical measure."""
    lagrangian_reduction: ClassVar[str | None] = None
    """The symmetry reduction of the Lagrangian solver that carries a spectral result of this
    domain on (``solve(..., continue_lagrangian=True)``): a key of
    :data:`meanfield.lagrangian.node_set.REDUCTIONS` (``"rings"`` for
    :class:`~meanfield.domains.zonal_sphere.ZonalSphere`: one ring per grid node), or ``None``,
    the default: the full nodes of :meth:`node_rule`."""
    low_modes: ClassVar[tuple[Any, ...]] = ()
    """Keys of :meth:`real_mode` for a few low modes: the perturbation of the uniform density
    that ``meanfield solve DOMAIN --init modes`` adds (empty, the default: that choice is
    refused naming the domain)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            Domain.registry[cls.name] = cls

    # -- description ---------------------------------------------------------------------

    @property
    @abstractmethod
    def geometry(self) -> SphereGeometry:
        """The space the basis lives on (``S^{d-1}``): area, Laplacian spectrum, multipliers."""

    @property
    def d(self) -> int:
        """Ambient dimension: the domain is (a reduction of) ``S^{d-1} in R^d``."""
        return self.geometry.d

    @property
    @abstractmethod
    def resolution(self) -> int:
        """The number that refinement doubles (``N``, ``lmax``, ``degree``)."""

    @abstractmethod
    def with_resolution(self, resolution: int) -> Domain:
        """The same domain at another resolution."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """A JSON-able dict of constructor arguments (``name`` included)."""

    @property
    @abstractmethod
    def grid(self) -> Any:
        """The grid: an array, or a tuple of arrays for tensor grids."""

    @property
    @abstractmethod
    def coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the grid dimensions (keys ``dims``), for ``xarray``."""

    @property
    @abstractmethod
    def points(self) -> np.ndarray:
        """Cartesian coordinates of the grid nodes, shape ``grid_shape + (d,)``."""

    @property
    @abstractmethod
    def weights(self) -> np.ndarray:
        """Quadrature weights on the grid: ``int f dA ~ sum(weights * f)``."""

    @property
    @abstractmethod
    def degrees(self) -> np.ndarray:
        """Degree ``l`` of each stored coefficient (same shape as the coefficients)."""

    @property
    @abstractmethod
    def parseval_weights(self) -> np.ndarray:
        """``w`` with ``int f g dA = sum w Re(c(f) conj(c(g)))`` for real ``f, g``."""

    @property
    @abstractmethod
    def point_count(self) -> int:
        """The number of grid nodes, from the constructor's arguments alone (without building
        the grid): :mod:`meanfield.memory` sizes a run with it before the run starts."""

    @property
    def transform_bytes(self) -> float:
        """Bytes the transforms hold beyond the grid-sized work arrays that
        :func:`meanfield.memory.solve_bytes` counts (default 0; dense matrices count here)."""
        return 0.0

    @property
    @abstractmethod
    def min_spacing(self) -> float:
        """Smallest grid spacing (geodesic), for the CFL bound."""

    # -- transforms ----------------------------------------------------------------------

    @abstractmethod
    def forward(self, f: np.ndarray) -> np.ndarray:
        """Grid values to coefficients (analysis; a new array)."""

    @abstractmethod
    def backward(self, c: np.ndarray) -> np.ndarray:
        """Coefficients to grid values (synthesis; a new array)."""

    # The dealiased calculus is the flow's hot path. ``out=`` work buffers: when given, the
    # result is written into ``out`` (an array of the shape of a result made without it,
    # which the flow allocates once from a first call) and ``out`` (or a view of it) is
    # returned; large fresh arrays per call would cost page faults.

    @abstractmethod
    def synthesize_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Values of ``sum c B`` on the dealiased grid (shape ``padded_weights.shape``)."""

    @abstractmethod
    def gradient_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Tangent gradient of ``sum c B`` on the dealiased grid (components first:
        shape ``(k,) + padded_weights.shape``, ``k`` components in an orthonormal frame)."""

    @abstractmethod
    def divergence_padded(self, flux: np.ndarray) -> np.ndarray:
        """Coefficients of ``div(flux)`` for a tangent field given on the dealiased grid (in
        the frame of :meth:`gradient_padded`; a new array). The weak form
        ``int B div F dA = -int grad B . F dA`` on the dealiased quadrature, so that
        ``divergence_padded(gradient_padded(c)) = laplacian_eigenvalues * c``."""

    @property
    @abstractmethod
    def padded_weights(self) -> np.ndarray:
        """Quadrature weights of the dealiased grid."""

    def synthesize_with_gradient_padded(
        self, c: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(f, grad f)`` on the dealiased grid (SA needs ``Z`` and ``grad Z``), into the
        pair of buffers ``out`` when given.

        The default calls :meth:`synthesize_padded` and :meth:`gradient_padded`; a domain
        whose two transforms share a stage (the sphere's Legendre stage) overrides it."""
        f_out, g_out = (None, None) if out is None else out
        return self.synthesize_padded(c, out=f_out), self.gradient_padded(c, out=g_out)

    def fused_drift(
        self, grad_mult: np.ndarray, scale: float, z_mult: np.ndarray | None, sign: float
    ) -> FusedDrift | None:
        """A faster evaluation of the drift ``-div(rho X)``, or ``None`` (the default) to let
        the flow compose ``synthesize_padded``, ``gradient_padded`` and ``divergence_padded``.

        ``X = s scale grad(grad_mult c)`` when ``z_mult`` is ``None`` (Wasserstein metric),
        else ``X = s grad(grad_mult c) / (z_mult c)`` (attention metric); ``s = sign``.
        It must equal the composition to round-off (the contract test checks it).
        """
        return None

    @staticmethod
    def dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Pointwise inner product of tangent fields (components on axis 0)."""
        return np.sum(u * v, axis=0)

    @abstractmethod
    def values_at(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of ``sum c B`` at points ``x`` of ``S^{d-1}``, shape ``(n, d)`` (unit
        vectors), as an array of shape ``(n,)``."""

    # -- particles -----------------------------------------------------------------------

    @abstractmethod
    def project(self, x: np.ndarray) -> np.ndarray:
        """Coefficients of the empirical measure ``(1/n) sum delta_{x_i}`` (``x``: (n, d))."""

    @abstractmethod
    def sample(self, rho: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. points (shape (n, d)) from the density ``rho`` given on the grid."""

    # -- derived, written once -----------------------------------------------------------

    @property
    def area(self) -> float:
        """``|S^{d-1}|`` (from :attr:`geometry`)."""
        return self.geometry.area

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(self.weights.shape)

    def integrate(self, f: np.ndarray) -> np.ndarray:
        """``int f dA`` over the grid axes (the trailing ones)."""
        w = self.weights
        axes = tuple(range(-w.ndim, 0))
        return np.sum(np.asarray(f) * w, axis=axes)

    @cached_property
    def laplacian_eigenvalues(self) -> np.ndarray:
        """``-l (l + d - 2)`` for each coefficient (from :attr:`geometry`)."""
        return self.geometry.laplacian_eigenvalues(self.degrees)

    def scaled_kernel_multipliers(self, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta}`` of ``K_beta`` per coefficient (docs/equations.md section 3)."""
        return self.geometry.scaled_kernel_multipliers(self.degrees, beta)

    def kernel_multipliers_over_beta(self, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta} / beta`` per coefficient (0 for ``l = 0``)."""
        return self.geometry.kernel_multipliers_over_beta(self.degrees, beta)

    @abstractmethod
    def zonal_multipliers(self, kernel: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Funk–Hecke multipliers ``lambda_l`` of a zonal kernel ``W(<x, y>)``, by quadrature."""

    def inner(self, a: np.ndarray, b: np.ndarray) -> float:
        """``int f g dA`` from coefficients (Parseval)."""
        return float(np.sum(self.parseval_weights * np.real(a * np.conj(b))))

    def kernel_distance(self, a: np.ndarray, b: np.ndarray, beta: float) -> float:
        """``||mu - nu||_beta`` of docs/equations.md section 6, from coefficients ``a``, ``b``."""
        diff = np.asarray(a) - np.asarray(b)
        lam = self.scaled_kernel_multipliers(beta)
        sq = np.sum(self.parseval_weights * lam * np.abs(diff) ** 2)
        return float(np.sqrt(max(sq, 0.0) * np.exp(beta)))

    def mass(self, c: np.ndarray) -> float:
        """``int rho dA`` from coefficients. The default reads ``c_0`` as the mean of
        ``rho`` (``B_0 = 1``); a basis normalised otherwise overrides it."""
        return float(np.real(c.flat[0]) * self.area)

    def uniform(self) -> np.ndarray:
        """The uniform density ``1/|S^{d-1}|`` on the grid."""
        return np.full(self.grid_shape, 1.0 / self.area)

    def tail(self, c: np.ndarray) -> float:
        """Largest coefficient among the top third of degrees, relative to ``c_0``.

        The resolution monitor refines when this exceeds its tolerance.
        """
        lmax = self.degrees.max()
        top = self.degrees > (2 * lmax) / 3
        return float(np.max(np.abs(c[top])) / abs(c.flat[0]))

    def roundoff(self, c: np.ndarray) -> np.ndarray | float:
        """A bound on the round-off of ``backward(c)`` at each grid node (default 0: on
        domains whose nodes all carry comparable weight, the negativity test's relative
        ``negative_tol`` already covers it). The resolution monitor tests
        ``backward(c) + roundoff(c)`` for negative values."""
        return 0.0

    def conditioning(self, c: np.ndarray) -> str | None:
        """Why the state ``c`` is no longer a density in float64 (a sentence), or ``None``
        (the default: a basis whose coefficients stay well conditioned). A domain whose
        basis loses the density to round-off before its tail or its negativity shows it
        (:meth:`ZonalSphere.conditioning <meanfield.domains.zonal_sphere.ZonalSphere.conditioning>`)
        overrides it; the resolution monitor stops the run there, and the solver drops the
        slices that are no longer densities on the final grid."""
        return None

    def degree_needed(self, c: np.ndarray, tail_tol: float = 1e-10) -> int:
        """An estimate of the resolution that would resolve ``c`` to ``tail_tol`` (default:
        the next refinement, twice the current one); named by the resolution monitor when it
        can refine no further."""
        return 2 * self.resolution

    def exponential_filter(self, order: int = 36, strength: float = 36.0) -> np.ndarray:
        """``exp(-strength (l/lmax)^order)`` per coefficient (an l-only filter)."""
        l = self.degrees / max(self.degrees.max(), 1)
        return np.exp(-strength * l**order)

    @abstractmethod
    def real_mode(self, key: Any) -> np.ndarray:
        """Grid values of one real basis function, named by a domain-specific ``key``
        (circle: ``k`` for ``cos k theta``, ``-k`` for ``sin k theta``; sphere: ``(l, m)``;
        zonal: ``l``); a key the domain does not resolve raises ``ValueError``."""

    @abstractmethod
    def prolong(self, c: np.ndarray, coarse: Domain) -> np.ndarray:
        """Coefficients ``c`` of ``coarse`` (the same kind of domain at any resolution) on this
        one: zero-padded when ``coarse`` is coarser, truncated when it is finer. Another kind
        of domain raises ``ValueError``."""

    # -- the solver's users: continuation, command line, contract test -------------------

    def node_rule(self) -> NodeRule:
        """The quadrature of ``S^{d-1}`` on this grid that starts a Lagrangian run from a
        density of this domain (:func:`meanfield.lagrangian.nodes.from_dataset`). The default refuses:
        ``ValueError`` naming the domain."""
        msg = f"no node rule for the domain {self!r} (Domain.node_rule)"
        raise ValueError(msg)

    def grid_node_rule(self, describe: str) -> NodeRule:
        """The grid itself as the node rule (``points``, ``weights``): for the domains whose
        grid is a quadrature of all of ``S^{d-1}`` (not a symmetry-reduced one)."""
        return NodeRule(self.points.reshape(-1, self.d), self.weights.reshape(-1), None, describe)

    @classmethod
    def from_options(cls, resolution: int, d: int) -> Domain:
        """The domain the command line names by ``--domain NAME --resolution R --d D`` (``d``
        is ignored where the domain fixes it). The default refuses: ``ValueError`` naming the
        domain; :func:`command_line_domains` lists those that do not."""
        msg = f"domain {cls.name!r} is not built from the command line (Domain.from_options)"
        raise ValueError(msg)

    @classmethod
    def examples(cls) -> tuple[Domain, ...]:
        """Small instances (a few resolutions and dimensions) that the contract test
        (tests/meanfield/domains/test_domain_contract.py) runs every check on. The default refuses:
        ``ValueError`` naming the domain, so that a registered domain without examples fails
        that test."""
        msg = f"domain {cls.name!r} gives no examples (Domain.examples)"
        raise ValueError(msg)

    def state_json(self) -> str:
        """:meth:`state` as JSON (for a result's ``attrs``)."""
        return json.dumps(self.state())

    @staticmethod
    def from_state(state: dict[str, Any] | str) -> Domain:
        """Rebuild a domain from :meth:`state` (or its JSON)."""
        fields: dict[str, Any] = dict(json.loads(state) if isinstance(state, str) else state)
        name = fields.pop("name", None)
        try:
            cls = Domain.registry[name]
        except KeyError:
            msg = f"unknown domain {name!r}; known: {sorted(Domain.registry)}"
            raise ValueError(msg) from None
        return cls(**fields)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.state().items() if k != "name")
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self.state() == other.state()

    def __hash__(self) -> int:
        return hash(self.state_json())



def command_line_domains() -> tuple[str, ...]:
    """Names of the registered domains that define :meth:`Domain.from_options` (the choices of
    the command line's ``--domain``), in the order they registered."""
    return tuple(name for name, cls in Domain.registry.items()
                 if any("from_options" in vars(k) for k in cls.__mro__ if k is not Domain))


def check_density(domain: Domain, rho: Any, *, negative_tol: float = 1e-10) -> np.ndarray:
    """Validate an initial density on ``domain``'s grid; return it normalised to mass 1.

    Raises ``ValueError`` if it is not finite, has the wrong shape, is negative beyond
    ``negative_tol * max(rho)``, or integrates to zero.
    """
    if callable(rho):
        grid = domain.grid
        if isinstance(grid, tuple):  # tensor grid: broadcastable coordinate arrays
            rho = rho(*np.meshgrid(*grid, indexing="ij", sparse=True))
        else:
            rho = rho(grid)
    rho = np.array(rho, dtype=float)
    if rho.shape != domain.grid_shape:
        if rho.ndim == 0:
            rho = np.full(domain.grid_shape, float(rho))
        else:
            msg = f"rho0 must have the grid's shape {domain.grid_shape}, got {rho.shape}"
            raise ValueError(msg)
    finite(rho, "rho0")
    top = float(np.max(np.abs(rho)))
    if float(np.min(rho)) < -negative_tol * top:
        msg = f"rho0 is negative (min {float(np.min(rho)):.3g}); a density must be >= 0"
        raise ValueError(msg)
    mass = float(domain.integrate(rho))
    if not mass > 0 or top == 0.0:
        msg = f"rho0 integrates to {mass:.3g}; a density needs a positive mass to normalise"
        raise ValueError(msg)
    return rho / mass


__all__ = ["Domain", "FusedDrift", "NodeRule", "check_density", "command_line_domains"]
