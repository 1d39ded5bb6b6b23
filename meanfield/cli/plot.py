"""``meanfield plot FILE``: draw a result file to an image (PNG by default; ``--out`` writes
the format its extension names, ``.jpg``, ``.pdf``, ``.svg``, ..., and refuses one matplotlib
cannot write).

The core draws its own files (densities of ``solve``; Gaussians of ``gaussian``;
self-convergence studies of ``convergence``); other packages add drawers for theirs through
the entry-point group :data:`GROUP` (``[project.entry-points."meanfield.plotters"]``), each a
module with ``accepts(ds) -> bool`` and ``draw(ds, out, at) -> None``, so that the core never
imports its users. A file that no drawer accepts (not written by this tool) is refused.
"""

from __future__ import annotations

import argparse
import math
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from meanfield.cli import options
from meanfield.io import check_writable, figure_format

GROUP = "meanfield.plotters"
"""Entry-point group of the drawers of other packages' files: ``name = "package.module"``."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``plot`` and set ``func``."""
    p = options.add_parser(
        sub, "plot", help="draw a result file (NetCDF) to an image", func=run,
        description="Circle: (theta, t) heat map with the energy beneath; sphere: maps at chosen "
                    "times; zonal: profiles against s; Gaussian: ellipses or eigenvalues; "
                    "convergence: differences against resolution and rtol; and the files of the "
                    "other packages' commands (particles, phase diagrams, metastability, "
                    "validation check data, token studies).")
    p.add_argument("file", type=Path, help="NetCDF file written by meanfield")
    return p


def _drawers() -> list[tuple[str, Any]]:
    """The registered drawers as (entry point, module), in name order."""
    out = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            out.append((ep.value, ep.load()))
        except Exception as exc:  # noqa: BLE001 (named, never dropped)
            msg = f"the drawer {ep.value} failed to import ({type(exc).__name__}: {exc})"
            raise RuntimeError(msg) from exc
    return out


def _read(path: Path) -> Any:
    """The Dataset in ``path``: NetCDF-4 first, then any engine xarray has (NetCDF-3)."""
    import xarray as xr

    from meanfield.io import read_netcdf

    if path.is_dir():
        msg = f"{path} is a folder, not a result file"
        raise ValueError(msg)
    try:
        return read_netcdf(path)
    except OSError as first:
        try:
            return xr.load_dataset(path)
        except Exception:  # noqa: BLE001 (the NetCDF-4 reason is the one to report)
            msg = f"cannot read {path} as NetCDF ({first})"
            raise ValueError(msg) from first


def _check_at(ds: Any, args: argparse.Namespace) -> None:
    """Refuse a time of ``--at`` outside the saved times of ``ds`` (named as typed, before
    drawing; the drawers pick the nearest saved time within round-off of the range)."""
    if not args.at or "time" not in ds.coords:
        return
    t = ds["time"].values
    for want in args.at:
        if not (math.isfinite(want) and t[0] - 1e-12 <= want <= t[-1] + 1e-12):
            msg = (f"{options.typed(args, 'at')} {want:g} is outside the saved times "
                   f"[{t[0]:g}, {t[-1]:g}] of {args.file}")
            raise ValueError(msg)


def run(args: argparse.Namespace) -> int:
    """Read, pick the drawer for the kind of file, write the image (the format of ``--out``)."""
    ds = _read(args.file)
    _check_at(ds, args)
    out = args.out or args.file.with_suffix(".png")
    figure_format(out, "--out")  # the format its extension names, or refused before drawing
    check_writable(out, overwrite=args.overwrite, name="--out")  # the default name too
    if "log_jacobian" in ds:
        from meanfield.plots.lagrangian import plot_lagrangian

        plot_lagrangian(ds, out, times=args.at)
    elif "density" in ds:
        from meanfield.plots.density import plot_result

        plot_result(ds, out, times=args.at)
    elif {"mean", "cov"} <= set(ds.data_vars):
        from meanfield.cli.gaussian import draw

        draw(ds, out)
    elif "difference_resolution" in ds.data_vars:
        from meanfield.plots.convergence import plot_convergence

        plot_convergence(ds, out)
    else:
        for _, module in _drawers():
            if module.accepts(ds):
                module.draw(ds, out, args.at)
                break
        else:
            msg = (f"meanfield plot cannot draw {args.file} "
                   f"(variables: {', '.join(map(str, ds.data_vars))})")
            raise ValueError(msg)
    print(f"wrote {out}")
    return 0


__all__ = ["GROUP", "add_parser", "run"]
