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

Layers with their own weights (docs/equations.md section 2): ``beta`` may be a
:class:`meanfield.Schedule` of models; each piece is one run of the engine, started from the
state output at its switch (as :func:`meanfield.schedule.run_schedule` does for the other
solvers), so no step crosses a switch and the run is the composition of single-piece runs.

Backends (:mod:`meanfield.backend`): the same code runs on NumPy (the default) and on
PyTorch, CPU or GPU, in float64 or float32 (``backend=``, ``device=``, ``dtype=``; a
``torch.Tensor`` start selects torch on its device). The state stays on the backend for the
whole run; ``output`` receives host NumPy arrays, copied off the device at output times only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from meanfield import backend as bk
from meanfield.arguments import output_times
from meanfield.attention import require
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
from meanfield.model import Model
from meanfield.schedule import Schedule
from particles.integrators import RK4, normalize_rows_inplace


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


@dataclass(frozen=True)
class _Piece:
    """One piece of an ensemble run: the field's parameters and its largest step."""

    beta: float
    softmax: bool
    bilinear: Any
    value: Any
    dt: float


ENSEMBLE_MODEL_FIELDS = ("noise", "heads", "causal", "feedforward")
"""The fields of a :class:`meanfield.Model` the ensembles do not integrate: a piece of a
schedule that sets one of them is refused (``noise > 0``, ``heads``, ``causal=True``,
``feedforward``)."""


