"""Tests of validation.sweep: grid mapping, seeds, workers, per-cell files and resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from testkit import assert_same_result

from validation.sweep import cell_seed, sweep


def noisy_cell(a: float, b: int, rng: np.random.Generator, *, size: int = 5) -> xr.Dataset:
    """A cell whose result depends on its parameters and on its random stream."""
    return xr.Dataset({"value": ("k", a * b + rng.standard_normal(size)),
                       "total": ((), a + b)}, coords={"k": np.arange(size)})


class Boom(RuntimeError):
    pass


FAIL: set = set()
"""Cells ``(a, b)`` on which :func:`failing_cell` raises (module state, shared by threads)."""


def failing_cell(a: float, b: int, rng: np.random.Generator, *, size: int = 5) -> xr.Dataset:
    """Like ``noisy_cell`` but raises on the cells listed in ``FAIL`` (an interruption)."""
    if (a, b) in FAIL:
        raise Boom(f"cell {(a, b)} interrupted")
    return noisy_cell(a, b, rng, size=size)


GRID = {"a": [0.5, 1.5, -2.0], "b": [1, 2, 3, 4]}


def test_grid_layout_and_values():
    out = sweep(noisy_cell, GRID, seed=3, progress=False)
    assert out["value"].dims == ("a", "b", "k")
    assert out["total"].dims == ("a", "b")
    np.testing.assert_array_equal(out["a"], GRID["a"])  # order kept, not sorted
    # cell (i, j) is number i * 4 + j and draws from SeedSequence(3, spawn_key=(index,))
    for i, a in enumerate(GRID["a"]):
        for j, b in enumerate(GRID["b"]):
            rng = np.random.default_rng(cell_seed(3, i * 4 + j))
            np.testing.assert_array_equal(out["value"][i, j], a * b + rng.standard_normal(5))
    assert json.loads(out.attrs["settings"])["grid"] == GRID


def test_cell_seed_matches_spawn():
    spawned = np.random.SeedSequence(7).spawn(5)[4]
    assert cell_seed(7, 4).generate_state(4).tolist() == spawned.generate_state(4).tolist()


def test_different_seeds_differ():
    a = sweep(noisy_cell, GRID, seed=0, progress=False)
    b = sweep(noisy_cell, GRID, seed=1, progress=False)
    assert not np.allclose(a["value"], b["value"])


def test_one_and_two_workers_identical(tmp_path):
    one = sweep(noisy_cell, GRID, seed=11, workers=1, progress=False, store=tmp_path / "one")
    # threads (processes=False): the test-module function needs no import on the workers,
    # and the cluster starts in about a second
    two = sweep(noisy_cell, GRID, seed=11, workers=2, processes=False, progress=False,
                store=tmp_path / "two")
    assert_same_result(one, two)


def test_cells_written_atomically_as_they_finish(tmp_path):
    store = tmp_path / "s"
    sweep(noisy_cell, GRID, seed=0, progress=False, store=store)
    names = sorted(p.name for p in store.iterdir())
    assert names == [f"cell-{i:06d}.nc" for i in range(12)] + ["sweep.json"]  # no temp left


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupted_sweep_resumes_to_the_same_result(tmp_path, workers):
    kw = dict(seed=5, progress=False, workers=workers, processes=False)
    FAIL.clear()
    reference = sweep(failing_cell, GRID, store=tmp_path / "ref", **kw)
    store = tmp_path / "s"
    FAIL.update({(1.5, 3), (-2.0, 1)})  # cells 6 and 8 of 12
    with pytest.raises(Boom):
        sweep(failing_cell, GRID, store=store, **kw)
    written = {p.name for p in store.glob("cell-*.nc")}
    if workers == 1:  # in order: cells 0..5 finished before cell 6 raised
        assert written == {f"cell-{i:06d}.nc" for i in range(6)}
    assert "cell-000006.nc" not in written and "cell-000008.nc" not in written
    # the resumed run must not recompute written cells: failing on each of them proves it
    cells = [(a, b) for a in GRID["a"] for b in GRID["b"]]
    FAIL.clear()
    FAIL.update(c for i, c in enumerate(cells) if f"cell-{i:06d}.nc" in written)
    try:
        resumed = sweep(failing_cell, GRID, store=store, resume=True, **kw)
    finally:
        FAIL.clear()
    assert_same_result(resumed, reference)


def test_resume_refuses_another_sweep(tmp_path):
    sweep(noisy_cell, GRID, seed=0, progress=False, store=tmp_path)
    with pytest.raises(ValueError, match="seed"):
        sweep(noisy_cell, GRID, seed=1, progress=False, store=tmp_path, resume=True)


def test_killed_process_resumes(tmp_path):
    """A sweep whose process dies mid-way (os._exit in a cell) resumes to the same result."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, numpy as np, xarray as xr
        from validation.sweep import sweep
        def cell(a, rng):
            if a == 3 and not os.environ.get("NO_KILL"):
                os._exit(9)  # the process is killed: no exception, no clean-up
            return xr.Dataset({{"v": ((), a + rng.standard_normal())}})
        out = sweep(cell, {{"a": list(range(6))}}, seed=2, progress=False,
                    store={str(tmp_path / "s")!r}, resume=True)
        out.to_netcdf({str(tmp_path / "out.nc")!r}, engine="h5netcdf")
    """)
    first = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert first.returncode == 9
    assert len(list((tmp_path / "s").glob("cell-*.nc"))) == 3
    second = subprocess.run([sys.executable, "-c", script], env={**__import__("os").environ,
                            "NO_KILL": "1"}, capture_output=True)
    assert second.returncode == 0, second.stderr.decode()
    out = xr.open_dataset(tmp_path / "out.nc", engine="h5netcdf").load()
    expected = [a + np.random.default_rng(cell_seed(2, a)).standard_normal() for a in range(6)]
    np.testing.assert_array_equal(out["v"].values, expected)


@pytest.mark.parametrize("grid, match", [
    ({}, "grid"),
    ({"a": []}, "grid\\['a'\\]"),
    ({"a": [[1, 2]]}, "grid\\['a'\\]"),
])
def test_bad_grids(grid, match):
    with pytest.raises(ValueError, match=match):
        sweep(noisy_cell, grid, progress=False)


def test_bad_workers_and_resume_without_store():
    with pytest.raises(ValueError, match="workers"):
        sweep(noisy_cell, GRID, workers=0, progress=False)
    with pytest.raises(ValueError, match="store"):
        sweep(noisy_cell, GRID, resume=True, progress=False)


def test_existing_scheduler_by_address_and_client():
    from distributed import Client, LocalCluster

    reference = sweep(noisy_cell, GRID, seed=4, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster:
        by_address = sweep(noisy_cell, GRID, seed=4, progress=False,
                           scheduler=cluster.scheduler_address)
        with Client(cluster) as client:
            by_client = sweep(noisy_cell, GRID, seed=4, progress=False, scheduler=client)
            assert client.status == "running"  # a client we were given is left open
    assert_same_result(by_address, reference)
    assert_same_result(by_client, reference)


def test_resume_never_mixes_cells_of_another_computation(tmp_path):
    """The stored cells of a sweep with size=5, then a run with size=3 that wrote its manifest
    and crashed before any cell (resume=False leaves old cell files): resuming it must not
    reuse the size=5 cells (the issue: new labels over old numbers)."""
    store = tmp_path / "s"
    sweep(noisy_cell, GRID, seed=1, store=store, progress=False, kwargs={"size": 5})
    FAIL.update({(a, b) for a in GRID["a"] for b in GRID["b"]})
    try:
        with pytest.raises(Boom):
            sweep(failing_cell, GRID, seed=1, store=store, progress=False, kwargs={"size": 3})
    finally:
        FAIL.clear()
    with pytest.warns(RuntimeWarning, match="made by another computation"):
        resumed = sweep(failing_cell, GRID, seed=1, store=store, resume=True, progress=False,
                        kwargs={"size": 3})
    fresh = sweep(failing_cell, GRID, seed=1, progress=False, kwargs={"size": 3})
    assert resumed.sizes["k"] == 3
    np.testing.assert_array_equal(resumed["value"].values, fresh["value"].values)


def test_a_cell_key_changes_with_every_input():
    from meanfield import Model
    from validation.sweep import cell_key

    base = cell_key(noisy_cell, {"a": 1.0, "b": 2}, 0, 3, {"size": 5})
    assert base == cell_key(noisy_cell, {"a": 1.0, "b": 2}, 0, 3, {"size": 5})
    others = [cell_key(noisy_cell, {"a": 1.0, "b": 2}, 0, 3, {"size": 6}),
              cell_key(noisy_cell, {"a": 1.0, "b": 3}, 0, 3, {"size": 5}),
              cell_key(noisy_cell, {"a": 1.0, "b": 2}, 1, 3, {"size": 5}),
              cell_key(failing_cell, {"a": 1.0, "b": 2}, 0, 3, {"size": 5})]
    assert base not in others and len(set(others)) == 4
    # models differing only in a large matrix (whose repr is truncated) differ in key
    q1, q2 = np.eye(40), np.eye(40)
    q2[20, 21] = 1e-3
    k1 = cell_key(noisy_cell, {}, 0, 0, {"model": Model(beta=1.0, Q=q1)})
    k2 = cell_key(noisy_cell, {}, 0, 0, {"model": Model(beta=1.0, Q=q2)})
    assert k1 != k2


def schedule_cell(a: float, rng: np.random.Generator, *, layers: object = None) -> xr.Dataset:
    import particles

    x = rng.standard_normal((6, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ds = particles.simulate(layers, x, [0.0, a], method="rk4", dt=0.1)
    return xr.Dataset({"x": (("token", "dim"), ds["x"].values[-1])})


def test_a_sweep_of_a_schedule_keys_every_piece(tmp_path):
    """An ensemble of runs under a schedule of models (layers with their own weights): the
    schedule reaches every cell, and its key changes with any entry of any piece."""
    from meanfield import Model, Schedule
    from validation.sweep import cell_key

    q1, q2 = np.eye(40), np.eye(40)
    q2[20, 21] = 1e-3
    s1 = Schedule([(0.0, Model(1.0)), (0.5, Model(beta=1.0, Q=q1))])
    s2 = Schedule([(0.0, Model(1.0)), (0.5, Model(beta=1.0, Q=q2))])
    s3 = Schedule([(0.0, Model(1.0)), (0.6, Model(beta=1.0, Q=q1))])
    keys = {cell_key(schedule_cell, {}, 0, 0, {"layers": s}) for s in (s1, s2, s3)}
    assert len(keys) == 3
    layers = Schedule([(0.0, Model(1.0)), (0.5, Model(4.0))])
    ds = sweep(schedule_cell, {"a": [1.0, 2.0]}, seed=1, progress=False,
               kwargs={"layers": layers}, store=tmp_path / "store")
    rng = np.random.default_rng(cell_seed(1, 1))
    np.testing.assert_array_equal(ds["x"].isel(a=1).values,
                                  schedule_cell(2.0, rng, layers=layers)["x"].values)


def test_worker_processes_from_a_script_without_main_guard_give_one_clear_error(tmp_path):
    """A script that starts worker processes at its top level gets one error saying what to
    add, before any cluster starts (not pages of 'Nanny failed to start')."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import numpy as np\n"
        "from validation.sweep import sweep\n"
        "def cell(a, rng):\n"
        "    return {'v': ((), a)}\n"
        "sweep(cell, {'a': [1.0, 2.0]}, workers=2, progress=False)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr and "MainGuardError" in proc.stderr
    assert "Nanny" not in proc.stderr


@pytest.mark.parametrize(("kw", "match"), [
    ({"workers": 1.5}, "workers must be an integer"),
    ({"workers": 0}, "workers must be >= 1"),
    ({"seed": -1}, "seed must be >= 0"),
    ({"seed": 1.0}, "seed must be an integer"),
])
def test_workers_and_seed_are_checked_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        sweep(noisy_cell, GRID, progress=False, **kw)
