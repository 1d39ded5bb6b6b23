"""Tests of the worker set-up (issue 14): pinned thread pools, the workers' environment, and
the grouping of cells into tasks (validation.cluster, validation.sweep.task_chunks).

No timings here (benchmarks/bench_workers.py measures them): these check the mechanisms the
speed rests on, each of which the rule of docs/sweeps.md states.
"""

from __future__ import annotations

import importlib
import math
import os

import numpy as np
import pytest
import xarray as xr
from testkit import assert_same_result
from threadpoolctl import threadpool_info, threadpool_limits

from validation.cluster import (
    DROPPED_VARIABLES,
    THREAD_VARIABLES,
    PinThreads,
    dask_client,
    worker_environ,
)
from validation.sweep import TASKS_PER_WORKER, sweep, task_chunks

sweep_module = importlib.import_module("validation.sweep")  # the name `sweep` is the function


def _worker_state() -> dict:
    """What a worker process runs with: its thread pools and its environment."""
    import dask
    from threadpoolctl import threadpool_info

    return {"pools": [(p["internal_api"], p["num_threads"]) for p in threadpool_info()],
            "environ": {k: os.environ.get(k) for k in (*THREAD_VARIABLES, *DROPPED_VARIABLES)},
            "pid": os.getpid(),
            "profiling": dask.config.get("distributed.worker.profile.enabled")}


def test_local_worker_processes_run_pinned_and_without_dasks_malloc_setting(monkeypatch):
    # as left behind by an earlier cluster of Dask's own (its nanny writes it here)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")
    before = dict(os.environ)
    with dask_client(workers=2) as client:
        states = client.run(_worker_state)
    assert len(states) == 2
    assert len({s["pid"] for s in states.values()} | {os.getpid()}) == 3  # two processes
    for s in states.values():
        assert s["pools"], "numpy's BLAS must be loaded in the worker"
        assert all(n == 1 for _, n in s["pools"]), s["pools"]
        assert s["environ"]["MALLOC_TRIM_THRESHOLD_"] is None
        assert all(s["environ"][k] == "1" for k in THREAD_VARIABLES)
        assert s["profiling"] is False  # Dask's 10 ms stack sampler is off in our workers
    # this process's environment is as it was (the nanny writes into it while spawning)
    assert {k: os.environ.get(k) for k in before} == before


def test_thread_workers_pin_this_process_while_open_and_restore_it():
    with threadpool_limits(limits=2):
        with dask_client(workers=2, processes=False, threads=1):
            assert all(p["num_threads"] == 1 for p in threadpool_info())
        assert all(p["num_threads"] == 2 for p in threadpool_info()
                   if p["user_api"] == "blas")


def test_pin_threads_plugin_and_worker_environ():
    assert worker_environ(3) == dict.fromkeys(THREAD_VARIABLES, "3")
    assert "MALLOC_TRIM_THRESHOLD_" not in worker_environ()
    with threadpool_limits(limits=2):  # restores this process's pools on exit
        PinThreads(3).setup(worker=None)
        assert all(p["num_threads"] == 3 for p in threadpool_info())


@pytest.mark.parametrize(("call", "match"), [
    (lambda: worker_environ(0), "threads must be >= 1"),
    (lambda: PinThreads(1.5), "threads must be an integer"),
    (lambda: dask_client(workers=1, threads=0).__enter__(), "threads must be >= 1"),
    (lambda: task_chunks(range(4), 0), "workers must be >= 1"),
    (lambda: task_chunks(range(4), 2, 0), "cells_per_task must be >= 1"),
    (lambda: task_chunks(range(4), 2, costs=[1.0, 2.0]), "costs must give one number per cell"),
    (lambda: sweep(lambda a, rng: {"x": a}, {"a": [1]}, cells_per_task=0, progress=False),
     "cells_per_task must be >= 1"),
])
def test_bad_threads_and_task_sizes_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(("n", "workers"), [(1, 1), (7, 2), (90, 2), (180, 2), (1000, 3), (5, 8)])
def test_task_chunks_follow_the_documented_rule(n, workers):
    todo = list(range(100, 100 + n))
    chunks = task_chunks(todo, workers)
    size = max(1, math.ceil(n / (TASKS_PER_WORKER * workers)))
    assert sorted(i for c in chunks for i in c) == todo  # every cell exactly once
    assert len(chunks) == math.ceil(n / size) <= TASKS_PER_WORKER * workers
    assert max(map(len, chunks)) == size and min(map(len, chunks)) >= size - 1
    for k, chunk in enumerate(chunks):  # interleaved: task k holds todo[k::m]
        assert chunk == todo[k::len(chunks)]


def test_task_chunks_explicit_size():
    assert task_chunks([3, 5, 8, 9, 12], 2, cells_per_task=1) == [[3], [5], [8], [9], [12]]
    assert task_chunks(range(5), 4, cells_per_task=2) == [[0, 3], [1, 4], [2]]
    assert task_chunks(range(5), 1, cells_per_task=10) == [[0, 1, 2, 3, 4]]


