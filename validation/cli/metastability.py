"""``meanfield metastability``: clusters on the circle against time (Figure 4, Problem 1).

Trajectories of one start, cluster counts of many seeds and the time spent in each
multi-cluster state (:mod:`validation.metastability`), optionally the peaks of the PDE
density; writes NetCDF (atomically) and optional PNGs (angles against time; cluster counts).
Interrupted (Ctrl-C), it writes the parts already finished (the trajectories, then the
cluster counts) with ``successful = 0`` and exits 130; a run that did not succeed (non-finite
states, a step beyond the stability bound) does the same with its reason and exits 1. With
``--on-failure record`` a failed ``beta`` of the cluster counts is NaN instead, left out of
the statistics and counted (``num_rejected``, ``settings["failed_cells"]``): the file is
written with ``successful = 0`` and the exit code is 1, the file as a whole not being the
study asked for.
The particle runs take ``--backend``, ``--device`` and ``--dtype`` as ``meanfield
phase-diagram`` does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from meanfield.cli import options
from meanfield.cli.options import Option, Use
from validation.cli import PAIRS

OPTIONS: dict[str, Option] = {
    "pde": Option("--pde", "also count the peaks of the PDE density", None, False,
                  flag_only=True),
    "pde_times": Option("--pde-times", "number of PDE output times", options.integer, 61,
                        lambda v: v >= 2, "must be >= 2"),
    "plot_clusters": Option("--plot-clusters", "PNG of the cluster counts and dwell times",
                            Path, shown="no figure", writes="figure"),
}
"""The options only ``meanfield metastability`` takes (they join
:data:`meanfield.cli.options.OPTIONS`)."""

TABLE: dict[str, Any] = {
    "beta": Use(default=[4.0, 9.0], nargs="+", help="inverse temperatures"), "n": PAIRS,
    "realizations": Use(default=256, help="random starts per beta"), "t_max": 30.0,
    "times": 301, "delta": 1e-3, "attention": Use(choices=options.attention_kinds("ensemble")),
    "dt": Use(default=0.1, help="largest RK4 step"), "seed": 0, "workers": 1,
    "scheduler": None, "on_failure": "stop", "pde": Use(),
    "resolution": Use(default=256, help="starting grid size N of the PDE"),
    "pde_times": Use(), "progress": True,
    "out": Use(required=True, help="NetCDF file to write"),
    "plot": Use(help="PNG of the angles against time (Figure 4)"),
    "plot_clusters": None, "overwrite": False,
    "backend": "numpy", "device": None, "dtype": "float64",
}
"""The options of ``meanfield metastability`` in ``--help`` order: a default, or a :class:`Use`
(the options of :data:`OPTIONS` and the shared ones of :mod:`meanfield.cli.options`)."""

options.register_command("metastability", TABLE, OPTIONS)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``metastability`` and set ``func``."""
    return options.add_parser(
        subparsers, "metastability", func=run, description=__doc__.split("\n\n")[0],
        help="trajectories and cluster counts on the circle, particles and PDE (Figure 4)")


def _write_partial(parts: list[Any], args: argparse.Namespace, stage: str, why: str) -> str:
    """Write the parts finished before an interruption or a failure to ``--out``
    (``successful = 0``, ``why`` and the stage in ``stop_reason``); return the sentence that
    says so."""
    import xarray as xr

    from meanfield.integrate import mark_unsuccessful
    from meanfield.io import write_netcdf

    if not parts:
        return f"during the {stage}; nothing was finished, nothing is written to {args.out}"
    ds = xr.merge(parts, combine_attrs="override")
    mark_unsuccessful(ds.attrs, f"{why} during the {stage}")
    write_netcdf(ds, args.out)
    kept = ", ".join(sorted(str(v) for v in ds.data_vars))
    return f"during the {stage}; the parts computed ({kept}) are written to {args.out}"


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring. Ctrl-C, or a run that failed, writes
    what was finished."""
    import xarray as xr

    from meanfield.integrate import IntegrationError, Interrupted, mark_unsuccessful
    from meanfield.io import write_netcdf
    from validation.cli.phase_diagram import in_options
    from validation.metastability import cluster_counts, pde_cluster_counts, trajectories
    from validation.plots_phase import plot_cluster_counts, plot_trajectories

    parts: list[Any] = []
    stage = "trajectories"
    try:
        traj = trajectories(betas=args.beta, n=args.n, t_max=args.t_max, times=args.times,
                            seed=args.seed, attention=args.attention, dt=args.dt,
                            backend=args.backend, device=args.device, dtype=args.dtype,
                            on_failure=args.on_failure)
        parts.append(traj.rename(clusters="trajectory_clusters", token="token"))
        stage = "cluster counts"
        counts = cluster_counts(betas=args.beta, n=args.n, seeds=args.realizations,
                                t_max=args.t_max, times=args.times, delta=args.delta,
                                attention=args.attention, seed=args.seed, workers=args.workers,
                                scheduler=args.scheduler, dt=args.dt, progress=args.progress,
                                backend=args.backend, device=args.device, dtype=args.dtype,
                                on_failure=args.on_failure)
        parts.insert(0, counts)
        if args.pde:
            stage = "PDE peaks"
            parts.append(pde_cluster_counts(betas=args.beta, N=args.resolution, t_max=args.t_max,
                                            times=args.pde_times, seed=args.seed,
                                            attention=args.attention))
    except KeyboardInterrupt as exc:  # the finished cells of the counts too (others NaN)
        if getattr(exc, "dataset", None) is not None and stage == "cluster counts":
            parts.insert(0, exc.dataset)  # type: ignore[attr-defined]
        said = _write_partial(parts, args, stage, "interrupted")
        raise Interrupted(said, None) from exc
    except IntegrationError as exc:  # its finished cells too (the others NaN), then exit 1
        if exc.dataset is not None and stage == "cluster counts":
            parts.insert(0, exc.dataset)
        said = _write_partial(parts, args, stage, f"failed: {exc}")
        exc.args = (f"{in_options(str(exc))}; {said}",)
        exc.handled_out = str(args.out)  # written (or said why not): not written again
        raise
    ds = xr.merge(parts, combine_attrs="override")  # the counts' attrs
    if not int(traj.attrs["successful"]):  # --on-failure record met a failed trajectory
        mark_unsuccessful(ds.attrs, traj.attrs["stop_reason"])
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}")
    for beta in args.beta:
        vf = ds["visit_fraction"].sel(beta=beta)
        dm = ds["dwell_median"].sel(beta=beta)
        if not bool(vf.notnull().any()):
            print(f"beta = {beta:g}: failed (NaN, left out: see stop_reason)")
            continue
        states = [int(k) for k in vf["clusters_state"].values if 2 <= k <= 6]
        summary = ", ".join(f"k={k}: {float(vf.sel(clusters_state=k)):.2f} of seeds, median "
                            f"{float(dm.sel(clusters_state=k)):.3g}" for k in states)
        print(f"beta = {beta:g}: time with k clusters ({summary})")
    if args.plot is not None:
        plot_trajectories(traj, args.plot)
        print(f"wrote {args.plot}")
    if args.plot_clusters is not None:
        plot_cluster_counts(ds, args.plot_clusters)
        print(f"wrote {args.plot_clusters}")
    if not int(ds.attrs["successful"]):  # --on-failure record met a failed beta
        print(f"meanfield metastability: error: {in_options(ds.attrs['stop_reason'])}; "
              f"{args.out} is written with successful = 0", file=sys.stderr)
        return 1
    return 0


__all__ = ["add_parser", "run"]
