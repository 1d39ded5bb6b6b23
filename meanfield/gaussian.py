"""The Gaussian reduction in ``R^d``: mean and covariance ODEs (docs/equations.md section 4).

.. autosummary::
   affine_field
   gaussian_rhs
   solve_gaussian
   BlowUpError
   GaussianFlowError
   CovarianceBlowupMonitor
   GAUSSIAN_KINDS
   METHODS

Without layer normalisation (tokens in ``R^d``), softmax, L2 and Sinkhorn attention give a
field that is affine in ``x`` when ``mu = N(m, Sigma)``, so the flow keeps Gaussians Gaussian.
For one head ``(Q, K, V)``, ``A = beta K^T Q`` and ``P = (I + beta Sigma K^T K)^{-1}`` (L2)
or ``P = I`` (softmax):

    X[mu](x) = V P (m + Sigma A x) = b + B x,   b = V P m,   B = V P Sigma A.

Sinkhorn attention averages over the Gaussian self-coupling of ``mu`` instead:
``X(x) = V (m + L G^T L^{-1} (x - m))`` with ``Sigma = L L^T`` and
``G (I - G^T G)^{-1} = L^T A^T L`` (solved by an SVD). Summing ``b`` and ``B`` over heads,
with noise ``sigma`` (the term ``sigma Lap rho``):

    m' = b + B m,        Sigma' = B Sigma + Sigma B^T + 2 sigma I.

The ODE is integrated for a factor ``Sigma = L L^T`` (``L' = B L + sigma L^{-T}``), so the
covariance is symmetric positive semi-definite by construction. See ``docs/gaussian.md``
for the derivations and the closed forms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import xarray as xr

from meanfield import attention
from meanfield.arguments import output_times
from meanfield.integrate import (
    IntegrationError,
    PIController,
    RungeKutta,
    Stop,
    StopReason,
    finish,
    integrate,
    run_attrs,
)
from meanfield.model import Model
from meanfield.schedule import Schedule, run_schedule

GAUSSIAN_KINDS = attention.names(solver="gaussian")
"""Attention kinds whose mean-field flow keeps Gaussian measures Gaussian (affine field): the
built-in kinds of :mod:`meanfield.attention` that declare the ``"gaussian"`` solver."""

_SYMMETRY_RTOL = 1e-10
"""Relative asymmetry ``|S - S^T| / |S|`` accepted in ``cov0`` (round-off of a computed
covariance), beyond which the input is rejected as not symmetric."""


class GaussianFlowError(IntegrationError):
    """The Gaussian ODE could not be continued; ``partial`` holds the times reached (also
    ``.dataset``, with ``.t`` and ``.reason`` as every :class:`meanfield.integrate.IntegrationError`).

    Attributes:
        time: the time at which integration stopped.
        partial: an ``xarray.Dataset`` like the one :func:`solve_gaussian` returns, with the
            requested times before ``time`` only (``attrs["successful"] == "false"``).
        mean, cov: the state at ``time``.
    """

    def __init__(self, msg: str, *, time: float, mean: np.ndarray, cov: np.ndarray,
                 partial: xr.Dataset | None = None,
                 reason: StopReason = StopReason.STEP_TOO_SMALL) -> None:
        super().__init__(msg, partial, time, reason)
        self.time = time
        self.mean = mean
        self.cov = cov

    @property
    def partial(self) -> xr.Dataset | None:
        """The partial result: :attr:`meanfield.integrate.IntegrationError.dataset` under the
        name this error has always had."""
        return self.dataset  # type: ignore[no-any-return]


class BlowUpError(GaussianFlowError):
    """The covariance diverged in finite time (docs/equations.md section 4, ``A + A^T`` indefinite).

    Attributes (besides those of :class:`GaussianFlowError`):
        eigenvalue: the largest eigenvalue of ``Sigma`` at ``time`` (above the threshold).
        eigenvector: its unit eigenvector (the diverging direction).
        blowup_time: the extrapolated time at which it becomes infinite,
            ``time + lambda / lambda'`` (``1/lambda`` is linear in ``t`` near a pole).
    """

    def __init__(self, msg: str, *, eigenvalue: float, eigenvector: np.ndarray,
                 blowup_time: float, **kw: Any) -> None:
        kw.setdefault("reason", StopReason.BLOWUP)
        super().__init__(msg, **kw)
        self.eigenvalue = eigenvalue
        self.eigenvector = eigenvector
        self.blowup_time = blowup_time


METHODS: dict[str, str] = {
    "dop853": "dop853", "dopri5": "dopri5", "bosh3": "bosh3",
    "DOP853": "dop853", "RK45": "dopri5", "RK23": "bosh3",
}
"""The ``method`` names :func:`solve_gaussian` takes -> the engine's scheme
(:data:`meanfield.integrate.SCHEMES`): its adaptive explicit schemes, and the names of
``scipy.integrate.solve_ivp`` for the same pairs (``DOP853``: Dormand-Prince 8(5,3),
``RK45``: Dormand-Prince 5(4), ``RK23``: Bogacki-Shampine 3(2))."""


# -- the field ------------------------------------------------------------------------------


def _check_model(model: Model) -> None:
    if not isinstance(model, Model):
        msg = f"model must be a meanfield.Model, got {type(model).__name__}"
        raise ValueError(msg)
    attention.require(model.attention, "gaussian")
    if model.causal:
        msg = "causal (masked) attention has no Gaussian reduction; use causal=False"
        raise ValueError(msg)


def affine_field(model: Model, mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The field ``X[N(mean, cov)](x) = b + B x`` of the model, as ``(b, B)`` (docs/equations.md 4).

    Summed over heads, ``A = beta K^T Q``. Softmax: ``V (m + cov A x)``. L2:
    ``V (I + beta cov K^T K)^{-1} (m + cov A x)`` (the mean of the tilted law, whose
    covariance is ``(cov^{-1} + beta K^T K)^{-1}``). Sinkhorn: ``V E_pi[y | x]`` for the
    Gaussian coupling ``pi`` of ``mu`` with itself, ``V (m + L G^T L^{-1} (x - m))``.
    The noise term is not a field and is not included. ``cov`` may be singular except for
    Sinkhorn. See docs/gaussian.md, section 1. Each head's field is its kind's
    :class:`meanfield.attention.GaussianField`.
    """
    _check_model(model)
    head = attention.resolve(model.attention).gaussian_field().head
    mean = np.asarray(mean, dtype=float)
    cov = np.asarray(cov, dtype=float)
    d = mean.shape[0]
    b = np.zeros(d)
    big_b = np.zeros((d, d))
    for q, k, v in model.matrices(d):
        bh, big_bh = head(model.beta, q, k, v, mean, cov)
        b += bh
        big_b += big_bh
    return b, big_b


