"""``meanfield convergence``: self-convergence study of a PDE run (resolution doubling and
tolerance tightening), printed as a table and written as NetCDF.

The run is given by its model (``--beta --attention --value --noise``), domain
(``--domain circle|sphere|zonal --resolution R [--d D]``), initial density (``--initial``,
or ``--rho0 FILE``: a ``.npy`` of grid values, or a NetCDF result whose first ``density``
is used) and final time. See :func:`meanfield.convergence.self_convergence` and
``docs/validation.md``. Exit code 0 when every resolution stayed resolved to the final
time, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        msg = f"expected comma-separated numbers such as 1e-6,1e-7,1e-8, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _modes(text: str) -> dict[int, float]:
    out = {}
    try:
        for part in text.split(","):
            k, a = part.split(":")
            out[int(k)] = float(a)
    except ValueError:
        msg = f"expected modes as k:amplitude pairs such as 1:0.05,3:0.02, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convergence`` and set ``func``."""
    p = subparsers.add_parser(
        "convergence",
        help="self-convergence study of a PDE run (resolution doubling, tolerance tightening)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--domain", choices=("circle", "sphere", "zonal"), default="circle")
    p.add_argument("--resolution", type=int, default=32, help="coarsest N / lmax / degree (default 32)")
    p.add_argument("--d", type=int, default=8, help="ambient dimension of --domain zonal (default 8)")
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--attention", default="softmax", help="softmax (SA) or unnormalized (USA)")
    p.add_argument("--value", type=int, default=1, choices=(1, -1), help="+1 attractive, -1 repulsive")
    p.add_argument("--noise", type=float, default=0.0)
    p.add_argument("--initial", choices=("von-mises", "wrapped-cauchy", "modes"), default="von-mises",
                   help="initial density (default von-mises)")
    p.add_argument("--kappa", type=float, default=1.0, help="von Mises(-Fisher) concentration")
    p.add_argument("--r", type=float, default=0.5, help="wrapped Cauchy radius")
    p.add_argument("--modes", type=_modes, default={1: 0.05}, help="uniform + modes, k:amp,...")
    p.add_argument("--rho0", type=Path, help=".npy grid values or NetCDF result (overrides --initial)")
    p.add_argument("--t-end", type=float, default=1.0)
    p.add_argument("--num", type=int, default=5, help="number of output times (default 5)")
    p.add_argument("--levels", type=int, default=4, help="number of resolutions R 2^j (default 4)")
    p.add_argument("--rtol", type=float, default=1e-10, help="time tolerance of the resolution study")
    p.add_argument("--atol", type=float, default=1e-14)
    p.add_argument("--tolerances", type=_floats, default=[1e-6, 1e-7, 1e-8, 1e-9],
                   help="rtol values of the tolerance study (empty string: skip)")
    p.add_argument("--tail-tol", type=float, default=1e-10, help="resolution monitor threshold")
    p.add_argument("--out", type=Path, help="NetCDF file for the study")
    p.set_defaults(func=run)
    return p


def _domain(args: argparse.Namespace) -> Any:
    if args.domain == "circle":
        from ..domains.circle import Circle

        return Circle(args.resolution)
    if args.domain == "sphere":
        from ..domains.sphere import Sphere

        return Sphere(args.resolution)
    from ..domains.zonal_sphere import ZonalSphere

    return ZonalSphere(args.d, args.resolution)


def _initial(args: argparse.Namespace, domain: Any) -> np.ndarray:
    from .. import initial

    if args.rho0 is not None:
        path = Path(args.rho0)
        if path.suffix == ".npy":
            return initial.from_array(domain, np.load(path))
        from ..io import domain_of, read_netcdf

        ds = read_netcdf(path)
        src = domain_of(ds)
        if src.with_resolution(domain.resolution) != domain and src != domain:
            msg = f"--rho0 {path} lives on {src!r}, not on {domain!r}"
            raise ValueError(msg)
        c = src.forward(ds["density"].values[0])
        return initial.from_array(domain, domain.backward(domain.prolong(c, src)))
    if args.initial == "von-mises":
        center = 0.0 if domain.d == 2 else np.eye(domain.d)[-1]
        return initial.von_mises(domain, center, args.kappa)
    if args.initial == "wrapped-cauchy":
        return initial.wrapped_cauchy(domain, args.r, 0.0 if domain.d == 2 else np.eye(domain.d)[-1])
    return initial.uniform_plus_modes(domain, args.modes)


def run(args: argparse.Namespace) -> int:
    from ..convergence import convergence_table, self_convergence
    from ..io import write_netcdf
    from ..model import Model

    if args.t_end <= 0:
        msg = f"--t-end must be > 0, got {args.t_end}"
        raise ValueError(msg)
    if args.num < 2:
        msg = f"--num must be >= 2, got {args.num}"
        raise ValueError(msg)
    model = Model(beta=args.beta, attention=args.attention, value=args.value, noise=args.noise)
    domain = _domain(args)
    rho0 = _initial(args, domain)
    times = np.linspace(0.0, args.t_end, args.num)
    ds = self_convergence(model, domain, rho0, times, levels=args.levels, rtol=args.rtol, atol=args.atol,
                          tolerances=tuple(args.tolerances), tail_tol=args.tail_tol)
    print(convergence_table(ds))
    if args.out is not None:
        write_netcdf(ds, args.out)
        print(f"\nwritten: {args.out}")
    resolved = bool(np.all(ds["t_resolved"].values >= times[-1] * (1 - 1e-12)))
    if not resolved:
        print("\nnote: some resolutions stopped before the final time (t_resolved); compare only "
              "up to the smallest t_resolved, or raise --resolution")
    return 0 if resolved else 1
