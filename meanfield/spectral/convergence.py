r"""Numerical self-convergence of a PDE run: the study to do before trusting a solution.

.. autosummary::
   self_convergence
   convergence_table
   table_time
   diagnose

For a user's run (model, domain, initial density, output times) the study solves the same
problem

* at resolutions ``R, 2R, 4R, ...`` (refinement disabled: ``max_resolution = resolution``),
  with a tight time-integration tolerance, and
* at one resolution with tolerances ``rtol = tol_0 > tol_1 > ...``,

and reports, at every output time, the ``L^2`` differences between successive runs (all
compared on the finest grid through exact zero-padding of the coefficients), the difference
to the finest run, and the observed orders

.. math::  p_j = \log_2 \frac{\|u_{R_j} - u_{R_{j+1}}\|}{\|u_{R_{j+1}} - u_{R_{j+2}}\|},
           \qquad q_j = \frac{\log (\|u_{\tau_j} - u_{\tau_{j+1}}\| /
                                    \|u_{\tau_{j+1}} - u_{\tau_{j+2}}\|)}
                             {\log (\tau_j / \tau_{j+1})}.

A spectral discretisation of a smooth solution converges faster than any power of ``R``,
so ``p_j`` grows with ``R`` (until round-off); the time integration (error-per-step control
of an embedded pair, advancing with the higher order) has ``q ~ 1`` (tolerance
proportionality). Each resolution also reports ``t_resolved``: the last time its resolution
monitor (spectral tail, positivity; :func:`meanfield.solve`) accepted the solution, the time
up to which that resolution can be trusted (docs/equations.md section 3).

A study is only as good as its latest comparison: when the resolutions stop (their monitors
find them unresolved) before the final time, :func:`diagnose` says how far the study is
resolved and what to change (a finer starting resolution, an earlier final time, or a larger
``tail_tol``), and :func:`convergence_table` puts that first; when no two resolutions can be
compared after the start (all runs agree there to round-off, which says nothing) the command
prints no table at all and exits 1.
"""

from __future__ import annotations

import json
import math
import time as _time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import xarray as xr

from meanfield.domains.base import Domain
from meanfield.integrate import Interrupted, StopReason, result_attrs, setting_of
from meanfield.integrate.schema import summed_stats
from meanfield.io import domain_of
from meanfield.memory import check_solve_memory
from meanfield.model import Model
from meanfield.spectral.solve import UnresolvedStartError, solve


def _initial_on(domain: Domain, base: Domain, rho0: Any) -> Any:
    """``rho0`` for ``domain``: a callable as is; grid values of ``base`` zero-padded."""
    if callable(rho0):
        return rho0
    c = base.forward(np.asarray(rho0, dtype=float))
    return domain.backward(domain.prolong(c, base))


def _nan_coefficients(fine: Domain, n_times: int) -> np.ndarray:
    """``n_times`` rows of coefficients on ``fine``, all NaN (times a run did not reach)."""
    return np.full((n_times,) + np.shape(fine.forward(fine.uniform())), np.nan, dtype=complex)


def _coefficients_at(ds: xr.Dataset, fine: Domain, times: np.ndarray) -> np.ndarray:
    """Coefficients on ``fine`` at ``times`` (NaN rows where the run did not get there)."""
    out = _nan_coefficients(fine, times.size)
    have = np.asarray(ds["time"].values, dtype=float)
    ok = float(ds.attrs.get("t_reached", have[-1]))
    final = domain_of(ds)
    for i, t in enumerate(times):
        j = np.flatnonzero(np.isclose(have, t, rtol=0, atol=1e-12 * max(1.0, abs(t))))
        if j.size and t <= ok * (1 + 1e-12) + 1e-12:
            c = final.forward(np.asarray(ds["density"].values[j[0]], dtype=float))
            out[i] = fine.prolong(c, final)
    return out