def gaussian_rhs(model: Model, mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(m', Sigma')`` at ``N(mean, cov)``: ``b + B m`` and ``B Sigma + Sigma B^T + 2 sigma I``."""
    b, big_b = affine_field(model, mean, cov)
    bs = big_b @ np.asarray(cov, dtype=float)
    dcov = bs + bs.T + 2.0 * model.noise * np.eye(len(b))
    return b + big_b @ np.asarray(mean, dtype=float), dcov


# -- inputs ---------------------------------------------------------------------------------


def _check_state(model: Model, mean0: Any, cov0: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``(mean0, cov0)``; return them and a factor ``L`` with ``cov0 = L L^T``."""
    mean = np.array(mean0, dtype=float)
    cov = np.array(cov0, dtype=float)
    if mean.ndim != 1 or mean.size == 0:
        msg = f"mean0 must be a non-empty vector of shape (d,), got shape {mean.shape}"
        raise ValueError(msg)
    d = mean.shape[0]
    if cov.shape != (d, d):
        msg = f"cov0 must have shape (d, d) = ({d}, {d}) to match mean0, got shape {cov.shape}"
        raise ValueError(msg)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))):
        msg = "mean0 and cov0 must be finite"
        raise ValueError(msg)
    asym = np.linalg.norm(cov - cov.T) / max(np.linalg.norm(cov), np.finfo(float).tiny)
    if asym > _SYMMETRY_RTOL:
        msg = f"cov0 is not symmetric: |cov0 - cov0^T| / |cov0| = {asym:.3g}"
        raise ValueError(msg)
    cov = 0.5 * (cov + cov.T)
    try:
        factor = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        lam = np.linalg.eigvalsh(cov)[0]
        msg = f"cov0 is not positive definite: smallest eigenvalue {lam:.3g}"
        raise ValueError(msg) from None
    model.check_dim(d)
    return mean, cov, factor


