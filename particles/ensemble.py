r"""Ensembles: many independent systems at once, for the phase diagram and metastability.

.. autosummary::
   ensemble_velocity
   simulate_ensemble
   ensemble_states
   FreezeClustered

The SA and USA systems of docs/equations.md section 2, batched over realisations ``(R, n, m)``,
each realisation with its own ``B = Qᵀ K`` and ``V`` if given (Figure 5 of the paper), run on
the project's one integration engine (:func:`meanfield.integrate.integrate`: RK4 on the
ambient field ``x' = Y - <Y, x> x``, which keeps the sphere invariant, projection after each
step, cubic Hermite output between steps).

Freezing of clustered realisations (:class:`FreezeClustered`, a monitor of the engine): if
``m = min_{i,j} <x_i, x_j> >= 0`` then ``m`` never decreases (for the pair attaining it,
``<x_i', x_j> = Σ_k A_ik (<x_k, x_j> - <x_i, x_k> m) >= 0`` since every ``A_ik >= 0``), for
SA and USA alike. A realisation with ``m >= 1 - delta`` is thus clustered at every later time
and is no longer integrated.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from meanfield.attention import require
from meanfield.checks import output_times
from meanfield.integrate import ConstantStep, Replace, RungeKutta, Solution, integrate

from .integrators import RK4, normalize_rows_inplace


def ensemble_velocity(x: np.ndarray, beta: float, softmax: bool,
                      bilinear: np.ndarray | None = None, value: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The right-hand side of (SA)/(USA) (docs/equations.md section 2) for ``x`` of shape
    ``(R, n, m)``, and the attention weights ``w`` (identity model: ``w_ij = exp(beta
    (<x_i, x_j> - 1))`` for SA, so that ``min w >= exp(-beta delta)`` iff all inner products
    are ``>= 1 - delta``).

    Work is three batched products: ``[beta x, c] [x, 1]ᵀ`` gives the exponents with their
    shift ``c`` (SA: ``-beta``, so exponents are ``<= 0``; USA: ``-log n``), one in-place
    ``exp``, and ``w [x, 1]`` gives ``Σ_j w_ij x_j`` and the row sums together. Small ``n``
    only: the ``n x n`` weights of every realisation are formed at once.
    """
    r, n, m = x.shape
    xa = np.empty((r, n, m + 1))
    xa[..., :m] = x
    xa[..., m] = 1.0
    right = np.ascontiguousarray(xa.swapaxes(-1, -2))  # BLAS wants C-contiguous batches
    if bilinear is None:
        left = np.empty((r, n, m + 1))
        np.multiply(x, beta, out=left[..., :m])
        left[..., m] = -beta if softmax else -math.log(n)
        w = left @ right
    else:
        w = (x @ bilinear) @ np.ascontiguousarray(right[:, :m])
        w *= beta
        if softmax:
            w -= w.max(axis=-1, keepdims=True)
        else:
            w -= math.log(n)
    np.exp(w, out=w)
    ya = w @ xa
    y = ya[..., :m]
    if softmax:
        y /= ya[..., m:]
    if value is not None:
        y = y @ value.swapaxes(-1, -2)
    y -= np.sum(y * x, axis=-1, keepdims=True) * x
    return y, w


class _Field:
    """The ensemble's right-hand side; keeps the weights of its last evaluation."""

    def __init__(self, beta: float, softmax: bool, bilinear: np.ndarray | None,
                 value: np.ndarray | None) -> None:
        self.beta, self.softmax = beta, softmax
        self.bilinear, self.value = bilinear, value
        self.weights: np.ndarray | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y, self.weights = ensemble_velocity(x, self.beta, self.softmax, self.bilinear, self.value)
        return y


