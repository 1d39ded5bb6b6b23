"""Benchmark of ring nodes (the k = 1 zonal reduction, docs/lagrangian.md section 8); a plain script:

    python benchmarks/bench_rings.py [--quick] [--rings R] [--particles N]

von Mises–Fisher starts ``exp(kappa <x, e>)`` on ``S^{d-1}``, SA (``Q = K = V = I``) through
collapse to ``t = 10``: ``d`` in {64, 1024}, ``kappa`` in {8, 16, 32, 64}, ``beta`` in {1, 4}.
Prints the wall time, whether the run succeeded, ``E[s]`` at ``t = 10`` and the peak log density.
Target (issue 22): the ``d = 64``, ``kappa = 32`` run to ``t = 10`` in under a minute on 2 cores.

``--particles N``: also ``N`` particles in reflection-symmetric pairs (``validation.pairs``:
their mean stays on the axis ``e`` exactly; RK4, step ``--dt``) for each ``d`` of ``--dims`` at
``kappa`` (``--kappa``, default 32), ``beta = 1`` to ``t = 3``, and the Kolmogorov distance of
``s = <x, e>`` at each output time against the ring run's distribution function, times
``sqrt(N/2)`` (the values come in equal pairs: ``N/2`` independent draws at ``t = 0``; the 99 %
level of the Kolmogorov distribution is 1.63), with the level that adds the coherent
fluctuation of the start's mean (``validation.pairs.kolmogorov_levels``), and against the run
of the start fitted to the particles' mean (level 1.63). ``N = 20 000`` is the issue's size:
``O(N^2 d / 2)`` per field evaluation, four per step (docs/lagrangian.md section 8 reports the
measured times).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from meanfield import Model, nodes, solve_lagrangian


def run(d: int, kappa: float, beta: float, rings: int) -> dict[str, float]:
    start = nodes.rings(lambda s: kappa * s, rings, d, log=True)
    t0 = time.perf_counter()
    ds = solve_lagrangian(Model(beta), start, np.linspace(0.0, 10.0, 11), throw=False)
    wall = time.perf_counter() - t0
    return {"d": d, "kappa": kappa, "beta": beta, "wall_s": wall,
            "successful": int(ds.attrs["successful"]),
            "mean_s": float((ds["weight"] * ds["s"]).sum("node")[-1]),
            "peak_log_density": float(ds["log_density"][-1].max())}


def against_particles(d: int, n: int, rings: int, kappa: float = 32.0, beta: float = 1.0,
                      dt: float = 0.25, t_max: float = 3.0
                      ) -> tuple[list[float], list[float], list[float], float]:
    """``sqrt(n/2) x`` the Kolmogorov distance of ``s = <x, e>`` at ``t = 0, 0.5, ..., t_max``
    (``n`` particles in reflection-symmetric pairs, ``validation.pairs``) against the ring run
    of the exact start, its level (``validation.pairs.kolmogorov_levels``), and against the
    run of the start fitted to the particles' mean (level 1.63); the particle run's wall time
    (:func:`validation.checks.rings.rings_against_pairs`, the check ``rings.particles``)."""
    from validation.checks.rings import rings_against_pairs

    times = np.arange(0.0, t_max + 0.25, 0.5)
    r = rings_against_pairs(Model(beta), kappa, d, n, dt=dt, rings=rings, times=times, seed=1)
    root = math.sqrt(n / 2)
    return ([v * root for v in r["ks_exact"]], [v * root for v in r["level_exact"]],
            [v * root for v in r["ks_fitted"]], r["wall_s_particles"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 64, kappa = 32, beta = 1 only")
    parser.add_argument("--rings", type=int, default=64)
    parser.add_argument("--particles", type=int, default=0)
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256],
                        help="dimensions of the particle comparison")
    parser.add_argument("--kappa", type=float, default=32.0, help="vMF kappa of the particle comparison")
    parser.add_argument("--dt", type=float, default=0.25, help="RK4 step of the particles")
    parser.add_argument("--skip-rings", action="store_true", help="only the particle comparison")
    args = parser.parse_args()
    grid = [] if args.skip_rings else [(64, 32.0, 1.0)] if args.quick else [
        (d, k, b) for d in (64, 1024) for k in (8.0, 16.0, 32.0, 64.0) for b in (1.0, 4.0)]
    print("| d | kappa | beta | wall (s) | successful | E[s] at t = 10 | peak log density |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for d, k, b in grid:
        r = run(d, k, b, args.rings)
        print(f"| {d} | {k:g} | {b:g} | {r['wall_s']:.1f} | {r['successful']} | {r['mean_s']:.10f} "
              f"| {r['peak_log_density']:.1f} |", flush=True)
    if args.particles:
        for d in args.dims:
            exact, levels, fit, wall = against_particles(d, args.particles, args.rings, args.kappa,
                                                         dt=args.dt)
            print(f"d = {d}, kappa = {args.kappa:g}, n = {args.particles} (pairs), RK4 step {args.dt:g}, "
                  f"{wall:.0f} s; sqrt(n/2) KS at t = 0, 0.5, ..., 3:\n  exact start: "
                  + " ".join(f"{v:.2f}" for v in exact)
                  + "\n  its level:   " + " ".join(f"{v:.2f}" for v in levels)
                  + "\n  fitted mean: " + " ".join(f"{v:.2f}" for v in fit) + " (level 1.63)", flush=True)

if __name__ == "__main__":
    main()