def _check_times(t: Any) -> np.ndarray:
    return output_times(t)


# -- the solver -----------------------------------------------------------------------------


def _dataset(model: Model, times: np.ndarray, means: np.ndarray, covs: np.ndarray,
             attrs: dict[str, Any]) -> xr.Dataset:
    d = means.shape[-1] if means.ndim == 2 else covs.shape[-1]
    ds = xr.Dataset(
        {
            "mean": (("time", "dim"), means.reshape(len(times), d),
                     {"long_name": "mean m(t) of the Gaussian"}),
            "cov": (("time", "dim", "dim_"), covs.reshape(len(times), d, d),
                    {"long_name": "covariance Sigma(t) of the Gaussian"}),
        },
        coords={
            "time": ("time", times, {"units": "1", "long_name": "time (depth)"}),
            "dim": ("dim", np.arange(d)),
            "dim_": ("dim_", np.arange(d)),
        },
    )
    ds.attrs.update(attrs)
    return ds


def _scheme_of(method: str) -> str:
    """The engine's scheme for ``method`` (:data:`METHODS`)."""
    if method not in METHODS:
        msg = f"method must be one of {', '.join(METHODS)}, got {method!r}"
        raise ValueError(msg)
    return METHODS[method]


def _check_tolerances(rtol: float, atol: float) -> None:
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not (np.isfinite(tol) and tol > 0):
            msg = f"{name} must be finite and > 0, got {tol!r}"
            raise ValueError(msg)


def _threshold(cov: np.ndarray, max_eigenvalue: float | None) -> float:
    """The blow-up threshold on ``lambda_max(Sigma)``: ``max_eigenvalue``, by default
    ``1e10 max(1, lambda_max(cov0))``; it must exceed ``lambda_max(cov0)``."""
    lam0 = float(np.linalg.eigvalsh(cov)[-1])
    threshold = 1e10 * max(1.0, lam0) if max_eigenvalue is None else float(max_eigenvalue)
    if not threshold > lam0:
        msg = (f"max_eigenvalue = {threshold!r} must exceed the largest eigenvalue of cov0, "
               f"{lam0:.6g}")
        raise ValueError(msg)
    return threshold


def _controller(rtol: float, atol: float) -> PIController:
    """The engine's controller set as the integral (I) control of Hairer's DOP853 and scipy's
    ``DOP853``, ``dt_next = 0.9 dt err^(-1/k)`` (``pcoeff = 1``, ``icoeff = 0``): its
    equilibrium error is ``0.9^k ~ 0.43`` of the tolerance at ``k = 8``, where the PI
    defaults' ``0.9^(k/0.3) ~ 0.06`` takes ~30% more steps on this smooth, non-stiff ODE
    (benchmarks/bench_gaussian.py)."""
    return PIController(rtol=rtol, atol=atol, pcoeff=1.0, icoeff=0.0)


def _factor_rhs(model: Model, d: int) -> Callable[[np.ndarray], np.ndarray]:
    """``y = (m, L)`` -> ``(b + B m, B L + sigma L^{-T})``: the Gaussian ODE for the factor
    ``Sigma = L L^T`` (docs/equations.md section 4; ``(sigma L^{-T}) L^T + L (sigma L^{-T})^T
    = 2 sigma I``)."""
    sigma = model.noise

    def rhs(y: np.ndarray) -> np.ndarray:
        m, lf = y[:d], y[d:].reshape(d, d)
        b, big_b = affine_field(model, m, lf @ lf.T)
        dl = big_b @ lf
        if sigma > 0:
            dl = dl + sigma * np.linalg.inv(lf).T
        return np.concatenate([b + big_b @ m, dl.ravel()])

    return rhs


def _covariances(factors: np.ndarray) -> np.ndarray:
    """``L L^T`` for a stack of factors, symmetrised exactly."""
    covs = factors @ np.transpose(factors, (0, 2, 1))
    return 0.5 * (covs + np.transpose(covs, (0, 2, 1)))


