"""Spectral domains: :class:`Circle`; the sphere domains register here when present."""

from .base import Domain
from .circle import Circle

__all__ = ["Circle", "Domain"]