def _norms(domain: Domain, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``||f_a - f_b||_{L^2}`` per time (rows)."""
    out = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        diff = a[i] - b[i]
        out[i] = math.sqrt(max(domain.inner(diff, diff), 0.0)) if np.all(np.isfinite(diff)) else np.nan
    return out


def _orders(diff: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """``log(diff_j / diff_{j+1}) / log(ratio_j)`` along axis 0 (NaN for the last one)."""
    out = np.full(diff.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(diff.shape[0] - 1):
            out[j] = np.log(diff[j] / diff[j + 1]) / math.log(ratio[j])
    return out


def self_convergence(
    model: Model,
    domain: Domain,
    rho0: np.ndarray | Callable[..., np.ndarray],
    t: Sequence[float] | np.ndarray,
    *,
    levels: int = 4,
    rtol: float = 1e-10,
    atol: float = 1e-14,
    tolerances: Sequence[float] = (1e-5, 1e-6, 1e-7, 1e-8),
    tolerance_resolution: int | None = None,
    form: str = "continuity",
    **solve_kwargs: Any,
) -> xr.Dataset:
    """Self-convergence of ``solve(model, domain, rho0, t)`` under refinement (docs/equations.md section 3).

    Args:
        model, domain, rho0, t: the run, as for :func:`meanfield.solve`; ``domain`` sets the
            coarsest resolution ``R``; ``rho0`` values are on ``domain``'s grid (or a callable
            of the grid).
        levels: number of resolutions ``R 2^j`` (at least 3 for an observed order).
        rtol, atol: time tolerances of the resolution study (tight, so that the spatial
            error dominates).
        tolerances: the ``rtol`` values of the tolerance study, decreasing (``atol =
            rtol * 1e-4``); empty to skip it.
        tolerance_resolution: resolution of the tolerance study (default: the coarsest
            resolution of the resolution study that stayed resolved to the final time, else
            the one resolved longest; runs at one resolution share their spatial error, so the
            differences measure the time integration alone).
        form: ``"continuity"`` or ``"gradient"``.
        solve_kwargs: passed on to :func:`meanfield.solve` (``scheme``, ``cfl``, ...).

    Returns:
        ``xarray.Dataset`` with dimensions ``resolution``, ``tolerance`` and ``time``:
        ``difference_resolution`` (to the next resolution), ``error_resolution`` (to the
        finest), ``order_resolution``, ``t_resolved``, ``steps_resolution``,
        ``resolution_needed`` (where a level stopped early, the resolution its monitor's
        estimate asks for: :meth:`Domain.degree_needed`) and their ``*_tolerance``
        counterparts; the ``attrs`` of the result schema
        (:data:`meanfield.integrate.RESULT_ATTRS`): ``rtol`` and ``atol`` of the resolution
        study, the runs' ``scheme`` and ``controller``, their step counters summed,
        ``t_reached`` the latest time a run reached, ``successful = 1`` once every run was
        made (a run that stopped early is data: ``t_resolved``), and in ``settings`` the
        coarsest ``domain``, ``tolerance_resolution``, ``form``, ``tail_tol`` and each
        resolution's ``stop_reasons``.

    Raises:
        meanfield.integrate.Interrupted: on ``KeyboardInterrupt``; its ``.dataset`` is the
            study of the runs finished (the others NaN, ``stop_reasons`` saying "not run"),
            with ``successful = 0`` and a ``stop_reason`` naming the runs not done.
    """
    tols = _check_study(levels, tolerances)
    wall0 = _time.perf_counter()
    times = np.atleast_1d(np.asarray(t, dtype=float))
    resolutions = [domain.resolution * 2**j for j in range(int(levels))]
    domains = [domain.with_resolution(r) for r in resolutions]
    check_solve_memory(domains[-1], times.size)  # the finest level, before the coarse ones run

    tail_tol = float(solve_kwargs.get("tail_tol", 1e-10))
    runs = _Runs(model, domain, rho0, times, form, solve_kwargs)
    by_resolution = _ResolutionStudy(resolutions, domains[-1])
    by_tolerance = _ToleranceStudy(tols)
    try:
        by_resolution.run(runs, domains, rtol, atol, tail_tol)
        if tolerance_resolution is not None:
            by_tolerance.domain = domain.with_resolution(int(tolerance_resolution))
        else:  # the coarsest level resolved to the end, else the one resolved longest
            by_tolerance.domain = by_resolution.longest_resolved(domains, times)
            if not np.isfinite(max(by_resolution.t_ok)):
                by_tolerance.skip()  # no level resolves the start: nothing to study (diagnose says so)
        by_tolerance.run(runs)
    except KeyboardInterrupt as exc:  # the finished runs kept, the others NaN and named
        msg = _interruption(by_resolution, by_tolerance)
        by_resolution.not_run(times.size)
        partial = _study(runs, by_resolution, by_tolerance, rtol, atol, tail_tol, wall0,
                         interrupted=msg)
        raise Interrupted(msg, partial) from exc
    return _study(runs, by_resolution, by_tolerance, rtol, atol, tail_tol, wall0)


def _check_study(levels: int, tolerances: Sequence[float]) -> np.ndarray:
    """The tolerances of the study as an array, after checking ``levels`` and them."""
    if int(levels) < 2:
        msg = f"levels must be >= 2, got {levels!r}"
        raise ValueError(msg)
    tols = np.asarray(list(tolerances), dtype=float)
    if tols.size and (np.any(tols <= 0) or np.any(np.diff(tols) >= 0)):
        msg = f"tolerances must be positive and strictly decreasing, got {list(tolerances)!r}"
        raise ValueError(msg)
    return tols


@dataclass
class _Runs:
    """What the two studies share: the problem (``domain`` the coarsest, on which ``rho0``
    is given) and the attrs of every run made, for the study's own."""

    model: Model
    domain: Domain
    rho0: Any
    times: np.ndarray
    form: str
    solve_kwargs: dict[str, Any]
    attrs: list[dict[str, Any]] = field(default_factory=list)

    def solve(self, dom: Domain, rtol: float, atol: float) -> xr.Dataset:
        """One run on ``dom`` with refinement disabled, its attrs kept."""
        ds = solve(self.model, dom, _initial_on(dom, self.domain, self.rho0), self.times,
                   rtol=rtol, atol=atol, max_resolution=dom.resolution, throw=False,
                   form=self.form, **self.solve_kwargs)
        self.attrs.append(dict(ds.attrs))
        return ds


