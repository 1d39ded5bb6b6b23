"""Benchmark: the array backends (NumPy; torch on the CPU; torch on CUDA when
``torch.cuda.is_available()``), on the velocity alone and on Figure 3's computation.

**Velocity.** ``particles.velocity.velocity(model, x, check=False)`` (as the integrators call
it) for softmax attention, ``Q = K = V = I``, ``beta = 1``, one batch of ``n`` uniform tokens
on ``S^{d-1}``, at ``(n, d)`` = (256, 64), (2048, 64), (8192, 128) (:data:`SIZES`), on
NumPy float64, torch CPU float64 and float32, CUDA float64 and float32. Printed: the time of
one evaluation (the least of ``--repeats``, after two warm-up calls; CUDA synchronised) and its
ratio to the floor, one bare ``torch.nn.functional.scaled_dot_product_attention(x, x, x,
scale=beta)`` on the same tensors (same dtype and device; for the NumPy row, torch CPU
float64 on the same numbers). The velocity is that call plus the tangent projection
``P_x^perp`` (docs/equations.md section 2); target on a GPU: within 2x of the floor.

**Figure 3** (docs/sweeps.md section 2): ``validation.phase_diagram.phase_diagram(n=32,
d=D, betas=..., realizations=R, t_max=30, times=200)`` with every other default (RK4,
dt = 0.3, freezing of clustered realisations, one process) on each backend, and the authors'
scheme (``authors_scheme.py``: explicit Euler, step 0.1, renormalised, in ``d`` dimensions)
on the same backend (our cells integrate the exact ``min(d, 32)``-dimensional reduction of
their starts, ``sample_tokens(reduce=True)``). A token-step is one token advanced by one
step of the scheme: ours is an RK4 step (4 velocity evaluations and the projection), theirs an Euler step (1
evaluation); token-steps per second = ``32 x R x steps x betas / wall time`` with
``steps = ceil(30 / dt)`` (realisations frozen once clustered are counted as stepped).
``--betas K`` times K of the paper's 90 betas (``linspace(0.1, 9, 90)``) spread evenly and
extrapolates the time to 90 linearly (said so in the table). Ratios are given by wall time
and by CPU time of this process (``time.process_time``, less sensitive to other load on a
shared machine; meaningless for CUDA rows, whose host threads wait on the device).

**Equal accuracy.** On NumPy float64 (the schemes do the same arithmetic on every backend),
for ``--accuracy-betas`` betas and ``--accuracy-realizations`` starts (the same starts for
every scheme): ``<x_1, x_2>`` from RK4 dt = 0.3 at the 200 output times (our dense
output), from Euler with steps 0.1, 0.05 and 0.025 at the times of the states it reports
(its rounding of the output times is not counted against it), and from the reference, RK4
with dt = 0.3/8 at all those times (its own error is 8^4 = 4096 times smaller than that of
dt = 0.3: fourth order). Errors against the reference: the RMS over realisations, times
and betas of ``<x_1, x_2>`` (the state; continuous), and the largest error of the
probability ``P(<x_1, x_2> >= 1 - 1e-3)`` over times and betas (the figure's quantity; a
multiple of 1/R). RK4 runs without freezing here (freezing changes no indicator, but holds
``<x_1, x_2>`` at its frozen value). Euler at equal accuracy: its cost
at step 0.1 times ``e_Euler(0.1) / e_RK4`` (first order: cost ~ 1/error), the measured order
printed beside it. The ratio at equal accuracy is that cost over ours, on the same backend.

Usage: ``python benchmarks/bench_backends.py [--d 2 128] [--betas 90] [--realizations 2048]
[--json out.json] [--quick]``; ``--skip-velocity``, ``--skip-figure3`` run one part;
``--threads N`` pins torch's and NumPy's native threads (on a shared machine, 1 avoids the
waits of a thread pool whose other threads are descheduled).
GPU target: the 90-beta grid at d = 128 in under 30 s (said whether met when CUDA is present).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from authors_scheme import FIG3_BETAS, beta_subset, euler_pair_inner
from threadpoolctl import threadpool_limits

from meanfield import Model
from meanfield import backend as bk
from particles.ensemble import simulate_ensemble
from particles.velocity import velocity
from validation.phase_diagram import phase_diagram, sample_tokens

SIZES = ((256, 64), (2048, 64), (8192, 128))
N_TOKENS = 32
DELTA = 1e-3
DT = 0.3
EULER_STEP = 0.1
EULER_STEPS = (0.1, 0.05, 0.025)
REFERENCE_REFINE = 8
GPU_TARGET_S = 30.0
VELOCITY_TARGET = 2.0
QUICK = dict(sizes=((32, 4),), repeats=1, d=[2], betas=1, realizations=8, t_max=1.5,
             times=6, accuracy_betas=1, accuracy_realizations=8)


def backends(cuda: bool, *, velocity_rows: bool) -> list[bk.Backend]:
    """The rows: NumPy float64, torch CPU float64 (and float32 for the velocity), CUDA
    float64 and float32 when available."""
    rows = [bk.Backend("numpy", None, "float64"), bk.Backend("torch", "cpu", "float64")]
    if velocity_rows:
        rows.append(bk.Backend("torch", "cpu", "float32"))
    if cuda:
        rows += [bk.Backend("torch", "cuda", "float64"), bk.Backend("torch", "cuda", "float32")]
    return rows


def _on_cuda(b: bk.Backend) -> bool:
    return b.device is not None and b.device.startswith("cuda")


def _sync(b: bk.Backend) -> None:
    if _on_cuda(b):
        torch.cuda.synchronize()


def best_time(fn: Callable[[], Any], repeats: int, b: bk.Backend) -> float:
    """The least wall time of ``repeats`` calls after two warm-up calls."""
    fn()
    fn()
    _sync(b)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(b)
        best = min(best, time.perf_counter() - t0)
    return best


def bench_velocity(sizes: Sequence[tuple[int, int]], repeats: int, cuda: bool,
                   beta: float = 1.0) -> list[dict]:
    model = Model(beta=beta)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for n, d in sizes:
        x0 = sample_tokens(np.random.default_rng(0), 1, n, d, reduce=False)
        for b in backends(cuda, velocity_rows=True):
            x = b.asarray(x0)
            xt = torch.as_tensor(x0, dtype=getattr(torch, b.dtype), device=b.device or "cpu")
            t = best_time(lambda: velocity(model, x, check=False), repeats, b)
            floor = best_time(lambda: sdpa(xt, xt, xt, scale=beta), repeats, b)
            rows.append(dict(backend=b.label(), n=n, d=d, velocity_s=t, sdpa_s=floor,
                             ratio=t / floor))
            if _on_cuda(b):
                rows[-1]["gpu_target_met"] = bool(t / floor <= VELOCITY_TARGET)
            print(f"velocity n={n} d={d} {b.label()}: {t * 1e3:.3g} ms, "
                  f"sdpa {floor * 1e3:.3g} ms, ratio {t / floor:.2f}", flush=True)
    return rows


def rk4_pair_inner(x0: np.ndarray, beta: float, times: np.ndarray, dt: float) -> np.ndarray:
    """``<x_1, x_2>`` at ``times`` ``(T, R)`` from :func:`particles.ensemble.simulate_ensemble`
    (RK4, constant step ``dt``, no freezing)."""
    out = np.zeros((times.size, x0.shape[0]))

    def record(k: int, _t: float, x: np.ndarray) -> None:
        out[k] = np.einsum("bd,bd->b", x[:, 0], x[:, 1])

    simulate_ensemble(x0, beta, times, record, dt=dt)
    return out


def accuracy(d: int, betas: np.ndarray, realizations: int, times: np.ndarray) -> dict:
    """Errors of RK4 dt = 0.3 (at ``times``) and of Euler (steps :data:`EULER_STEPS`, at the
    times of the states it reports) against RK4 with dt = 0.3/8, on the same starts (see the
    module docstring)."""
    thr = 1.0 - DELTA
    sq: dict[str, float] = {}
    dp: dict[str, float] = {}
    for i, beta in enumerate(betas):
        x0 = sample_tokens(np.random.default_rng([7, i]), realizations, N_TOKENS, d)
        runs = {"rk4": (rk4_pair_inner(x0, beta, times, DT), times)}
        for h in EULER_STEPS:
            runs[f"euler_{h}"] = euler_pair_inner(x0, beta, times, h)
        union = np.unique(np.concatenate([at for _, at in runs.values()]))
        ref = rk4_pair_inner(x0, beta, union, DT / REFERENCE_REFINE)
        for name, (g, at) in runs.items():
            r = ref[np.searchsorted(union, at)]
            sq[name] = sq.get(name, 0.0) + float(np.sum((g - r) ** 2))
            p = np.mean(g >= thr, axis=-1) - np.mean(r >= thr, axis=-1)
            dp[name] = max(dp.get(name, 0.0), float(np.max(np.abs(p))))
    count = betas.size * times.size * realizations
    rms = {k: math.sqrt(v / count) for k, v in sq.items()}
    steps = np.array(EULER_STEPS)
    errs = np.array([rms[f"euler_{h}"] for h in EULER_STEPS])
    order = float(np.polyfit(np.log(steps), np.log(errs), 1)[0])
    factor = rms[f"euler_{EULER_STEP}"] / rms["rk4"]
    return dict(betas=betas.tolist(), realizations=realizations, rms_inner=rms, max_dP=dp,
                euler_order=order, euler_cost_factor=factor,
                euler_step_equal_accuracy=EULER_STEP / factor)


def time_figure3(b: bk.Backend, d: int, betas: np.ndarray, realizations: int,
                 times: np.ndarray) -> dict:
    """Wall times of ``phase_diagram`` and of the authors' scheme on backend ``b``."""
    kw = dict(backend=b.name, device=b.device, dtype=b.dtype)
    # warm-up (first calls of the library's kernels, CUDA context): one short cell each
    phase_diagram(n=N_TOKENS, d=d, betas=[1.0], realizations=min(realizations, 8),
                  t_max=2 * DT, times=3, progress=False, **kw)
    euler_pair_inner(b.asarray(sample_tokens(np.random.default_rng(0), 2, N_TOKENS, d)), 1.0,
                     times[:2], EULER_STEP)
    _sync(b)
    t0, c0 = time.perf_counter(), time.process_time()
    ds = phase_diagram(n=N_TOKENS, d=d, betas=betas, realizations=realizations,
                       t_max=float(times[-1]), times=times.size, delta=DELTA, dt=DT,
                       progress=False, **kw)
    _sync(b)
    ours, ours_cpu = time.perf_counter() - t0, time.process_time() - c0
    euler = euler_cpu = 0.0
    for i, beta in enumerate(betas):
        x0 = b.asarray(sample_tokens(np.random.default_rng([11, i]), realizations, N_TOKENS, d,
                                     reduce=False))
        _sync(b)
        t0, c0 = time.perf_counter(), time.process_time()
        euler_pair_inner(x0, float(beta), times, EULER_STEP)
        _sync(b)
        euler += time.perf_counter() - t0
        euler_cpu += time.process_time() - c0
    return dict(backend=b.label(), wall_s=ours, euler_wall_s=euler, cpu_s=ours_cpu,
                euler_cpu_s=euler_cpu, probability=ds["probability"].values)


