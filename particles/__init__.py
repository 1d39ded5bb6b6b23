"""particles: the finite-n self-attention system (docs/equations.md section 2).

Tokens ``x_i`` on ``S^{d-1}`` (or in ``R^d``) move with the attention of a
:class:`meanfield.Model`: SA (2.3), USA, multi-head (2.7), repulsive, ``beta = 0``, and the
variants L2, sigmoid, Sinkhorn and causal. Velocity fields are batched over independent
systems and tiled so that the ``n x n`` attention stays under a memory limit.

.. autosummary::
   velocity
   simulate
   simulate_angles
   energy
   dissipation
   sample_sphere
   orthogonal
   registered_kernels

See ``docs/particles.md``.
"""

from __future__ import annotations

from meanfield import attention as _attention
from meanfield.integrate import DOPRI5, RK4, ButcherTableau
from meanfield.kernels import (
    DEFAULT_MEMORY_LIMIT,
    Kernel,
    Tiling,
    get_kernel,
    registered_kernels,
)
from particles.angles import angle_velocity, from_angles, to_angles
from particles.integrators import normalize_rows
from particles.observables import (
    count_clusters,
    count_clusters_angles,
    dissipation,
    energy,
    energy_gradient,
    gram,
    inner_product_histogram,
    kuramoto_order,
    log_energy,
    mean_covariance,
    pairwise_inner_products,
    partition,
)
from particles.samplers import orthogonal, sample_density, sample_gaussian, sample_sphere
from particles.simulate import METHODS, SimulationError, simulate, simulate_angles
from particles.velocity import attention, attention_weights, project_tangent, velocity

# the solvers this package provides, for the attention kinds to declare (docs/equations.md
# section 2): meanfield.attention.require(kind, "particles") etc.
_attention.register_solver("particles", "particles.simulate, particles.velocity", section=2)
_attention.register_solver("angles", "particles.angles, the circle in angles (7.1)", section=2)
_attention.register_solver(
    "ensemble", "particles.ensemble, many small systems with per-realisation matrices",
    section=2)

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DOPRI5",
    "METHODS",
    "RK4",
    "ButcherTableau",
    "Kernel",
    "SimulationError",
    "Tiling",
    "angle_velocity",
    "attention",
    "attention_weights",
    "count_clusters",
    "count_clusters_angles",
    "dissipation",
    "energy",
    "energy_gradient",
    "from_angles",
    "get_kernel",
    "gram",
    "inner_product_histogram",
    "kuramoto_order",
    "log_energy",
    "mean_covariance",
    "normalize_rows",
    "orthogonal",
    "pairwise_inner_products",
    "partition",
    "project_tangent",
    "registered_kernels",
    "sample_density",
    "sample_gaussian",
    "sample_sphere",
    "simulate",
    "simulate_angles",
    "to_angles",
    "velocity",
]