@dataclass
class _ResolutionStudy:
    """The runs at resolutions ``R 2^j`` in order, compared on the finest grid ``fine``: a
    level whose start is not resolved, or that was not run, holds NaN coefficients."""

    resolutions: list[int]
    fine: Domain
    coefs: list[np.ndarray] = field(default_factory=list)
    t_ok: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    ok_flags: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    needed: list[int] = field(default_factory=list)

    def add(self, coefs: np.ndarray, t_ok: float, steps: int, ok: int, reason: str,
            needed: int) -> None:
        self.coefs.append(coefs)
        self.t_ok.append(t_ok)
        self.steps.append(steps)
        self.ok_flags.append(ok)
        self.reasons.append(reason)
        self.needed.append(needed)

    def run(self, runs: _Runs, domains: list[Domain], rtol: float, atol: float,
            tail_tol: float) -> None:
        for dom in domains:
            try:
                ds = runs.solve(dom, rtol, atol)
            except UnresolvedStartError as exc:  # rho0 itself is not resolved at this resolution
                self.add(_nan_coefficients(self.fine, runs.times.size), -math.inf, 0, 0, str(exc),
                         2 * dom.resolution)
                continue
            self.add(_coefficients_at(ds, self.fine, runs.times),
                     float(ds.attrs["t_reached"]), int(ds.attrs["num_accepted"]),
                     int(ds.attrs["successful"]), str(ds.attrs["stop_reason"]),
                     _needed(ds, tail_tol))

    def longest_resolved(self, domains: list[Domain], times: np.ndarray) -> Domain:
        """The coarsest level resolved to the final time, else the one resolved longest."""
        done = [j for j in range(len(domains)) if self.t_ok[j] >= times[-1] * (1 - 1e-12)]
        return domains[done[0] if done else int(np.argmax(self.t_ok))]

    def missing(self) -> list[int]:
        """The resolutions not run (yet)."""
        return self.resolutions[len(self.coefs):]

    def not_run(self, n_times: int) -> None:
        """Fill the levels not run (an interrupted study): NaN, named in ``reasons``."""
        for r in self.missing():
            self.add(_nan_coefficients(self.fine, n_times), math.nan, 0, 0,
                     f"not run (interrupted) at resolution {r}", 0)

    def variables(self, times: np.ndarray) -> dict[str, Any]:
        L = len(self.resolutions)
        diff_r = np.full((L, times.size), np.nan)
        err_r = np.full((L, times.size), np.nan)
        for j in range(L - 1):
            diff_r[j] = _norms(self.fine, self.coefs[j], self.coefs[j + 1])
            err_r[j] = _norms(self.fine, self.coefs[j], self.coefs[-1])
        order_r = _orders(diff_r, np.full(L, 2.0))
        return {
            "difference_resolution": (("resolution", "time"), diff_r, {
                "long_name": "L2 difference to the next resolution"}),
            "error_resolution": (("resolution", "time"), err_r, {
                "long_name": "L2 difference to the finest resolution"}),
            "order_resolution": (("resolution", "time"), order_r, {
                "long_name": ("observed order under resolution doubling, log2 of successive "
                              "difference ratios")}),
            "t_resolved": ("resolution", np.array(self.t_ok), {
                "long_name": "last time the resolution monitor accepted the solution"}),
            "successful_resolution": ("resolution", np.array(self.ok_flags)),
            "steps_resolution": ("resolution", np.array(self.steps)),
            "resolution_needed": ("resolution", np.array(self.needed), {
                "long_name": "resolution the monitor's estimate asks for where the level stopped early"}),
        }