def test_task_chunks_send_the_most_expensive_cells_first():
    todo = [10, 11, 12, 13, 14, 15, 16]
    costs = [3.0, 9.0, 1.0, 9.0, 5.0, 0.5, 7.0]
    # by decreasing cost (ties in grid order): 11, 13, 16, 14, 10, 12, 15
    assert task_chunks(todo, 2, cells_per_task=1, costs=costs) == [
        [11], [13], [16], [14], [10], [12], [15]]
    assert task_chunks(todo, 2, cells_per_task=2, costs=costs) == [
        [11, 10], [13, 12], [16, 15], [14]]
    chunks = task_chunks(range(90), 2, costs=list(range(90)))  # cost growing along the grid
    totals = [sum(c) for c in chunks]
    assert totals == sorted(totals, reverse=True)  # the cheapest tasks come last
    assert sorted(i for c in chunks for i in c) == list(range(90))


def test_one_worker_runs_the_cells_most_expensive_first(monkeypatch):
    """The order of submission is the order of work: a one-thread worker runs the tasks in
    the order of :func:`task_chunks` with the costs, and the numbers are those of one process."""
    grid = {"a": np.linspace(0, 1, 5), "b": [1, 2]}  # 10 cells, cell i = (a[i // 2], b[i % 2])
    reference = sweep(grid_cell, grid, seed=4, workers=1, progress=False)
    monkeypatch.setattr(sweep_module, "_run_chunk", recording_chunk)
    SUBMITTED.clear()
    with dask_client(workers=1, processes=False) as client:
        out = sweep(grid_cell, grid, seed=4, scheduler=client, progress=False,
                    cells_per_task=1, cost=lambda a, b: a * b)
    costs = [a * b for a in grid["a"] for b in grid["b"]]
    assert SUBMITTED == task_chunks(range(10), 1, 1, costs)
    assert SUBMITTED[0] == [9] and SUBMITTED[-1] in ([0], [1])  # a = 0: cost 0
    assert_same_result(out, reference)


def grid_cell(a: float, b: int, rng: np.random.Generator) -> xr.Dataset:
    return xr.Dataset({"value": ("k", a * b + rng.standard_normal(3))})


SUBMITTED: list[list[int]] = []
"""Cell indices of every task submitted by the sweep below (worker threads share it)."""

RUN_CHUNK = sweep_module._run_chunk


def recording_chunk(func, cells, seed, *args, **kwargs):
    SUBMITTED.append([index for index, _ in cells])
    return RUN_CHUNK(func, cells, seed, *args, **kwargs)


def test_sweep_submits_the_documented_tasks_and_the_same_numbers(monkeypatch):
    grid = {"a": np.linspace(0, 1, 10), "b": [1, 2, 3, 4]}  # 40 cells
    reference = sweep(grid_cell, grid, seed=4, workers=1, progress=False)
    monkeypatch.setattr(sweep_module, "_run_chunk", recording_chunk)
    SUBMITTED.clear()
    out = sweep(grid_cell, grid, seed=4, workers=2, processes=False, progress=False)
    assert sorted(map(sorted, SUBMITTED)) == sorted(map(sorted, task_chunks(range(40), 2)))
    assert len(SUBMITTED) == math.ceil(40 / math.ceil(40 / (TASKS_PER_WORKER * 2)))
    assert_same_result(out, reference)
    SUBMITTED.clear()
    out = sweep(grid_cell, grid, seed=4, workers=2, processes=False, progress=False,
                cells_per_task=40)
    assert SUBMITTED == [list(range(40))]
    assert_same_result(out, reference)


FAIL_AT = {6}


def failing_cell(a: float, rng: np.random.Generator) -> xr.Dataset:
    if a in FAIL_AT:
        msg = f"cell a={a} fails"
        raise ArithmeticError(msg)
    return xr.Dataset({"value": ((), a + rng.standard_normal())})


def test_a_failing_cell_keeps_the_cells_its_task_finished_before_it(tmp_path):
    grid = {"a": list(range(10))}
    with pytest.raises(ArithmeticError, match="a=6 fails") as info:
        sweep(failing_cell, grid, workers=2, processes=False, progress=False,
              store=tmp_path, cells_per_task=10)  # one task: cells 0..9 in order
    written = sorted(p.name for p in tmp_path.glob("cell-*.nc"))
    assert written == [f"cell-{i:06d}.nc" for i in range(6)]
    if hasattr(info.value, "__notes__"):
        assert "sweep cell 6" in info.value.__notes__[0]
    FAIL_AT.clear()
    try:
        out = sweep(failing_cell, grid, workers=2, processes=False, progress=False,
                    store=tmp_path, resume=True, cells_per_task=10)
        whole = sweep(failing_cell, grid, workers=1, progress=False)
    finally:
        FAIL_AT.add(6)
    np.testing.assert_array_equal(out["value"].values, whole["value"].values)
