"""Benchmark of the particle system (velocity against its matrix-product floor); run as a plain script:

    python benchmarks/bench_particles.py [--quick] [--repeat R]

(a) Time of one velocity evaluation (softmax, ``Q = K = V = I``, on the sphere) for
    ``n`` from 256 to 16 384 and ``d`` in {2, 64, 512}, divided by the floor: the time of the
    two matrix products of the same shapes, ``X X^T`` (n x d times d x n) and ``A X``
    (n x n times n x d), timed with numpy on full matrices. Target: ratio <= 3 for d >= 64.
(b) Throughput in token-steps per second of RK4 on a batch of 2048 systems of 32 tokens in
    d = 2 (the workload of Figure 3 of the paper): one RK4 step = 4 velocity evaluations.

Times are the minimum over ``--repeat`` runs (wall clock, whatever BLAS threads numpy uses).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import particles
from meanfield import Model


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return float(best)


def velocity_ratios(ns: list[int], ds: list[int], repeat: int) -> list[dict[str, float]]:
    model = Model(beta=1.0)
    rows = []
    for d in ds:
        for n in ns:
            x = particles.sample_sphere(n, d, 0)
            A = np.random.default_rng(1).random((n, n))
            t_gram = _best(lambda: x @ x.T, repeat)  # noqa: B023
            t_ax = _best(lambda: A @ x, repeat)  # noqa: B023
            t_vel = _best(lambda: particles.velocity(model, x, check=False), repeat)  # noqa: B023
            floor = t_gram + t_ax
            rows.append({"n": n, "d": d, "velocity_s": t_vel, "floor_s": floor,
                         "ratio": t_vel / floor})
            print(f"  n={n:6d} d={d:4d} velocity {t_vel:.4g} s  floor {floor:.4g} s  "
                  f"ratio {t_vel / floor:.2f}", flush=True)
    return rows


def throughput(batch: int, n: int, d: int, steps: int, repeat: int) -> dict[str, float]:
    model = Model(beta=4.0)
    x0 = particles.sample_sphere(n, d, 2, batch=batch)
    t = np.array([0.0, steps * 0.1])
    wall = _best(lambda: particles.simulate(model, x0, t, dt=0.1, observables=False), repeat)
    return {"batch": batch, "n": n, "d": d, "steps": steps, "wall_s": wall,
            "token_steps_per_s": batch * n * steps / wall}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n up to 4096, d in {2, 64}")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    ns = [256, 1024, 4096] if args.quick else [256, 1024, 4096, 16384]
    ds = [2, 64] if args.quick else [2, 64, 512]
    print(f"# particles benchmark ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__})", flush=True)
    print("(a) velocity / floor (X X^T + A X)", flush=True)
    rows = velocity_ratios(ns, ds, args.repeat)
    print("(b) throughput", flush=True)
    tp = throughput(2048, 32, 2, args.steps, args.repeat)
    print()
    print("| n | d | velocity (s) | floor (s) | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']} | {r['d']} | {r['velocity_s']:.3g} | {r['floor_s']:.3g} | "
              f"{r['ratio']:.2f} |")
    print()
    print(f"RK4, batch {tp['batch']} x {tp['n']} tokens, d = {tp['d']}, {tp['steps']} steps: "
          f"{tp['wall_s']:.3g} s, {tp['token_steps_per_s']:.3g} token-steps/s")


if __name__ == "__main__":
    main()
