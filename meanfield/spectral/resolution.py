"""The resolution monitor: refine the grid, or stop, when it no longer resolves the density.

.. autosummary::
   ResolutionMonitor
   unresolved

After every accepted step the monitor checks the spectral tail (largest coefficient in the
top third of degrees, relative to the mean, :meth:`Domain.tail`) and the minimum of the
density. If either shows that the grid no longer resolves the solution, the resolution is
doubled (exact zero-padding of the coefficients, :meth:`Domain.prolong`) up to
``max_resolution``; past it the integration stops with :attr:`StopReason.UNRESOLVED`, naming
the time, the failing quantity and the resolution that would be needed next.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from meanfield.domains.base import Domain
from meanfield.integrate import Replace, Stop, StopReason
from meanfield.memory import available_memory, solve_bytes


def unresolved(domain: Domain, c: np.ndarray, tail_tol: float, negative_tol: float) -> str | None:
    """What the grid fails to resolve in ``c`` (a sentence), or ``None``."""
    tail = domain.tail(c)
    if not tail <= tail_tol:
        return f"spectral tail {tail:.3g} exceeds tail_tol={tail_tol:g}"
    rho = domain.backward(c)
    # round-off at nodes of negligible weight is not negativity (Domain.roundoff)
    lo, hi = float(np.min(rho + domain.roundoff(c))), float(np.max(np.abs(rho)))
    if lo < -negative_tol * hi:
        return f"density is negative (min {lo:.3g}, below -negative_tol*max = {-negative_tol * hi:.3g})"
    return domain.conditioning(c)  # ZonalSphere: the float64 limit


class ResolutionMonitor:
    """Refines ``domain`` by factors of 2 up to ``max_resolution`` while ``c`` is unresolved.

    Args:
        rebuild: ``rebuild(domain) -> stepper`` for the refined domain (a new flow).
        tail_tol, negative_tol: thresholds of :func:`unresolved`.
        max_resolution: the largest resolution refinement may reach.
        filter_order: apply the exponential l-only filter of this order after each step.
        outputs: output times of the solve, for the memory estimate of a refinement
            (:func:`meanfield.memory.solve_bytes`): a refinement that would not fit in the
            available memory stops the run (results kept) instead of swapping.
    """

    def __init__(self, rebuild: Callable[[Domain], object], *, tail_tol: float,
                 negative_tol: float, max_resolution: int, filter_order: int | None = None,
                 outputs: int = 1) -> None:
        self.rebuild = rebuild
        self.tail_tol = tail_tol
        self.negative_tol = negative_tol
        self.max_resolution = max_resolution
        self.filter_order = filter_order
        self.refinements = 0
        self.outputs = outputs
        self._filters: dict[int, np.ndarray] = {}

    def _filter(self, domain: Domain) -> np.ndarray:
        f = self._filters.get(domain.resolution)
        if f is None:
            assert self.filter_order is not None
            f = self._filters[domain.resolution] = domain.exponential_filter(self.filter_order)
        return f

    def check(self, t: float, c: np.ndarray, stage: np.ndarray | None, domain: Domain
              ) -> Replace | None:
        replaced = False
        if self.filter_order is not None:
            c = c * self._filter(domain)
            replaced = True
        stepper = None
        problem = unresolved(domain, c, self.tail_tol, self.negative_tol)
        while problem is not None:
            if domain.resolution * 2 > self.max_resolution:
                raise Stop(StopReason.UNRESOLVED,
                           f"at t = {t:.6g} the {problem} at resolution {domain.resolution} "
                           f"(max_resolution={self.max_resolution}); the decay of the "
                           f"coefficients suggests resolution "
                           f"{domain.degree_needed(c, self.tail_tol)} (degree_needed)")
            fine = domain.with_resolution(domain.resolution * 2)
            need, have = solve_bytes(fine, self.outputs), available_memory()
            if have is not None and need > have:
                raise Stop(StopReason.UNRESOLVED,
                           f"at t = {t:.6g} the {problem} at resolution {domain.resolution}; "
                           f"refining to {fine.resolution} needs about {need / 2**30:.3g} GiB of "
                           f"memory, but only {have / 2**30:.3g} GiB are available (lower "
                           "max_resolution, or the number of output times)")
            c = fine.prolong(c, domain)
            domain = fine
            stepper = self.rebuild(domain)
            self.refinements += 1
            replaced = True
            if self.filter_order is not None:
                c = c * self._filter(domain)
            problem = unresolved(domain, c, self.tail_tol, self.negative_tol)
        if not replaced:
            return None
        return Replace(c, None, stepper, domain if stepper is not None else None)


__all__ = ["ResolutionMonitor", "unresolved"]