def bench_figure3(d: int, k: int, realizations: int, cuda: bool, t_max: float, ntimes: int,
                  acc_betas: int, acc_realizations: int) -> dict:
    times = np.linspace(0.0, t_max, ntimes)
    betas = beta_subset(k)
    acc = accuracy(d, beta_subset(acc_betas), acc_realizations, times)
    print(f"d={d} accuracy: {json.dumps(acc)}", flush=True)
    rows = []
    ref_p = None
    for b in backends(cuda, velocity_rows=False):
        r = time_figure3(b, d, betas, realizations, times)
        p = r.pop("probability")
        ref_p = p if ref_p is None else ref_p
        r["max_dP_vs_numpy"] = float(np.max(np.abs(p - ref_p)))
        ours_steps = math.ceil(t_max / DT)
        eu_steps = math.ceil(t_max / EULER_STEP)
        r["token_steps_per_s"] = N_TOKENS * realizations * ours_steps * betas.size / r["wall_s"]
        r["euler_token_steps_per_s"] = (N_TOKENS * realizations * eu_steps * betas.size
                                        / r["euler_wall_s"])
        r["wall_s_90"] = r["wall_s"] * FIG3_BETAS.size / betas.size
        r["ratio_equal_step"] = r["euler_wall_s"] / r["wall_s"]
        r["ratio_equal_accuracy"] = r["ratio_equal_step"] * acc["euler_cost_factor"]
        r["ratio_equal_step_cpu"] = r["euler_cpu_s"] / r["cpu_s"]
        r["ratio_equal_accuracy_cpu"] = r["ratio_equal_step_cpu"] * acc["euler_cost_factor"]
        if _on_cuda(b) and d == 128:
            r["gpu_target_met"] = bool(r["wall_s_90"] < GPU_TARGET_S)
        rows.append(r)
        print(f"d={d} {json.dumps(r)}", flush=True)
    return dict(d=d, betas=int(betas.size), extrapolated=bool(betas.size < FIG3_BETAS.size),
                realizations=realizations, t_max=t_max, times=ntimes, accuracy=acc, rows=rows)