def _model_matrices(k: int, model: Model, m: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(Qᵀ K, value V)`` of a schedule's piece ``k`` for tokens in ``R^m`` (``None`` for the
    identity); ``ValueError`` naming the piece, the field and its value for what the
    ensembles do not integrate (:data:`ENSEMBLE_MODEL_FIELDS`)."""
    for name in ENSEMBLE_MODEL_FIELDS:
        got = getattr(model, name)
        if got is not None and got is not False and not (name == "noise" and got == 0):
            msg = (f"schedule piece {k}: the ensembles integrate the noiseless (SA)/(USA) with "
                   f"single-head Q, K, V only, got model.{name} = {got!r}")
            raise ValueError(msg)
    eye = np.eye(m)
    for name in ("Q", "K", "V"):
        a = getattr(model, name)
        if a is not None and a.shape[0] != m:
            msg = (f"schedule piece {k}: model.{name} is {a.shape[0]} x {a.shape[0]}, the "
                   f"tokens live in R^{m}")
            raise ValueError(msg)
    bilinear = None
    if model.Q is not None or model.K is not None:
        bilinear = (eye if model.Q is None else model.Q).T @ (eye if model.K is None else model.K)
    value = None
    if model.V is not None or model.value != 1:
        value = model.value * (eye if model.V is None else model.V)
    return bilinear, value


def _per_piece(name: str, arg: Any, count: int) -> list[Any]:
    """``arg`` for each of ``count`` pieces: a list or tuple gives one entry per piece, any
    other value is shared by all."""
    if isinstance(arg, (list, tuple)):
        if len(arg) != count:
            msg = (f"{name}: a list gives one entry per piece of the schedule ({count} "
                   f"pieces), got {len(arg)} entries")
            raise ValueError(msg)
        return list(arg)
    return [arg] * count


def _pieces(beta: float | Schedule, t: np.ndarray, m: int, attention: str | None,
            bilinear: Any, value: Any, dt: Any) -> list[tuple[_Piece, np.ndarray]]:
    """The pieces of a run and their times (:meth:`meanfield.Schedule.pieces`: start, the
    output times inside, end); one piece over ``t`` for a number ``beta``."""
    if not isinstance(beta, Schedule):
        softmax = require("softmax" if attention is None else attention, "ensemble").normalized
        return [(_Piece(float(beta), softmax, bilinear, value, _step(dt, "dt")), t)]
    parts = beta.pieces(t)
    index = {s: k for k, s in enumerate(beta.starts)}
    bils = _per_piece("bilinear", bilinear, len(beta))
    vals = _per_piece("value", value, len(beta))
    dts = _per_piece("dt", dt, len(beta))
    out = []
    for model, times in parts:
        k = index[max(s for s in beta.starts if s <= times[0])]
        try:
            kind = require(model.attention, "ensemble")
        except ValueError as exc:
            msg = f"schedule piece {k}: {exc}"
            raise ValueError(msg) from None
        if attention is not None and require(attention, "ensemble") is not kind:
            msg = (f"schedule piece {k} has attention={kind.name!r}, but attention={attention!r} "
                   "was given: leave attention=None to take the pieces' own")
            raise ValueError(msg)
        b, v = _model_matrices(k, model, m)
        for name, own, given in (("bilinear", b, bils[k]), ("value", v, vals[k])):
            if own is not None and given is not None:
                msg = (f"schedule piece {k}: {name} is given both by the model's matrices and "
                       f"by the {name} argument; give one")
                raise ValueError(msg)
        out.append((_Piece(model.beta, kind.normalized, bils[k] if b is None else b,
                           vals[k] if v is None else v, _step(dts[k], f"dt of piece {k}")),
                    times))
    return out


def _step(dt: Any, name: str) -> float:
    """``dt`` as a float, or ``ValueError`` naming ``name`` unless a finite number > 0."""
    try:
        h = math.nan if isinstance(dt, (str, bytes, bool)) else float(dt)
    except (TypeError, ValueError):
        h = math.nan
    if not (math.isfinite(h) and h > 0):
        msg = f"{name} must be finite and > 0, got {dt!r}"
        raise ValueError(msg)
    return h


def simulate_ensemble(
    x0: Any,
    beta: float | Schedule,
    times: ArrayLike,
    output: Callable[[int, float, np.ndarray], None],
    *,
    attention: str | None = None,
    bilinear: Any = None,
    value: Any = None,
    dt: float | Sequence[float] = 0.3,
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
        beta: inverse temperature, or a :class:`meanfield.Schedule` of models (layers with
            their own weights, docs/equations.md section 2): piece ``k`` integrates its
            model's ``beta``, attention, ``Qᵀ K`` and ``value V`` (shared by every
            realisation; noise, heads, causal and feed-forward models are refused,
            :data:`ENSEMBLE_MODEL_FIELDS`). Each piece is one run of the engine over its
            span (``ceil(span/dt)`` equal steps, the output times inside it, the switch as
            its end), started from the state output at the switch: no step crosses a switch,
            and the run equals the composition of single-piece runs (the same arithmetic:
            bitwise). The step monitor checks each piece at :data:`ENSEMBLE_CHECKS` times.
        times: increasing output times (``times[0]``: the time of ``x0``; a switch that is
            not one of them is not output).
        attention: ``"softmax"`` (SA, the default) or ``"unnormalized"`` (USA); with a
            schedule, ``None`` (the pieces' own) or the attention of every piece.
        bilinear, value: optional ``(R, m, m)`` matrices ``Qᵀ K`` and ``V`` (moved to the
            backend once); with a schedule, one for every piece or a list with one entry per
            piece (``None`` where the piece's model gives its own or the identity).
        dt: largest step; watched by :class:`meanfield.integrate.StepSizeMonitor`: the run
            stops with ``UNSTABLE`` where ``h L`` exceeds half RK4's stability bound (an
            ensemble's statistics need more than stability; measured: the default 0.3 has
            ``h L <= 0.3`` on the phase diagram up to ``beta = 9``). With a schedule, a list
            gives one per piece (USA's step ``dt e^{-beta}`` depends on the piece's ``beta``).
        max_steps: a step needing more steps than this (in any piece) is refused with
            ``ValueError`` (:func:`meanfield.integrate.check_step_count`), before any work.
        freeze_above: with the identity model (in every piece), stop integrating a
            realisation once all its inner products are ``>= freeze_above >= 0``
            (:class:`FreezeClustered`; exact across switches: the argument of the module
            docstring holds for every ``beta >= 0``, SA and USA, and the test reads the
            current piece's ``beta``).
        backend, device, dtype: where the state lives for the whole run
            (:func:`meanfield.backend.get_backend`: ``"numpy"`` or ``"torch"``; a torch
            device such as ``"cuda"``; ``"float64"`` or ``"float32"``).

    Returns:
        The engine's :class:`meanfield.integrate.Solution` (of the last piece run, with the
        step counters and wall time summed over the pieces): check it (``finish``), the
        outputs after a stop are missing.
    """
    t = output_times(times, "times")
    shape = tuple(np.shape(x0))  # a torch tensor's .shape, else that of the array it makes
    if len(shape) != 3:
        msg = f"x0 must have shape (R, n, m), got shape {shape}"
        raise ValueError(msg)
    pieces = _pieces(beta, t, int(shape[-1]), attention, bilinear, value, dt)
    for p, tt in pieces:
        check_step_count(tt, p.dt, max_steps, dense=True)
    if freeze_above is not None and any(p.bilinear is not None or p.value is not None
                                        for p, _ in pieces):
        msg = "freeze_above needs the identity model (Q = K = V = I)"
        raise ValueError(msg)
    b = bk.get_backend(backend, device, dtype, like=x0)
    # a copy of its own on the backend (frozen realisations are written into it; at each
    # switch it holds the state handed to the next piece)
    start = b.asarray(x0)
    xp = bk.namespace(start)
    full = xp.asarray(start, copy=True)
    freeze = None
    reached = {float(s): k for k, s in enumerate(t)}
    total: Solution | None = None
    for i, (p, tt) in enumerate(pieces):
        field = _Field(p.beta, p.softmax, _on(full, p.bilinear), _on(full, p.value))
        monitors: list[Any] = []
        if freeze_above is not None:
            if freeze is None:
                freeze = FreezeClustered(field, full, float(freeze_above))
            freeze.field = field  # the threshold test reads the current piece's beta
            monitors.append(freeze)

        def emit(j: int, tj: float, x: np.ndarray, first: bool = i == 0) -> None:
            # the caller's output times only; a switch that is one was output by its piece
            if tj in reached and (j > 0 or first):
                output(reached[tj], tj, x)

        sol = _run_piece(field, full, freeze, monitors, tt, p.dt, emit)
        total = sol if total is None else _summed(total, sol)
        if not sol.successful:
            break
    assert total is not None
    return total