@dataclass(frozen=True)
class _StopState:
    """The Gaussian where a run stopped: ``(m, Sigma)`` at ``t``, the top eigenpair of
    ``Sigma`` and the blow-up time extrapolated from it."""

    t: float
    mean: np.ndarray
    cov: np.ndarray
    eigenvalue: float
    eigenvector: np.ndarray
    blowup_time: float

    @classmethod
    def at(cls, model: Model, t: float, y: np.ndarray, d: int) -> _StopState:
        """At the state ``y = (m, L)``: ``t* = t + lambda / lambda'`` with ``lambda' = v^T
        Sigma' v`` (Hellmann-Feynman; ``1/lambda`` is linear in ``t`` near a pole), ``inf``
        when ``lambda`` does not grow."""
        mean, factor = y[:d], y[d:].reshape(d, d)
        with np.errstate(over="ignore", invalid="ignore"):
            cov = _covariances(factor[None])[0]
            if np.all(np.isfinite(cov)):
                lam, vec = np.linalg.eigh(cov)
            else:
                lam, vec = np.array([np.inf]), np.full((d, 1), np.nan)
        lam_max, v_max = float(lam[-1]), vec[:, -1]
        t_star = float("nan")
        if np.isfinite(lam_max):
            with np.errstate(over="ignore", invalid="ignore"):  # an overflowing field: rate NaN
                rate = float(v_max @ gaussian_rhs(model, mean, cov)[1] @ v_max)
            t_star = t + lam_max / rate if rate > 0 else float("inf")
        return cls(t, mean, cov, lam_max, v_max, t_star)

    def blown(self, threshold: float) -> bool:
        """Past the threshold, non-finite, or at a pole (``t* - t <= 1e-6 max(1, |t|)``: the
        step size collapsed just before ``t*``)."""
        near_pole = self.blowup_time - self.t <= 1e-6 * max(1.0, abs(self.t))
        return not np.isfinite(self.eigenvalue) or self.eigenvalue > threshold or near_pole

    def reason(self, threshold: float) -> str:
        return (f"finite-time blow-up: the largest eigenvalue of the covariance reached "
                f"{self.eigenvalue:.6g} (threshold {threshold:.3g}) at t = {self.t:.12g}, along "
                f"{np.array2string(self.eigenvector, precision=4)}; extrapolated blow-up time "
                f"t* = {self.blowup_time:.12g}")


class CovarianceBlowupMonitor:
    """An engine monitor (:class:`meanfield.integrate.Monitor`) of the Gaussian ODE in factor
    form ``y = (m, L)``: stops the run with :attr:`StopReason.BLOWUP` at the first accepted
    state whose ``lambda_max(Sigma) = ||L||_2^2`` exceeds ``threshold`` (docs/equations.md
    section 4, ``A + A^T`` indefinite: a finite-time pole), and names a step that collapses
    or a state that turns non-finite at a pole as the blow-up too (and, through ``start``, a
    start already at one). The state it stopped at is ``stopped`` (a :class:`_StopState`,
    ``None`` while it has not stopped): an accepted state, up to which :func:`solve_gaussian`
    keeps the results.

    Args:
        model: the :class:`meanfield.Model` (for the extrapolated blow-up time).
        d: the dimension.
        threshold: the bound on ``lambda_max(Sigma)``.
    """

    def __init__(self, model: Model, d: int, threshold: float) -> None:
        self.model = model
        self.d = d
        self.threshold = threshold
        self.stopped: _StopState | None = None
        self.reason = ""

    def start(self, t0: float, y0: np.ndarray, stage: Any, context: Any) -> None:
        """Before the first step: a start already at a pole (``t* - t0`` below the step the
        engine can take, e.g. ``beta = 1e300``) is the blow-up, not an overflow of the step."""
        self._explain(t0, y0, "the blow-up is within round-off of the start")

    def check(self, t: float, y: np.ndarray, stage: Any, context: Any) -> None:
        factor = y[self.d:]
        with np.errstate(over="ignore", invalid="ignore"):
            if float(factor @ factor) <= self.threshold:  # ||L||_2^2 <= ||L||_F^2: no SVD
                return
            s = np.linalg.norm(factor.reshape(self.d, self.d), 2)
        if np.isfinite(s) and s * s <= self.threshold:
            return
        self._stop(t, y, "")

    def explain_small_step(self, t: float, y: np.ndarray, h: float) -> None:
        self._explain(t, y, f"the step collapsed to dt = {h:.3g} at t = {t:.6g}")

    def explain_non_finite(self, t: float, y: np.ndarray, h: float) -> None:
        self._explain(t, y, f"a non-finite state in the step from t = {t:.6g}")

    def _explain(self, t: float, y: np.ndarray, why: str) -> None:
        """A stop of the integrator at a pole is the blow-up; elsewhere it keeps its reason."""
        state = _StopState.at(self.model, t, y, self.d)
        if state.blown(self.threshold):
            self._stop(t, y, f" (the integrator stopped: {why})", state)

    def _stop(self, t: float, y: np.ndarray, why: str, state: _StopState | None = None) -> None:
        self.stopped = state if state is not None else _StopState.at(self.model, t, y, self.d)
        self.reason = self.stopped.reason(self.threshold) + why
        raise Stop(StopReason.BLOWUP, self.reason)


