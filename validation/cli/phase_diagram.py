"""``meanfield phase-diagram``: the probability of clustering over (t, beta) (Figure 3).

Runs :func:`validation.phase_diagram.phase_diagram` (optionally on a Dask cluster), writes
the Dataset as NetCDF (atomically) and, optionally, a PNG heat map with the curve (6.12).
Each finished (d, beta) cell is saved under ``OUT.cells/`` as it completes; after an
interruption, the same command with ``--resume`` computes only the missing cells.
``--backend torch --device cuda`` runs the cells on a GPU (one GPU per worker with
``--workers``), ``--dtype float32`` in single precision.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from meanfield.cli import options


def add_backend_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--backend``, ``--device`` and ``--dtype`` (:mod:`meanfield.backend`); the values
    are checked by the computation (``ValueError`` naming the field, exit status 2)."""
    from meanfield.backend import BACKENDS, DTYPES

    parser.add_argument("--backend", choices=BACKENDS, default="numpy",
                        help="array library of the particle runs (default: numpy)")
    parser.add_argument("--device", default=None, metavar="DEVICE",
                        help="torch device: cpu, cuda (one GPU per Dask worker) or cuda:K "
                             "(default: none, the CPU)")
    parser.add_argument("--dtype", choices=DTYPES, default="float64",
                        help="floating-point precision (default: float64)")
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``phase-diagram`` and set ``func``."""
    return add_backend_options(options.add_parser(
        subparsers, "phase-diagram", func=run, description=__doc__.split("\n\n")[0],
        help="probability that <x_1(t), x_2(t)> >= 1 - delta over (t, beta), Figure 3"))


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring."""
    from meanfield.io import write_netcdf
    from validation.phase_diagram import phase_diagram
    from validation.plots_phase import plot_phase_diagram

    d = args.d[0] if len(args.d) == 1 else args.d
    store = args.store if args.store is not None else args.out.with_suffix(".cells")
    try:
        ds = phase_diagram(
            n=args.n, d=d, beta_min=args.beta_min, beta_max=args.beta_max, betas=args.betas,
            t_max=args.t_max, times=args.times, delta=args.delta, realizations=args.realizations,
            attention=args.attention, seed=args.seed, workers=args.workers, qk=args.qk, v=args.v,
            dt=args.dt, scheduler=args.scheduler, store=store, resume=args.resume,
            progress=args.progress, backend=args.backend, device=args.device, dtype=args.dtype)
    except KeyboardInterrupt:
        print(f"meanfield phase-diagram: interrupted; the finished cells are kept in {store}; "
              "run the same command with --resume to compute only the missing ones",
              file=sys.stderr)
        return 130
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}")
    if not args.keep_cells:
        shutil.rmtree(store, ignore_errors=True)
    if args.plot is not None:
        plot_phase_diagram(ds, args.plot)
        print(f"wrote {args.plot}")
    return 0


__all__ = ["add_backend_options", "add_parser", "run"]
