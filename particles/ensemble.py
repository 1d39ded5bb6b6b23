r"""Ensembles: many independent systems at once, for the phase diagram and metastability.

.. autosummary::
   ensemble_velocity
   simulate_ensemble
   ensemble_states
   FreezeClustered
   EnsembleError

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

The step is watched (:class:`meanfield.integrate.StepSizeMonitor`, on the realisations still
integrated): a step with ``h L`` beyond half RK4's stability bound (a local error of a few
per cent per step, which spoils an ensemble's statistics) stops the run with
:attr:`meanfield.integrate.StopReason.UNSTABLE`, and a step that would need more than
``max_steps`` steps is refused up front. :func:`simulate_ensemble` returns the engine's
:class:`meanfield.integrate.Solution`; its callers end through
:func:`meanfield.integrate.finish` (an interrupted run raises
:class:`meanfield.integrate.Interrupted`, one that did not succeed :class:`EnsembleError`),
so that an output that saw only part of the run is never taken for a result.

Backends (:mod:`meanfield.backend`): the same code runs on NumPy (the default) and on
PyTorch, CPU or GPU, in float64 or float32 (``backend=``, ``device=``, ``dtype=``; a
``torch.Tensor`` start selects torch on its device). The state stays on the backend for the
whole run; ``output`` receives host NumPy arrays, copied off the device at output times only.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from meanfield import backend as bk
from meanfield.attention import require
from meanfield.checks import output_times
from meanfield.integrate import (
    ConstantStep,
    IntegrationError,
    Replace,
    RungeKutta,
    Solution,
    StepSizeMonitor,
    check_step_count,
    finish,
    integrate,
)
from meanfield.integrate.stability import WARN_FACTOR

from .integrators import RK4, normalize_rows_inplace


def ensemble_velocity(x: Any, beta: float, softmax: bool, bilinear: Any = None,
                      value: Any = None) -> tuple[Any, Any]:
    """The right-hand side of (SA)/(USA) (docs/equations.md section 2) for ``x`` of shape
    ``(R, n, m)``, and the attention weights ``w`` (identity model: ``w_ij = exp(beta
    (<x_i, x_j> - 1))`` for SA, so that ``min w >= exp(-beta delta)`` iff all inner products
    are ``>= 1 - delta``).

    Work is three batched products: ``[beta x, c] [x, 1]ᵀ`` gives the exponents with their
    shift ``c`` (SA: ``-beta``, so exponents are ``<= 0``; USA: ``-log n``), one in-place
    ``exp``, and ``w [x, 1]`` gives ``Σ_j w_ij x_j`` and the row sums together. Small ``n``
    only: the ``n x n`` weights of every realisation are formed at once. NumPy or torch
    (``x``'s backend, dtype and device; ``bilinear`` and ``value`` on the same one).
    """
    xp = bk.namespace(x)
    r, n, m = x.shape
    xa = bk.empty(x, (r, n, m + 1))
    xa[..., :m] = x
    xa[..., m] = 1.0
    right = bk.swap_last(xa)  # BLAS wants C-contiguous batches
    if bilinear is None:
        left = bk.empty(x, (r, n, m + 1))
        bk.multiply(x, beta, out=left[..., :m])
        left[..., m] = -beta if softmax else -math.log(n)
        w = left @ right
    else:
        w = (x @ bilinear) @ bk.contiguous(right[:, :m])
        w *= beta
        if softmax:
            w -= xp.max(w, axis=-1, keepdims=True)
        else:
            w -= math.log(n)
    bk.exp_(w)
    ya = w @ xa
    y = ya[..., :m]
    if softmax:
        y /= ya[..., m:]
    if value is not None:
        y = y @ xp.matrix_transpose(value)
    y -= xp.sum(y * x, axis=-1, keepdims=True) * x
    return y, w


ENSEMBLE_CHECKS = 8
"""Output times at which an ensemble's step is checked (besides the start): a check costs 4
evaluations on the batch, a step 4, so 8 checks cost at most 8 % of the phase diagram's
default 100 steps; they are spread over the span, where forming clusters raise ``L``."""


class EnsembleError(IntegrationError):
    """An ensemble run that did not reach its final time (a non-finite state, a step beyond
    the stability bound, ...): ``.reason`` and ``.t`` say why and where; ``.dataset`` is
    ``None`` (an ensemble hands its states to ``output`` as it goes)."""


class _Field:
    """The ensemble's right-hand side; keeps the weights of its last evaluation."""

    def __init__(self, beta: float, softmax: bool, bilinear: Any, value: Any) -> None:
        self.beta, self.softmax = beta, softmax
        self.bilinear, self.value = bilinear, value
        self.weights: Any = None

    def __call__(self, x: Any) -> Any:
        y, self.weights = ensemble_velocity(x, self.beta, self.softmax, self.bilinear, self.value)
        return y


class FreezeClustered:
    """A monitor that stops integrating the realisations whose inner products are all
    ``>= threshold >= 0`` (exact for the indicators ``<x_i, x_j> >= threshold``, see the
    module docstring). ``active`` indexes the realisations still integrated; ``full`` holds
    every realisation, frozen ones at their frozen state (both on ``full``'s backend)."""

    def __init__(self, field: _Field, full: Any, threshold: float) -> None:
        self.field = field
        self.full = full
        self.threshold = threshold
        self.active = bk.namespace(full).arange(full.shape[0], device=bk.device_of(full))

    def check(self, t: float, y: Any, stage: Any, context: Any) -> Replace | None:
        xp = bk.namespace(y)
        w, beta = self.field.weights, self.field.beta  # weights at y: stage = F(y)
        if beta > 0 and w is not None and w.shape[0] == y.shape[0]:
            shift = -beta if self.field.softmax else -math.log(y.shape[-2])
            done = xp.min(w, axis=(1, 2)) >= math.exp(beta * self.threshold + shift)
        else:
            done = xp.min(y @ xp.matrix_transpose(y), axis=(1, 2)) >= self.threshold
        if not bool(xp.any(done)):
            return None
        self.full[self.active[done]] = y[done]
        keep = ~done
        self.active = self.active[keep]
        return Replace(y[keep], None if stage is None else stage[keep])


def _on(full: Any, a: Any) -> Any:
    """The matrix ``a`` (``None``, NumPy or torch) on ``full``'s backend, dtype and device."""
    if a is None:
        return None
    return bk.like(full, bk.to_numpy(a) if bk.is_numpy(full) else a)


def simulate_ensemble(
    x0: Any,
    beta: float,
    times: ArrayLike,
    output: Callable[[int, float, np.ndarray], None],
    *,
    attention: str = "softmax",
    bilinear: Any = None,
    value: Any = None,
    dt: float = 0.3,
    freeze_above: float | None = None,
    backend: str | None = "numpy",
    device: str | None = None,
    dtype: str = "float64",
    max_steps: int = 1_000_000,
) -> Solution:
    """Integrate (SA) or (USA) for a batch ``x0`` of shape ``(R, n, m)``; ``output(k, t, x)``
    receives the whole batch as a host NumPy array (``x`` reused: copy to keep) at every
    output time.

    RK4 with ``ceil(t_max/dt)`` equal steps, projection after each, cubic Hermite output.

    Args:
        x0: unit tokens, ``(R, n, m)`` (NumPy, or a torch tensor: runs on torch, on its
            device, unless ``backend`` says otherwise).
        beta: inverse temperature.
        times: increasing output times (``times[0]``: the time of ``x0``).
        attention: ``"softmax"`` (SA) or ``"unnormalized"`` (USA).
        bilinear, value: optional ``(R, m, m)`` matrices ``Qᵀ K`` and ``V`` (moved to the
            backend once).
        dt: largest step; watched by :class:`meanfield.integrate.StepSizeMonitor`: the run
            stops with ``UNSTABLE`` where ``h L`` exceeds half RK4's stability bound (an
            ensemble's statistics need more than stability; measured: the default 0.3 has
            ``h L <= 0.3`` on the phase diagram up to ``beta = 9``).
        max_steps: a step needing more steps than this is refused with ``ValueError``
            (:func:`meanfield.integrate.check_step_count`), before any work.
        freeze_above: with the identity model, stop integrating a realisation once all its
            inner products are ``>= freeze_above >= 0`` (:class:`FreezeClustered`).
        backend, device, dtype: where the state lives for the whole run
            (:func:`meanfield.backend.get_backend`: ``"numpy"`` or ``"torch"``; a torch
            device such as ``"cuda"``; ``"float64"`` or ``"float32"``).

    Returns:
        The engine's :class:`meanfield.integrate.Solution`: check it (``finish``), the
        outputs after a stop are missing.
    """
    softmax = require(attention, "ensemble").name == "softmax"
    t = output_times(times, "times")
    if not (math.isfinite(dt) and dt > 0):
        msg = f"dt must be finite and > 0, got {dt!r}"
        raise ValueError(msg)
    check_step_count(t, float(dt), max_steps, dense=True)
    if freeze_above is not None and (bilinear is not None or value is not None):
        msg = "freeze_above needs the identity model (Q = K = V = I)"
        raise ValueError(msg)
    b = bk.get_backend(backend, device, dtype, like=x0)
    # a copy of its own on the backend (frozen realisations are written into it)
    start = b.asarray(x0)
    xp = bk.namespace(start)
    full = xp.asarray(start, copy=True)
    field = _Field(float(beta), softmax, _on(full, bilinear), _on(full, value))
    monitors: list[Any] = []
    freeze = None
    if freeze_above is not None:
        freeze = FreezeClustered(field, full, float(freeze_above))
        monitors.append(freeze)

    def rate_field(x: Any) -> Any:  # the field without touching the weights freezing reads
        return ensemble_velocity(x, field.beta, softmax, field.bilinear, field.value)[0]

    y0 = xp.asarray(full, copy=True)
    if len(t) > 1:  # after the freezing: the realisations still integrated are measured
        # 8 checks: at most 32 evaluations against the run's 4 per step (the phase diagram's
        # default 100 steps: <= 8 %), spread over the span, where clusters raise L
        monitors.append(StepSizeMonitor(rate_field, "rk4", float(dt), t, sphere=True, x0=y0,
                                        dense=True, stop_factor=WARN_FACTOR, advice=None,
                                        checks=ENSEMBLE_CHECKS))

    def emit(k: int, tk: float, y: Any, _ctx: Any) -> None:
        if freeze is None:
            output(k, tk, bk.to_numpy(y))
        else:
            full[freeze.active] = y
            output(k, tk, bk.to_numpy(full))

    return integrate(RungeKutta(field, RK4, project=normalize_rows_inplace), y0, t,
                     controller=ConstantStep(float(dt)), output=emit, monitors=monitors,
                     dense=True)


def ensemble_states(x0: Any, beta: float, times: ArrayLike, **kwargs: Any) -> np.ndarray:
    """The states of :func:`simulate_ensemble` at every output time, ``(len(times), R, n, m)``,
    as one host NumPy array (``kwargs``: those of :func:`simulate_ensemble`, the backend
    included; :class:`EnsembleError` if the run does not reach the final time,
    :class:`meanfield.integrate.Interrupted` if it was interrupted)."""
    out: list[np.ndarray] = []
    sol = simulate_ensemble(x0, beta, times, lambda k, tk, x: out.append(x.copy()), **kwargs)
    finish(sol, None, name="the ensemble run", error=EnsembleError)
    return np.array(out)


__all__ = ["ENSEMBLE_CHECKS", "EnsembleError", "FreezeClustered", "ensemble_states", "ensemble_velocity", "simulate_ensemble"]
