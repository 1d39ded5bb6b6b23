"""The Lagrangian (characteristics) solver of the Transformer PDE (docs/lagrangian.md).

.. autosummary::
   weighted_field
   field_at
   FieldResult
   FieldState

Nodes of a quadrature of the initial measure move with the attention field of the weighted
measure they carry; the density is carried along them through ``d/dt log J = div X``.
"""

from __future__ import annotations

from .field import FieldResult, FieldState, field_at, weighted_field

__all__ = ["FieldResult", "FieldState", "field_at", "weighted_field"]