@dataclass
class _ToleranceStudy:
    """The runs at tolerances ``rtol = tols[j]`` (``atol = rtol 1e-4``) on one grid,
    ``domain``; those not run are NaN."""

    tols: np.ndarray
    domain: Domain | None = None
    coefs: list[np.ndarray] = field(default_factory=list)
    steps: np.ndarray = field(init=False)
    t_ok: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.steps = np.zeros(self.tols.size, dtype=int)
        self.t_ok = np.full(self.tols.size, np.nan)

    def skip(self) -> None:
        """No tolerance study (no level of the resolution study resolves the start)."""
        self.tols, self.steps, self.t_ok = self.tols[:0], self.steps[:0], self.t_ok[:0]

    def run(self, runs: _Runs) -> None:
        dom = self.domain
        assert dom is not None
        for j, tol in enumerate(self.tols):
            ds = runs.solve(dom, float(tol), float(tol) * 1e-4)
            self.coefs.append(_coefficients_at(ds, dom, runs.times))
            self.steps[j] = int(ds.attrs["num_accepted"])
            self.t_ok[j] = float(ds.attrs["t_reached"])

    def missing(self) -> list[str]:
        """The tolerances not run (yet), as written in messages."""
        return [f"{tol:g}" for tol in self.tols[len(self.coefs):]]

    def variables(self, times: np.ndarray, dom: Domain) -> dict[str, Any]:
        cq, T = self.coefs, self.tols.size
        diff_q = np.full((T, times.size), np.nan)
        err_q = np.full((T, times.size), np.nan)
        if T:
            for j in range(len(cq) - 1):
                diff_q[j] = _norms(dom, cq[j], cq[j + 1])
                if len(cq) == T:  # to the tightest tolerance, only once it has run
                    err_q[j] = _norms(dom, cq[j], cq[-1])
            ratio = np.append(self.tols[:-1] / self.tols[1:], 10.0)
            order_q = _orders(diff_q, ratio)
        else:
            order_q = diff_q.copy()
        return {
            "difference_tolerance": (("tolerance", "time"), diff_q, {
                "long_name": "L2 difference to the next (tighter) tolerance"}),
            "error_tolerance": (("tolerance", "time"), err_q, {
                "long_name": "L2 difference to the tightest tolerance"}),
            "order_tolerance": (("tolerance", "time"), order_q, {
                "long_name": "observed order in the tolerance"}),
            "t_resolved_tolerance": ("tolerance", self.t_ok),
            "steps_tolerance": ("tolerance", self.steps),
        }


def _interruption(by_resolution: _ResolutionStudy, by_tolerance: _ToleranceStudy) -> str:
    """The message of an interrupted study: the run it was in and the runs not done."""
    missing = [str(r) for r in by_resolution.missing()]
    missing_q = by_tolerance.missing()
    running = (f"resolution {missing[0]}" if missing else
               f"tolerance {missing_q[0]}" if missing_q else "the comparison")
    not_run = "; ".join(
        part for part in (f"resolutions not run: {', '.join(missing)}" if missing else "",
                          f"tolerances not run: {', '.join(missing_q)}" if missing_q else "")
        if part)
    return (f"self_convergence interrupted while running {running}"
            f"{'; ' + not_run if not_run else ''} (the study is incomplete: its differences "
            "and orders compare only the runs finished)")