def _error(stopped: _StopState) -> Callable[[str, Any, float, StopReason], GaussianFlowError]:
    """The error :func:`meanfield.integrate.finish` raises: :class:`BlowUpError` at a blow-up,
    else :class:`GaussianFlowError`, with the state where the run stopped."""

    def error(msg: str, result: Any, t_reached: float, why: StopReason) -> GaussianFlowError:
        kw = {"time": stopped.t, "mean": stopped.mean, "cov": stopped.cov, "partial": result}
        if why is StopReason.BLOWUP:
            return BlowUpError(msg, eigenvalue=stopped.eigenvalue, eigenvector=stopped.eigenvector,
                               blowup_time=stopped.blowup_time, **kw)
        return GaussianFlowError(msg, reason=why, **kw)

    return error


def _solve_schedule(schedule: Schedule, mean0: Any, cov0: Any, t: Any, rtol: float, atol: float,
                    method: str, max_eigenvalue: float | None, throw: bool) -> xr.Dataset:
    """:func:`solve_gaussian` piece by piece (:func:`meanfield.schedule.run_schedule`), with
    ``max_eigenvalue`` from ``cov0`` for every piece."""
    for piece in schedule.models:
        _check_model(piece)
    if max_eigenvalue is None:
        cov_checked = _check_state(schedule.models[0], mean0, cov0)[1]
        max_eigenvalue = _threshold(cov_checked, None)
    return run_schedule(
        schedule, t, (mean0, cov0),
        lambda m, tt, s: solve_gaussian(m, s[0], s[1], tt, rtol=rtol, atol=atol, method=method,
                                        max_eigenvalue=max_eigenvalue, throw=throw),
        lambda ds: (ds["mean"].values[-1], ds["cov"].values[-1]))


