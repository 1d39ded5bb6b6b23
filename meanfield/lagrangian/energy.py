"""The interaction energy of a weighted measure, with the partition function on the way: the
Lagrangian solver's names for :mod:`meanfield.kernels.interaction`, where the energy lives
beside the field (the particle system sums the same energy with the weights ``1/n``).

.. autosummary::
   has_energy
   use_fast_energy
   weighted_energy
   energy_terms

For ``mu = sum_j w_j delta_{x_j}`` (docs/equations.md sections 2 and 3, the ``-1``
convention of (3.5))::

    E_beta[mu] = (1 / (2 beta)) sum_h sum_{i,j} w_i w_j (e^{beta <Q_h x_i, K_h x_j>} - 1)
    Z_mu(x_i)  = sum_j w_j e^{beta <x_i, x_j>}

the tiled sum, its shifted exponents and the fast path are described in
:mod:`meanfield.kernels.interaction`.
"""

from __future__ import annotations

from meanfield.kernels.interaction import (
    EXP_SAFE,
    EnergyTerms,
    energy_terms,
    exponent_bound,
    fast_energy_reason,
    fast_partition,
    has_energy,
    times_exp,
    use_fast_energy,
    weighted_energy,
)

__all__ = ["EXP_SAFE", "EnergyTerms", "energy_terms", "exponent_bound", "fast_energy_reason",
           "fast_partition", "has_energy", "times_exp", "use_fast_energy", "weighted_energy"]
