"""``solve``: evolve a density under the mean-field flow, adaptively and watchfully.

.. autosummary::
   solve
   ResolutionError
   check_density

``solve`` is a flow (:mod:`meanfield.spectral.flow`), a Lawson Runge–Kutta stepper
(:class:`meanfield.integrate.RungeKutta`: the diffusion ``sigma Laplacian`` is diagonal in
the spectral basis and integrated exactly, the drift by an explicit embedded scheme,
Dormand–Prince 5(4) by default, under a PI step-size controller and a CFL bound
``dt <= cfl * min_spacing / max|X|``) and the resolution monitor
(:class:`meanfield.spectral.resolution.ResolutionMonitor`), run by the one integration loop
(:func:`meanfield.integrate.integrate`). When the monitor cannot refine further the solve stops
with :class:`ResolutionError`, which names the time reached and the quantity that failed and
carries the partial results (also written to ``out`` when given).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import xarray as xr

from meanfield.arguments import output_times
from meanfield.domains.base import Domain, check_density
from meanfield.finite import DISSIPATION_NOTE, energy_variables, note_nonfinite
from meanfield.integrate import (
    ButcherTableau,
    ConstantStep,
    IntegrationError,
    PIController,
    ProgressTracker,
    RungeKutta,
    StopReason,
    Tracker,
    finish,
    get_scheme,
    integrate,
    run_attrs,
)
from meanfield.memory import check_solve_memory
from meanfield.model import Model
from meanfield.schedule import Schedule, forwarded, run_schedule
from meanfield.spectral.flow import Flow, make_flow
from meanfield.spectral.resolution import ResolutionMonitor


class ResolutionError(IntegrationError):
    """The solve could not continue; ``.dataset`` holds the results up to ``.t``."""


class UnresolvedStartError(ValueError):
    """``rho0`` is not resolved by the domain it is given on (its spectral tail exceeds
    ``tail_tol`` and no finer grid may be tried); ``.resolution`` and ``.tail`` say where.
    A ``ValueError``: the input is what is wrong."""

    def __init__(self, message: str, *, resolution: int, tail: float) -> None:
        super().__init__(message)
        self.resolution = resolution
        self.tail = tail



def _diagnostics(flow: Flow, c: np.ndarray) -> tuple[float, float, float, float]:
    """Energy, dissipation, mass and log-energy (finite where the energy overflows float64,
    :meth:`meanfield.spectral.flow.Flow.log_energy`). For USA at ``beta`` beyond ~350 the dissipation
    ``~ e^{2 beta}`` exceeds the float64 range: ``inf``, with a note in the Dataset."""
    with np.errstate(over="ignore", invalid="ignore"):
        return flow.energy(c), flow.dissipation(c), flow.domain.mass(c), flow.log_energy(c)


def solve(
    model: Model | Schedule,
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
    overwrite: bool = False,
    continue_lagrangian: bool = False,
) -> xr.Dataset:
    """Evolve ``rho0`` under ``model`` on ``domain``; densities saved at the times ``t``.

    Args:
        model: the attention model (SA or USA, ``Q = K = I``, ``V = +-I``, noise), or a
            :class:`meanfield.Schedule` of such models (docs/equations.md section 2, "Layers
            with their own weights"), run piece by piece
            (:func:`meanfield.schedule.run_schedule`), each piece from the density and grid
            the previous one ended with (``max_resolution`` from ``domain``), the result on
            the finest grid reached; not with ``continue_lagrangian``.
        domain: the spectral domain (its resolution is the starting one).
        rho0: density values on ``domain.grid`` or a callable of the grid (re-evaluated if
            the grid is refined before the start); normalised to mass 1.
        t: output times, strictly increasing; ``t[0]`` is the start time.
        form: ``"continuity"`` (velocity of (3.4)) or ``"gradient"`` (energy + metric).
        scheme: ``"dopri5"`` (default), ``"bosh3"``, ``"rk4"`` or ``"euler"`` (fixed step),
            or a tableau.
        controller: step-size control; default ``PIController(rtol, atol)`` with
            ``rtol = 1e-8`` unless given, and ``atol`` as given (absolute) or by default
            ``1e-12 max(1, max|c|)`` for the coefficients ``c`` at each step (``atol_relative``:
            concentrated densities have coefficients up to ``1e14`` times the mean's, whose
            round-off an absolute ``1e-12`` would chase). ``ConstantStep(dt)`` for fixed steps.
        cfl: CFL number for ``dt <= cfl * min_spacing / max|X|``.
        max_resolution: the largest resolution refinement may reach (default: 8 times the
            starting one); ``max_resolution = domain.resolution`` disables refinement.
        tail_tol, negative_tol: resolution monitor thresholds (spectral tail relative to the
            mean coefficient; negative density relative to its maximum).
        filter_order: apply the exponential l-only filter of this order after each step.
        max_steps: bound on attempted steps.
        trackers: hooks (see :mod:`meanfield.integrate.trackers`); ``handle`` gets the
            coefficients and the current domain.
        progress: show a tqdm progress bar.
        throw: raise :class:`ResolutionError` on failure (else return the partial Dataset
            with ``attrs["successful"] = 0``).
        out: if given, the result (partial on failure or interruption) is written there;
            checked before any work (:func:`meanfield.io.check_writable`).
        overwrite: replace an existing ``out`` (else it is refused before any work).
        continue_lagrangian: when the grid can no longer resolve the solution, carry its last
            resolved state on to ``t[-1]`` by characteristics (docs/lagrangian.md): the result
            is then the Dataset of :func:`meanfield.lagrangian.continue_lagrangian` (nodes
            from the hand-over on, the spectral densities before it as ``spectral_density``,
            the scalar ``handover_time``), also what ``out`` holds.

    Returns:
        ``xarray.Dataset`` with ``density`` (time, *domain.dims), ``energy``,
        ``dissipation``, ``mass`` and ``resolution`` (time) (and ``log_energy`` where the
        energy overflows float64; every NaN or inf with a ``note``: docs/results.md), and the attrs of
        :data:`meanfield.integrate.RESULT_ATTRS` (the domain and the monitor's settings in
        ``settings``).

    A run whose estimated memory (:func:`meanfield.memory.check_solve_memory`) exceeds the
    available memory is refused with ``ValueError`` before any work; a refinement that would
    not fit stops the run like an unresolved one (results kept).
    """
    if isinstance(model, Schedule):
        if continue_lagrangian:
            msg = "continue_lagrangian=True is not available with a Schedule of models"
            raise ValueError(msg)
        options = forwarded(solve, locals(), positional=4,  # forwarded to each piece
                            skip=("out", "overwrite", "continue_lagrangian"))
        if max_resolution is None:  # fixed by the starting grid, not by each piece's
            options["max_resolution"] = 8 * domain.resolution
        return _solve_schedule(model, domain, rho0, t, out=out, overwrite=overwrite,
                               options=options)
    times = output_times(t)
    if out is not None:
        from meanfield.io import check_writable

        check_writable(out, overwrite=overwrite, name="out")
    check_solve_memory(domain, times.size)  # refuse with the figure before any work
    tab = get_scheme(scheme)
    controller = _controller(tab, controller, rtol, atol)
    if not (math.isfinite(cfl) and cfl > 0):
        msg = f"cfl must be finite and > 0, got {cfl!r}"
        raise ValueError(msg)
    max_res = _max_resolution(domain, max_resolution)
    make_flow(model, domain, form)  # validates the model for the PDE before any work
    start = domain
    domain, c = _resolved_start(domain, rho0, tail_tol, negative_tol, max_res)
    run = _Run(model, form, tab, cfl)
    monitor = ResolutionMonitor(run.rebuild, tail_tol=tail_tol, negative_tol=negative_tol,
                                max_resolution=max_res, filter_order=filter_order,
                                outputs=times.size)
    trackers = list(trackers)
    if progress:
        trackers.append(ProgressTracker(desc=f"solve {domain.name}",
                                        postfix=lambda dom: {"N": dom.resolution}))
    sol = integrate(run.rebuild(domain), c, times, controller=controller, output=run.output,
                    dt0=dt0, max_steps=max_steps, monitors=[monitor], trackers=trackers,
                    step_bound=run.cfl_bound, context=domain)
    saved = run.kept(sol)
    settings = {
        "domain": saved[-1][2].state(), "initial_domain": start.state(), "form": form,
        "cfl": float(cfl), "tail_tol": float(tail_tol), "negative_tol": float(negative_tol),
        "max_resolution": int(max_res), "filter_order": filter_order,
        "num_refinements": monitor.refinements,
        "atol_relative": bool(getattr(controller, "atol_relative", False)),
    }
    ds = _assemble(saved, model, settings, tab, controller, sol)
    if not sol.successful and continue_lagrangian and sol.reason is StopReason.UNRESOLVED:
        return _hand_over(model, ds, times, throw=throw, out=out)
    return finish(sol, ds, name="solve", error=ResolutionError, throw=throw, out=out,
                  kept="results are kept up to the last resolved time")


# -- the checks and the start ------------------------------------------------------------------


def _controller(tab: ButcherTableau, controller: PIController | ConstantStep | None,
                rtol: float | None, atol: float | None) -> PIController | ConstantStep:
    """The step-size control of :func:`solve`: the one given, checked against the scheme, or
    the default ``PIController`` (``atol`` relative unless given)."""
    if controller is None:
        if not tab.adaptive:
            msg = f"scheme {tab.name!r} has no error estimate: pass controller=ConstantStep(dt)"
            raise ValueError(msg)
        controller = PIController(rtol=1e-8 if rtol is None else rtol,  # default atol: relative
                                  atol=1e-12 if atol is None else atol, atol_relative=atol is None)
    elif rtol is not None or atol is not None:
        msg = "give either controller or rtol/atol, not both"
        raise ValueError(msg)
    if controller.adaptive and not tab.adaptive:
        msg = f"scheme {tab.name!r} has no error estimate: use controller=ConstantStep(dt)"
        raise ValueError(msg)
    return controller


def _max_resolution(domain: Domain, max_resolution: int | None) -> int:
    """The largest resolution refinement may reach (default ``8 domain.resolution``); one
    that refinement (which doubles) cannot reach is refused."""
    max_res = 8 * domain.resolution if max_resolution is None else int(max_resolution)
    if max_res < domain.resolution:
        msg = f"max_resolution={max_res} is below the domain's resolution {domain.resolution}"
        raise ValueError(msg)
    if domain.resolution < max_res < 2 * domain.resolution:
        msg = (f"max_resolution={max_res} is below the first refinement "
               f"({2 * domain.resolution}): refinement doubles the resolution, so this value "
               f"disables it; give max_resolution={domain.resolution} to say so, or >= "
               f"{2 * domain.resolution}")
        raise ValueError(msg)
    return max_res


def _resolved_start(domain: Domain, rho0: Any, tail_tol: float, negative_tol: float,
                    max_res: int) -> tuple[Domain, np.ndarray]:
    """The initial state and its domain, refined until resolved (callables only): the first
    resolution whose spectral tail is within ``tail_tol``."""
    while True:
        rho = check_density(domain, rho0, negative_tol=negative_tol)
        c = domain.forward(rho)
        tail0 = domain.tail(c)
        if tail0 <= tail_tol:
            return domain, c
        if not callable(rho0) or domain.resolution * 2 > max_res:
            msg = (
                f"rho0 is not resolved at resolution {domain.resolution}: spectral tail "
                f"{tail0:.3g} > tail_tol={tail_tol:g}; give rho0 as a callable of the grid, "
                "a finer domain, or a larger tail_tol"
            )
            raise UnresolvedStartError(msg, resolution=domain.resolution, tail=float(tail0))
        domain = domain.with_resolution(domain.resolution * 2)


# -- the run ---------------------------------------------------------------------------------


_Saved = tuple[float, np.ndarray, Domain, tuple[float, float, float, float]]
"""One output of a run: time, coefficients, their domain and :func:`_diagnostics`."""


class _Run:
    """The parts of one :func:`solve` run that the engine calls back: the stepper of the
    current grid (rebuilt by the resolution monitor when it refines), the CFL bound of its
    flow and the outputs with their diagnostics."""

    def __init__(self, model: Model, form: str, tab: ButcherTableau, cfl: float) -> None:
        self.model, self.form, self.tab, self.cfl = model, form, tab, cfl
        self.flow: Flow | None = None
        self.saved: list[_Saved] = []

    def rebuild(self, dom: Domain) -> RungeKutta:
        flow = self.flow = make_flow(self.model, dom, self.form)
        return RungeKutta(flow.drift, self.tab, linear=flow.linear)

    def cfl_bound(self) -> float:
        flow = self.flow
        assert flow is not None
        speed = flow.max_speed  # computed on demand by fused drifts: read once
        return self.cfl * flow.domain.min_spacing / speed if speed > 0 else math.inf

    def output(self, k: int, tk: float, ck: np.ndarray, dom: Domain) -> None:
        assert self.flow is not None
        self.saved.append((tk, ck.copy(), dom, _diagnostics(self.flow, ck)))

    def kept(self, sol: Any) -> list[_Saved]:
        """The outputs that are resolved densities, and the last accepted state after them."""
        saved = self.saved
        # a monitor's Stop keeps the last state it accepted: outputs interpolated inside the
        # step it refused are not a resolved density (issue 22), drop them
        saved[:] = [e for e in saved if e[0] <= sol.t_reached]
        if sol.t_reached > saved[-1][0]:  # partial results up to the last accepted state
            dom = sol.context
            saved.append((sol.t_reached, sol.y.copy(), dom,
                          _diagnostics(make_flow(self.model, dom, self.form), sol.y)))
        if not sol.successful:  # keep only slices that are densities on the final grid (issue 22)
            _drop_non_densities(saved)
        return saved


# -- the finish ------------------------------------------------------------------------------


def _hand_over(model: Model, ds: xr.Dataset, times: np.ndarray, *, throw: bool,
               out: str | Path | None) -> xr.Dataset:
    """The run carried on by characteristics from its last resolved state
    (:func:`meanfield.lagrangian.continuation.continue_lagrangian`); the spectral part is
    written to ``out`` when the continuation fails."""
    from meanfield.lagrangian.continuation import continue_lagrangian as carry_on

    try:
        return carry_on(model, ds, times, throw=throw, out=out, overwrite=True)
    except IntegrationError:
        _write(ds, out)  # the spectral part is not lost
        raise


def _solve_schedule(schedule: Schedule, domain: Domain, rho0: Any, t: Any, *,
                    out: str | Path | None, overwrite: bool, options: dict[str, Any]
                    ) -> xr.Dataset:
    """:func:`solve` under a schedule: one run per piece, each from the density (on the grid)
    the previous piece ended with; the result on the finest grid any piece reached."""
    from meanfield.integrate.schema import settings_of

    def grid_of(ds: xr.Dataset) -> Domain:
        return Domain.from_state(settings_of(ds)["domain"])

    def join(dss: list[xr.Dataset]) -> list[xr.Dataset]:
        grids = [grid_of(ds) for ds in dss]
        final = max(grids, key=lambda g: g.resolution)
        joined = []
        for ds, grid in zip(dss, grids):
            if grid.resolution != final.resolution:
                dens = np.stack([final.backward(final.prolong(grid.forward(r), grid))
                                 for r in ds["density"].values])
                attrs = ds["density"].attrs
                ds = ds.drop_vars(["density", *grid.coords])
                ds = ds.assign_coords({n: (n, np.asarray(v)) for n, v in final.coords.items()})
                ds["density"] = (("time", *final.dims), dens, attrs)
            joined.append(ds)
        return joined

    return run_schedule(schedule, t, (domain, rho0),
                        lambda m, tt, s: solve(m, s[0], s[1], tt, **options),
                        lambda ds: (grid_of(ds), ds["density"].values[-1]), join=join,
                        out=out, overwrite=overwrite)


def _drop_non_densities(saved: list) -> None:
    """Drop trailing slices that the final (finest) grid no longer holds as a density
    (:meth:`Domain.conditioning`; on a ``ZonalSphere`` negative mass or mass drift beyond
    ``1e-6``): the resolution monitor checked each at its own resolution, but the Dataset is
    assembled on the finest one. The first slice is always kept."""
    final = max((e[2] for e in saved), key=lambda d: d.resolution)
    while len(saved) > 1 and final.conditioning(final.prolong(saved[-1][1], saved[-1][2])):
        saved.pop()


def _write(ds: xr.Dataset | None, out: str | Path | None) -> None:
    if out is not None and ds is not None:
        from meanfield.io import write_netcdf

        write_netcdf(ds, out)


def _assemble(saved: list, model: Model, settings: dict[str, Any], tab: ButcherTableau,
              controller: PIController | ConstantStep, sol: Any) -> xr.Dataset:
    final = max((e[2] for e in saved), key=lambda d: d.resolution)
    dens = np.stack([final.backward(final.prolong(c, dom)) for _, c, dom, _ in saved])
    tvals = np.array([e[0] for e in saved])
    diag = np.array([e[3] for e in saved], dtype=float)
    dims = ("time",) + tuple(final.dims)
    coords: dict[str, Any] = {"time": ("time", tvals, {"long_name": "time", "units": "1"})}
    for name, values in final.coords.items():
        coords[name] = (name, np.asarray(values))
    energy = {"long_name": "interaction energy E_beta (docs/equations.md (3.5), -1 convention)"}
    ds = xr.Dataset(
        {
            "density": (dims, dens, {"long_name": "density w.r.t. surface measure", "units": "1/area"}),
            **energy_variables("time", diag[:, 0], diag[:, 3], energy),
            "dissipation": ("time", diag[:, 1], note_nonfinite(
                {"long_name": "dE/dt predicted by the dissipation identity"}, diag[:, 1],
                DISSIPATION_NOTE)),
            "mass": ("time", diag[:, 2], {"long_name": "total mass"}),
            "resolution": ("time", np.array([e[2].resolution for e in saved]),
                           {"long_name": "resolution in use"}),
        },
        coords=coords,
    )
    settings = dict(settings, domain=final.state())
    ds.attrs.update(run_attrs(
        sol, title=f"meanfield solve on {final.name}", solver="meanfield.solve",
        model=model.to_json(), settings=settings, scheme=tab.name,
        controller=type(controller).__name__, rtol=controller.rtol, atol=controller.atol,
        dt=controller.dt if isinstance(controller, ConstantStep) else None,
    ))
    return ds


__all__ = ["ConstantStep", "PIController", "ResolutionError", "StopReason", "check_density", "solve"]