def solve_gaussian(model: Model | Schedule, mean0: Any, cov0: Any, t: Any, *, rtol: float = 1e-10,
                   atol: float = 1e-12, method: str = "dop853",
                   max_eigenvalue: float | None = None, throw: bool = True) -> xr.Dataset:
    """Evolve ``N(mean0, cov0)`` under the mean-field flow of ``model`` (docs/equations.md section 4).

    The ODE ``m' = b + B m``, ``L' = B L + sigma L^{-T}`` (``Sigma = L L^T``) runs through the
    engine (:func:`meanfield.integrate.integrate`, the PI controller; the outputs from the
    scheme's continuous extension where it has one, DOP853's of order 7, else steps landing on
    the output times), with :class:`CovarianceBlowupMonitor` watching the covariance.

    Args:
        model: softmax, L2 or Sinkhorn attention, any ``Q, K, V``, ``heads``, ``beta``,
            ``value`` and ``noise``.
        mean0: initial mean, shape ``(d,)``.
        cov0: initial covariance, symmetric positive definite, shape ``(d, d)``.
        t: strictly increasing output times; ``t[0]`` is the initial time.
        rtol, atol: tolerances of the step-size control on ``(m, L)``, ``Sigma = L L^T``.
        method: a name in :data:`METHODS`: the engine's adaptive schemes (``"dop853"``,
            Dormand-Prince 8(5,3), the default; ``"dopri5"``; ``"bosh3"``) or scipy's names of
            the same (``"DOP853"``, ``"RK45"``, ``"RK23"``).
        max_eigenvalue: blow-up threshold on the largest eigenvalue of ``Sigma``; default
            ``1e10 * max(1, largest eigenvalue of cov0)``.
        throw: raise :class:`BlowUpError` (or :class:`GaussianFlowError`) on failure; if
            False, return the partial Dataset with ``attrs["successful"] == 0``.

    Returns:
        ``xarray.Dataset`` with ``mean`` (time, dim) and ``cov`` (time, dim, dim_); ``attrs``
        follow the result schema (:data:`meanfield.integrate.RESULT_ATTRS`; the initial
        state, the method and, after a stop, ``stop_time`` and ``blowup_time`` in
        ``settings``).

    Raises:
        meanfield.integrate.Interrupted: on ``KeyboardInterrupt``; its ``.dataset`` holds the
            output times passed up to the last accepted step (``t_reached``), ``successful = 0``.
        ValueError: bad input (shapes, a covariance that is not symmetric positive definite,
            an attention kind without a Gaussian reduction, a model of another dimension, a
            ``method`` not in :data:`METHODS`).
        BlowUpError: finite-time blow-up (the partial Dataset is its ``partial``).
        GaussianFlowError: the integrator stopped elsewhere (a step-size collapse, an overflow).

    A :class:`meanfield.schedule.Schedule` of models is run piece by piece
    (:func:`meanfield.schedule.run_schedule`): the run stops at each switch and the next
    piece starts from ``(m, Sigma)`` there; ``max_eigenvalue`` defaults from ``cov0``.
    """
    if isinstance(model, Schedule):
        return _solve_schedule(model, mean0, cov0, t, rtol, atol, method, max_eigenvalue, throw)
    _check_model(model)
    mean, cov, factor = _check_state(model, mean0, cov0)
    times = _check_times(t)
    scheme = _scheme_of(method)
    _check_tolerances(rtol, atol)
    d = mean.shape[0]
    monitor = CovarianceBlowupMonitor(model, d, _threshold(cov, max_eigenvalue))
    ys = np.empty((times.size, d + d * d))
    reached = [0]

    def output(k: int, _t: float, y: np.ndarray, _context: Any) -> None:
        ys[k] = y
        reached[0] = k + 1

    stepper = RungeKutta(_factor_rhs(model, d), scheme)
    sol = integrate(stepper, np.concatenate([mean, factor.ravel()]), times,
                    controller=_controller(rtol, atol), output=output,
                    monitors=[monitor], dense=stepper.interpolates)
    if monitor.stopped is not None:  # the accepted state past the threshold ends the result
        sol = replace(sol, t_reached=monitor.stopped.t)
    n = reached[0]
    if not sol.successful:  # no output beyond the state the run ended at
        n = int(np.searchsorted(times[:n], sol.t_reached, side="right"))
    covs = _covariances(ys[:n, d:].reshape(n, d, d))
    covs[0] = cov  # the first output time is the initial time: return the input exactly
    settings: dict[str, Any] = {
        "method": method, "form": "factor Sigma = L L^T", "max_eigenvalue": monitor.threshold,
        "mean0": mean.tolist(), "cov0": cov.tolist(),
        "reference": "docs/equations.md section 4; docs/gaussian.md",
    }
    stopped = None
    if not (sol.successful or sol.reason is StopReason.INTERRUPTED):
        stopped = monitor.stopped or _StopState.at(model, sol.t_reached, np.asarray(sol.y), d)
        settings.update(stop_time=stopped.t, blowup_time=stopped.blowup_time)
    partial = _dataset(model, times[:n], ys[:n, :d], covs, run_attrs(
        sol, title="meanfield solve_gaussian", solver="meanfield.solve_gaussian",
        model=model.to_json(), settings=settings, scheme=scheme,
        controller="PIController", rtol=rtol, atol=atol, dt=None,
        stop_reason=monitor.reason or None))
    return finish(sol, partial, name="solve_gaussian", throw=throw,
                  error=IntegrationError if stopped is None else _error(stopped))


