"""The Lagrangian (characteristics) solver of the Transformer PDE (docs/lagrangian.md).

.. autosummary::
   solve_lagrangian
   LagrangianError
   continue_lagrangian
   weighted_field
   field_at
   FieldResult
   FieldState

Nodes of a quadrature of the initial measure move with the attention field of the weighted
measure they carry; the density is carried along them through ``d/dt log J = div X``.
"""

from __future__ import annotations

from meanfield.lagrangian.continuation import continue_lagrangian
from meanfield.lagrangian.field import FieldResult, FieldState, field_at, weighted_field
from meanfield.lagrangian.solve import LagrangianError, solve_lagrangian

__all__ = ["FieldResult", "FieldState", "LagrangianError", "continue_lagrangian", "field_at",
           "solve_lagrangian", "weighted_field"]
