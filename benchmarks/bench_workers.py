"""Benchmark: Figure 3's computation on ``w`` Dask workers against one process, before and
after the worker set-up of :func:`validation.cluster.dask_client`, in one run.

Three configurations, each timed on the same phase diagram (n = 32, the paper's β grid
[0.1, 9], t in [0, 30] with 200 output times, the same seeds, so the same numbers):

* ``one process``: ``phase_diagram(workers=1)``, the cells one after the other here;
* ``before``: the set-up before issue 14, reproduced: a ``LocalCluster`` with Dask's own
  worker environment (its nanny sets ``MALLOC_TRIM_THRESHOLD_=65536``; no ``threadpoolctl``
  pinning) and one task per cell (``cells_per_task=1``);
* ``after``: ``phase_diagram(workers=w)`` as shipped (``dask_client``: thread pools pinned,
  glibc's own malloc settings; :func:`validation.sweep.task_chunks`);
* ``processes``: the ceiling of any scheduler on this machine: ``w`` plain processes (no Dask,
  thread pools pinned to one thread), each running ``phase_diagram(workers=1)`` on every
  ``w``-th beta. The same work, not the same numbers (a cell's random starts depend on its
  index in the grid), so it is left out of the identical-results check. Where ``processes``
  is itself below ``0.8 w``, two busy cores slow each other down (shared cache and memory
  bandwidth) and no scheduler can reach the target here.

Reported per configuration: wall time (cluster start and close included; the minimum over
``--repeat`` runs), the speed-up over one process (target: ``>= 0.8 w``), the CPU seconds
of this process and all its child processes (workers, reaped at close) and their minor page
faults (both much less sensitive than wall time to other load on the machine), and the
1-minute load average before each run. A busy machine inflates the wall times: read the
load column.

Usage: ``python benchmarks/bench_workers.py [--d 2 128] [--workers 2] [--betas 90]
[--realizations 1024] [--repeat 1] [--configs one-process before after processes]
[--json out.json]``. ``--betas K < 90`` takes K values
spread evenly over the 90 of Figure 3 (said so in the output).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr
from authors_scheme import beta_subset

from validation.phase_diagram import phase_diagram


def _usage() -> tuple[float, int]:
    """CPU seconds and minor page faults of this process and its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return cpu, own.ru_minflt + kids.ru_minflt


def _before(workers: int, **kw: Any) -> xr.Dataset:
    """The old set-up: Dask's default worker environment, no pinning, a task per cell."""
    from distributed import Client, LocalCluster

    saved = dict(os.environ)
    try:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            return phase_diagram(scheduler=client, cells_per_task=1, **kw)
    finally:  # the nanny wrote its variables into this process's environment
        os.environ.clear()
        os.environ.update(saved)


def _part(args: tuple[int, int, dict[str, Any]]) -> xr.Dataset:
    """One plain process of ``processes``: every ``w``-th beta, threads pinned to one."""
    from threadpoolctl import threadpool_limits

    part, w, kw = args
    with threadpool_limits(limits=1):
        return phase_diagram(workers=1, **{**kw, "betas": kw["betas"][part::w]})


def _processes(w: int, **kw: Any) -> xr.Dataset:
    """``w`` plain processes (spawned, thread variables set to 1), no Dask."""
    import multiprocessing

    from validation.cluster import worker_environ

    saved = dict(os.environ)
    os.environ.update(worker_environ(1))
    try:
        with multiprocessing.get_context("spawn").Pool(w) as pool:
            parts = pool.map(_part, [(i, w, kw) for i in range(w)])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return xr.concat(parts, dim="beta").sortby("beta")


def _timed(run: Callable[[], xr.Dataset]) -> dict[str, Any]:
    load = os.getloadavg()[0]
    cpu0, flt0 = _usage()
    t0 = time.perf_counter()
    ds = run()
    wall = time.perf_counter() - t0
    cpu1, flt1 = _usage()
    return {"wall_s": wall, "cpu_s": cpu1 - cpu0, "minflt": flt1 - flt0, "load": load,
            "probability": ds["probability"].values}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, nargs="+", default=[2, 128])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--betas", type=int, default=90)
    p.add_argument("--realizations", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--configs", nargs="+", default=["one-process", "before", "after", "processes"],
                   choices=["one-process", "before", "after", "processes"])
    p.add_argument("--json", default=None)
    args = p.parse_args()
    w = args.workers
    betas = beta_subset(args.betas)
    print(f"Figure 3's computation: n = 32, {betas.size} of the 90 betas in [0.1, 9]"
          f"{'' if betas.size == 90 else ' (spread evenly)'}, {args.realizations} starts, "
          f"200 times in [0, 30]; workers = {w} on {os.cpu_count()} cores; "
          f"best of {args.repeat}", flush=True)
    every = {
        "one process": lambda kw: phase_diagram(workers=1, **kw),
        "before": lambda kw: _before(w, **kw),
        "after": lambda kw: phase_diagram(workers=w, **kw),
        "processes": lambda kw: _processes(w, **kw),
    }
    configs = {name: run for name, run in every.items()
               if name.replace(" ", "-") in args.configs or name == "one process"}
    report: dict[str, Any] = {"workers": w, "betas": betas.size, "realizations": args.realizations,
                              "runs": {}}
    for d in args.d:
        kw = dict(n=32, d=d, betas=betas.tolist(), realizations=args.realizations, seed=0,
                  progress=False)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
        for _ in range(args.repeat):  # interleaved, so that a change of load hits all three
            for name, run in configs.items():
                runs[name].append(_timed(lambda run=run: run(kw)))
                r = runs[name][-1]
                print(f"  d = {d:4d} {name:12s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s"
                      f"  minflt {r['minflt']:9d}  load {r['load']:.1f}", flush=True)
        ref = runs["one process"][0]["probability"]
        same = all(np.array_equal(r["probability"], ref) for name, rs in runs.items()
                   for r in rs if name != "processes")
        best = {name: min(rs, key=lambda r: r["wall_s"]) for name, rs in runs.items()}
        one = best["one process"]["wall_s"]
        print(f"d = {d}: identical results in all runs: {same}")
        print(f"  {'':12s} {'wall s':>8s} {'speed-up':>9s} {'cpu s':>8s} {'minflt':>10s} {'load':>5s}")
        for name, r in best.items():
            print(f"  {name:12s} {r['wall_s']:8.1f} {one / r['wall_s']:8.2f}x {r['cpu_s']:8.1f}"
                  f" {r['minflt']:10d} {r['load']:5.1f}")
        if "after" in best:
            print(f"  target for after: >= {0.8 * w:.1f}x", flush=True)
        if "after" in best and "before" in best:
            print(f"  after/before wall: {best['before']['wall_s'] / best['after']['wall_s']:.2f}x "
                  "faster", flush=True)
        if "after" in best and "processes" in best:
            print(f"  after / the plain-process ceiling: "
                  f"{best['processes']['wall_s'] / best['after']['wall_s']:.2f}", flush=True)
        report["runs"][str(d)] = {name: [{k: v for k, v in r.items() if k != "probability"}
                                         for r in rs] for name, rs in runs.items()}
        report["runs"][str(d)]["identical"] = same
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
