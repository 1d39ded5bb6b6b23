"""``meanfield solve DOMAIN ...``: evolve a density and write NetCDF atomically."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

# Defaults in one place (the CLI's OPTIONS table), validated by the library objects.
DEFAULTS = {
    "beta": 4.0,
    "attention": "softmax",
    "value": 1,
    "noise": 0.0,
    "N": 128,
    "t_max": 4.0,
    "times": 51,
    "rtol": 1e-8,
    "atol": 1e-12,
    "init": "modes",
    "out": "solution.nc",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="evolve a density under the mean-field PDE",
                       description="Evolve a density under the mean-field PDE (docs/equations.md section 3).")
    p.add_argument("domain", choices=["circle", "sphere", "zonal"], help="spectral domain")
    p.add_argument("--beta", type=float, default=DEFAULTS["beta"])
    p.add_argument("--attention", choices=["softmax", "unnormalized"], default=DEFAULTS["attention"])
    p.add_argument("--value", type=int, choices=[1, -1], default=DEFAULTS["value"],
                   help="+1 attractive (V = I), -1 repulsive (V = -I)")
    p.add_argument("--noise", type=float, default=DEFAULTS["noise"], help="sigma of sigma*Laplacian")
    p.add_argument("--N", "--resolution", dest="N", type=int, default=DEFAULTS["N"],
                   help="grid size (circle: N; sphere: lmax; zonal: degree)")
    p.add_argument("--d", type=int, default=8, help="ambient dimension (zonal domain)")
    p.add_argument("--max-resolution", type=int, default=None)
    p.add_argument("--t-max", type=float, default=DEFAULTS["t_max"])
    p.add_argument("--times", type=int, default=DEFAULTS["times"], help="number of output times")
    p.add_argument("--rtol", type=float, default=DEFAULTS["rtol"])
    p.add_argument("--atol", type=float, default=DEFAULTS["atol"])
    p.add_argument("--form", choices=["continuity", "gradient"], default="continuity")
    p.add_argument("--init", choices=["modes", "vonmises", "uniform"], default=DEFAULTS["init"],
                   help="modes: uniform + 0.01 cos(k x) for k = 1..4 (or l = 1..4); "
                        "vonmises: two von Mises(-Fisher) bumps")
    p.add_argument("--out", type=Path, default=Path(DEFAULTS["out"]))
    p.add_argument("--plot", type=Path, default=None, help="also draw the result to this PNG")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def _domain(args: argparse.Namespace):
    import meanfield

    if args.domain == "circle":
        return meanfield.Circle(args.N)
    if args.domain == "sphere":
        return meanfield.Sphere(args.N)
    return meanfield.ZonalSphere(args.d, args.N)


def _initial(domain, kind: str) -> np.ndarray:
    from meanfield import initial

    if kind == "uniform":
        return initial.uniform(domain)
    if kind == "vonmises":
        d = domain.d
        a = np.zeros(d)
        a[0] = 1.0
        b = np.zeros(d)
        b[0], b[-1] = -0.6, 0.8
        return initial.von_mises(domain, [a, b], [3.0, 5.0], [0.6, 0.4])
    keys = {"circle": [1, 2, 3, 4], "sphere": [(1, 0), (2, 1), (3, -2), (4, 3)], "zonal": [1, 2, 3, 4]}
    modes = {k: 0.01 for k in keys[domain.name]}
    return initial.uniform_plus_modes(domain, modes)


def run(args: argparse.Namespace) -> int:
    import meanfield
    from meanfield.solve import ResolutionError

    model = meanfield.Model(args.beta, attention=args.attention, value=args.value, noise=args.noise)
    domain = _domain(args)
    rho0 = _initial(domain, args.init)
    if not args.times >= 2:
        msg = f"--times must be >= 2, got {args.times}"
        raise ValueError(msg)
    t = np.linspace(0.0, args.t_max, args.times)
    try:
        ds = meanfield.solve(model, domain, rho0, t, form=args.form, rtol=args.rtol, atol=args.atol,
                             max_resolution=args.max_resolution, progress=not args.no_progress,
                             out=args.out)
        code = 0
    except ResolutionError as exc:
        print(f"meanfield: {exc}")
        print(f"partial results (up to t = {exc.t:.6g}) written to {args.out}")
        ds, code = exc.dataset, 1
    print(f"wrote {args.out}: {ds.sizes['time']} times, final resolution "
          f"{int(ds['resolution'][-1])}, {ds.attrs['num_accepted']} steps; {ds.attrs['stop_reason']}")
    if args.plot is not None:
        from meanfield.plots import plot_result

        plot_result(ds, args.plot)
        print(f"wrote {args.plot}")
    return code