def _run_piece(field: _Field, full: Any, freeze: FreezeClustered | None, monitors: list[Any],
               t: np.ndarray, dt: float, output: Callable[[int, float, np.ndarray], None]
               ) -> Solution:
    """One engine run of the field from ``full`` (its realisations still integrated) over
    ``t``; ``full`` holds the state output at ``t[-1]`` when it ends."""
    xp = bk.namespace(full)
    y0 = xp.asarray(full if freeze is None else full[freeze.active], copy=True)

    def rate_field(x: Any) -> Any:  # the field without touching the weights freezing reads
        return ensemble_velocity(x, field.beta, field.softmax, field.bilinear, field.value)[0]

    if len(t) > 1:  # after the freezing: the realisations still integrated are measured
        # 8 checks: at most 32 evaluations against the run's 4 per step (the phase diagram's
        # default 100 steps: <= 8 %), spread over the span, where clusters raise L
        monitors.append(StepSizeMonitor(rate_field, "rk4", float(dt), t, sphere=True, x0=y0,
                                        dense=True, stop_factor=WARN_FACTOR, advice=None,
                                        checks=ENSEMBLE_CHECKS))
    last = len(t) - 1

    def emit(k: int, tk: float, y: Any, _ctx: Any) -> None:
        if freeze is None:
            if k == last:
                full[...] = y
            output(k, tk, bk.to_numpy(y))
        else:
            full[freeze.active] = y
            output(k, tk, bk.to_numpy(full))

    return integrate(RungeKutta(field, RK4, project=normalize_rows_inplace), y0, t,
                     controller=ConstantStep(float(dt)), output=emit, monitors=monitors,
                     dense=True)


def _summed(before: Solution, sol: Solution) -> Solution:
    """``sol`` with the step counters and wall time of the pieces before it added."""
    return replace(sol, **{key: getattr(before, key) + getattr(sol, key) for key in (
        "num_steps", "num_accepted", "num_rejected", "num_evaluations", "wall_time_s")})


def ensemble_states(x0: Any, beta: float | Schedule, times: ArrayLike, **kwargs: Any) -> np.ndarray:
    """The states of :func:`simulate_ensemble` at every output time, ``(len(times), R, n, m)``,
    as one host NumPy array (``kwargs``: those of :func:`simulate_ensemble`, the backend
    included; :class:`EnsembleError` if the run does not reach the final time,
    :class:`meanfield.integrate.Interrupted` if it was interrupted)."""
    out: list[np.ndarray] = []
    sol = simulate_ensemble(x0, beta, times, lambda k, tk, x: out.append(x.copy()), **kwargs)
    finish(sol, None, name="the ensemble run", error=EnsembleError)
    return np.array(out)


__all__ = ["ENSEMBLE_CHECKS", "ENSEMBLE_MODEL_FIELDS", "EnsembleError", "FreezeClustered", "ensemble_states",
           "ensemble_velocity", "simulate_ensemble"]
