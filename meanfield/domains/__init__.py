"""Spectral domains: :class:`Circle` (Fourier), :class:`Sphere` (spherical harmonics),
:class:`ZonalSphere` (Gegenbauer series for axisymmetric densities on ``S^{d-1}``)."""

from .base import Domain
from .circle import Circle
from .sphere import Sphere
from .zonal_sphere import ZonalSphere

__all__ = ["Circle", "Domain", "Sphere", "ZonalSphere"]