def print_tables(vel: list[dict], fig: list[dict]) -> None:
    if vel:
        print("\nVelocity (softmax, Q = K = V = I, beta = 1, batch 1): one evaluation, the least "
              "of the repeats; floor: one bare scaled_dot_product_attention on the same tensors")
        print("\n| n | d | backend | velocity | SDPA floor | ratio |\n|---|---|---|---|---|---|")
        for r in vel:
            print(f"| {r['n']} | {r['d']} | {r['backend']} | {r['velocity_s'] * 1e3:.3g} ms | "
                  f"{r['sdpa_s'] * 1e3:.3g} ms | {r['ratio']:.2f} |")
        gpu = [r for r in vel if "gpu_target_met" in r]
        if gpu:
            met = all(r["gpu_target_met"] for r in gpu)
            print(f"GPU target (velocity within {VELOCITY_TARGET:g}x of the floor): "
                  f"{'met' if met else 'NOT met'} on {sum(r['gpu_target_met'] for r in gpu)} "
                  f"of {len(gpu)} GPU rows")
    for f in fig:
        a = f["accuracy"]
        ext = f" (timed {f['betas']}, extrapolated)" if f["extrapolated"] else ""
        print(f"\nFigure 3, d = {f['d']}: n = {N_TOKENS}, {f['realizations']} realisations, "
              f"t in [0, {f['t_max']:g}], {f['times']} output times; RK4 dt = {DT} "
              f"({math.ceil(f['t_max'] / DT)} steps) against Euler step {EULER_STEP} "
              f"({math.ceil(f['t_max'] / EULER_STEP)} steps)")
        print(f"Accuracy (NumPy float64, {len(a['betas'])} betas, {a['realizations']} starts; "
              f"reference RK4 dt = {DT}/{REFERENCE_REFINE}): RMS error of <x1, x2>: RK4 "
              f"{a['rms_inner']['rk4']:.2e}; Euler " + ", ".join(
                  f"{h}: {a['rms_inner'][f'euler_{h}']:.2e}" for h in EULER_STEPS)
              + f" (measured order {a['euler_order']:.2f}); max error of P: RK4 "
              f"{a['max_dP']['rk4']:.4f}, Euler {EULER_STEP}: "
              f"{a['max_dP'][f'euler_{EULER_STEP}']:.4f}")
        print(f"Euler at RK4's accuracy: step {a['euler_step_equal_accuracy']:.2e} by first-order "
              f"extrapolation from step {EULER_STEP}: {a['euler_cost_factor']:.3g}x its cost")
        print(f"\n| backend | wall, 90 betas{ext} | token-steps/s (RK4) | Euler 0.1 token-steps/s "
              "| Euler 0.1 time / ours: wall (CPU) | at equal accuracy: wall (CPU) "
              "| max dP vs numpy |")
        print("|---|---|---|---|---|---|---|")
        for r in f["rows"]:
            print(f"| {r['backend']} | {r['wall_s_90']:.3g} s | {r['token_steps_per_s']:.3g} | "
                  f"{r['euler_token_steps_per_s']:.3g} | {r['ratio_equal_step']:.2f} "
                  f"({r['ratio_equal_step_cpu']:.2f}) | {r['ratio_equal_accuracy']:.3g} "
                  f"({r['ratio_equal_accuracy_cpu']:.3g}) | {r['max_dP_vs_numpy']:.2g} |")
            if "gpu_target_met" in r:
                met = "met" if r["gpu_target_met"] else "NOT met"
                print(f"GPU target (90 betas, d = 128, < {GPU_TARGET_S:g} s) on {r['backend']}: "
                      f"{met} ({r['wall_s_90']:.3g} s)")


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[2, 128], help="Figure 3's d (2, 128)")
    p.add_argument("--betas", type=int, default=90, help="betas timed, of the paper's 90")
    p.add_argument("--realizations", type=int, default=2048)
    p.add_argument("--accuracy-betas", type=int, default=3)
    p.add_argument("--accuracy-realizations", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5, help="velocity: timed calls per row")
    p.add_argument("--threads", type=int, default=None,
                   help="native threads of torch and of NumPy's BLAS (default: as found)")
    p.add_argument("--skip-velocity", action="store_true")
    p.add_argument("--skip-figure3", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (the smoke test): " + json.dumps(QUICK))
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    sizes: Sequence[tuple[int, int]] = SIZES
    t_max, ntimes = 30.0, 200
    if args.quick:
        sizes, t_max, ntimes = QUICK["sizes"], QUICK["t_max"], QUICK["times"]  # type: ignore[assignment]
        for key in ("repeats", "d", "betas", "realizations", "accuracy_betas",
                    "accuracy_realizations"):
            setattr(args, key, QUICK[key])
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        threadpool_limits(args.threads)
    cuda = torch.cuda.is_available()
    where = (f"CUDA: {torch.cuda.get_device_name(0)} (GPU rows included)" if cuda else
             "CUDA: not available (torch.cuda.is_available() is False): no GPU rows")
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), {os.cpu_count()} "
          f"CPUs, load average {os.getloadavg()[0]:.1f}; {where}", flush=True)
    vel = [] if args.skip_velocity else bench_velocity(sizes, args.repeats, cuda)
    fig = [] if args.skip_figure3 else [
        bench_figure3(d, args.betas, args.realizations, cuda, t_max, ntimes,
                      args.accuracy_betas, args.accuracy_realizations) for d in args.d]
    print_tables(vel, fig)
    result = dict(cuda=cuda, torch=torch.__version__, cpus=os.cpu_count(),
                  torch_threads=torch.get_num_threads(), load_average=os.getloadavg()[0],
                  velocity=vel, figure3=fig)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
