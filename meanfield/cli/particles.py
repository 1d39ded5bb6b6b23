"""``meanfield particles ...``: simulate the finite-n system and write NetCDF atomically."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

# Defaults in one place (the CLI's OPTIONS table); each value is validated below or by the
# library objects (Model, simulate), which name the bad field.
DEFAULTS: dict[str, Any] = {
    "n": 32,
    "d": 2,
    "batch": 0,
    "beta": 4.0,
    "attention": "softmax",
    "value": 1,
    "noise": 0.0,
    "geometry": "sphere",
    "init": "sphere",
    "t_max": 30.0,
    "times": 301,
    "seed": 0,
    "method": "rk4",
    "dt": None,
    "rtol": 1e-9,
    "atol": 1e-12,
    "memory_limit_mb": 256,
    "out": "particles.nc",
}

_INITS = ("sphere", "orthogonal", "gaussian")
_ATTENTION = ("softmax", "unnormalized", "l2", "sigmoid", "sinkhorn")
_METHODS = ("rk4", "dopri5", "dop853", "post_ln", "angles", "euler_maruyama")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "particles",
        help="simulate n interacting tokens (the finite-n system)",
        description="Simulate the particle system of docs/equations.md section 2 and write NetCDF.",
    )
    p.add_argument("--n", type=int, default=DEFAULTS["n"], help="tokens per system")
    p.add_argument("--d", type=int, default=DEFAULTS["d"], help="dimension (tokens in R^d)")
    p.add_argument("--batch", type=int, default=DEFAULTS["batch"],
                   help="independent systems (0: a single system, no batch axis)")
    p.add_argument("--beta", type=float, default=DEFAULTS["beta"])
    p.add_argument("--attention", choices=_ATTENTION, default=DEFAULTS["attention"])
    p.add_argument("--value", type=int, choices=[1, -1], default=DEFAULTS["value"],
                   help="+1 attractive (V = I), -1 repulsive (V = -I)")
    p.add_argument("--causal", action="store_true", help="causal mask (j <= i)")
    p.add_argument("--noise", type=float, default=DEFAULTS["noise"],
                   help="sigma (needs --method euler_maruyama)")
    p.add_argument("--geometry", choices=["sphere", "euclidean"], default=DEFAULTS["geometry"])
    p.add_argument("--init", choices=_INITS, default=DEFAULTS["init"],
                   help="uniform on the sphere, orthogonal (d >= n), or standard Gaussian")
    p.add_argument("--t-max", type=float, default=DEFAULTS["t_max"])
    p.add_argument("--times", type=int, default=DEFAULTS["times"], help="number of output times")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    p.add_argument("--method", choices=_METHODS, default=DEFAULTS["method"])
    p.add_argument("--dt", type=float, default=DEFAULTS["dt"],
                   help="step (fixed-step methods; default per method)")
    p.add_argument("--rtol", type=float, default=DEFAULTS["rtol"])
    p.add_argument("--atol", type=float, default=DEFAULTS["atol"])
    p.add_argument("--memory-limit-mb", type=float, default=DEFAULTS["memory_limit_mb"],
                   help="bound on the n x n attention tiles, in MiB")
    p.add_argument("--no-observables", action="store_true",
                   help="skip energy and dissipation (saves two n^2 passes per output)")
    p.add_argument("--out", type=Path, default=Path(DEFAULTS["out"]), help="NetCDF file")
    p.add_argument("--plot", type=Path, default=None,
                   help="PNG of the trajectories (circle: angle vs time; S^2: paths)")
    p.add_argument("--progress", action="store_true")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if args.times < 2:
        msg = f"--times must be >= 2, got {args.times}"
        raise ValueError(msg)
    if not (np.isfinite(args.t_max) and args.t_max > 0):
        msg = f"--t-max must be finite and > 0, got {args.t_max}"
        raise ValueError(msg)
    if args.batch < 0:
        msg = f"--batch must be >= 0, got {args.batch}"
        raise ValueError(msg)
    if args.seed < 0:
        msg = f"--seed must be >= 0, got {args.seed}"
        raise ValueError(msg)
    if not args.memory_limit_mb > 0:
        msg = f"--memory-limit-mb must be > 0, got {args.memory_limit_mb}"
        raise ValueError(msg)
    if args.init == "gaussian" and args.geometry == "sphere":
        msg = "--init gaussian needs --geometry euclidean (Gaussian tokens are not on the sphere)"
        raise ValueError(msg)


def _initial(args: argparse.Namespace, rng: np.random.Generator) -> np.ndarray:
    import particles

    batch = args.batch or None
    if args.init == "orthogonal":
        return particles.orthogonal(args.n, args.d, rng, batch=batch)
    if args.init == "gaussian":
        return particles.sample_gaussian(np.zeros(args.d), np.eye(args.d), args.n, rng,
                                         batch=batch)
    return particles.sample_sphere(args.n, args.d, rng, batch=batch)


def run(args: argparse.Namespace) -> int:
    import meanfield
    import particles

    _check(args)
    model = meanfield.Model(
        args.beta, attention=args.attention, value=args.value, noise=args.noise,
        causal=args.causal,
    )
    rng = np.random.default_rng(args.seed)
    x0 = _initial(args, rng)
    t = np.linspace(0.0, args.t_max, args.times)
    ds = particles.simulate(
        model, x0, t, geometry=args.geometry, method=args.method, dt=args.dt,
        rtol=args.rtol, atol=args.atol, memory_limit=int(args.memory_limit_mb * 2**20),
        observables=not args.no_observables, rng=rng, progress=args.progress,
    )
    settings = json.loads(ds.attrs["settings"])
    settings.update(seed=int(args.seed), init=args.init)
    ds.attrs["settings"] = json.dumps(settings, sort_keys=True)
    from meanfield.io import write_netcdf

    write_netcdf(ds, args.out)
    print(f"wrote {args.out}: {ds.sizes['time']} times, n = {args.n}, d = {args.d}, "
          f"{ds.attrs['num_steps']} steps in {ds.attrs['wall_time_s']:.3g} s")
    if args.plot is not None:
        from particles.plots import plot_trajectories


        plot_trajectories(ds, args.plot)
        print(f"wrote {args.plot}")
    return 0
