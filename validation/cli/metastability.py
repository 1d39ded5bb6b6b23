"""``meanfield metastability``: clusters on the circle against time (Figure 4, Problem 1).

Trajectories of one start, cluster counts of many seeds and the time spent in each
multi-cluster state (:mod:`validation.metastability`), optionally the peaks of the PDE
density; writes NetCDF (atomically) and optional PNGs (angles against time; cluster counts).
Interrupted (Ctrl-C), it writes the parts already finished (the trajectories, then the
cluster counts) with ``successful = 0`` and exits 130.
The particle runs take ``--backend``, ``--device`` and ``--dtype`` as ``meanfield
phase-diagram`` does.
"""

from __future__ import annotations

import argparse
from typing import Any

from meanfield.cli import options


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``metastability`` and set ``func``."""
    return options.add_parser(
        subparsers, "metastability", func=run, description=__doc__.split("\n\n")[0],
        help="trajectories and cluster counts on the circle, particles and PDE (Figure 4)")


def _write_partial(parts: list[Any], args: argparse.Namespace, stage: str) -> str:
    """Write the parts finished before an interruption to ``--out`` (``successful = 0``, the
    stage interrupted in ``stop_reason``); return the sentence that says so."""
    import xarray as xr

    from meanfield.io import write_netcdf

    ds = xr.merge(parts, combine_attrs="override")
    ds.attrs.update(successful=0, stop_reason=f"interrupted during the {stage}")
    write_netcdf(ds, args.out)
    kept = ", ".join(sorted(str(v) for v in ds.data_vars))
    return f"during the {stage}; the parts computed ({kept}) are written to {args.out}"


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring. Ctrl-C writes what was finished."""
    import xarray as xr

    from meanfield.integrate import Interrupted
    from meanfield.io import write_netcdf
    from validation.metastability import cluster_counts, pde_cluster_counts, trajectories
    from validation.plots_phase import plot_cluster_counts, plot_trajectories

    traj = trajectories(betas=args.beta, n=args.n, t_max=args.t_max, times=args.times,
                        seed=args.seed, attention=args.attention, dt=args.dt,
                        backend=args.backend, device=args.device, dtype=args.dtype)
    parts = [traj.rename(clusters="trajectory_clusters", token="token")]
    stage = "cluster counts"
    try:
        counts = cluster_counts(betas=args.beta, n=args.n, seeds=args.realizations,
                                t_max=args.t_max, times=args.times, delta=args.delta,
                                attention=args.attention, seed=args.seed, workers=args.workers,
                                scheduler=args.scheduler, dt=args.dt, progress=args.progress,
                                backend=args.backend, device=args.device, dtype=args.dtype)
        parts.insert(0, counts)
        if args.pde:
            stage = "PDE peaks"
            parts.append(pde_cluster_counts(betas=args.beta, N=args.resolution, t_max=args.t_max,
                                            times=args.pde_times, seed=args.seed,
                                            attention=args.attention))
    except KeyboardInterrupt as exc:
        said = _write_partial(parts, args, stage)
        raise Interrupted(said, None) from exc
    ds = xr.merge(parts, combine_attrs="override")
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}")
    for beta in args.beta:
        vf = ds["visit_fraction"].sel(beta=beta)
        dm = ds["dwell_median"].sel(beta=beta)
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
    return 0


__all__ = ["add_parser", "run"]
