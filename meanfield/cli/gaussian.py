"""``meanfield gaussian``: solve the mean/covariance ODE of a Gaussian in ``R^d``.

Matrices and vectors are given as JSON (``--Q "[[1,0],[0,1]]"``), or the whole model as a
JSON file written by ``Model.to_json()`` (``--model model.json``). Writes the Dataset as
NetCDF (atomically) and, optionally, a PNG of the ellipses (``d = 2``) or eigenvalues.
Exit code 0 on success, 1 on blow-up or when the integrator gives up (the partial result is
still written), 2 on bad input, 130 interrupted (the output times passed up to the last
accepted step are written to ``--out``, ``successful = 0``).
See ``docs/gaussian.md`` and docs/equations.md section 4.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from meanfield.cli import options


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``gaussian`` and set ``func``."""
    return options.add_parser(
        subparsers, "gaussian", func=run, description=__doc__.split("\n\n")[0],
        help="mean/covariance ODE of a Gaussian in R^d (softmax, multi-head, L2, Sinkhorn)")


def _model(args: argparse.Namespace) -> Any:
    from meanfield.model import Model

    if args.model is not None:
        return Model.from_state(args.model.read_text())
    heads = None
    if args.heads:
        try:
            heads = json.loads(args.heads)
        except json.JSONDecodeError as exc:
            msg = f"--heads must be a JSON list of [Q, K, V] triples ({exc})"
            raise ValueError(msg) from None
    return Model(beta=args.beta, attention=args.attention, value=args.value, noise=args.noise,
                 Q=args.Q, K=args.K, V=args.V, heads=heads)


def draw(ds: Any, path: Path) -> None:
    """Draw a Gaussian result to the PNG ``path``: ellipses for ``d = 2``, else eigenvalues."""
    from meanfield.io import save_png
    from meanfield.plots.gaussian import plot_eigenvalues, plot_ellipses

    save_png(plot_ellipses(ds) if ds.sizes["dim"] == 2 else plot_eigenvalues(ds), path)


def run(args: argparse.Namespace) -> int:
    """Solve, report the final state, write the outputs; see the module docstring."""
    from meanfield.gaussian import GaussianFlowError, solve_gaussian
    from meanfield.io import write_netcdf

    model = _model(args)
    times = np.linspace(0.0, args.t_max, args.times)
    code = 0
    try:
        ds = solve_gaussian(model, args.mean, args.cov, times, rtol=args.rtol, atol=args.atol)
    except GaussianFlowError as exc:  # a blow-up, or the integrator gave up
        if exc.partial is None:
            raise
        # one prefix: the reason as the partial result records it, not solve_gaussian's name
        print(f"meanfield gaussian: {exc.partial.attrs['stop_reason']}", file=sys.stderr)
        ds, code = exc.partial, 1
    last = ds.isel(time=-1)
    np.set_printoptions(precision=6, suppress=False)
    print(f"t = {float(last.time):.6g}: {ds.attrs['stop_reason']}")
    print(f"mean = {last['mean'].values}")
    print(f"cov eigenvalues = {np.linalg.eigvalsh(last['cov'].values)}")
    if args.out is not None:
        write_netcdf(ds, args.out)
        print(f"wrote {args.out}")
    if args.plot is not None:
        draw(ds, args.plot)
        print(f"wrote {args.plot}")
    return code


__all__ = ["add_parser", "draw", "run"]
