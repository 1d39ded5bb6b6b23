"""Metastability on the circle (Figure 4 of the paper, Problem 1; docs/equations.md section 5).

.. autosummary::
   trajectories
   cluster_counts
   count_clusters_angles
   dwell_times
   pde_cluster_counts
   count_peaks

For ``beta >> 1`` the tokens first gather in a few clusters, which stay apart for a long time
before they merge (two time scales). This module measures it:

* :func:`trajectories`: the angles ``theta_i(t)`` of one random start (Figure 4, ``beta = 4``
  and ``9``, snapshots at ``t = 2.5, 18, 30``);
* :func:`cluster_counts`: the number of clusters against time for many seeds (cluster = a
  connected component of ``<x_i, x_j> >= 1 - delta``, as ``particles.count_clusters``), and
  the time each seed spends with ``k`` clusters, for every ``k`` (:func:`dwell_times`);
* :func:`pde_cluster_counts`: the same for the mean-field PDE on the circle, from a
  perturbed uniform density, counting the density's peaks above a threshold, up to the last
  time the solver resolves (point clusters are Dirac masses, which no grid resolves).

The particle runs take the array backend options of :mod:`validation.phase_diagram`
(``backend``, ``device``, ``dtype``: NumPy, or PyTorch on the CPU or a GPU).
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from meanfield import Schedule
from meanfield.attention import require
from meanfield.finite import note_nonfinite, note_variables
from meanfield.integrate import Interrupted, StopReason, finish, result_attrs, revise_attrs
from meanfield.integrate.schema import summed_stats
from particles import count_clusters_angles
from particles.ensemble import EnsembleError, simulate_ensemble
from validation.phase_diagram import (
    _cell_run,
    _largest_betas,
    cell_cost,
    check_backend,
    check_cell_steps,
    check_schedule,
    chunk_size,
    model_record,
    sample_tokens,
)
from validation.sweep import ON_FAILURE, SweepError, sweep

NEVER_CLUSTERED = "NaN where the seed never had at most that many clusters up to the last time"
"""The note on ``first_time`` (:mod:`meanfield.finite`)."""


def dwell_times(counts: np.ndarray, times: np.ndarray, max_clusters: int) -> np.ndarray:
    """Total time spent with ``k`` clusters, ``k = 1..max_clusters`` (last axis).

    ``counts`` has time on its last axis; the count on ``[t_j, t_{j+1})`` is ``counts[j]``
    (a state observed at the last time contributes nothing: censored).
    """
    c = np.asarray(counts)
    dt = np.diff(np.asarray(times, dtype=float))
    ks = np.arange(1, max_clusters + 1)
    onehot = c[..., :-1, None] == ks
    return np.einsum("...tk,t->...k", onehot, dt)


def _angles(x: np.ndarray) -> np.ndarray:
    return np.arctan2(x[..., 1], x[..., 0])


def trajectories(betas: Sequence[float] = (4.0, 9.0), n: int = 32, t_max: float = 30.0,
                 times: int = 301, seed: int = 0, attention: str = "softmax",
                 dt: float = 0.1, *, backend: str = "numpy", device: str | None = None,
                 dtype: str = "float64", on_failure: str = "stop",
                 schedule: Schedule | None = None) -> xr.Dataset:
    """Angles of one random uniform start of ``n`` tokens on the circle, for each ``beta``.

    The same start for every ``beta`` (drawn from ``seed``), integrated by the batched RK4 of
    :mod:`validation.phase_diagram` (checked against ``particles``). Returns ``theta``
    (beta, time, token), unwrapped in time, and ``clusters`` (beta, time), ``delta = 1e-3``.
    ``backend``, ``device``, ``dtype``: the array backend of the runs (recorded in
    ``settings``). The ``attrs`` are the result schema's (:data:`meanfield.integrate.RESULT_ATTRS`:
    the runs' counters summed; ``n``, ``seed``, ``attention``, ``dt``, ``backend`` and
    ``failed_betas`` in ``settings``).

    A ``beta`` whose run did not reach ``t_max`` raises
    :class:`particles.ensemble.EnsembleError` (``on_failure="stop"``) or, with
    ``on_failure="record"``, is NaN (``clusters`` becomes float), named with its reason in
    ``settings["failed_betas"]`` (``{beta: reason}``, empty when none failed) and in
    ``stop_reason``, with ``successful = 0``; every ``beta`` failing raises the first error.

    ``schedule``: layers with their own weights, as in
    :func:`validation.phase_diagram.phase_diagram` (piece ``k`` at ``beta * model_k.beta``,
    :func:`validation.phase_diagram.schedule_at`; no step across a switch), recorded in
    ``attrs["model"]``.
    """
    if on_failure not in ON_FAILURE:
        msg = f"on_failure must be one of {ON_FAILURE}, got {on_failure!r}"
        raise ValueError(msg)
    wall0 = time.perf_counter()
    _check(n=n, t_max=t_max, times=times, betas=betas)
    where = check_backend(backend, device, dtype)
    t = np.linspace(0.0, float(t_max), int(times))
    attention = _canonical(attention, schedule)
    check_cell_steps(t, float(dt), _largest_betas(np.asarray(betas, dtype=float), schedule),
                     attention)
    x0 = sample_tokens(np.random.default_rng(seed), 1, int(n), 2)
    theta = np.empty((len(betas), t.size, int(n)))
    failed: dict[int, str] = {}
    runs: list[dict[str, int]] = []
    for b, beta in enumerate(betas):
        def record(k: int, _t: float, x: np.ndarray, b: int = b) -> None:
            theta[b, k] = _angles(x[0])

        run, step = _cell_run(float(beta), schedule, dt, attention)
        sol = simulate_ensemble(x0, run, t, record, attention=attention, dt=step,
                                backend=where.name, device=where.device, dtype=where.dtype)
        runs.append(sol.stats())
        try:
            finish(sol, None, name=f"trajectories at beta = {float(beta):g}",
                   error=EnsembleError)
        except EnsembleError as exc:
            if on_failure == "stop" or len(failed) == len(betas) - 1:
                raise
            failed[b] = str(exc)
    theta[list(failed)] = 0.0  # never counted: NaN below
    theta = np.unwrap(theta, axis=1)
    clusters: np.ndarray = count_clusters_angles(theta)
    if failed:
        theta[list(failed)] = np.nan
        clusters = clusters.astype(float)
        clusters[list(failed)] = np.nan
    lost = {f"{float(betas[b]):g}": why for b, why in failed.items()}
    return xr.Dataset(
        {"theta": (("beta", "time", "token"), theta, {"long_name": "angle theta_i(t)"}),
         "clusters": (("beta", "time"), clusters)},
        coords={"beta": ("beta", np.asarray(betas, dtype=float)), "time": ("time", t),
                "token": np.arange(int(n))},
        attrs=result_attrs(
            title="trajectories on the circle (Figure 4 of arXiv 2312.10794)",
            solver="validation.metastability.trajectories",
            model=json.dumps(model_record(attention, schedule)),
            settings={"n": int(n), "seed": int(seed), "attention": attention, "dt": float(dt),
                      "backend": where.label(), "failed_betas": lost},
            scheme="rk4", controller="ConstantStep", rtol=None, atol=None, dt=float(dt),
            stats=summed_stats(runs),
            stop_reason=(f"the trajectories of {len(lost)} beta(s) failed and are NaN: "
                         f"{'; '.join(lost.values())}" if lost else StopReason.SUCCESS.value),
            successful=not lost, t_reached=float(t[-1]), wall_time_s=time.perf_counter() - wall0))


def metastability_cell(beta: float, rng: np.random.Generator, *, n: int, seeds: int,
                       times: list[float], attention: str, delta: float, dt: float,
                       backend: str = "numpy", device: str | None = None,
                       dtype: str = "float64", schedule: Schedule | None = None) -> xr.Dataset:
    """One ``beta`` of :func:`cluster_counts`: ``seeds`` independent starts, vectorised, on
    the array backend ``backend``, ``device``, ``dtype`` (:mod:`meanfield.backend`); under
    ``schedule`` piece ``k`` at ``beta * model_k.beta``.
    Raises :class:`meanfield.integrate.Interrupted` or
    :class:`particles.ensemble.EnsembleError` (as :func:`validation.phase_diagram.phase_cell`)
    unless every seed ran to ``times[-1]``."""
    t = np.asarray(times)
    x0 = sample_tokens(rng, seeds, n, 2)
    counts = np.empty((seeds, t.size), dtype=np.int64)
    chunk = chunk_size(x0.shape, device, dtype)
    run, step = _cell_run(beta, schedule, dt, attention)
    for start in range(0, seeds, chunk):
        part = slice(start, start + chunk)

        def record(k: int, _t: float, x: np.ndarray, part: slice = part) -> None:
            counts[part, k] = count_clusters_angles(_angles(x), delta)

        sol = simulate_ensemble(x0[part], run, t, record, attention=attention,
                                dt=step, freeze_above=1.0 - delta,
                                backend=backend, device=device, dtype=dtype)
        # the counts of a block cut short were never written: never a result
        finish(sol, None, name=f"metastability cell beta = {beta:g} (seeds {start}-"
               f"{min(start + chunk, seeds) - 1})", error=EnsembleError)
    dwell = dwell_times(counts, t, n)
    first = np.where((counts[:, :, None] <= np.arange(1, n + 1)).any(axis=1),
                     t[np.argmax(counts[:, :, None] <= np.arange(1, n + 1), axis=1)], np.nan)
    return xr.Dataset(
        {"clusters": (("seed", "time"), counts),
         "dwell": (("seed", "clusters_state"), dwell),
         "first_time": (("seed", "clusters_state"), first, note_nonfinite(
             {"long_name": "first time at which a seed has at most that many clusters"}, first,
             NEVER_CLUSTERED)),
         "final_clusters": ("seed", counts[:, -1])},
        coords={"time": ("time", t), "clusters_state": np.arange(1, n + 1),
                "seed": np.arange(seeds)})


def cluster_counts(betas: Sequence[float] = (4.0, 9.0), n: int = 32, seeds: int = 256,
                   t_max: float = 30.0, times: int = 301, delta: float = 1e-3,
                   attention: str = "softmax", seed: int = 0, workers: int = 1, *,
                   dt: float = 0.1, scheduler: Any = None, store: str | None = None,
                   resume: bool = False, progress: bool = True, processes: bool = True,
                   backend: str = "numpy", device: str | None = None, dtype: str = "float64",
                   on_failure: str = "stop", schedule: Schedule | None = None) -> xr.Dataset:
    """Number of clusters against time for ``seeds`` random starts per ``beta`` (a sweep).

    Returns ``clusters`` (beta, seed, time); ``dwell`` (beta, seed, clusters_state): time
    spent with ``k`` clusters before ``t_max``; ``first_time``: first time with at most ``k``
    clusters (NaN if not before ``t_max``); ``final_clusters``; and over seeds, for ``k >= 2``,
    ``dwell_mean`` and ``dwell_median`` among the seeds that visit ``k`` and
    ``visit_fraction``. The state at ``t_max`` is censored (its dwell is a lower bound).
    Clustered seeds (all inner products ``>= 1 - delta``) are frozen, which is exact for the
    counts (see :mod:`validation.phase_diagram`). ``backend``, ``device``, ``dtype``: the
    array backend of the cells, as in :func:`validation.phase_diagram.phase_diagram`
    (recorded in ``settings`` and in every cell's resume key; ``device="cuda"`` gives each
    Dask worker one GPU).

    How it ends (:func:`validation.sweep.sweep`): a ``beta`` whose seeds did not all reach
    ``t_max`` stops the sweep with :class:`validation.sweep.SweepError`, or with
    ``on_failure="record"`` is NaN (counts become floats), left out of the statistics and
    counted in ``num_rejected`` (``successful = 0``); an interrupt raises
    :class:`meanfield.integrate.Interrupted` with the finished cells (kept in ``store``).
    A step that could not finish is refused before any cell runs.

    ``schedule``: layers with their own weights, as in
    :func:`validation.phase_diagram.phase_diagram` (piece ``k`` at ``beta * model_k.beta``,
    freezing exact across switches), recorded in ``attrs["model"]``.
    """
    _check(n=n, t_max=t_max, times=times, betas=betas)
    if int(seeds) < 1:
        msg = f"seeds must be a positive integer, got {seeds!r}"
        raise ValueError(msg)
    if not 0 < delta < 1:
        msg = f"delta must lie in (0, 1), got {delta!r}"
        raise ValueError(msg)
    b = check_backend(backend, device, dtype, here=scheduler is None)
    t = np.linspace(0.0, float(t_max), int(times))
    attention = _canonical(attention, schedule)
    check_cell_steps(t, float(dt), _largest_betas(np.asarray(betas, dtype=float), schedule),
                     attention)  # before any cell runs
    settings = dict(n=int(n), seeds=int(seeds), delta=float(delta), attention=attention,
                    dt=float(dt), backend=b.name, device=b.device, dtype=b.dtype)
    kwargs: dict[str, Any] = dict(n=int(n), seeds=int(seeds), times=t.tolist(),
                                  attention=attention, delta=float(delta), dt=float(dt),
                                  backend=b.name, device=b.device, dtype=b.dtype)
    if schedule is not None:  # only then: the cells' resume keys of plain runs stay as they were
        kwargs["schedule"] = schedule
    try:
        out = sweep(metastability_cell, {"beta": np.asarray(betas, dtype=float)}, seed=seed,
                    workers=workers, scheduler=scheduler, store=store, resume=resume,
                    progress=progress, processes=processes, desc="metastability",
                    kwargs=kwargs, device=b.device, cost=functools.partial(cell_cost, 2),
                    on_failure=on_failure)
    except (Interrupted, SweepError) as exc:  # the finished cells, marked unsuccessful
        if exc.dataset is not None:
            exc.dataset = _counts_result(exc.dataset, settings, attention, dt, schedule)
        raise
    return _counts_result(out, settings, attention, dt, schedule)


def _canonical(attention: str, schedule: Schedule | None) -> str:
    """The run's attention, canonical, with ``schedule`` checked against it
    (:func:`validation.phase_diagram.check_schedule`)."""
    attention = require(attention, "phase_diagram").name
    if schedule is not None:
        check_schedule(schedule, attention)
    return attention


def _counts_result(out: xr.Dataset, extra: dict[str, Any], attention: str,
                   dt: float, schedule: Schedule | None = None) -> xr.Dataset:
    """The sweep's Dataset completed with the statistics over seeds (NaN for a failed or
    missing cell) and the attrs (``successful``, ``stop_reason`` as the sweep says)."""
    dwell = out["dwell"].where(out["dwell"] > 0)
    out["dwell_mean"] = dwell.mean("seed")
    out["dwell_median"] = dwell.median("seed")
    out["visit_fraction"] = (out["dwell"] > 0).mean("seed").where(out["dwell"].notnull().all("seed"))
    out["dwell"].attrs.update(long_name="time spent with k clusters before t_max")
    note_variables(out, {
        "dwell_mean": "NaN where no seed visits that many clusters",
        "dwell_median": "NaN where no seed visits that many clusters",
        "first_time": NEVER_CLUSTERED})
    settings = json.loads(out.attrs["settings"])
    settings.update(extra)
    out.attrs.update(revise_attrs(
        out.attrs, title="cluster counts on the circle (metastability, Problem 1)",
        solver="validation.metastability", settings=settings, scheme="rk4",
        controller="ConstantStep", dt=float(dt), model=json.dumps(model_record(attention, schedule))))
    return out


def count_peaks(density: np.ndarray, threshold: float) -> np.ndarray:
    """Circular local maxima of ``density`` (last axis) with value ``>= threshold``."""
    rho = np.asarray(density)
    peak = (rho > np.roll(rho, 1, axis=-1)) & (rho >= np.roll(rho, -1, axis=-1))
    return np.count_nonzero(peak & (rho >= threshold), axis=-1)


def pde_cluster_counts(betas: Sequence[float] = (4.0, 9.0), N: int = 256, t_max: float = 30.0,
                       times: int = 61, amplitude: float = 0.05, modes: int = 8,
                       peak_threshold: float = 2.0, seed: int = 0, attention: str = "softmax",
                       max_resolution: int | None = 1024) -> xr.Dataset:
    """Peaks of the mean-field density on the circle against time, while resolved.

    Start: ``rho0 = (1 + 2 a Σ_{k=1}^{modes} cos(k theta + phi_k)) / (2 pi)`` with random
    phases ``phi_k`` (a smooth stand-in for the fluctuations of a finite sample; the uniform
    density alone is a steady state). A cluster is a local maximum of the density above
    ``peak_threshold / (2 pi)``. ``meanfield.solve`` stops where the grid no longer resolves
    the solution; later times are NaN and ``t_resolved`` says where that was.
    """
    import meanfield

    _check(n=2, t_max=t_max, times=times, betas=betas)
    if not 0 <= 2 * amplitude * modes < 1:
        msg = f"2 * amplitude * modes must lie in [0, 1) (positive density), got " \
              f"{2 * amplitude * modes!r}"
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    phases = rng.uniform(0, 2 * np.pi, int(modes))
    ks = np.arange(1, int(modes) + 1)

    def rho0(theta: np.ndarray) -> np.ndarray:
        wave = np.cos(ks[:, None] * theta[None] + phases[:, None]).sum(axis=0)
        return (1 + 2 * amplitude * wave) / (2 * np.pi)

    t = np.linspace(0.0, float(t_max), int(times))
    peaks = np.full((len(betas), t.size), np.nan)
    resolved = np.zeros(len(betas))
    for b, beta in enumerate(betas):
        sol = meanfield.solve(meanfield.Model(beta=float(beta), attention=attention),
                              meanfield.Circle(int(N)), rho0, t, throw=False,
                              max_resolution=max_resolution)
        st = sol["time"].values
        idx = np.clip(np.searchsorted(t, st - 1e-9), 0, t.size - 1)
        on_grid = np.abs(t[idx] - st) <= 1e-9 * max(1.0, t_max)  # not the partial last time
        counts = count_peaks(sol["density"].values, peak_threshold / (2 * np.pi))
        peaks[b, idx[on_grid]] = counts[on_grid]
        resolved[b] = float(sol.attrs.get("t_reached", sol["time"].values[-1]))
    return xr.Dataset(
        {"pde_peaks": (("beta", "pde_time"), peaks,
                       {"long_name": "density peaks above the threshold"}),
         "t_resolved": ("beta", resolved)},
        coords={"beta": np.asarray(betas, dtype=float), "pde_time": ("pde_time", t)},
        attrs={"N": int(N), "amplitude": float(amplitude), "modes": int(modes),
               "peak_threshold": float(peak_threshold), "pde_seed": int(seed)})


def _check(*, n: int, t_max: float, times: int, betas: Sequence[float]) -> None:
    if int(n) != n or n < 2:
        msg = f"n must be an integer >= 2, got {n!r}"
        raise ValueError(msg)
    if not (math.isfinite(t_max) and t_max > 0):
        msg = f"t_max must be finite and > 0, got {t_max!r}"
        raise ValueError(msg)
    if int(times) != times or times < 2:
        msg = f"times must be an integer >= 2, got {times!r}"
        raise ValueError(msg)
    b = np.atleast_1d(np.asarray(betas, dtype=float))
    if b.ndim != 1 or b.size == 0 or np.any(b < 0) or not np.all(np.isfinite(b)):
        msg = f"betas must be a non-empty sequence of finite values >= 0, got {betas!r}"
        raise ValueError(msg)


__all__ = ["cluster_counts", "count_peaks", "dwell_times",
           "metastability_cell", "pde_cluster_counts", "trajectories"]