def _study(runs: _Runs, by_resolution: _ResolutionStudy, by_tolerance: _ToleranceStudy,
           rtol: float, atol: float, tail_tol: float, wall0: float,
           interrupted: str | None = None) -> xr.Dataset:
    """The Dataset of :func:`self_convergence` from its two studies (the tolerance runs: the
    first ones of its ``tols``; the others, not run, are NaN; ``interrupted`` the message of
    an interrupted study)."""
    times, domain = runs.times, runs.domain
    res_tol = by_tolerance.domain if by_tolerance.domain is not None else domain
    ds = xr.Dataset(
        {**by_resolution.variables(times), **by_tolerance.variables(times, res_tol)},
        coords={
            "resolution": ("resolution", np.array(by_resolution.resolutions)),
            "tolerance": ("tolerance", by_tolerance.tols),
            "time": ("time", times, {"units": "1"}),
        },
    )
    made = runs.attrs
    reached = [float(r["t_reached"]) for r in made if math.isfinite(float(r["t_reached"]))]
    ds.attrs.update(result_attrs(
        title="self-convergence study (meanfield.convergence)",
        solver="meanfield.convergence", model=runs.model.to_json(),
        settings={"domain": domain.state(), "tolerance_resolution": int(res_tol.resolution),
                  "form": runs.form, "tail_tol": float(tail_tol),
                  "stop_reasons": list(by_resolution.reasons)},
        scheme=made[0]["scheme"] if made else "",
        controller=made[0]["controller"] if made else "", rtol=rtol, atol=atol, dt=None,
        stats=summed_stats(made),
        stop_reason=(StopReason.SUCCESS.value if interrupted is None
                     else f"{StopReason.INTERRUPTED.value}: {interrupted}"),
        successful=interrupted is None,
        t_reached=max(reached) if reached else float(times[0]),
        wall_time_s=_time.perf_counter() - wall0))
    return ds


def _needed(ds: xr.Dataset, tail_tol: float) -> int:
    """The resolution a solve asked for where it stopped early (its own, where it did not)."""
    dom = domain_of(ds)
    if int(ds.attrs["successful"]):
        return int(dom.resolution)
    c = dom.forward(np.asarray(ds["density"].values[-1], dtype=float))
    return int(max(dom.degree_needed(c, tail_tol), 2 * dom.resolution))


def _tail_tol(ds: xr.Dataset) -> float:
    """The study's ``tail_tol`` (NaN where it is not recorded); a file written before it moved
    into ``settings`` holds it in the attribute ``solve_settings``."""
    old = json.loads(ds.attrs.get("solve_settings", "{}")).get("tail_tol", math.nan)
    return float(setting_of(ds, "tail_tol", old))


def table_time(ds: xr.Dataset) -> float | None:
    """The time of the resolution table: the latest output time at which two resolutions can
    be compared (both resolved there); ``None`` when that is only the start time (where every
    run starts from the same coefficients, so agreement says nothing)."""
    times = ds["time"].values
    count = np.sum(np.isfinite(ds["difference_resolution"].values), axis=0)
    later = np.flatnonzero(count[1:] > 0) + 1 if times.size > 1 else np.flatnonzero(count > 0)
    return float(times[later[-1]]) if later.size else None