__all__ = [
    "GAUSSIAN_KINDS",
    "METHODS",
    "BlowUpError",
    "CovarianceBlowupMonitor",
    "GaussianFlowError",
    "affine_field",
    "gaussian_rhs",
    "solve_gaussian",
]


# -- exact statements: blow-up direction, noisy fixed points and their spectra ------------------


def interaction_matrix(model: Model, d: int) -> tuple[float, np.ndarray]:
    """``(v, A)`` for softmax attention whose heads all have ``V_h = v I``: ``A = sum_h beta
    K_h^T Q_h`` (docs/equations.md section 4), so that ``m' = v (I + Sigma A) m`` and
    ``Sigma' = v Sigma (A + A^T) Sigma + 2 sigma I``.

    Raises:
        ValueError: another attention kind, or a head whose ``V`` is not a multiple of ``I``.
    """
    _check_model(model)
    if not attention.resolve(model.attention).gaussian_field().plain:
        msg = ("interaction_matrix needs softmax attention (an affine field v(m + Sigma A x)), got "
               f"{model.attention!r}")
        raise ValueError(msg)
    a = np.zeros((d, d))
    values = set()
    for q, k, v in model.matrices(d):
        if not np.allclose(v, v[0, 0] * np.eye(d), rtol=0.0, atol=0.0):
            msg = "interaction_matrix needs V = v I in every head (a scalar value matrix)"
            raise ValueError(msg)
        values.add(float(v[0, 0]))
        a += model.beta * (k.T @ q)
    if len(values) != 1:
        msg = f"interaction_matrix needs the same V = v I in every head, got v in {sorted(values)}"
        raise ValueError(msg)
    return values.pop(), a


def layered_covariance(schedule: Schedule, cov0: Any, t: Any) -> np.ndarray:
    """The closed form of ``Sigma(t)`` under a schedule of softmax models with ``V = v I`` and
    no noise (docs/equations.md sections 8.2 and 2, "Layers with their own weights"), layer by
    layer: on the piece ``[t_k, t_{k+1})``, ``Sigma(t) = (Sigma(t_k)^{-1} - v_k (A_k + A_k^T)(t - t_k))^{-1}``
    with ``(v_k, A_k)`` from :func:`interaction_matrix` and ``Sigma(t_k)`` the closed form at
    the switch (``cov0`` at ``t[0]``).

    Returns:
        ``Sigma`` at the times ``t``, shape ``(len(t), d, d)``.

    Raises:
        ValueError: a piece with noise, another attention kind or a non-scalar ``V``; a time
            at or past the blow-up of its piece (``Sigma^{-1}`` no longer positive definite).
    """
    times = output_times(t)
    inv = np.linalg.inv(_check_state(schedule.models[0], np.zeros(np.shape(cov0)[0]), cov0)[1])
    d = inv.shape[0]
    out = np.empty((times.size, d, d))
    t_k = float(times[0])
    for model, piece in schedule.pieces(times):
        if model.noise != 0:
            msg = f"layered_covariance needs noise = 0 in every piece, got noise = {model.noise}"
            raise ValueError(msg)
        v, a = interaction_matrix(model, d)
        rate = v * (a + a.T)
        for tau in piece:
            prec = inv - rate * (float(tau) - t_k)
            if np.linalg.eigvalsh(0.5 * (prec + prec.T))[0] <= 0:
                msg = f"layered_covariance: t = {float(tau):.6g} is at or past the blow-up"
                raise ValueError(msg)
            hit = np.flatnonzero(times == tau)
            if hit.size:
                out[hit[0]] = np.linalg.inv(prec)
        inv = inv - rate * (float(piece[-1]) - t_k)
        t_k = float(piece[-1])
    return 0.5 * (out + np.transpose(out, (0, 2, 1)))


