"""Benchmark: the phase diagram on the shared engine against a previous revision, in one run.

For each ``d`` and a few ``beta``, one phase-diagram cell (n = 32, ``--realizations`` starts,
t in [0, 30], 200 output times, RK4 dt = 0.3, freezing) is computed by

* ``after``: ``validation.phase_diagram.phase_cell`` of the working tree (RK4 of
  ``meanfield.integrate`` through ``particles.ensemble``);
* ``before``: ``phase_cell`` of the revision ``--before`` (default ``337dd2b``, the last
  revision with a private integrator in ``validation/phase_diagram.py``), loaded from git;
* ``euler``: the authors' explicit Euler scheme, step 0.1 (``bench_phase_diagram.euler_cell``).

Rounds are interleaved and the best CPU time (``time.process_time``) of ``--repeat`` rounds
is kept, so that other load on the machine inflates the figures less. Printed: seconds per
cell, the ratios after/before and euler/after, and the largest difference in probability
between before and after (same starts: rounding only, or a start that sits on the threshold).

Usage: ``python benchmarks/bench_engine.py [--d 2 128] [--betas 1 4 9] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import time
import types
from pathlib import Path

import numpy as np
from authors_scheme import TIMES, euler_cell

ROOT = Path(__file__).resolve().parents[1]

after = importlib.import_module("validation.phase_diagram")


def load_before(rev: str) -> types.ModuleType:
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:validation/phase_diagram.py"],
                         check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("validation._phase_diagram_before", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "validation"
    exec(compile(src, f"{rev}:validation/phase_diagram.py", "exec"), mod.__dict__)
    return mod


def cell(module: types.ModuleType, beta: float, d: int, realizations: int):
    rng = np.random.default_rng(12345)
    return module.phase_cell(beta, d, rng, n=32, times=TIMES.tolist(), delta=1e-3,
                             realizations=realizations, attention="softmax", qk="identity",
                             v="identity", dt=0.3, confidence=0.95)


def timed(fn):
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[2, 128])
    p.add_argument("--betas", type=float, nargs="+", default=[1.0, 4.0, 9.0])
    p.add_argument("--realizations", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--before", default="337dd2b")
    args = p.parse_args()
    before = load_before(args.before)
    print("| d | beta | before s | after s | after/before | euler s | euler/after | max |dP| |")
    print("|---|---|---|---|---|---|---|---|")
    for d in args.d:
        for beta in args.betas:
            best = {"before": np.inf, "after": np.inf, "euler": np.inf}
            res = {}
            for _ in range(args.repeat):
                for name, fn in (
                    ("before", lambda: cell(before, beta, d, args.realizations)),
                    ("after", lambda: cell(after, beta, d, args.realizations)),
                    ("euler", lambda: euler_cell(beta, np.random.default_rng(12345), d=d,
                                                 realizations=args.realizations, step=0.1)),
                ):
                    s, out = timed(fn)
                    best[name] = min(best[name], s)
                    res[name] = out
            dp = float(np.max(np.abs(res["before"]["probability"].values
                                     - res["after"]["probability"].values)))
            print(f"| {d} | {beta:g} | {best['before']:.3f} | {best['after']:.3f} | "
                  f"{best['after'] / best['before']:.2f} | {best['euler']:.3f} | "
                  f"{best['euler'] / best['after']:.2f} | {dp:.2g} |", flush=True)


if __name__ == "__main__":
    main()
