"""``meanfield phase-diagram``: the probability of clustering over (t, beta) (Figure 3).

Runs :func:`validation.phase_diagram.phase_diagram` (optionally on a Dask cluster), writes
the Dataset as NetCDF (atomically) and, optionally, a PNG heat map with the curve (6.12).
Each finished (d, beta) cell is saved under ``OUT.cells/`` as it completes; after an
interruption, the same command with ``--resume`` computes only the missing cells. A store
that holds an earlier run's cells is never deleted or reused silently: without ``--resume``
the command is refused before any work unless ``--overwrite`` (start again).
``--backend torch --device cuda`` runs the cells on a GPU (one GPU per worker with
``--workers``), ``--dtype float32`` in single precision.

How it ends (:func:`validation.sweep.sweep`): exit 0 when every cell succeeded; 130 when
interrupted (the finished cells kept in the store and written to ``--out``, the others NaN,
``successful = 0``); 1 when a cell failed (non-finite states, a step beyond the stability
bound): with ``--on-failure stop`` (the default) the command stops with the cell's reason,
the finished cells written to ``--out``; with ``--on-failure record`` it goes on, and the
file holds the failed cells as NaN, counted in ``num_rejected`` and listed in
``settings["failed_cells"]``, with ``successful = 0``: exit 1, because the file as a whole is
not the diagram asked for (a script that checks the exit code must not take it for one).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from meanfield.cli import options
from meanfield.cli.options import Option, Use
from validation.cli import PAIRS, at_least_2

OPTIONS: dict[str, Option] = {
    "beta_min": Option("--beta-min", "smallest beta", options.number, 0.1, options.NONNEGATIVE,
                       "must be finite and >= 0"),
    "beta_max": Option("--beta-max", "largest beta", options.number, 9.0, options.NONNEGATIVE,
                       "must be finite and >= 0"),
    "betas": Option("--betas", "number of beta values", options.integer, 90, lambda v: v >= 1,
                    "must be >= 1"),
    "qk": Option("--qk", "law of Q^T K, drawn per realisation (Figure 5)", str, "identity",
                 choices=("identity", "ginibre", "goe")),
    "v": Option("--v", "law of V; 'qk' sets V = Q^T K", str, "identity",
                choices=("identity", "ginibre", "goe", "qk")),
    "store": Option("--store", "directory for the per-cell files", Path,
                    shown="OUT with suffix .cells"),
    "keep_cells": Option("--keep-cells", "keep the per-cell files after success", None, False,
                         flag_only=True),
}
"""The options only ``meanfield phase-diagram`` takes (they join
:data:`meanfield.cli.options.OPTIONS`)."""

TABLE: dict[str, Any] = {
    "n": PAIRS, "d": Use(default=[2], nargs="+", check=at_least_2, need="must be >= 2",
                          help="dimension(s) d of S^{d-1} (several give a d axis)"),
    "beta_min": Use(), "beta_max": Use(), "betas": Use(), "t_max": 30.0, "times": 200,
    "delta": 1e-3, "realizations": Use(default=1024, help="random starts per cell"),
    "attention": Use(choices=options.attention_kinds("phase_diagram")), "qk": Use(),
    "v": Use(), "dt": Use(default=0.3, help="largest RK4 step"), "seed": 0,
    "workers": 1, "scheduler": None, "on_failure": "stop", "store": None,
    "resume": Use(help="skip the cells already in the store (after an interruption); "
                       "an --out file left by the interrupted run (successful = 0) is "
                       "replaced"),
    "keep_cells": Use(), "progress": True,
    "out": Use(required=True, help="NetCDF file to write"),
    "plot": Use(help="PNG heat map with the curve (6.12)"), "overwrite": False,
    "backend": "numpy", "device": None, "dtype": "float64",
}
"""The options of ``meanfield phase-diagram`` in ``--help`` order: a default, or a :class:`Use`
(the options of :data:`OPTIONS` and the shared ones of :mod:`meanfield.cli.options`)."""

options.register_command("phase-diagram", TABLE, OPTIONS)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``phase-diagram`` and set ``func``."""
    return options.add_parser(
        subparsers, "phase-diagram", func=run, description=__doc__.split("\n\n")[0],
        help="probability that <x_1(t), x_2(t)> >= 1 - delta over (t, beta), Figure 3")


