"""The Gaussian reduction in ``R^d``: mean and covariance ODEs (docs/equations.md section 4).

.. autosummary::
   affine_field
   gaussian_rhs
   solve_gaussian
   BlowUpError
   GaussianFlowError
   GAUSSIAN_KINDS

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

import time as _time
from typing import Any

import numpy as np
import xarray as xr
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, OdeSolver, Radau, solve_ivp

from meanfield import attention
from meanfield.arguments import output_times
from meanfield.integrate import IntegrationError, Solution, StopReason, finish, result_attrs
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
        self.partial = partial


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


METHODS: dict[str, type[OdeSolver]] = {c.__name__: c for c in (DOP853, RK45, RK23, Radau, BDF,
                                                                LSODA)}
"""The ``solve_ivp`` methods :func:`solve_gaussian` takes, by name."""


def _recording(base: type[OdeSolver], times: np.ndarray, kept: dict[int, np.ndarray]
               ) -> type[OdeSolver]:
    """``base`` that also keeps, after each accepted step, the states at the output times it
    passed (``kept[k]``, from the step's own interpolant, as ``solve_ivp``'s ``t_eval``) and
    the last accepted state (``kept[-1] = [t, *y]``): what an interrupt inside ``solve_ivp``,
    which keeps nothing, leaves to the partial result."""

    class Recording(base):  # type: ignore[valid-type,misc]
        def step(self) -> str | None:
            message = super().step()
            if self.status == "failed":
                return message
            t_old, t_new = self.t_old, self.t
            k = len(kept) - (-1 in kept)  # the next output time not kept
            interp = None
            while k < times.size and times[k] <= t_new:
                if times[k] == t_new or t_old is None:
                    kept[k] = np.array(self.y, copy=True)
                else:
                    if interp is None:
                        interp = self.dense_output()
                    kept[k] = np.asarray(interp(times[k]), dtype=float)
                k += 1
            kept[-1] = np.concatenate([[t_new], self.y])
            return message

    Recording.__name__ = base.__name__
    return Recording


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


def solve_gaussian(model: Model | Schedule, mean0: Any, cov0: Any, t: Any, *, rtol: float = 1e-10,
                   atol: float = 1e-12, method: str = "DOP853",
                   max_eigenvalue: float | None = None, throw: bool = True) -> xr.Dataset:
    """Evolve ``N(mean0, cov0)`` under the mean-field flow of ``model`` (docs/equations.md section 4).

    Args:
        model: softmax, L2 or Sinkhorn attention, any ``Q, K, V``, ``heads``, ``beta``,
            ``value`` and ``noise``.
        mean0: initial mean, shape ``(d,)``.
        cov0: initial covariance, symmetric positive definite, shape ``(d, d)``.
        t: strictly increasing output times; ``t[0]`` is the initial time.
        rtol, atol: tolerances of ``scipy.integrate.solve_ivp`` on ``(m, L)``, ``Sigma = L L^T``.
        method: a ``solve_ivp`` method named in :data:`METHODS` (``"DOP853"``, ``"RK45"``,
            ``"Radau"``, ...).
        max_eigenvalue: blow-up threshold on the largest eigenvalue of ``Sigma``; default
            ``1e10 * max(1, largest eigenvalue of cov0)``.
        throw: raise :class:`BlowUpError` (or :class:`GaussianFlowError`) on failure; if
            False, return the partial Dataset with ``attrs["successful"] == 0``.

    Returns:
        ``xarray.Dataset`` with ``mean`` (time, dim) and ``cov`` (time, dim, dim_); ``attrs``
        follow the result schema (:data:`meanfield.integrate.RESULT_ATTRS`; the initial
        state, the method and, after a blow-up, ``blowup_time`` in ``settings``).

    Raises:
        meanfield.integrate.Interrupted: on ``KeyboardInterrupt``; its ``.dataset`` holds the
            output times passed up to the last accepted step (``t_reached``), ``successful = 0``.
        ValueError: bad input (shapes, a covariance that is not symmetric positive definite,
            an attention kind without a Gaussian reduction, a model of another dimension).
        BlowUpError: finite-time blow-up (the partial Dataset is its ``partial``).

    A :class:`meanfield.schedule.Schedule` of models is run piece by piece
    (:func:`meanfield.schedule.run_schedule`): ``solve_ivp`` stops at each switch and the next
    piece starts from ``(m, Sigma)`` there; ``max_eigenvalue`` defaults from ``cov0``.
    """
    if isinstance(model, Schedule):
        for piece in model.models:
            _check_model(piece)
        if max_eigenvalue is None:
            cov_checked = _check_state(model.models[0], mean0, cov0)[1]
            max_eigenvalue = 1e10 * max(1.0, float(np.linalg.eigvalsh(cov_checked)[-1]))
        return run_schedule(
            model, t, (mean0, cov0),
            lambda m, tt, s: solve_gaussian(m, s[0], s[1], tt, rtol=rtol, atol=atol, method=method,
                                            max_eigenvalue=max_eigenvalue, throw=throw),
            lambda ds: (ds["mean"].values[-1], ds["cov"].values[-1]))
    _check_model(model)
    mean, cov, factor = _check_state(model, mean0, cov0)
    times = _check_times(t)
    if method not in METHODS:
        msg = f"method must be one of {', '.join(METHODS)}, got {method!r}"
        raise ValueError(msg)
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not (np.isfinite(tol) and tol > 0):
            msg = f"{name} must be finite and > 0, got {tol!r}"
            raise ValueError(msg)
    d = mean.shape[0]
    lam0 = float(np.linalg.eigvalsh(cov)[-1])
    threshold = 1e10 * max(1.0, lam0) if max_eigenvalue is None else float(max_eigenvalue)
    if not threshold > lam0:
        msg = (f"max_eigenvalue = {threshold!r} must exceed the largest eigenvalue of cov0, "
               f"{lam0:.6g}")
        raise ValueError(msg)
    sigma = model.noise

    def split(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return y[:d], y[d:].reshape(d, d)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        m, lf = split(y)
        b, big_b = affine_field(model, m, lf @ lf.T)
        dl = big_b @ lf
        if sigma > 0:
            # d(L L^T) = B S + S B^T + 2 sigma I with L' = B L + sigma L^{-T}
            dl = dl + sigma * np.linalg.inv(lf).T
        return np.concatenate([b + big_b @ m, dl.ravel()])

    log_thr = np.log(threshold)

    def blowup(_t: float, y: np.ndarray) -> float:
        lf = split(y)[1]
        s = np.linalg.norm(lf, 2)
        return 2.0 * np.log(s) - log_thr if np.isfinite(s) and s > 0 else 1.0

    blowup.terminal = True  # type: ignore[attr-defined]
    blowup.direction = 1.0  # type: ignore[attr-defined]

    y0 = np.concatenate([mean, factor.ravel()])
    settings: dict[str, Any] = {
        "method": method, "form": "factor Sigma = L L^T", "max_eigenvalue": threshold,
        "mean0": mean.tolist(), "cov0": cov.tolist(),
        "reference": "docs/equations.md section 4; docs/gaussian.md",
    }
    start = _time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):
        start_finite = bool(np.all(np.isfinite(rhs(float(times[0]), y0))))
    if times.size == 1 or not start_finite:
        sol_t, sol_y, status, events = times[:1], y0[:, None], 0 if start_finite else -1, None
        message = ("single time" if start_finite else
                   f"{StopReason.OVERFLOW.value}: the field is non-finite at the start, t = "
                   f"{float(times[0]):.6g} (beta = {model.beta:g})")
        nfev = nsteps = 0
    else:
        kept: dict[int, np.ndarray] = {0: y0}
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                sol = solve_ivp(rhs, (times[0], times[-1]), y0, t_eval=times,
                                method=_recording(METHODS[method], times, kept),
                                rtol=rtol, atol=atol, events=blowup, dense_output=True)
        except KeyboardInterrupt:  # the output times passed, up to the last accepted step
            wall = _time.perf_counter() - start
            t_last = float(kept[-1][0]) if -1 in kept else float(times[0])
            reached = sorted(k for k in kept if k >= 0)
            ys_kept = np.array([kept[k] for k in reached])
            lf_kept = ys_kept[:, d:].reshape(-1, d, d)
            cov_kept = lf_kept @ np.transpose(lf_kept, (0, 2, 1))
            cov_kept = 0.5 * (cov_kept + np.transpose(cov_kept, (0, 2, 1)))
            cov_kept[0] = cov
            ended = Solution(StopReason.INTERRUPTED, "", t_last, y0, None, wall_time_s=wall)
            partial = _dataset(model, times[reached], ys_kept[:, :d], cov_kept, result_attrs(
                title="meanfield solve_gaussian", solver="meanfield.solve_gaussian",
                model=model.to_json(), settings=settings, scheme=f"scipy-{method}",
                controller="scipy", rtol=rtol, atol=atol, dt=None, stats={},
                stop_reason=(f"{ended.message} at t = {t_last:.6g} (the last accepted step; "
                             f"{len(reached)} of {times.size} output times reached)"),
                successful=False, t_reached=t_last, wall_time_s=wall))
            return finish(ended, partial, name="solve_gaussian")
        sol_t, status, message, nfev = np.asarray(sol.t, dtype=float), sol.status, sol.message, sol.nfev
        sol_y = np.asarray(sol.y, dtype=float).reshape(y0.size, -1)
        if sol_t.size == 0:  # stopped before the first output: keep the initial state
            sol_t, sol_y = times[:1], y0[:, None]
        nsteps = len(sol.sol.ts) - 1 if sol.sol is not None else 0
        events = sol
    ys = sol_y.T
    means = ys[:, :d]
    lfs = ys[:, d:].reshape(-1, d, d)
    covs = lfs @ np.transpose(lfs, (0, 2, 1))
    covs = 0.5 * (covs + np.transpose(covs, (0, 2, 1)))  # exactly symmetric
    if len(sol_t):
        covs[0] = cov  # the first output time is the initial time: return the input exactly
    wall = _time.perf_counter() - start
    stats = {"num_steps": int(nsteps), "num_accepted": int(nsteps), "num_evaluations": int(nfev)}

    def attrs(stop_reason: str, successful: bool, t_reached: float) -> dict[str, Any]:
        return result_attrs(
            title="meanfield solve_gaussian", solver="meanfield.solve_gaussian",
            model=model.to_json(), settings=settings, scheme=f"scipy-{method}",
            controller="scipy", rtol=rtol, atol=atol, dt=None, stats=stats,
            stop_reason=stop_reason, successful=successful, t_reached=t_reached,
            wall_time_s=wall)

    if status == 0:
        return _dataset(model, sol_t, means, covs,
                        attrs(StopReason.SUCCESS.value, True, float(sol_t[-1])))

    # failure: blow-up (terminal event) or the integrator gave up
    if status == 1 and events is not None and len(events.t_events[0]):
        t_stop = float(events.t_events[0][0])
        m_stop, l_stop = split(events.y_events[0][0])
    elif events is not None and events.sol is not None and nsteps > 0:
        # the integrator gave up: the last accepted step ends where its interpolant does
        t_stop = float(events.sol.t_max)
        m_stop, l_stop = split(events.sol(t_stop))
    else:
        t_stop = float(times[0])
        m_stop, l_stop = split(y0)
    c_stop = 0.5 * (l_stop @ l_stop.T + (l_stop @ l_stop.T).T)
    with np.errstate(over="ignore", invalid="ignore"):
        finite = bool(np.all(np.isfinite(c_stop)))
        if finite:
            lam, vec = np.linalg.eigh(c_stop)
        else:
            lam, vec = np.array([np.inf]), np.full((d, 1), np.nan)
    lam_max, v_max = float(lam[-1]), vec[:, -1]
    t_star = float("nan")
    if np.isfinite(lam_max):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing field: rate NaN
            dm, dc = gaussian_rhs(model, m_stop, c_stop)
            rate = float(v_max @ dc @ v_max)  # d lambda_max / dt (Hellmann-Feynman)
        t_star = t_stop + lam_max / rate if rate > 0 else float("inf")
    # a pole: the threshold was crossed, or the step size collapsed just before t*
    near_pole = t_star - t_stop <= 1e-6 * max(1.0, abs(t_stop))
    blown = status == 1 or not np.isfinite(lam_max) or lam_max > threshold or near_pole
    if blown:
        reason = (f"finite-time blow-up: the largest eigenvalue of the covariance reached "
                  f"{lam_max:.6g} (threshold {threshold:.3g}) at t = {t_stop:.12g}, along "
                  f"{np.array2string(v_max, precision=4)}; extrapolated blow-up time "
                  f"t* = {t_star:.12g}")
        if status == -1:
            reason += f" (the integrator stopped: {message})"
    elif not start_finite:
        reason = message
    else:
        reason = f"the integrator stopped at t = {t_stop:.12g}: {message}"
    settings.update(stop_time=t_stop, blowup_time=t_star)
    partial = _dataset(model, sol_t, means, covs, attrs(reason, False, t_stop))
    ended = Solution(StopReason.BLOWUP if blown else StopReason.STEP_TOO_SMALL, reason, t_stop,
                     y0, None, num_steps=int(nsteps), num_accepted=int(nsteps),
                     num_evaluations=int(nfev), wall_time_s=wall)

    def error(msg: str, result: Any, t_reached: float, why: StopReason) -> GaussianFlowError:
        if blown:
            return BlowUpError(msg, time=t_reached, mean=m_stop, cov=c_stop, partial=result,
                               eigenvalue=lam_max, eigenvector=v_max, blowup_time=t_star)
        return GaussianFlowError(msg, time=t_reached, mean=m_stop, cov=c_stop, partial=result,
                                 reason=why)

    return finish(ended, partial, name="solve_gaussian", error=error, throw=throw)


__all__ = [
    "GAUSSIAN_KINDS",
    "METHODS",
    "BlowUpError",
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
