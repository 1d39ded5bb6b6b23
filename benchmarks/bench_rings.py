"""Benchmark of ring nodes (the k = 1 zonal reduction, docs/lagrangian.md section 8); a plain script:

    python benchmarks/bench_rings.py [--quick] [--rings R] [--particles N]

von Mises–Fisher starts ``exp(kappa <x, e>)`` on ``S^{d-1}``, SA (``Q = K = V = I``) through
collapse to ``t = 10``: ``d`` in {64, 1024}, ``kappa`` in {8, 16, 32, 64}, ``beta`` in {1, 4}.
Prints the wall time, whether the run succeeded, ``E[s]`` at ``t = 10`` and the peak log density.
Target (issue 22): the ``d = 64``, ``kappa = 32`` run to ``t = 10`` in under a minute on 2 cores.

``--particles N``: also ``N`` particles (``particles.simulate``, ``dopri5``) for each ``d`` at
``kappa = 32``, ``beta = 1`` to ``t = 3``, and the Kolmogorov distance of ``s`` (taken along
the particles' own mean direction, see the docs) at each output time, times ``sqrt(N)``
(the 95 % level of an i.i.d. sample is 1.36). ``N = 20 000`` is the issue's size: hours on
2 cores (``O(N^2 d)`` per step), minutes on a GPU.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from meanfield import Model, ZonalSphere, nodes, solve_lagrangian
from meanfield.lagrangian.rings import cdf_s


def run(d: int, kappa: float, beta: float, rings: int) -> dict[str, float]:
    start = nodes.rings(lambda s: kappa * s, rings, d, log=True)
    t0 = time.perf_counter()
    ds = solve_lagrangian(Model(beta), start, np.linspace(0.0, 10.0, 11), throw=False)
    wall = time.perf_counter() - t0
    return {"d": d, "kappa": kappa, "beta": beta, "wall_s": wall,
            "successful": int(ds.attrs["successful"]),
            "mean_s": float((ds["weight"] * ds["s"]).sum("node")[-1]),
            "peak_log_density": float(ds["log_density"][-1].max())}


def against_particles(d: int, n: int, rings: int, kappa: float = 32.0, beta: float = 1.0) -> list[float]:
    import particles

    times = np.linspace(0.0, 3.0, 7)
    Z = ZonalSphere(d, 128) if d <= 400 else None
    if Z is None:  # ZonalSphere stops near d = 400 (|S^{d-1}| underflows): Wood's vMF sampler
        msg = "--particles: sampling at d > 400 is not implemented here"
        raise SystemExit(msg)
    x0 = Z.sample(np.exp(kappa * (Z.grid - 1)), n, np.random.default_rng(1))
    px = particles.simulate(Model(beta), x0, times, method="dopri5", rtol=1e-7, atol=1e-9,
                            observables=False)["x"].values
    ds = solve_lagrangian(Model(beta), nodes.rings(lambda s: kappa * s, rings, d, log=True), times,
                          rtol=1e-10, atol=1e-12)
    out = []
    for k in range(times.size):
        m = px[k].sum(axis=0)
        s = np.sort(px[k] @ (m / np.linalg.norm(m)))
        F = cdf_s(ds, k, s)
        ks = max(np.max(np.arange(1, n + 1) / n - F), np.max(F - np.arange(n) / n))
        out.append(float(ks * math.sqrt(n)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 64, kappa = 32, beta = 1 only")
    parser.add_argument("--rings", type=int, default=64)
    parser.add_argument("--particles", type=int, default=0)
    args = parser.parse_args()
    grid = [(64, 32.0, 1.0)] if args.quick else [
        (d, k, b) for d in (64, 1024) for k in (8.0, 16.0, 32.0, 64.0) for b in (1.0, 4.0)]
    print("| d | kappa | beta | wall (s) | successful | E[s] at t = 10 | peak log density |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for d, k, b in grid:
        r = run(d, k, b, args.rings)
        print(f"| {d} | {k:g} | {b:g} | {r['wall_s']:.1f} | {r['successful']} | {r['mean_s']:.10f} "
              f"| {r['peak_log_density']:.1f} |", flush=True)
    if args.particles:
        for d in (16, 64, 256):
            ks = against_particles(d, args.particles, args.rings)
            print(f"d = {d}, n = {args.particles}: sqrt(n) KS at t = 0, 0.5, ..., 3: "
                  + " ".join(f"{v:.2f}" for v in ks), flush=True)


if __name__ == "__main__":
    main()
