"""Spectral domains: :class:`Circle` (Fourier), :class:`Sphere` (spherical harmonics),
:class:`ZonalSphere` (Gegenbauer series for axisymmetric densities on ``S^{d-1}``), all
on a :class:`SphereGeometry`; the contract is :class:`Domain` (docs/extending.md).

The imports of the domain modules below are the registry's entries: a class with a ``name``
registers itself in ``Domain.registry`` when its module is imported (files, command line,
contract test); a new domain is its module and one line here."""

from meanfield.domains.base import Domain, FusedDrift, NodeRule, command_line_domains
from meanfield.domains.circle import Circle
from meanfield.domains.geometry import SphereGeometry
from meanfield.domains.sphere import Sphere
from meanfield.domains.zonal_sphere import ZonalSphere

__all__ = ["Circle", "Domain", "FusedDrift", "NodeRule", "Sphere", "SphereGeometry", "ZonalSphere",
           "command_line_domains"]