class FreezeClustered:
    """A monitor that stops integrating the realisations whose inner products are all
    ``>= threshold >= 0`` (exact for the indicators ``<x_i, x_j> >= threshold``, see the
    module docstring). ``active`` indexes the realisations still integrated; ``full`` holds
    every realisation, frozen ones at their frozen state."""

    def __init__(self, field: _Field, full: np.ndarray, threshold: float) -> None:
        self.field = field
        self.full = full
        self.threshold = threshold
        self.active = np.arange(full.shape[0])

    def check(self, t: float, y: np.ndarray, stage: np.ndarray | None, context: Any
              ) -> Replace | None:
        w, beta = self.field.weights, self.field.beta  # weights at y: stage = F(y)
        if beta > 0 and w is not None and w.shape[0] == y.shape[0]:
            shift = -beta if self.field.softmax else -math.log(y.shape[-2])
            done = w.min(axis=(1, 2)) >= math.exp(beta * self.threshold + shift)
        else:
            done = (y @ y.swapaxes(-1, -2)).min(axis=(1, 2)) >= self.threshold
        if not done.any():
            return None
        self.full[self.active[done]] = y[done]
        keep = ~done
        self.active = self.active[keep]
        return Replace(y[keep], None if stage is None else stage[keep])


def simulate_ensemble(
    x0: np.ndarray,
    beta: float,
    times: ArrayLike,
    output: Callable[[int, float, np.ndarray], None],
    *,
    attention: str = "softmax",
    bilinear: np.ndarray | None = None,
    value: np.ndarray | None = None,
    dt: float = 0.3,
    freeze_above: float | None = None,
) -> Solution:
    """Integrate (SA) or (USA) for a batch ``x0`` of shape ``(R, n, m)``; ``output(k, t, x)``
    receives the whole batch (``x`` reused: copy to keep) at every output time.

    RK4 with ``ceil(t_max/dt)`` equal steps, projection after each, cubic Hermite output.

    Args:
        x0: unit tokens, ``(R, n, m)``.
        beta: inverse temperature.
        times: increasing output times (``times[0]``: the time of ``x0``).
        attention: ``"softmax"`` (SA) or ``"unnormalized"`` (USA).
        bilinear, value: optional ``(R, m, m)`` matrices ``Qᵀ K`` and ``V``.
        dt: largest step.
        freeze_above: with the identity model, stop integrating a realisation once all its
            inner products are ``>= freeze_above >= 0`` (:class:`FreezeClustered`).
    """
    softmax = require(attention, "ensemble").name == "softmax"
    t = output_times(times, "times")
    if not dt > 0:
        msg = f"dt must be > 0, got {dt!r}"
        raise ValueError(msg)
    if freeze_above is not None and (bilinear is not None or value is not None):
        msg = "freeze_above needs the identity model (Q = K = V = I)"
        raise ValueError(msg)
    field = _Field(float(beta), softmax, bilinear, value)
    full = np.array(x0, dtype=float)
    monitors = []
    freeze = None
    if freeze_above is not None:
        freeze = FreezeClustered(field, full, float(freeze_above))
        monitors.append(freeze)

    def emit(k: int, tk: float, y: np.ndarray, _ctx: Any) -> None:
        if freeze is None:
            output(k, tk, y)
        else:
            full[freeze.active] = y
            output(k, tk, full)

    return integrate(RungeKutta(field, RK4, project=normalize_rows_inplace), full.copy(), t,
                     controller=ConstantStep(float(dt)), output=emit, monitors=monitors,
                     dense=True)


def ensemble_states(x0: np.ndarray, beta: float, times: ArrayLike, **kwargs: Any) -> np.ndarray:
    """The states of :func:`simulate_ensemble` at every output time, ``(len(times), R, n, m)``
    (``ValueError`` if the run does not reach the final time)."""
    out: list[np.ndarray] = []
    sol = simulate_ensemble(x0, beta, times, lambda k, tk, x: out.append(x.copy()), **kwargs)
    if not sol.successful:
        msg = f"the ensemble run stopped: {sol.message}"
        raise ValueError(msg)
    return np.array(out)


__all__ = ["FreezeClustered", "ensemble_states", "ensemble_velocity", "simulate_ensemble"]
