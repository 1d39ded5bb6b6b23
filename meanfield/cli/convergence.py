"""``meanfield convergence``: self-convergence study of a PDE run (resolution doubling and
tolerance tightening), printed as a table and written as NetCDF.

The run is given by its model (``--beta --attention --value --noise``), domain
(``--domain circle|sphere|zonal --resolution R [--d D]``), initial density (``--init``,
or ``--rho0 FILE``: a ``.npy`` of grid values, or a NetCDF result whose first ``density``
is used) and final time. See :func:`meanfield.spectral.convergence.self_convergence` and
``docs/validation.md``. Exit code 0 when two resolutions (and the tolerance study) stayed
resolved to the final time; 1 otherwise, with a sentence saying what to change (a finer
``--resolution``, an earlier ``--t-max``, a larger ``--tail-tol``), and no table at all when
no two resolutions can be compared after the start; 2 on bad input; 130 interrupted (the study of
the runs finished is written to ``--out``, the others NaN, ``successful = 0``, its
``stop_reason`` naming the resolutions and tolerances not run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from meanfield.cli import options


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convergence`` and set ``func``."""
    return options.add_parser(
        subparsers, "convergence", func=run, description=__doc__.split("\n\n")[0],
        help="self-convergence study of a PDE run (resolution doubling, tolerance tightening)")


def _domain(args: argparse.Namespace) -> Any:
    from meanfield.domains import Domain

    return Domain.registry[args.domain].from_options(args.resolution, args.d)


def _initial(args: argparse.Namespace, domain: Any) -> np.ndarray:
    from meanfield.spectral import initial

    if args.rho0 is not None:
        path = Path(args.rho0)
        if path.suffix == ".npy":
            return initial.from_array(domain, np.load(path))
        from meanfield.io import domain_of, read_netcdf

        ds = read_netcdf(path)
        src = domain_of(ds)
        if src.with_resolution(domain.resolution) != domain and src != domain:
            msg = f"--rho0 {path} lives on {src!r}, not on {domain!r}"
            raise ValueError(msg)
        c = src.forward(ds["density"].values[0])
        return initial.from_array(domain, domain.backward(domain.prolong(c, src)))
    if args.init == "von-mises":
        center = 0.0 if domain.d == 2 else np.eye(domain.d)[-1]
        return initial.von_mises(domain, center, args.kappa)
    if args.init == "wrapped-cauchy":
        return initial.wrapped_cauchy(domain, args.r, 0.0 if domain.d == 2 else np.eye(domain.d)[-1])
    return initial.uniform_plus_modes(domain, args.modes)


def run(args: argparse.Namespace) -> int:
    from meanfield.io import write_netcdf
    from meanfield.model import Model
    from meanfield.spectral.convergence import convergence_table, diagnose, self_convergence, table_time

    model = Model(beta=args.beta, attention=args.attention, value=args.value, noise=args.noise)
    domain = _domain(args)
    rho0 = _initial(args, domain)
    times = np.linspace(0.0, args.t_max, args.times)
    # Ctrl-C: self_convergence's Interrupted carries the study of the runs finished, which
    # meanfield.cli.main writes to --out (successful = 0)
    ds = self_convergence(model, domain, rho0, times, levels=args.levels, rtol=args.rtol,
                          atol=args.atol, tolerances=tuple(args.tolerances),
                          tail_tol=args.tail_tol)
    problem = diagnose(ds)
    if table_time(ds) is not None:  # else every comparison is at the start: no table
        print(convergence_table(ds, note=False))  # the note goes to stderr
    if args.out is not None:
        write_netcdf(ds, args.out)
        print(f"\nwritten: {args.out}")
    if problem is not None:
        print(f"meanfield convergence: {problem}", file=sys.stderr)
        return 1
    return 0
