"""``meanfield solve DOMAIN ...``: evolve a density and write NetCDF atomically."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from meanfield.cli import options


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``solve`` and set ``func``."""
    p = options.add_parser(
        sub, "solve", help="evolve a density under the mean-field PDE", func=run,
        description="Evolve a density under the mean-field PDE (docs/equations.md section 3).")
    from meanfield.domains import command_line_domains

    p.add_argument("domain", choices=[*command_line_domains(), "lagrangian"],
                   help="spectral domain, or lagrangian: the characteristics solver on nodes "
                        "(circle for --d 2, S^2 for --d 3; Gauss-Hermite nodes of N(0, I/4) in "
                        "R^d, d = 2, 3, for --geometry euclidean; --resolution is N, lmax or "
                        "nodes per dimension)")
    return p


def _domain(args: argparse.Namespace) -> Any:
    from meanfield.domains import Domain

    return Domain.registry[args.domain].from_options(args.resolution, args.d)


def _initial(domain: Any, kind: str) -> np.ndarray:
    from meanfield.spectral import initial

    if kind == "uniform":
        return initial.uniform(domain)
    if kind == "von-mises":
        d = domain.d
        a = np.zeros(d)
        a[0] = 1.0
        b = np.zeros(d)
        b[0], b[-1] = -0.6, 0.8
        return initial.von_mises(domain, [a, b], [3.0, 5.0], [0.6, 0.4])
    if not domain.low_modes:
        msg = f"--init modes: the domain {domain.name!r} names no low modes (Domain.low_modes)"
        raise ValueError(msg)
    modes = {k: 0.01 for k in domain.low_modes}
    return initial.uniform_plus_modes(domain, modes)


def _nodes(args: argparse.Namespace) -> Any:
    """The starting nodes of ``meanfield solve lagrangian`` (docs/lagrangian.md)."""
    import meanfield
    from meanfield.lagrangian import nodes

    if args.geometry == "euclidean":
        if args.d not in (2, 3):
            msg = f"--d must be 2 or 3 for lagrangian nodes in R^d, got {args.d}"
            raise ValueError(msg)
        return nodes.gaussian(np.zeros(args.d), 0.25 * np.eye(args.d), args.resolution)
    if args.d == 2:
        circle = meanfield.Circle(args.resolution)
        return nodes.circle(_initial(circle, args.init), args.resolution)
    if args.d == 3:
        sphere = meanfield.Sphere(args.resolution)
        return nodes.sphere(_initial(sphere, args.init), args.resolution)
    msg = f"--d must be 2 (circle) or 3 (S^2) for lagrangian nodes on the sphere, got {args.d}"
    raise ValueError(msg)


def run_lagrangian(args: argparse.Namespace, model: Any, t: np.ndarray) -> int:
    """``meanfield solve lagrangian``: the characteristics solver; exit 1 if it stopped early."""
    from meanfield.lagrangian import LagrangianError, solve_lagrangian

    start = _nodes(args)
    try:
        ds = solve_lagrangian(model, start, t, rtol=args.rtol, atol=args.atol,
                              progress=args.progress, out=args.out, overwrite=args.overwrite,
                              backend=args.backend, device=args.device, dtype=args.dtype,
                              field_method=args.field_method)
        code = 0
    except LagrangianError as exc:
        print(f"meanfield: {exc}")
        print(f"partial results (up to t = {exc.t:.6g}) written to {args.out}")
        ds, code = exc.dataset, 1
    print(f"wrote {args.out}: {ds.sizes['time']} times, {ds.sizes['node']} nodes, "
          f"{ds.attrs['num_accepted']} steps; {ds.attrs['stop_reason']}")
    if args.plot is not None:
        from meanfield.plots.lagrangian import plot_lagrangian

        plot_lagrangian(ds, args.plot)
        print(f"wrote {args.plot}")
    return code


def run(args: argparse.Namespace) -> int:
    """Solve, write, report; exit 1 when the run stopped before ``--t-max``."""
    import meanfield
    from meanfield.spectral.solve import ResolutionError, UnresolvedStartError

    model = meanfield.Model(args.beta, attention=args.attention, value=args.value, noise=args.noise)
    if args.domain == "lagrangian":
        return run_lagrangian(args, model, np.linspace(0.0, args.t_max, args.times))
    if (args.backend, args.device, args.dtype) != ("numpy", None, "float64"):
        msg = (f"--backend {args.backend} / --device / --dtype {args.dtype} apply to "
               f"'meanfield solve lagrangian' only: the spectral solvers run on NumPy float64")
        raise ValueError(msg)
    if "field_method" in (getattr(args, options.TYPED_KEY, None) or {}):
        msg = (f"--field-method {args.field_method} applies to 'meanfield solve lagrangian' only: "
               f"the spectral solvers sum no particles")
        raise ValueError(msg)
    domain = _domain(args)
    from meanfield.memory import check_solve_memory

    check_solve_memory(domain, args.times)  # before the initial density is even made
    rho0 = _initial(domain, args.init)
    t = np.linspace(0.0, args.t_max, args.times)
    try:
        ds = meanfield.solve(model, domain, rho0, t, form=args.form, rtol=args.rtol, atol=args.atol,
                             max_resolution=args.max_resolution, progress=args.progress,
                             out=args.out, overwrite=args.overwrite)
        code = 0
    except ResolutionError as exc:
        print(f"meanfield: {exc}")
        print(f"partial results (up to t = {exc.t:.6g}) written to {args.out}")
        ds, code = exc.dataset, 1
    except UnresolvedStartError as exc:  # said in the options' words: the start is the command's
        msg = (f"--init {args.init} is not resolved at --resolution {args.resolution} (its "
               f"spectral tail {exc.tail:.3g} is above the solver's threshold): raise --resolution")
        raise ValueError(msg) from exc
    print(f"wrote {args.out}: {ds.sizes['time']} times, final resolution "
          f"{int(ds['resolution'][-1])}, {ds.attrs['num_accepted']} steps; {ds.attrs['stop_reason']}")
    if args.plot is not None:
        from meanfield.plots.density import plot_result

        plot_result(ds, args.plot)
        print(f"wrote {args.plot}")
    return code


__all__ = ["add_parser", "run"]
