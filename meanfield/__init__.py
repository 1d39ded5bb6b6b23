"""meanfield: the mean-field dynamics of Transformers.

Spectral solvers for the continuity equation of self-attention on the circle, the sphere
and ``S^{d-1}`` (axisymmetric), its gradient-flow form, and the Gaussian reduction in ``R^d``.
See ``docs/`` and MATH.md for the conventions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .model import ATTENTION_KINDS, Model
from .domains import Circle, Domain, Sphere, ZonalSphere
from . import initial
from .flow import make_flow
from .gaussian import BlowUpError, solve_gaussian
from .solve import ResolutionError, StopReason, solve

__all__ = [
    "ATTENTION_KINDS",
    "BlowUpError",
    "Circle",
    "Domain",
    "Model",
    "ResolutionError",
    "Sphere",
    "StopReason",
    "ZonalSphere",
    "__version__",
    "initial",
    "make_flow",
    "solve",
    "solve_gaussian",
]
