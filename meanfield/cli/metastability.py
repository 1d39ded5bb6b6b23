"""``meanfield metastability``: clusters on the circle against time (Figure 4, Problem 1).

Trajectories of one start, cluster counts of many seeds and the time spent in each
multi-cluster state (:mod:`validation.metastability`), optionally the peaks of the PDE
density; writes NetCDF (atomically) and optional PNGs (angles against time; cluster counts).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``metastability`` and set ``func``."""
    p = subparsers.add_parser(
        "metastability",
        help="trajectories and cluster counts on the circle, particles and PDE (Figure 4)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--beta", type=float, nargs="+", default=[4.0, 9.0],
                   help="inverse temperatures (default 4 9)")
    p.add_argument("--n", type=int, default=32, help="tokens (default 32)")
    p.add_argument("--seeds", type=int, default=256, help="random starts per beta (256)")
    p.add_argument("--t-max", type=float, default=30.0, help="final time (default 30)")
    p.add_argument("--times", type=int, default=301, help="number of output times (301)")
    p.add_argument("--delta", type=float, default=1e-3,
                   help="tokens i, j are in one cluster when <x_i, x_j> >= 1 - delta")
    p.add_argument("--attention", default="softmax", choices=("softmax", "unnormalized"))
    p.add_argument("--dt", type=float, default=0.1, help="largest RK4 step (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    p.add_argument("--workers", type=int, default=1, help="LocalCluster workers (1: no cluster)")
    p.add_argument("--scheduler", help="address of an existing Dask scheduler")
    p.add_argument("--pde", action="store_true", help="also count the peaks of the PDE")
    p.add_argument("--N", type=int, default=256, help="PDE starting grid size (default 256)")
    p.add_argument("--pde-times", type=int, default=61, help="PDE output times (61)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--out", type=Path, required=True, help="NetCDF file to write")
    p.add_argument("--plot", type=Path, help="PNG of the angles against time (Figure 4)")
    p.add_argument("--plot-clusters", type=Path, help="PNG of the cluster counts and dwell times")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring."""
    import xarray as xr

    from validation.metastability import cluster_counts, pde_cluster_counts, trajectories
    from validation.plots_phase import plot_cluster_counts, plot_trajectories

    from .phase_diagram import write_netcdf

    traj = trajectories(betas=args.beta, n=args.n, t_max=args.t_max, times=args.times,
                        seed=args.seed, attention=args.attention, dt=args.dt)
    counts = cluster_counts(betas=args.beta, n=args.n, seeds=args.seeds, t_max=args.t_max,
                            times=args.times, delta=args.delta, attention=args.attention,
                            seed=args.seed, workers=args.workers, scheduler=args.scheduler,
                            dt=args.dt, progress=not args.no_progress)
    parts = [counts, traj.rename(clusters="trajectory_clusters", token="token")]
    if args.pde:
        parts.append(pde_cluster_counts(betas=args.beta, N=args.N, t_max=args.t_max,
                                        times=args.pde_times, seed=args.seed,
                                        attention=args.attention))
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
