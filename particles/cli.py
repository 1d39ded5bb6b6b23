"""``meanfield particles ...``: simulate the finite-n system and write NetCDF atomically.

Registered with the ``meanfield`` command through the entry point
``particles = "particles.cli"`` (group ``meanfield.commands``); its options are declared
here (:data:`OPTIONS`, :data:`TABLE`) and registered with
:func:`meanfield.cli.options.register_command`. This module also draws particle files for
``meanfield plot`` (group ``meanfield.plotters``): :func:`accepts` and :func:`draw`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from meanfield.cli import options
from meanfield.cli.options import Option, Use
from particles.simulate import METHODS

OPTIONS: dict[str, Option] = {
    "causal": Option("--causal", "causal mask (token i attends to j <= i)", None, False,
                     flag_only=True),
    "batch": Option("--batch", "independent systems (0: a single system, no batch axis)",
                    options.integer, 0, lambda v: v >= 0, "must be >= 0"),
    "method": Option("--method", "time integrator", str, "rk4", choices=tuple(METHODS)),
    "memory_limit_mb": Option("--memory-limit-mb", "bound on the n x n attention tiles, in MiB",
                              options.number, 256.0, options.POSITIVE, "must be finite and > 0"),
    "no_observables": Option("--no-observables",
                             "skip energy and dissipation (saves two n^2 passes per output)",
                             None, False, flag_only=True),
}
"""The options only ``meanfield particles`` takes (they join
:data:`meanfield.cli.options.OPTIONS`)."""

TABLE: dict[str, Any] = {
    "n": 32, "d": 2, "batch": Use(), "beta": 4.0,
    "attention": Use(choices=options.attention_kinds("particles")), "value": 1,
    "causal": Use(), "noise": Use(default=0.0, help="sigma (needs --method euler_maruyama)"),
    "geometry": "sphere",
    "init": Use(default="sphere", choices=("sphere", "orthogonal", "gaussian"),
                help="uniform on the sphere, orthogonal (d >= n), or standard Gaussian"),
    "t_max": 30.0, "times": 301, "seed": 0, "method": Use(),
    "dt": Use(help="step of fixed-step methods"), "rtol": 1e-9, "atol": 1e-12,
    "memory_limit_mb": Use(), "field_method": "auto", "no_observables": Use(),
    "out": Path("particles.nc"),
    "plot": Use(help="PNG of the trajectories (circle: angle vs time; S^2: paths)"),
    "overwrite": False, "progress": True, "backend": "numpy", "device": None,
    "dtype": "float64",
}
"""The options of ``meanfield particles`` in ``--help`` order: a default, or a :class:`Use`
(the options of :data:`OPTIONS` and the shared ones of :mod:`meanfield.cli.options`)."""

options.register_command("particles", TABLE, OPTIONS)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``particles`` and set ``func``."""
    parser = options.add_parser(
        sub, "particles", func=run, help="simulate n interacting tokens (the finite-n system)",
        description="Simulate the particle system of docs/equations.md section 2 and write NetCDF.")
    return parser


def _check(args: argparse.Namespace) -> None:
    from meanfield.backend import get_backend

    get_backend(args.backend, args.device, args.dtype)  # a ValueError naming the field, early
    if args.init == "gaussian" and args.geometry == "sphere":
        msg = "--init gaussian needs --geometry euclidean (Gaussian tokens are not on the sphere)"
        raise ValueError(msg)


def _initial(args: argparse.Namespace, rng: np.random.Generator) -> np.ndarray:
    from particles.samplers import orthogonal, sample_gaussian, sample_sphere

    batch = args.batch or None
    if args.init == "orthogonal":
        return orthogonal(args.n, args.d, rng, batch=batch)
    if args.init == "gaussian":
        return sample_gaussian(np.zeros(args.d), np.eye(args.d), args.n, rng, batch=batch)
    return sample_sphere(args.n, args.d, rng, batch=batch)


def run(args: argparse.Namespace) -> int:
    """Simulate, write, report; see the module docstring."""
    from meanfield import Model
    from meanfield.integrate import Interrupted
    from meanfield.io import write_netcdf
    from particles.simulate import simulate

    _check(args)
    model = Model(args.beta, attention=args.attention, value=args.value, noise=args.noise,
                  causal=args.causal)
    from meanfield.memory import check_particles_memory

    check_particles_memory(max(args.batch, 1), args.n, args.d, args.times,  # before sampling
                           int(args.memory_limit_mb * 2**20), METHODS[args.method]["adaptive"])
    rng = np.random.default_rng(args.seed)
    x0 = _initial(args, rng)
    t = np.linspace(0.0, args.t_max, args.times)
    try:
        ds = simulate(
            model, x0, t, geometry=args.geometry, method=args.method, dt=args.dt,
            rtol=args.rtol, atol=args.atol, memory_limit=int(args.memory_limit_mb * 2**20),
            observables=not args.no_observables, rng=rng, progress=args.progress, throw=False,
            backend=args.backend, device=args.device, dtype=args.dtype,
            field_method=args.field_method,
            # the command's seed and start; settings["field_method"] is what simulate chose,
            # the request ("auto") is kept beside it
            settings={"seed": int(args.seed), "init": args.init,
                      "field_method_requested": args.field_method},
        )
    except Interrupted as exc:  # Ctrl-C: the states up to then are written, as solve does
        if exc.dataset is None:
            raise
        write_netcdf(exc.dataset, args.out)
        msg = f"{exc}; partial results written to {args.out}"
        raise Interrupted(msg, exc.dataset, handled_out=str(args.out)) from None
    write_netcdf(ds, args.out)
    print(f"wrote {args.out}: {ds.sizes['time']} times, n = {args.n}, d = {args.d}, "
          f"{ds.attrs['num_steps']} steps in {ds.attrs['wall_time_s']:.3g} s")
    if not ds.attrs["successful"]:  # kept up to the last accepted state; say so, exit 1
        print(f"meanfield particles: the run stopped early: {ds.attrs['stop_reason']}; "
              f"{args.out} holds the results up to t = {ds.attrs['t_reached']:.6g}",
              file=sys.stderr)
        code = 1
    else:
        code = 0
    if args.plot is not None:
        from particles.plots import plot_trajectories

        plot_trajectories(ds, args.plot)
        print(f"wrote {args.plot}")
    return code


def accepts(ds: Any) -> bool:
    """Whether ``ds`` is a particle file (token positions ``x``)."""
    return "x" in ds.data_vars


def draw(ds: Any, out: Path, at: list[float] | None = None) -> None:
    """Draw a particle file to the PNG ``out`` (for ``meanfield plot``)."""
    from particles.plots import plot_result

    plot_result(ds, out)


__all__ = ["accepts", "add_parser", "draw", "run"]
