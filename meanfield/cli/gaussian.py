"""``meanfield gaussian``: solve the mean/covariance ODE of a Gaussian in ``R^d``.

Matrices and vectors are given as JSON (``--Q "[[1,0],[0,1]]"``), or the whole model as a
JSON file written by ``Model.to_json()`` (``--model model.json``). Writes the Dataset as
NetCDF (atomically) and, optionally, a PNG of the ellipses (``d = 2``) or eigenvalues.
Exit code 0 on success, 1 on blow-up (the partial result is still written), 2 on bad input.
See ``docs/gaussian.md`` and docs/equations.md section 4.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _json_array(text: str) -> np.ndarray:
    try:
        return np.array(json.loads(text), dtype=float)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        msg = f"expected a JSON number array such as [[1,0],[0,1]], got {text!r} ({exc})"
        raise argparse.ArgumentTypeError(msg) from None


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``gaussian`` and set ``func``."""
    p = subparsers.add_parser(
        "gaussian",
        help="mean/covariance ODE of a Gaussian in R^d (softmax, multi-head, L2, Sinkhorn)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--model", type=Path, help="JSON file of a Model (overrides the options below)")
    p.add_argument("--beta", type=float, default=1.0, help="inverse temperature (default 1)")
    p.add_argument("--attention", default="softmax", choices=("softmax", "l2", "sinkhorn"))
    p.add_argument("--value", type=int, default=1, choices=(1, -1), help="sign folded into V")
    p.add_argument("--noise", type=float, default=0.0, help="sigma of sigma*Laplacian")
    for name in ("Q", "K", "V"):
        p.add_argument(f"--{name}", type=_json_array, help=f"{name} as a JSON matrix (default I)")
    p.add_argument("--heads", type=str, help="JSON list of [Q, K, V] triples (multi-head)")
    p.add_argument("--mean", type=_json_array, required=True, help="initial mean, JSON vector")
    p.add_argument("--cov", type=_json_array, required=True, help="initial covariance, JSON")
    p.add_argument("--t-end", type=float, required=True, help="final time")
    p.add_argument("--num", type=int, default=101, help="number of output times (default 101)")
    p.add_argument("--rtol", type=float, default=1e-10)
    p.add_argument("--atol", type=float, default=1e-12)
    p.add_argument("--out", type=Path, help="NetCDF file to write")
    p.add_argument("--plot", type=Path, help="PNG: ellipses for d = 2, eigenvalues otherwise")
    p.set_defaults(func=run)
    return p


def _model(args: argparse.Namespace) -> Any:
    from ..model import Model

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


def _write_netcdf(ds: Any, path: Path) -> None:
    from ..io import write_netcdf

    write_netcdf(ds, path)


def run(args: argparse.Namespace) -> int:
    """Solve, report the final state, write the outputs; see the module docstring."""
    from ..gaussian import BlowUpError, solve_gaussian
    from ..gaussian_plots import plot_eigenvalues, plot_ellipses, save_png

    if args.num < 2 or not args.t_end > 0:
        msg = f"need --num >= 2 and --t-end > 0, got {args.num} and {args.t_end}"
        raise ValueError(msg)
    model = _model(args)
    times = np.linspace(0.0, args.t_end, args.num)
    code = 0
    try:
        ds = solve_gaussian(model, args.mean, args.cov, times, rtol=args.rtol, atol=args.atol)
    except BlowUpError as exc:
        print(f"meanfield gaussian: {exc}", file=sys.stderr)
        ds, code = exc.partial, 1
    last = ds.isel(time=-1)
    np.set_printoptions(precision=6, suppress=False)
    print(f"t = {float(last.time):.6g}: {ds.attrs['stop_reason']}")
    print(f"mean = {last['mean'].values}")
    print(f"cov eigenvalues = {np.linalg.eigvalsh(last['cov'].values)}")
    if args.out is not None:
        _write_netcdf(ds, args.out)
        print(f"wrote {args.out}")
    if args.plot is not None:
        fig = plot_ellipses(ds) if ds.sizes["dim"] == 2 else plot_eigenvalues(ds)
        save_png(fig, args.plot)
        print(f"wrote {args.plot}")
    return code


__all__ = ["add_parser", "run"]
