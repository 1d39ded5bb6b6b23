"""Monitors of the particle runs: what the integrator can check cheaply, so that a step far
too large for the dynamics never passes without a word.

.. autosummary::
   EnergyMonitor
   StepSizeMonitor
   STABILITY_RADIUS
   has_energy

:class:`EnergyMonitor` checks, at every output time, that the interaction energy ``E_beta``
(docs/equations.md section 2) moves the way the exact flow moves it: SA and USA with
``Q = K = I``, ``V = +I`` ascend it (USA is the gradient flow ``X' = n grad E``; SA the
gradient flow of the metric weighted by ``Z``, (3.12)), ``V = -I`` descends it. A step that
reverses it (RK4 with ``dt = 5`` at ``beta = 4``, say) stops the run with
:attr:`StopReason.UNSTABLE` and the measured violation; the results up to the last output
time that kept the energy monotone are kept. One energy costs what one velocity does, so
checking at output times costs at most one evaluation per output. (Where ``E_beta`` exceeds
the float range, ``beta`` beyond about 715, it is ``inf`` and not judged.)

:class:`StepSizeMonitor` serves every model, with or without an energy (general ``Q, K, V``,
``l2``, ``sigmoid``, ``sinkhorn``, tokens in ``R^d``): it compares ``h L``, the step times the
largest rate of the Jacobian measured by power iteration, with the stability bound of the
scheme, and stops the run with :attr:`StopReason.UNSTABLE` above it. It lives in
:mod:`meanfield.integrate.stability` (the Lagrangian solver and the ensembles use it too) and
is re-exported here with its constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meanfield import backend as bk
from meanfield.integrate import Stop, StopReason
from meanfield.integrate.stability import (
    BUDGET,
    EVALUATIONS_PER_STEP,
    STABILITY_RADIUS,
    WARN_FACTOR,
    StepSizeMonitor,
)
from meanfield.kernels.interaction import has_energy  # re-exported: one definition
from particles.observables import energy, fast_energy_error


class EnergyMonitor:
    """Stops a run whose energy moves against the flow between output times.

    Args:
        model: a model with :func:`has_energy`.
        times: the output times (checked there only).
        memory_limit: for the energy's tiles.
        rtol: allowed reversal relative to ``|E|`` (round-off of the ``n^2`` sum, far below
            what a stable step changes; default ``1e-9``).
        method: how the energy is summed (:func:`particles.observables.energies`: the run's
            ``field_method`` decision; ``"direct"`` by default). Where it may be the fast
            sum, the allowed reversal also has twice its error bound
            (:func:`particles.observables.fast_energy_error`, one for each energy compared).
    """

    def __init__(self, model: Any, times: np.ndarray, memory_limit: int, rtol: float = 1e-9,
                 method: str = "direct") -> None:
        self.model = model
        self.method = method
        self.slack = 0.0 if method == "direct" else 2.0 * fast_energy_error(model)
        self.times = set(np.asarray(times, dtype=float).tolist())
        self.memory_limit = memory_limit
        self.rtol = rtol
        self.sign = model.sign
        self.last: tuple[float, np.ndarray] | None = None

    def check(self, t: float, y: np.ndarray, stage: Any, context: Any) -> None:
        if t not in self.times:
            return None
        # energy is a NumPy observable: a host copy (output times only)
        e = np.atleast_1d(energy(self.model, bk.to_numpy(y), memory_limit=self.memory_limit,
                                 method=self.method))
        if not np.all(np.isfinite(e)):  # beyond the float range (beta > ~715): no judgement
            self.last = None
            return None
        if self.last is not None:
            t0, e0 = self.last
            change = self.sign * (e - e0)  # >= 0 along the exact flow
            allowed = self.rtol * np.maximum(np.abs(e), np.abs(e0)) + 1e-14 + self.slack
            bad = change < -allowed
            if np.any(bad):
                i = int(np.argmax(-change / allowed))
                where = f" (batch {i})" if y.ndim == 3 else ""
                direction = "decreased" if self.sign > 0 else "increased"
                raise Stop(StopReason.UNSTABLE,
                           f"the energy {direction} from {e0[i]:.12g} to {e[i]:.12g} between "
                           f"t = {t0:.6g} and t = {t:.6g}{where}, against the flow: the step is "
                           "too large for the dynamics (take a smaller dt or method='dopri5')")
        self.last = (t, e)
        return None


__all__ = ["BUDGET", "EVALUATIONS_PER_STEP", "STABILITY_RADIUS", "WARN_FACTOR", "EnergyMonitor",
           "StepSizeMonitor", "has_energy"]
