"""``meanfield plot FILE``: draw a result file to PNG."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a result file (NetCDF) to PNG",
                       description="Circle: (theta, t) heat map with the energy beneath; sphere: "
                                   "maps at chosen times; zonal: profiles against s.")
    p.add_argument("file", type=Path)
    p.add_argument("--out", type=Path, default=None, help="PNG path (default: FILE with .png)")
    p.add_argument("--times", type=float, nargs="*", default=None, help="times to draw (sphere)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from meanfield.io import read_netcdf

    ds = read_netcdf(args.file)
    out = args.out or args.file.with_suffix(".png")
    if "density" in ds:
        from meanfield.plots import plot_result

        plot_result(ds, out, times=args.times)
    elif "x" in ds:
        from particles.plots import plot_result as plot_particles

        plot_particles(ds, out)
    else:
        msg = f"{args.file} holds neither a density nor particles (variables: {list(ds.data_vars)})"
        raise ValueError(msg)
    print(f"wrote {out}")
    return 0
