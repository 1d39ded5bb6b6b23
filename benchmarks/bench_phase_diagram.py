"""Benchmark: the default Figure 3 phase diagram (n = 32, 90 betas, 1024 starts, t in [0, 30],
200 output times) for d = 2 and d = 128, on all cores, and its accuracy.

Reported per d:

* wall time of ``validation.phase_diagram(d=d, workers=W)`` with every default (cluster
  start-up included), and per beta value;
* CPU seconds per beta (one process, on the accuracy subset), which other load on the
  machine inflates less than wall time, and the load average when measured;
* accuracy: the largest difference in probability (over beta and t) between the default
  step (RK4, dt = 0.3) and a 4x smaller step (dt = 0.075), same starts, on a subset of the
  beta grid (``--accuracy-betas`` values spread over [0.1, 9]);
* the authors' scheme for comparison (explicit Euler with step 0.1 and renormalisation, as in
  github.com/borjanG/2023-transformers-rotf ``phase-diagrams.py``) on the same starts: its
  difference against its own 4x smaller step, and against our dt = 0.075 run.

The authors' own timings on this 2-core machine (PyTorch CPU, batch 2048, float64) are
as published with their code: about 12 s per beta for d = 2 and 29 s for d = 128.

Usage: ``python benchmarks/bench_phase_diagram.py [--d 2 128] [--workers 2] [--betas 90]
[--accuracy-betas 10] [--json out.json]``. ``--betas K < 90`` times a subset and
extrapolates linearly to 90 (said so in the output).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
from authors_scheme import beta_subset, euler_cell

from validation.phase_diagram import phase_diagram
from validation.sweep import sweep

AUTHORS_S_PER_BETA = {2: 12.0, 128: 29.0}


def bench(d: int, workers: int, betas: int, acc_betas: int, realizations: int,
          timing_only: bool = False) -> dict:
    res: dict = {"d": d, "workers": workers, "realizations": realizations}
    grid = beta_subset(betas)
    t0 = time.perf_counter()
    full = phase_diagram(d=d, betas=grid, realizations=realizations, workers=workers,
                         progress=False)
    wall = time.perf_counter() - t0
    res["wall_s"] = wall
    res["betas_timed"] = int(grid.size)
    res["wall_s_90"] = wall * 90 / grid.size
    res["extrapolated"] = bool(grid.size < 90)
    res["s_per_beta"] = wall / grid.size
    res["speedup_vs_authors"] = AUTHORS_S_PER_BETA.get(d, math.nan) * 90 / res["wall_s_90"]
    res["t_half_minus_curve_max"] = float(np.nanmax(np.abs(full["t_half"] -
                                                           full["transition_time"])))
    res["load_average_timing"] = os.getloadavg()[0]
    if timing_only:
        return res
    sub = beta_subset(acc_betas)
    kw = dict(d=d, betas=sub, realizations=realizations, workers=workers, progress=False)
    # in this process: CPU seconds per beta, less sensitive than wall time to other load
    c0 = time.process_time()
    coarse = phase_diagram(dt=0.3, **{**kw, "workers": 1})
    res["cpu_s_per_beta_subset"] = (time.process_time() - c0) / sub.size
    res["load_average"] = os.getloadavg()[0]
    fine = phase_diagram(dt=0.075, **kw)
    res["accuracy_betas"] = sub.tolist()
    res["max_dP_dt0.3_vs_dt0.075"] = float(np.abs(coarse["probability"] -
                                                  fine["probability"]).max())
    res["max_dPpairs_dt0.3_vs_dt0.075"] = float(np.abs(coarse["pair_probability"] -
                                                       fine["pair_probability"]).max())
    eu = {}
    for step in (0.1, 0.025):
        t1 = time.perf_counter()
        eu[step] = sweep(euler_cell, {"beta": sub}, seed=0, workers=workers, progress=False,
                         kwargs=dict(d=d, realizations=realizations, step=step))
        res[f"euler_{step}_numpy_s_per_beta"] = (time.perf_counter() - t1) / sub.size * workers
    res["max_dP_euler0.1_vs_euler0.025"] = float(np.abs(eu[0.1]["probability"] -
                                                        eu[0.025]["probability"]).max())
    res["max_dP_euler0.1_vs_rk4_0.075"] = float(np.abs(
        eu[0.1]["probability"].values - fine["probability"].values).max())
    res["max_dP_euler0.025_vs_rk4_0.075"] = float(np.abs(
        eu[0.025]["probability"].values - fine["probability"].values).max())
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[2, 128])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--betas", type=int, default=90, help="betas timed (< 90: extrapolate)")
    p.add_argument("--accuracy-betas", type=int, default=10)
    p.add_argument("--realizations", type=int, default=1024)
    p.add_argument("--timing-only", action="store_true", help="skip the accuracy runs")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    results = []
    for d in args.d:
        r = bench(d, args.workers, args.betas, args.accuracy_betas, args.realizations,
                  args.timing_only)
        results.append(r)
        print(json.dumps(r, indent=1), flush=True)
    print("\n| d | wall (90 betas) | wall s per beta | CPU s per beta | authors | speed-up "
          "| max dP, dt vs dt/4 | Euler 0.1: max dP vs 0.025 | Euler 0.1 vs RK4 0.075 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "max_dP_dt0.3_vs_dt0.075" not in r:
            print(f"| {r['d']} | {r['wall_s_90']:.0f} s | {r['s_per_beta']:.2f} | (timing only)")
            continue
        ext = " (extrapolated)" if r["extrapolated"] else ""
        print(f"| {r['d']} | {r['wall_s_90']:.0f} s{ext} | {r['s_per_beta']:.2f} | "
              f"{r['cpu_s_per_beta_subset']:.2f} | "
              f"{AUTHORS_S_PER_BETA.get(r['d'], math.nan):g} s | "
              f"{r['speedup_vs_authors']:.1f}x | {r['max_dP_dt0.3_vs_dt0.075']:.4f} | "
              f"{r['max_dP_euler0.1_vs_euler0.025']:.4f} | "
              f"{r['max_dP_euler0.1_vs_rk4_0.075']:.4f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
