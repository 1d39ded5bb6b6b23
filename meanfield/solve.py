"""``solve``: evolve a density under the mean-field flow, adaptively and watchfully.

.. autosummary::
   solve
   StopReason
   ResolutionError

Lawson (integrating-factor) Runge–Kutta: the diffusion ``sigma Laplacian`` is diagonal in
the spectral basis and integrated exactly (``exp(sigma L dt)``); the drift by an explicit
embedded scheme (Dormand–Prince 5(4) by default) under a PI step-size controller and a CFL
bound ``dt <= cfl * min_spacing / max|X|``.

After every accepted step a resolution monitor checks the spectral tail (largest coefficient
in the top third of degrees, relative to the mean) and the minimum of the density. If either
shows that the grid no longer resolves the solution, the resolution is doubled (exact
zero-padding of the coefficients) up to ``max_resolution``; past it the solve stops with
:class:`ResolutionError`, which names the time reached and the quantity that failed and
carries the partial results (also written to ``out`` when given).
"""

from __future__ import annotations

import enum
import math
import time as _time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import xarray as xr

from .checks import finite, output_times
from .controller import ConstantStep, PIController, rms_norm
from .domains.base import Domain
from .flow import Flow, make_flow
from .model import Model
from .tableaus import ButcherTableau, get_scheme
from .trackers import FinishedSimulation, ProgressTracker, Tracker


class StopReason(enum.Enum):
    """Why a solve ended; the values are readable messages."""

    SUCCESS = "reached the final time"
    FINISHED_EARLY = "a tracker ended the solve early"
    UNRESOLVED = "the grid no longer resolves the solution at the largest allowed resolution"
    MAX_STEPS = "the maximum number of steps was reached"
    STEP_TOO_SMALL = "the step size fell below its minimum"
    NON_FINITE = "the solution became non-finite"
    INTERRUPTED = "interrupted by the user"


class ResolutionError(RuntimeError):
    """The solve could not continue; ``.dataset`` holds the results up to ``.t``."""

    def __init__(self, msg: str, dataset: xr.Dataset | None, t: float, reason: StopReason) -> None:
        super().__init__(msg)
        self.dataset = dataset
        self.t = t
        self.reason = reason


def check_density(domain: Domain, rho: Any, *, negative_tol: float = 1e-10) -> np.ndarray:
    """Validate an initial density on ``domain``'s grid; return it normalised to mass 1.

    Raises ``ValueError`` if it is not finite, has the wrong shape, is negative beyond
    ``negative_tol * max(rho)``, or integrates to zero.
    """
    if callable(rho):
        grid = domain.grid
        if isinstance(grid, tuple):  # tensor grid: broadcastable coordinate arrays
            rho = rho(*np.meshgrid(*grid, indexing="ij", sparse=True))
        else:
            rho = rho(grid)
    rho = np.array(rho, dtype=float)
    if rho.shape != domain.grid_shape:
        if rho.ndim == 0:
            rho = np.full(domain.grid_shape, float(rho))
        else:
            msg = f"rho0 must have the grid's shape {domain.grid_shape}, got {rho.shape}"
            raise ValueError(msg)
    finite(rho, "rho0")
    top = float(np.max(np.abs(rho)))
    if float(np.min(rho)) < -negative_tol * top:
        msg = f"rho0 is negative (min {float(np.min(rho)):.3g}); a density must be >= 0"
        raise ValueError(msg)
    mass = float(domain.integrate(rho))
    if not mass > 0 or top == 0.0:
        msg = f"rho0 integrates to {mass:.3g}; a density needs a positive mass to normalise"
        raise ValueError(msg)
    return rho / mass