def diagnose(ds: xr.Dataset) -> str | None:
    """What keeps a :func:`self_convergence` study from the final time, and what to change
    (``None`` when its resolution table, and its tolerance study, reach the final time)."""
    times = ds["time"].values
    t_end = float(times[-1])
    res = [int(r) for r in ds["resolution"].values]
    t_res = np.asarray(ds["t_resolved"].values, dtype=float)
    listing = ", ".join(f"{r}: {t:.3g}" if np.isfinite(t) else f"{r}: start unresolved"
                        for r, t in zip(res, t_res))
    tail = _tail_tol(ds)
    tail_txt = f" (now {tail:g})" if np.isfinite(tail) else ""
    if not np.any(np.isfinite(t_res)):
        return (f"the initial density is not resolved at any resolution of the study "
                f"({res[0]} to {res[-1]}): raise --resolution to {2 * res[-1]} or more, or "
                f"raise --tail-tol{tail_txt}")
    done = [j for j in range(len(res)) if t_res[j] >= t_end * (1 - 1e-12)]
    if len(done) >= 2:
        where = None
    elif done:  # only the finest reached the end: start where it is resolved
        where = f"raise --resolution to {res[done[0]]} (it stayed resolved to t = {t_end:.3g})"
    else:
        need = int(ds["resolution_needed"].values[-1])
        where = (f"raise --resolution so that the finest level reaches at least {need} "
                 f"(the finest, {res[-1]}, stopped at t = {t_res[-1]:.3g} asking for {need})")
    t_tab = table_time(ds)
    if where is not None:
        finite = np.isfinite(t_res)
        t_two = float(np.sort(t_res[finite])[-2]) if np.sum(finite) >= 2 else -math.inf
        if t_tab is None:
            head = ("no two resolutions stay resolved past the start, so there is nothing to "
                    f"compare (t_resolved by resolution: {listing})")
        else:
            head = (f"the study is resolved only to t = {t_tab:.3g} of t = {t_end:.3g} "
                    f"(t_resolved by resolution: {listing})")
        lower = f" or lower --t-max to {t_two:.3g}" if t_two > times[0] else ""
        return (f"{head}: {where}{lower}, or raise --tail-tol{tail_txt} to let the coarse "
                "grids run on (docs/validation.md)")
    if ds.sizes.get("tolerance", 0):
        t_tol = float(np.nanmin(ds["t_resolved_tolerance"].values))
        if not t_tol >= t_end * (1 - 1e-12):
            return (f"the tolerance study at resolution {setting_of(ds, 'tolerance_resolution')} is "
                    f"resolved only to t = {t_tol:.3g} of t = {t_end:.3g}: give a finer "
                    "tolerance_resolution, or lower --t-max")
    return None


def _fmt(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.3g}"


def convergence_table(ds: xr.Dataset, time: float | None = None, *, note: bool = True) -> str:
    """A Markdown table of a :func:`self_convergence` result at ``time`` (default:
    :func:`table_time`, the latest time at which two resolutions can be compared), after
    :func:`diagnose`'s sentence when the study falls short of its final time (unless
    ``note=False``)."""
    times = ds["time"].values
    if time is None:
        time = table_time(ds)
        time = float(times[0]) if time is None else time
    i = int(np.argmin(np.abs(times - time)))
    problem = diagnose(ds) if note else None
    lines = [f"Note: {problem}", ""] if problem else []
    lines += [f"Resolution study at t = {times[i]:.4g} (rtol = {ds.attrs['rtol']:.1e})", "",
             "| resolution | diff. to next | error to finest | observed order | t_resolved | steps |",
             "|---:|---:|---:|---:|---:|---:|"]
    for j, r in enumerate(ds["resolution"].values):
        lines.append(
            f"| {int(r)} | {_fmt(ds['difference_resolution'].values[j, i])} | "
            f"{_fmt(ds['error_resolution'].values[j, i])} | {_fmt(ds['order_resolution'].values[j, i])} | "
            f"{ds['t_resolved'].values[j]:.4g} | {int(ds['steps_resolution'].values[j])} |"
        )
    if ds.sizes.get("tolerance", 0):
        lines += ["",
                  f"Tolerance study at resolution {setting_of(ds, 'tolerance_resolution')}, "
                  f"t = {times[i]:.4g}",
                  "",
                  "| rtol | diff. to next | error to tightest | observed order | steps |",
                  "|---:|---:|---:|---:|---:|"]
        for j, tol in enumerate(ds["tolerance"].values):
            lines.append(
                f"| {tol:.1e} | {_fmt(ds['difference_tolerance'].values[j, i])} | "
                f"{_fmt(ds['error_tolerance'].values[j, i])} | {_fmt(ds['order_tolerance'].values[j, i])} | "
                f"{int(ds['steps_tolerance'].values[j])} |"
            )
    return "\n".join(lines)


__all__ = ["convergence_table", "diagnose", "self_convergence", "table_time"]
