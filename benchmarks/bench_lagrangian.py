"""Benchmark of the Lagrangian field (velocity and divergence in one pass); a plain script:

    python benchmarks/bench_lagrangian.py [--quick] [--repeat R]

One evaluation of ``meanfield.lagrangian.weighted_field`` (velocity and surface divergence of
a weighted measure: softmax, ``Q = K = V = I``, on ``S^2``, random weights) against one
particle velocity evaluation (``particles.velocity``, same nodes) for ``n`` from 1024 to
16 384, ``d = 3``; also the velocity alone and the Euclidean divergence. Target (issue 12):
ratio <= 1.5 at ``n = 4096``.

Times are the minimum over ``--repeat`` runs, the two sides interleaved (a busy machine slows
both alike; the minimum is the least disturbed run). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Callable

import numpy as np

import particles
from meanfield import Model
from meanfield.lagrangian import weighted_field


def _best(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    best = dict.fromkeys(fns, np.inf)
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def ratios(ns: list[int], d: int, repeat: int) -> list[dict[str, float]]:
    model = Model(beta=1.0)
    rows = []
    for n in ns:
        x = particles.sample_sphere(n, d, 0)
        w = np.random.default_rng(1).random(n) + 0.5
        w /= w.sum()
        t = _best({
            "particles": lambda: particles.velocity(model, x, check=False),  # noqa: B023
            "field": lambda: weighted_field(model, x, w),  # noqa: B023
            "velocity": lambda: weighted_field(model, x, w, divergence=False),  # noqa: B023
            "euclidean": lambda: weighted_field(model, x, w, geometry="euclidean"),  # noqa: B023
        }, repeat)
        row = {"n": n, "d": d, **{f"{k}_s": v for k, v in t.items()},
               "ratio": t["field"] / t["particles"],
               "ratio_velocity": t["velocity"] / t["particles"],
               "ratio_euclidean": t["euclidean"] / t["particles"]}
        rows.append(row)
        print(f"  n={n:6d} particles {t['particles']:.4g} s  field {t['field']:.4g} s  "
              f"ratio {row['ratio']:.2f}", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="n up to 4096")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    ns = [1024, 2048, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384]
    print(f"# Lagrangian field benchmark ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}, load {os.getloadavg()[0]:.1f})",
          flush=True)
    rows = ratios(ns, 3, args.repeat)
    print()
    print("| n | d | particle velocity (s) | velocity + divergence, sphere (s) | ratio "
          "| velocity only / particles | velocity + divergence, R^d / particles |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['n']} | {r['d']} | {r['particles_s']:.4g} | {r['field_s']:.4g} | "
              f"{r['ratio']:.2f} | {r['ratio_velocity']:.2f} | {r['ratio_euclidean']:.2f} |")


if __name__ == "__main__":
    main()