class _Stepper:
    """One Lawson Runge–Kutta step for ``c' = L c + N(c)`` with diagonal ``L``."""

    def __init__(self, flow: Flow, tableau: ButcherTableau) -> None:
        self.flow = flow
        self.tab = tableau
        self.L = flow.linear
        self.has_linear = bool(np.any(self.L))

    def _E(self, x: float, h: float, cache: dict[float, Any]) -> Any:
        if not self.has_linear or x == 0.0:
            return 1.0
        if x not in cache:
            cache[x] = np.exp(self.L * (x * h))
        return cache[x]

    def step(self, c: np.ndarray, k1: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``(c_new, error, k_last)``; ``k_last = N(c_new)`` for FSAL schemes."""
        tab = self.tab
        cache: dict[float, Any] = {}
        ks = [k1]
        s = tab.stages
        for i in range(1, s):
            ci = tab.c[i]
            u = self._E(ci, h, cache) * c
            for j in range(i):
                a = tab.a[i, j]
                if a:
                    u = u + (h * a) * (self._E(ci - tab.c[j], h, cache) * ks[j])
            if tab.fsal and i == s - 1:
                new = u
            ks.append(self.flow.drift(u))
        if not tab.fsal:
            new = self._E(1.0, h, cache) * c
            for j in range(s):
                if tab.b[j]:
                    new = new + (h * tab.b[j]) * (self._E(1.0 - tab.c[j], h, cache) * ks[j])
        err = None
        if tab.b_error is not None:
            err = 0.0
            for j in range(s):
                if tab.b_error[j]:
                    err = err + (h * tab.b_error[j]) * (self._E(1.0 - tab.c[j], h, cache) * ks[j])
        return new, err, (ks[-1] if tab.fsal else None)


def _diagnostics(flow: Flow, c: np.ndarray) -> tuple[float, float, float]:
    """Energy, dissipation, mass. For USA at ``beta`` beyond ~350 the dissipation
    ``~ e^{2 beta}`` exceeds the float64 range and is reported as ``inf``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return flow.energy(c), flow.dissipation(c), flow.domain.mass(c)


def solve(
    model: Model,
    domain: Domain,
    rho0: np.ndarray | Callable[..., np.ndarray],
    t: Sequence[float] | np.ndarray,
    *,
    form: str = "continuity",
    scheme: str | ButcherTableau = "dopri5",
    controller: PIController | ConstantStep | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    cfl: float = 0.5,
    dt0: float | None = None,
    max_resolution: int | None = None,
    tail_tol: float = 1e-10,
    negative_tol: float = 1e-10,
    filter_order: int | None = None,
    max_steps: int = 1_000_000,
    trackers: Iterable[Tracker] = (),
    progress: bool = False,
    throw: bool = True,
    out: str | Path | None = None,
) -> xr.Dataset:
    """Evolve ``rho0`` under ``model`` on ``domain``; densities saved at the times ``t``.

    Args:
        model: the attention model (SA or USA, ``Q = K = I``, ``V = +-I``, noise).
        domain: the spectral domain (its resolution is the starting one).
        rho0: density values on ``domain.grid`` or a callable of the grid (re-evaluated if
            the grid is refined before the start); normalised to mass 1.
        t: output times, strictly increasing; ``t[0]`` is the start time.
        form: ``"continuity"`` (velocity of (3.4)) or ``"gradient"`` (energy + metric).
        scheme: ``"dopri5"`` (default), ``"bosh3"`` or ``"rk4"`` (fixed step), or a tableau.
        controller: step-size control; default ``PIController(rtol, atol)`` with
            ``rtol = 1e-8``, ``atol = 1e-12`` unless given. ``ConstantStep(dt)`` for fixed steps.
        cfl: CFL number for ``dt <= cfl * min_spacing / max|X|``.
        max_resolution: the largest resolution refinement may reach (default: 8 times the
            starting one); ``max_resolution = domain.resolution`` disables refinement.
        tail_tol, negative_tol: resolution monitor thresholds (spectral tail relative to the
            mean coefficient; negative density relative to its maximum).
        filter_order: apply the exponential l-only filter of this order after each step.
        trackers: hooks (see :mod:`meanfield.trackers`).
        progress: show a tqdm progress bar.
        throw: raise :class:`ResolutionError` on failure (else return the partial Dataset
            with ``attrs["successful"] = 0``).
        out: if given, the result (partial on failure or interruption) is written there.

    Returns:
        ``xarray.Dataset`` with ``density`` (time, *domain.dims), ``energy``,
        ``dissipation``, ``mass`` and ``resolution`` (time), and the settings in ``attrs``.
    """
    wall0 = _time.perf_counter()
    times = output_times(t)
    tab = get_scheme(scheme)
    if controller is None:
        if tab.adaptive:
            controller = PIController(rtol=1e-8 if rtol is None else rtol,
                                      atol=1e-12 if atol is None else atol)
        else:
            msg = f"scheme {tab.name!r} has no error estimate: pass controller=ConstantStep(dt)"
            raise ValueError(msg)
    elif rtol is not None or atol is not None:
        msg = "give either controller or rtol/atol, not both"
        raise ValueError(msg)
    if controller.adaptive and not tab.adaptive:
        msg = f"scheme {tab.name!r} has no error estimate: use controller=ConstantStep(dt)"
        raise ValueError(msg)
    if not (math.isfinite(cfl) and cfl > 0):
        msg = f"cfl must be finite and > 0, got {cfl!r}"
        raise ValueError(msg)
    max_res = 8 * domain.resolution if max_resolution is None else int(max_resolution)
    if max_res < domain.resolution:
        msg = f"max_resolution={max_res} is below the domain's resolution {domain.resolution}"
        raise ValueError(msg)
    make_flow(model, domain, form)  # validates the model for the PDE before any work

    # -- the initial state, refined until resolved (callables only) ------------------
    start_domain = domain
    while True:
        rho = check_density(domain, rho0, negative_tol=negative_tol)
        c = domain.forward(rho)
        tail0 = domain.tail(c)
        if tail0 <= tail_tol:
            break
        if not callable(rho0) or domain.resolution * 2 > max_res:
            msg = (
                f"rho0 is not resolved at resolution {domain.resolution}: spectral tail "
                f"{tail0:.3g} > tail_tol={tail_tol:g}; give rho0 as a callable of the grid, "
                "a finer domain, or a larger tail_tol"
            )
            raise ValueError(msg)
        domain = domain.with_resolution(domain.resolution * 2)

    flow = make_flow(model, domain, form)
    stepper = _Stepper(flow, tab)
    filt = None if filter_order is None else domain.exponential_filter(filter_order)
    trackers = list(trackers)
    if progress:
        trackers.append(ProgressTracker(desc=f"solve {domain.name}"))
    for tr in trackers:
        tr.initialize(float(times[0]), float(times[-1]))

    saved: list[tuple[float, np.ndarray, Domain, tuple[float, float, float]]] = []
    saved.append((float(times[0]), c.copy(), domain, _diagnostics(flow, c)))
    state = controller.init()
    stats = {"num_steps": 0, "num_accepted": 0, "num_rejected": 0, "num_refinements": 0}
    reason = StopReason.SUCCESS
    detail = ""
    tnow = float(times[0])
    k1 = flow.drift(c)
    if isinstance(controller, ConstantStep):
        dt = controller.dt
    elif dt0 is not None:
        dt = float(dt0)
    else:  # Hairer–Norsett–Wanner's first guess: 0.01 ||y|| / ||f||
        scale = controller.atol + controller.rtol * np.abs(c)
        d0 = rms_norm(c / scale)
        d1 = rms_norm((k1 + flow.linear * c) / scale)
        dt = 0.01 * d0 / d1 if d1 > 1e-300 else 1e-6 * max(times[-1] - times[0], 1.0)
    min_dt = 1e-13 * max(abs(times[-1]), abs(times[0]))
    last_ok = (tnow, c.copy(), domain, saved[0][3])

    try:
        for t_target in times[1:]:
            while tnow < t_target:
                speed = flow.max_speed  # computed on demand by fused drifts: read once
                cfl_dt = cfl * domain.min_spacing / speed if speed > 0 else np.inf
                h = min(dt, cfl_dt, t_target - tnow)
                if t_target - (tnow + h) < 1e-10 * h:
                    h = t_target - tnow
                if h < min_dt and t_target - tnow > min_dt:
                    reason = StopReason.STEP_TOO_SMALL
                    detail = f"dt = {h:.3g} at t = {tnow:.6g}"
                    raise _Stop
                stats["num_steps"] += 1
                if stats["num_steps"] > max_steps:
                    reason = StopReason.MAX_STEPS
                    detail = f"max_steps={max_steps} reached at t = {tnow:.6g}"
                    raise _Stop
                new, err, k_last = stepper.step(c, k1, h)
                if controller.adaptive:
                    error = controller.error_norm(err, c, new)
                    if not math.isfinite(error):
                        error = 1e10
                    accept, dt = controller.adapt(error, h, tab.error_order, state)
                else:
                    accept, dt = True, controller.dt
                if not accept:
                    stats["num_rejected"] += 1
                    continue
                if not np.all(np.isfinite(new)):
                    reason = StopReason.NON_FINITE
                    detail = f"non-finite coefficients at t = {tnow + h:.6g}"
                    raise _Stop
                tnow = t_target if h == t_target - tnow else tnow + h
                c = new
                stats["num_accepted"] += 1
                if filt is not None:
                    c = c * filt
                    k_last = None
                # -- resolution monitor -------------------------------------------------
                problem = _unresolved(domain, c, tail_tol, negative_tol)
                refined = False
                while problem is not None:
                    if refined and problem.startswith("density is negative"):
                        # prolongation cannot lift a negative value: refine once per step
                        # and let the finer grid's next steps decide
                        break
                    if domain.resolution * 2 > max_res:
                        reason = StopReason.UNRESOLVED
                        detail = (
                            f"at t = {tnow:.6g} the {problem} at resolution "
                            f"{domain.resolution} (max_resolution={max_res}); results are "
                            f"kept up to the last resolved time t = {last_ok[0]:.6g}"
                        )
                        raise _Stop
                    fine = domain.with_resolution(domain.resolution * 2)
                    c = fine.prolong(c, domain)
                    domain = fine
                    flow = make_flow(model, domain, form)
                    stepper = _Stepper(flow, tab)
                    filt = None if filter_order is None else domain.exponential_filter(filter_order)
                    k_last = None
                    stats["num_refinements"] += 1
                    refined = True
                    problem = _unresolved(domain, c, tail_tol, negative_tol)
                k1 = k_last if k_last is not None else flow.drift(c)
                last_ok = (tnow, c.copy(), domain, None)
                for tr in trackers:
                    tr.handle(tnow, c, domain)
            saved.append((tnow, c.copy(), domain, _diagnostics(flow, c)))
    except _Stop:
        pass
    except FinishedSimulation as exc:
        reason = StopReason.FINISHED_EARLY
        detail = str(exc)
        saved.append((tnow, c.copy(), domain, _diagnostics(flow, c)))
    except KeyboardInterrupt:
        reason = StopReason.INTERRUPTED
        detail = f"interrupted at t = {tnow:.6g}"
        ds = _assemble(saved, last_ok, model, start_domain, form, tab, controller, stats,
                       reason, detail, wall0, cfl, tail_tol, negative_tol, max_res)
        if out is not None:
            from .io import write_netcdf

            write_netcdf(ds, out)
        raise
    finally:
        for tr in trackers:
            tr.finalize({"reason": reason, "t": tnow, **stats})

    ds = _assemble(saved, last_ok, model, start_domain, form, tab, controller, stats, reason,
                   detail, wall0, cfl, tail_tol, negative_tol, max_res)
    if out is not None:
        from .io import write_netcdf

        write_netcdf(ds, out)
    if reason not in (StopReason.SUCCESS, StopReason.FINISHED_EARLY) and throw:
        msg = f"{reason.value}: {detail}"
        raise ResolutionError(msg, ds, float(last_ok[0]), reason)
    return ds


class _Stop(Exception):
    pass


def _unresolved(domain: Domain, c: np.ndarray, tail_tol: float, negative_tol: float) -> str | None:
    tail = domain.tail(c)
    if not tail <= tail_tol:
        return f"spectral tail {tail:.3g} exceeds tail_tol={tail_tol:g}"
    rho = domain.backward(c)
    lo, hi = float(np.min(rho)), float(np.max(np.abs(rho)))
    if lo < -negative_tol * hi:
        return f"density is negative (min {lo:.3g}, below -negative_tol*max = {-negative_tol * hi:.3g})"
    return None


def _assemble(saved, last_ok, model, start_domain, form, tab, controller, stats, reason,
              detail, wall0, cfl, tail_tol, negative_tol, max_res) -> xr.Dataset:
    entries = list(saved)
    if last_ok[0] > entries[-1][0]:
        t_ok, c_ok, dom_ok, _ = last_ok
        entries.append((t_ok, c_ok, dom_ok, _diagnostics(make_flow(model, dom_ok, form), c_ok)))
    final = max((e[2] for e in entries), key=lambda d: d.resolution)
    dens = np.stack([final.backward(final.prolong(c, dom)) for _, c, dom, _ in entries])
    tvals = np.array([e[0] for e in entries])
    diag = np.array([e[3] for e in entries], dtype=float)
    dims = ("time",) + tuple(final.dims)
    coords: dict[str, Any] = {"time": ("time", tvals, {"long_name": "time", "units": "1"})}
    for name, values in final.coords.items():
        coords[name] = (name, np.asarray(values))
    ds = xr.Dataset(
        {
            "density": (dims, dens, {"long_name": "density w.r.t. surface measure", "units": "1/area"}),
            "energy": ("time", diag[:, 0], {"long_name": "interaction energy E_beta (docs/equations.md (3.5), -1 convention)"}),
            "dissipation": ("time", diag[:, 1], {"long_name": "dE/dt predicted by the dissipation identity"}),
            "mass": ("time", diag[:, 2], {"long_name": "total mass"}),
            "resolution": ("time", np.array([e[2].resolution for e in entries]), {"long_name": "resolution in use"}),
        },
        coords=coords,
    )
    from . import __version__

    ds.attrs.update(
        {
            "title": f"meanfield solve on {final.name}",
            "model": model.to_json(),
            "domain": final.state_json(),
            "initial_domain": start_domain.state_json(),
            "form": form,
            "scheme": tab.name,
            "controller": type(controller).__name__,
            "rtol": float(controller.rtol) if controller.rtol is not None else -1.0,
            "atol": float(controller.atol) if controller.atol is not None else -1.0,
            "dt": float(getattr(controller, "dt", -1.0)),
            "cfl": float(cfl),
            "tail_tol": float(tail_tol),
            "negative_tol": float(negative_tol),
            "max_resolution": int(max_res),
            **{k: int(v) for k, v in stats.items()},
            "stop_reason": reason.value + (f": {detail}" if detail else ""),
            "successful": int(reason in (StopReason.SUCCESS, StopReason.FINISHED_EARLY)),
            "t_reached": float(last_ok[0]),
            "meanfield_version": __version__,
            "wall_time_s": float(_time.perf_counter() - wall0),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return ds


__all__ = ["ConstantStep", "PIController", "ResolutionError", "StopReason", "check_density", "solve"]
