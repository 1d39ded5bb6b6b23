"""The contract every spectral domain fulfils.

.. autosummary::
   Domain

A domain is a spectral basis on ``S^{d-1}`` (or a reduction of it) with its grid. The flow
(:mod:`meanfield.flow`) and the solver are written once against this interface:

* ``forward(f) -> c`` and ``backward(c) -> f`` between grid values and coefficients, with
  ``f = sum_j c_j Y_j``;
* ``degrees`` (the degree ``l`` of each stored coefficient), from which the Funk–Hecke
  multipliers of a zonal kernel and the Laplacian ``-l(l+d-2)`` follow;
* ``parseval_weights`` such that ``int f g dA = sum_j w_j Re(c_j(f) conj(c_j(g)))``;
* dealiased products: ``synthesize_padded``, ``gradient_padded`` and ``divergence_padded``
  act on a finer (3/2-rule) quadrature grid with weights ``padded_weights``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from functools import cached_property
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from ..special import kernel_multipliers_over_beta, scaled_kernel_multipliers, sphere_area


def _flush(mult: np.ndarray) -> np.ndarray:
    """Set multipliers below ``1e-100`` of the largest to zero: they are far below
    round-off, and as subnormal numbers they would slow every product by orders of magnitude."""
    top = float(np.max(np.abs(mult))) if mult.size else 0.0
    return np.where(np.abs(mult) < 1e-100 * top, 0.0, mult)


class FusedDrift(Protocol):
    """A domain's own evaluation of the drift ``-div(rho X)`` (see :meth:`Domain.fused_drift`)."""

    evaluate: Callable[[np.ndarray], np.ndarray]
    """Coefficients ``c`` to the coefficients of ``-div(rho X)`` (a new array)."""

    def max_speed(self) -> float:
        """``max |X|`` (componentwise) of the last evaluation."""
        ...


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
    accepts_out: ClassVar[bool] = False
    """True when ``synthesize_padded`` and ``gradient_padded`` take ``out=`` work buffers
    (the flow then allocates nothing per call: large fresh arrays cost page faults)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            Domain.registry[cls.name] = cls

    # -- description ---------------------------------------------------------------------

    @property
    @abstractmethod
    def d(self) -> int:
        """Ambient dimension: the domain is (a reduction of) ``S^{d-1} in R^d``."""

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
        """Coordinates of the grid dimensions, for ``xarray``."""

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
    def min_spacing(self) -> float:
        """Smallest grid spacing (geodesic), for the CFL bound."""

    # -- transforms ----------------------------------------------------------------------

    @abstractmethod
    def forward(self, f: np.ndarray) -> np.ndarray:
        """Grid values to coefficients (analysis)."""

    @abstractmethod
    def backward(self, c: np.ndarray) -> np.ndarray:
        """Coefficients to grid values (synthesis)."""

    @abstractmethod
    def synthesize_padded(self, c: np.ndarray) -> np.ndarray:
        """Values of ``sum c Y`` on the dealiased grid."""

    @abstractmethod
    def gradient_padded(self, c: np.ndarray) -> np.ndarray:
        """Tangent gradient of ``sum c Y`` on the dealiased grid (components first)."""

    @abstractmethod
    def divergence_padded(self, flux: np.ndarray) -> np.ndarray:
        """Coefficients of ``div(flux)`` for a tangent field given on the dealiased grid."""

    @property
    @abstractmethod
    def padded_weights(self) -> np.ndarray:
        """Quadrature weights of the dealiased grid."""

    def fused_drift(
        self, grad_mult: np.ndarray, scale: float, z_mult: np.ndarray | None, sign: float
    ) -> FusedDrift | None:
        """A faster evaluation of the drift ``-div(rho X)``, or ``None`` (the default) to let
        the flow compose ``synthesize_padded``, ``gradient_padded`` and ``divergence_padded``.

        ``X = s scale grad(grad_mult c)`` when ``z_mult`` is ``None`` (Wasserstein metric),
        else ``X = s grad(grad_mult c) / (z_mult c)`` (attention metric); ``s = sign``.
        """
        return None

    @staticmethod
    def dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Pointwise inner product of tangent fields (components on axis 0)."""
        return np.sum(u * v, axis=0)

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
        """``|S^{d-1}|``."""
        return sphere_area(self.d)

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
        """``-l (l + d - 2)`` for each coefficient."""
        l = self.degrees
        return -l * (l + self.d - 2.0)

    def scaled_kernel_multipliers(self, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta}`` of ``K_beta`` per coefficient (docs/equations.md section 3)."""
        return _flush(self.area * scaled_kernel_multipliers(self.degrees, beta, self.d))

    def kernel_multipliers_over_beta(self, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta} / beta`` per coefficient (0 for ``l = 0``)."""
        return _flush(self.area * kernel_multipliers_over_beta(self.degrees, beta, self.d))

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
        """``int rho dA`` from coefficients."""
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

    def exponential_filter(self, order: int = 36, strength: float = 36.0) -> np.ndarray:
        """``exp(-strength (l/lmax)^order)`` per coefficient (an l-only filter)."""
        l = self.degrees / max(self.degrees.max(), 1)
        return np.exp(-strength * l**order)

    def real_mode(self, key: Any) -> np.ndarray:
        """Grid values of one real basis function, named by a domain-specific ``key``
        (circle: ``k`` for ``cos k theta``, ``-k`` for ``sin k theta``)."""
        msg = f"{type(self).__name__} does not implement real_mode"
        raise NotImplementedError(msg)

    def prolong(self, c: np.ndarray, coarse: Domain) -> np.ndarray:
        """Coefficients ``c`` of ``coarse`` expressed on this (finer or equal) domain."""
        msg = f"{type(self).__name__} does not implement prolong"
        raise NotImplementedError(msg)

    def state_json(self) -> str:
        return json.dumps(self.state())

    @staticmethod
    def from_state(state: dict[str, Any] | str) -> Domain:
        """Rebuild a domain from :meth:`state` (or its JSON)."""
        if isinstance(state, str):
            state = json.loads(state)
        state = dict(state)
        name = state.pop("name")
        try:
            cls = Domain.registry[name]
        except KeyError:
            msg = f"unknown domain {name!r}; known: {sorted(Domain.registry)}"
            raise ValueError(msg) from None
        return cls(**state)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.state().items() if k != "name")
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self.state() == other.state()

    def __hash__(self) -> int:
        return hash(self.state_json())


__all__ = ["Domain", "FusedDrift"]
