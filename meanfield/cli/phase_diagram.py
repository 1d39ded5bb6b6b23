"""``meanfield phase-diagram``: the probability of clustering over (t, beta) (Figure 3).

Runs :func:`validation.phase_diagram.phase_diagram` (optionally on a Dask cluster), writes
the Dataset as NetCDF (atomically) and, optionally, a PNG heat map with the curve (6.12).
Each finished (d, beta) cell is saved under ``OUT.cells/`` as it completes; after an
interruption, the same command with ``--resume`` computes only the missing cells.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``phase-diagram`` and set ``func``."""
    p = subparsers.add_parser(
        "phase-diagram",
        help="probability that <x_1(t), x_2(t)> >= 1 - delta over (t, beta), Figure 3",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--n", type=int, default=32, help="tokens (default 32)")
    p.add_argument("--d", type=int, nargs="+", default=[2],
                   help="dimension(s) d of S^{d-1} (default 2; several give a d axis)")
    p.add_argument("--beta-min", type=float, default=0.1, help="smallest beta (default 0.1)")
    p.add_argument("--beta-max", type=float, default=9.0, help="largest beta (default 9)")
    p.add_argument("--betas", type=int, default=90, help="number of beta values (default 90)")
    p.add_argument("--t-max", type=float, default=30.0, help="final time (default 30)")
    p.add_argument("--times", type=int, default=200, help="number of output times (200)")
    p.add_argument("--delta", type=float, default=1e-3, help="threshold 1 - delta (1e-3)")
    p.add_argument("--realizations", type=int, default=1024, help="starts per cell (1024)")
    p.add_argument("--attention", default="softmax", choices=("softmax", "unnormalized"))
    p.add_argument("--qk", default="identity", choices=("identity", "ginibre", "goe"),
                   help="law of Q^T K, drawn per realisation (Figure 5)")
    p.add_argument("--v", default="identity", choices=("identity", "ginibre", "goe", "qk"),
                   help="law of V; 'qk' sets V = Q^T K")
    p.add_argument("--dt", type=float, default=0.3, help="largest RK4 step (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    p.add_argument("--workers", type=int, default=1, help="LocalCluster workers (1: no cluster)")
    p.add_argument("--scheduler", help="address of an existing Dask scheduler")
    p.add_argument("--store", type=Path,
                   help="directory for the per-cell files (default: OUT with suffix .cells)")
    p.add_argument("--resume", action="store_true",
                   help="skip the cells already in the store (after an interruption)")
    p.add_argument("--keep-cells", action="store_true",
                   help="keep the per-cell files after success (default: remove them)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--out", type=Path, required=True, help="NetCDF file to write")
    p.add_argument("--plot", type=Path, help="PNG heat map with the curve (6.12)")
    p.set_defaults(func=run)
    return p


def write_netcdf(ds: Any, path: Path) -> None:
    """Write ``ds`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".nc", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring."""
    from validation.phase_diagram import phase_diagram
    from validation.plots_phase import plot_phase_diagram

    d = args.d[0] if len(args.d) == 1 else args.d
    store = args.store if args.store is not None else args.out.with_suffix(".cells")
    ds = phase_diagram(
        n=args.n, d=d, beta_min=args.beta_min, beta_max=args.beta_max, betas=args.betas,
        t_max=args.t_max, times=args.times, delta=args.delta, realizations=args.realizations,
        attention=args.attention, seed=args.seed, workers=args.workers, qk=args.qk, v=args.v,
        dt=args.dt, scheduler=args.scheduler, store=store, resume=args.resume,
        progress=not args.no_progress)
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}")
    if not args.keep_cells:
        shutil.rmtree(store, ignore_errors=True)
    if args.plot is not None:
        plot_phase_diagram(ds, args.plot)
        print(f"wrote {args.plot}")
    return 0


__all__ = ["add_parser", "run", "write_netcdf"]
