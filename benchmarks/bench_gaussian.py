"""Benchmark: ``solve_gaussian`` on the engine's DOP853 against scipy's ``solve_ivp`` DOP853.

The same factor-form ODE (``meanfield.gaussian._factor_rhs``: ``y = (m, L)``, ``Sigma = L L^T``,
docs/equations.md section 4) is solved for a few models (``d = 3``, two heads, softmax, L2 with
noise, Sinkhorn, and a contracting ``K = -Q`` case) and output grids by

* ``engine``: :func:`meanfield.gaussian.solve_gaussian` (the engine's loop, steps landing on
  the output times, PI control, the blow-up monitor, the Dataset);
* ``scipy``: ``scipy.integrate.solve_ivp(method="DOP853", t_eval=times)`` (its own controller,
  outputs from its 7th-order interpolant), the solver ``solve_gaussian`` used before;
* ``before``: ``solve_gaussian`` of the revision ``--before`` (default ``ce814f6``, the last
  with its own ``solve_ivp`` loop), loaded from git: scipy's DOP853 with the same checks and
  Dataset around it as the engine's run.

Floor: the cost of one evaluation of the right-hand side, measured in the same run, times each
run's evaluation count: ``engine/floor`` and ``scipy/floor`` say how much each spends beyond
the field itself. Rounds are interleaved and the best CPU time (``time.process_time``) of
``--repeat`` rounds is kept. Printed: steps and evaluations, seconds, the ratios engine/scipy
and engine/before, and the largest relative difference of the covariances (both at ``rtol``:
rtol-level).

Usage: ``python benchmarks/bench_gaussian.py [--rtol 1e-10] [--repeat 3] [--before ce814f6]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import time
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy.integrate import solve_ivp

from meanfield import Model
from meanfield.gaussian import _factor_rhs, solve_gaussian

ROOT = Path(__file__).resolve().parents[1]
COV0 = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0.0, 0.1, 0.5]])
MEAN0 = np.array([1.0, -0.5, 0.2])


def _mat(seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).normal(size=(3, 3))


HEADS = [(_mat(41), _mat(42), _mat(43, 0.7)), (_mat(44), _mat(45), _mat(46))]
CASES: dict[str, tuple[Model, float]] = {
    "softmax": (Model(beta=0.2, Q=_mat(0), K=_mat(10)), 0.3),
    "l2+noise": (Model(beta=0.5, attention="l2", heads=HEADS, noise=0.2), 5.0),
    "sinkhorn": (Model(beta=0.5, attention="sinkhorn", heads=HEADS), 5.0),
    "K=-Q": (Model(beta=1.0, Q=_mat(8), K=-_mat(8)), 5.0),
}
"""Model and final time of each case (the softmax one blows up at t ~ 0.45: stop before)."""


def load_before(rev: str) -> types.ModuleType:
    """``meanfield/gaussian.py`` at ``rev``, as a module of the working tree's package."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:meanfield/gaussian.py"],
                         check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("meanfield._gaussian_before", loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "meanfield"
    exec(compile(src, f"{rev}:meanfield/gaussian.py", "exec"), mod.__dict__)
    return mod


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    c0 = time.process_time()
    out = fn()
    return time.process_time() - c0, out


def per_evaluation(model: Model, repeat: int) -> float:
    """CPU seconds of one right-hand side evaluation (best of ``repeat`` batches of 200)."""
    rhs = _factor_rhs(model, 3)
    y = np.concatenate([MEAN0, np.linalg.cholesky(COV0).ravel()])
    return min(timed(lambda: [rhs(y) for _ in range(200)])[0] for _ in range(repeat)) / 200


def scipy_run(model: Model, times: np.ndarray, rtol: float, atol: float) -> Any:
    rhs = _factor_rhs(model, 3)
    y0 = np.concatenate([MEAN0, np.linalg.cholesky(COV0).ravel()])
    return solve_ivp(lambda _t, y: rhs(y), (times[0], times[-1]), y0, method="DOP853",
                     t_eval=times, rtol=rtol, atol=atol)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rtol", type=float, default=1e-10)
    p.add_argument("--atol", type=float, default=1e-12)
    p.add_argument("--outputs", type=int, nargs="+", default=[11, 201])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--before", default="ce814f6")
    args = p.parse_args()
    before = load_before(args.before)
    print(f"rtol = {args.rtol:g}, atol = {args.atol:g}")
    print("| case | outputs | engine steps / evals | scipy steps / evals | engine s | scipy s "
          "| before s | engine/scipy | engine/before | engine/floor | scipy/floor | max rel diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, (model, t_end) in CASES.items():
        floor = per_evaluation(model, args.repeat)
        for n_out in args.outputs:
            times = np.linspace(0.0, t_end, n_out)
            best = {"engine": np.inf, "scipy": np.inf, "before": np.inf}
            res: dict[str, Any] = {}
            for _ in range(args.repeat):
                for key, fn in (
                    ("engine", lambda: solve_gaussian(model, MEAN0, COV0, times, rtol=args.rtol,
                                                      atol=args.atol)),
                    ("scipy", lambda: scipy_run(model, times, args.rtol, args.atol)),
                    ("before", lambda: before.solve_gaussian(model, MEAN0, COV0, times,
                                                             rtol=args.rtol, atol=args.atol)),
                ):
                    s, out = timed(fn)
                    best[key] = min(best[key], s)
                    res[key] = out
            ds, sol = res["engine"], res["scipy"]
            factors = sol.y.T[:, 3:].reshape(-1, 3, 3)
            ref = factors @ np.transpose(factors, (0, 2, 1))
            diff = float(np.abs(ds["cov"].values - ref).max() / np.abs(ref).max())
            evals, steps = int(ds.attrs["num_evaluations"]), int(ds.attrs["num_steps"])
            scipy_steps = (sol.nfev - 2) // 12  # 12 a step, 2 for the first-step guess
            print(f"| {name} | {n_out} | {steps} / {evals} | {scipy_steps} / {sol.nfev} | "
                  f"{best['engine']:.4f} | {best['scipy']:.4f} | {best['before']:.4f} | "
                  f"{best['engine'] / best['scipy']:.2f} | {best['engine'] / best['before']:.2f} | "
                  f"{best['engine'] / (floor * evals):.2f} | "
                  f"{best['scipy'] / (floor * sol.nfev):.2f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
