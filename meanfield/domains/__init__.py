"""Spectral domains: :class:`Circle` (Fourier), :class:`Sphere` (spherical harmonics),
:class:`ZonalSphere` (Gegenbauer series for axisymmetric densities on ``S^{d-1}``), all
on a :class:`SphereGeometry`; the contract is :class:`Domain` (docs/extending.md)."""

from .base import Domain, FusedDrift
from .circle import Circle
from .geometry import SphereGeometry
from .sphere import Sphere
from .zonal_sphere import ZonalSphere

__all__ = ["Circle", "Domain", "FusedDrift", "Sphere", "SphereGeometry", "ZonalSphere"]
