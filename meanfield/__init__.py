"""meanfield: the mean-field dynamics of Transformers.

Spectral solvers for the continuity equation of self-attention on the circle, the sphere
and ``S^{d-1}`` (axisymmetric), its gradient-flow form, and the Gaussian reduction in ``R^d``.
See ``docs/`` and docs/equations.md for the conventions.
"""

from __future__ import annotations

from meanfield import attention, metrics
from meanfield._version import __version__
from meanfield.attention import AttentionKind
from meanfield.domains import Circle, Domain, Sphere, ZonalSphere
from meanfield.gaussian import BlowUpError, solve_gaussian
from meanfield.lagrangian import LagrangianError, nodes, solve_lagrangian
from meanfield.metrics import (
    kernel_distance,
    kernel_distance_particle_sets,
    kernel_distance_particles,
    w1_densities,
    w1_density_particles,
    w1_particles,
)
from meanfield.model import ATTENTION_KINDS, Model
from meanfield.schedule import Schedule
from meanfield.spectral import convergence, initial
from meanfield.spectral.convergence import convergence_table, self_convergence
from meanfield.spectral.flow import make_flow
from meanfield.spectral.solve import ResolutionError, StopReason, UnresolvedStartError, solve

__all__ = [
    "ATTENTION_KINDS",
    "AttentionKind",
    "BlowUpError",
    "Circle",
    "Domain",
    "LagrangianError",
    "Model",
    "ResolutionError",
    "UnresolvedStartError",
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