FLAGS = {"n": "--n", "d": "--d", "beta": "--beta-min/--beta-max/--betas",
         "times": "--t-max/--times", "delta": "--delta", "realizations": "--realizations",
         "attention": "--attention", "qk": "--qk", "v": "--v", "dt": "--dt", "seed": "--seed",
         "backend": "--backend", "device": "--device", "dtype": "--dtype"}
"""The options of this command by the names :func:`validation.phase_diagram.phase_diagram`
records in its store (the others, such as the code's version, have no option)."""


def _store(args: argparse.Namespace) -> Path:
    """The cell store, checked before any work: a folder that can be written, and one that
    holds an earlier run's cells only with ``--resume`` (continue) or ``--overwrite`` (whose
    old cells are then removed: the run starts again)."""
    from meanfield.io import check_folder

    store = args.store if args.store is not None else args.out.with_suffix(".cells")
    name = "--store" if args.store is not None else f"--store (default: {store}, from --out)"
    check_folder(store, name=name)
    if args.resume or not store.is_dir() or not any(store.iterdir()):
        return store
    if not args.overwrite:
        msg = (f"{name}: {store} holds the cells of an earlier run; pass --resume to continue "
               "it, or --overwrite to delete them and start again")
        raise ValueError(msg)
    shutil.rmtree(store)
    return store


def _mismatch(exc: Any, store: Path) -> ValueError:
    """The refusal of ``--resume`` in this command's words: the options that differ."""
    from validation.sweep import short

    said = ", ".join(f"{FLAGS.get(k, k)} ({short(a)} then, {short(b)} now)"
                     for k, (a, b) in exc.differences.items())
    return ValueError(f"--resume: the cells in {store} were computed with other settings: "
                      f"{said}; resume with the options of that run, or pass --overwrite "
                      "without --resume to start again (or another --store)")


def in_options(text: str) -> str:
    """A sweep's message in the command's words: ``--on-failure record``, ``--resume``."""
    return (text.replace("on_failure='record'", "--on-failure record")
            .replace("resume=True", "--resume"))


def run(args: argparse.Namespace) -> int:
    """Compute, write, plot; see the module docstring."""
    from meanfield.integrate import Interrupted
    from meanfield.io import write_netcdf
    from validation.phase_diagram import phase_diagram
    from validation.plots_phase import plot_phase_diagram
    from validation.sweep import ResumeMismatch, SweepError

    d = args.d[0] if len(args.d) == 1 else args.d
    store = _store(args)
    try:
        ds = phase_diagram(
            n=args.n, d=d, beta_min=args.beta_min, beta_max=args.beta_max, betas=args.betas,
            t_max=args.t_max, times=args.times, delta=args.delta, realizations=args.realizations,
            attention=args.attention, seed=args.seed, workers=args.workers, qk=args.qk, v=args.v,
            dt=args.dt, scheduler=args.scheduler, store=str(store), resume=args.resume,
            progress=args.progress, backend=args.backend, device=args.device, dtype=args.dtype,
            on_failure=args.on_failure)
    except ResumeMismatch as exc:
        raise _mismatch(exc, store) from exc
    except SweepError as exc:  # meanfield.cli.main writes .dataset to --out, exit 1
        exc.args = (in_options(str(exc)),)
        raise
    except KeyboardInterrupt as exc:
        partial = getattr(exc, "dataset", None)
        written = ""
        if partial is not None:
            write_netcdf(partial, args.out)
            written = f"; the finished cells are written to {args.out} (successful = 0)"
        said = in_options(str(exc).strip()) or "the phase diagram was interrupted"
        msg = (f"{said}{written}; run the same command with --resume to compute only the "
               f"missing cells (kept in {store})")
        raise Interrupted(msg, None) from exc
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}")
    if not args.keep_cells:
        shutil.rmtree(store, ignore_errors=True)
    if args.plot is not None:
        plot_phase_diagram(ds, args.plot)
        print(f"wrote {args.plot}")
    if not int(ds.attrs["successful"]):  # --on-failure record met failed cells
        print(f"meanfield phase-diagram: error: {in_options(ds.attrs['stop_reason'])}; "
              f"{args.out} is written with successful = 0", file=sys.stderr)
        return 1
    return 0


__all__ = ["add_parser", "run"]