def blowup_limit(model: Model, cov0: Any) -> tuple[float, np.ndarray]:
    """The blow-up time ``t*`` and the limit direction ``u`` of ``Sigma(t) / tr Sigma(t)``.

    Noise-free softmax with ``V = v I`` (:func:`interaction_matrix`): ``Sigma(t) = (Sigma_0^{-1}
    - M t)^{-1}``, ``M = v (A + A^T)`` (docs/gaussian.md section 3). With ``M w_k = lambda_k
    Sigma_0^{-1} w_k`` (generalised eigenvectors, ``w_k^T Sigma_0^{-1} w_l = delta_kl``),
    ``Sigma(t) = sum_k w_k w_k^T / (1 - lambda_k t)``: the term of the largest ``lambda_1 > 0``
    diverges at ``t* = 1/lambda_1`` and ``Sigma / tr Sigma -> u u^T``, ``u = w_1 / |w_1|``,
    a rank-one projector (docs/equations.md section 8.2). ``u`` is the top eigenvector of
    ``A + A^T`` itself only when ``Sigma_0`` is a multiple of ``I`` (or commutes with ``M``).

    Returns:
        ``(t*, u)``; ``(inf, nan vector)`` when ``M`` has no positive eigenvalue (no blow-up).
    """
    from scipy.linalg import eigh

    cov = np.asarray(cov0, dtype=float)
    d = cov.shape[0]
    if model.noise:
        msg = f"blowup_limit is the noise-free closed form, got noise = {model.noise!r}"
        raise ValueError(msg)
    v, a = interaction_matrix(model, d)
    lam, w = eigh(v * (a + a.T), np.linalg.inv(cov))
    if lam[-1] <= 0:
        return float("inf"), np.full(d, np.nan)
    u = w[:, -1] / np.linalg.norm(w[:, -1])
    return float(1.0 / lam[-1]), u * np.sign(u[np.argmax(np.abs(u))])


def noisy_fixed_point(model: Model, d: int) -> np.ndarray:
    """The fixed point ``(m, Sigma) = (0, Sigma*)`` of the noisy Gaussian ODE (softmax, ``V = v I``,
    noise ``sigma > 0``): ``Sigma* = sigma^{1/2} R^{-1}`` with ``R = (-v S)^{1/2}``,
    ``S = (A + A^T)/2`` (docs/equations.md section 8.2). It exists iff ``-v S`` is positive
    definite (repulsive ``v = -1`` with ``S > 0``, or attractive with ``S < 0``, e.g. ``K = -Q``).

    Raises:
        ValueError: no noise, or ``-v S`` not positive definite (then no Gaussian steady state).
    """
    if not model.noise > 0:
        msg = f"noisy_fixed_point needs noise > 0, got {model.noise!r}"
        raise ValueError(msg)
    v, a = interaction_matrix(model, d)
    lam, vec = np.linalg.eigh(-v * 0.5 * (a + a.T))
    if lam[0] <= 0:
        msg = (f"no Gaussian fixed point: -v (A + A^T)/2 must be positive definite, its smallest "
               f"eigenvalue is {lam[0]:.6g} (v = {v:g})")
        raise ValueError(msg)
    return (vec * (np.sqrt(model.noise) / np.sqrt(lam))) @ vec.T


def linearised_spectrum(model: Model, d: int) -> dict[str, np.ndarray]:
    """The exact spectrum of the Gaussian ODE linearised at :func:`noisy_fixed_point`.

    The Jacobian is block-triangular (the mean vanishes at the fixed point):

    * mean block: ``v (I + Sigma* A)`` (``d`` eigenvalues, possibly complex);
    * covariance block, on symmetric ``delta``: ``delta' = -2 sigma^{1/2} (R delta + delta R)``,
      eigenvalues ``-2 sigma^{1/2} (r_i + r_j)``, ``i <= j``, ``r_i`` those of ``R`` (``d(d+1)/2``;
      all negative: the covariance is always attracted).

    Returns:
        ``{"mean": complex (d,), "cov": (d(d+1)/2,)}``, each sorted by real part.
    """
    v, a = interaction_matrix(model, d)
    sigma_star = noisy_fixed_point(model, d)
    mean = np.linalg.eigvals(v * (np.eye(d) + sigma_star @ a))
    r = np.linalg.eigvalsh(-v * 0.5 * (a + a.T)) ** 0.5
    i, j = np.triu_indices(d)
    cov = -2.0 * np.sqrt(model.noise) * (r[i] + r[j])
    return {"mean": mean[np.argsort(mean.real)], "cov": np.sort(cov)}



__all__ += ["blowup_limit", "interaction_matrix", "linearised_spectrum", "noisy_fixed_point"]
