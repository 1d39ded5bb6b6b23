"""meanfield: the mean-field dynamics of Transformers.

Spectral solvers for the continuity equation of self-attention on the circle, the sphere
and ``S^{d-1}`` (axisymmetric), its gradient-flow form, and the Gaussian reduction in ``R^d``.
See ``docs/`` and docs/equations.md for the conventions.
"""

from __future__ import annotations

from . import attention, convergence, initial, metrics, nodes
from ._version import __version__
from .attention import AttentionKind
from .convergence import convergence_table, self_convergence
from .domains import Circle, Domain, Sphere, ZonalSphere
from .flow import make_flow
from .gaussian import BlowUpError, solve_gaussian
from .lagrangian import LagrangianError, solve_lagrangian
from .metrics import (
    kernel_distance,
    kernel_distance_particle_sets,
    kernel_distance_particles,
    w1_densities,
    w1_density_particles,
    w1_particles,
)
from .model import ATTENTION_KINDS, Model
from .schedule import Schedule
from .solve import ResolutionError, StopReason, solve

__all__ = [
    "ATTENTION_KINDS",
    "AttentionKind",
    "BlowUpError",
    "Circle",
    "Domain",
    "LagrangianError",
    "Model",
    "ResolutionError",
    "Schedule",
    "Sphere",
    "StopReason",
    "ZonalSphere",
    "__version__",
    "attention",
    "convergence",
    "convergence_table",
    "initial",
    "kernel_distance",
    "kernel_distance_particle_sets",
    "kernel_distance_particles",
    "make_flow",
    "metrics",
    "nodes",
    "self_convergence",
    "solve",
    "solve_gaussian",
    "solve_lagrangian",
    "w1_densities",
    "w1_density_particles",
    "w1_particles",
]
