"""How an ensemble and its sweep end (issue 21, items 1 and 2): an interrupt ends the sweep
(exit 130) with only the finished cells kept, a failed or unstable cell is never a result,
and a step that cannot finish is refused before any work."""

from __future__ import annotations

import functools
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from meanfield.cli import main
from meanfield.integrate import IntegrationError, Interrupted, StopReason
from validation.metastability import cluster_counts
from validation.phase_diagram import phase_diagram
from validation.sweep import SweepError, sweep

ROOT = Path(__file__).resolve().parents[2]
pdg = importlib.import_module("validation.phase_diagram")  # the package exports a function by that name

# small grids: each cell well under a second
SMALL = dict(n=8, d=2, times=11, t_max=20.0, realizations=16, progress=False)


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return func(*args, **kwargs)


# -- failed cells ----------------------------------------------------------------------------


def test_a_step_beyond_the_bound_stops_the_phase_diagram(tmp_path):
    """The issue's --dt 3 (other n, betas): it used to write probabilities off by up to 1.0
    with exit 0; now the first cell stops with the measured h L (about 1.5-2.6 here, above
    half the RK4 bound 1.39) and nothing of it is stored."""
    store = tmp_path / "cells"
    with pytest.raises(SweepError, match=r"h L = .*stability bound 2\.785 of rk4") as info:
        _quiet(phase_diagram, betas=[1.0, 5.0], dt=3.0, store=str(store), **SMALL)
    err = info.value
    assert err.reason is StopReason.UNSTABLE and err.cell == 0 and err.params["beta"] == 1.0
    assert not list(store.glob("cell-*.nc"))  # the failed cell is not stored as done
    # the same grid with the default step succeeds, with no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ok = phase_diagram(betas=[1.0, 5.0], **SMALL)
    assert ok.attrs["successful"] == 1 and ok.attrs["num_rejected"] == 0


@pytest.mark.parametrize("dt", [5.0, 20.0])
def test_a_step_that_overflows_at_once_is_named_by_the_step_size_monitor(dt):
    """The issue's ensembles with dt = 5 or 20 ended as 'non-finite': the first RK4 step at
    beta = 9 overflows exp before any monitor ran. The monitor now judges h L at the initial
    state before the first step, so the run stops at t = 0 with the step-size message (as
    particles.simulate), and no exp overflowed (RuntimeWarning raised as an error)."""
    kw = dict(n=8, seeds=8, t_max=20.0, times=11, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(SweepError, match=r"at t = 0 .*h L = .*stability bound 2\.785 of "
                           r"rk4.*take dt <= ") as info:
            _quiet(cluster_counts, betas=[9.0], dt=dt, **kw)
        assert info.value.reason is StopReason.UNSTABLE
        with pytest.raises(SweepError, match=r"at t = 0 .*h L = .*take dt <= ") as info:
            _quiet(phase_diagram, betas=[9.0], dt=dt, **SMALL)
        assert info.value.reason is StopReason.UNSTABLE


def test_recorded_failures_are_nan_and_counted():
    """on_failure='record': the failed cell (beta = 1e300: non-finite states) is NaN and
    left out of t_half, counted in num_rejected and named in stop_reason; the other cell is
    the one a clean run gives (same cell index, same seed)."""
    with np.errstate(all="ignore"):
        ds = _quiet(phase_diagram, betas=[1.0, 1e300], on_failure="record", **SMALL)
    bad = ds["probability"].isel(beta=1).values
    good = ds["probability"].isel(beta=0).values
    assert np.all(np.isnan(bad)) and np.all(np.isfinite(good))
    assert np.isnan(float(ds["t_half"].isel(beta=1)))
    assert ds.attrs["successful"] == 0 and ds.attrs["num_rejected"] == 1
    assert "1 of 2 cells failed" in ds.attrs["stop_reason"] and "non-finite" in ds.attrs["stop_reason"]
    assert list(json.loads(ds.attrs["settings"])["failed_cells"]) == ["1"]
    alone = phase_diagram(betas=[1.0], **SMALL)  # cell 0 has the same seed
    np.testing.assert_array_equal(good, alone["probability"].values.ravel())
    with np.errstate(all="ignore"), pytest.raises(SweepError, match="every cell failed"):
        _quiet(phase_diagram, betas=[1e300], on_failure="record", **SMALL)


def test_metastability_never_counts_from_uninitialised_memory():
    """The issue's metastability --dt 5 (counts like 140637317833776) and --beta 1e300
    (non-finite states): both stop with the reason; with on_failure='record' the counts of
    the failed beta are NaN (floats), the other beta's are whole numbers."""
    kw = dict(n=8, seeds=8, t_max=20.0, times=11, progress=False)
    with pytest.raises(SweepError, match=r"h L = .*stability bound") as info:
        _quiet(cluster_counts, betas=[4.0], dt=5.0, **kw)
    assert info.value.reason is StopReason.UNSTABLE
    with np.errstate(all="ignore"), pytest.raises(SweepError, match="overflowed") as info:
        _quiet(cluster_counts, betas=[1e300], **kw)
    assert info.value.reason is StopReason.OVERFLOW  # e^{beta <x, y>} beyond float64, named
    with np.errstate(all="ignore"):
        ds = _quiet(cluster_counts, betas=[4.0, 1e300], on_failure="record", **kw)
    counts = ds["clusters"].values
    assert np.all(np.isnan(counts[1])) and np.all((counts[0] >= 1) & (counts[0] <= 8))
    assert ds.attrs["successful"] == 0 and ds.attrs["num_rejected"] == 1


def test_metastability_trajectories_attrs_follow_the_schema():
    """The trajectories' attrs come from the result schema: their own entries (the backend,
    failed_betas) in settings; a beta recorded as failed (1e300: non-finite states) makes the
    result unsuccessful, named in stop_reason; the counters are the runs' sums (t_max / dt
    = 20 RK4 steps for a beta that runs to its end, fewer for one that stops early)."""
    from meanfield.integrate import check_result_attrs, settings_of
    from validation.metastability import trajectories

    kw = dict(n=8, t_max=2.0, times=3)
    ok = trajectories(betas=[4.0], **kw)
    check_result_attrs(ok.attrs)
    assert ok.attrs["successful"] == 1 and ok.attrs["num_accepted"] == 20
    assert settings_of(ok)["failed_betas"] == {} and settings_of(ok)["backend"].startswith("numpy")
    with np.errstate(all="ignore"):
        ds = trajectories(betas=[4.0, 1e300], on_failure="record", **kw)
    check_result_attrs(ds.attrs)
    assert ds.attrs["successful"] == 0 and list(settings_of(ds)["failed_betas"]) == ["1e+300"]
    assert ds.attrs["stop_reason"].startswith("the trajectories of 1 beta(s) failed and are NaN")
    assert 20 <= ds.attrs["num_accepted"] < 40


def test_a_step_that_cannot_finish_is_refused_up_front():
    """USA at beta_max = 1e3 steps dt e^{-beta}: it used to say 'dt must be > 0, got 0.0'
    from inside a cell; now the estimate comes before any cell, in logarithms."""
    with pytest.raises(ValueError, match=r"beta = 1000.*10\^436\.3 steps.*max_steps = 1000000"):
        phase_diagram(n=8, d=2, beta_min=0.1, beta_max=1e3, betas=3, attention="unnormalized",
                      progress=False)
    with pytest.raises(ValueError, match=r"dt = 1e-09 needs 2e\+10 steps"):
        phase_diagram(betas=[1.0], dt=1e-9, **SMALL)
    with pytest.raises(ValueError, match=r"dt = 1e-09 needs 2e\+10 steps"):
        cluster_counts(betas=[1.0], dt=1e-9, n=8, seeds=4, t_max=20.0, times=5, progress=False)


# -- interrupts ------------------------------------------------------------------------------

STOP_AT = {"calls": 0, "at": -1}


def _cell(a: float, rng: np.random.Generator) -> xr.Dataset:
    STOP_AT["calls"] += 1
    if STOP_AT["calls"] == STOP_AT["at"]:
        raise KeyboardInterrupt
    return xr.Dataset({"y": ("k", a + rng.standard_normal(3))})


def test_an_interrupted_sweep_keeps_only_finished_cells(tmp_path):
    grid = {"a": [0.0, 1.0, 2.0, 3.0]}
    STOP_AT.update(calls=0, at=3)
    with pytest.raises(Interrupted, match="interrupted after 2 of 4 cells") as info:
        sweep(_cell, grid, store=tmp_path, progress=False)
    part = info.value.dataset
    assert part.attrs["successful"] == 0 and part.attrs["num_accepted"] == 2
    assert part.attrs["stop_reason"].startswith(StopReason.INTERRUPTED.value)
    assert np.all(np.isfinite(part["y"].values[:2])) and np.all(np.isnan(part["y"].values[2:]))
    assert sorted(p.name for p in tmp_path.glob("cell-*.nc")) == ["cell-000000.nc", "cell-000001.nc"]
    STOP_AT.update(calls=0, at=-1)
    resumed = sweep(_cell, grid, store=tmp_path, resume=True, progress=False)
    assert STOP_AT["calls"] == 2 and resumed.attrs["successful"] == 1  # only the missing ones
    np.testing.assert_array_equal(resumed["y"].values[:2], part["y"].values[:2])


CHILD = """
import functools, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may ignore it
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
import importlib
pdg = importlib.import_module("validation.phase_diagram")
real = pdg.phase_cell

@functools.wraps(real)  # the same module and name: the same cell keys as the real command
def cell(*args, **kwargs):
    out = real(*args, **kwargs)
    print("cell done", flush=True)
    return out

pdg.phase_cell = cell
from meanfield.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_ends_the_phase_diagram_with_130_and_resume_computes_the_rest(tmp_path,
                                                                             monkeypatch):
    """The issue's reproduction, as a real process sent SIGINT after its first cell: exit
    130 (it used to go on, exit 0 and write successful=1 with one block cut short), the store
    holds only cells that finished, no file claims success, and --resume computes only the
    missing cells."""
    out, store = tmp_path / "pd.nc", tmp_path / "cells"
    args = ["phase-diagram", "--n", "16", "--d", "2", "--beta-min", "1", "--beta-max", "6",
            "--betas", "6", "--t-max", "20", "--times", "11", "--realizations", "256",
            "--no-progress", "--store", str(store), "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert child.stdout is not None
        first = child.stdout.readline()
        assert first.strip() == "cell done", child.stderr.read() if child.stderr else ""
        deadline = time.monotonic() + 60
        while not list(store.glob("cell-*.nc")) and time.monotonic() < deadline:
            time.sleep(0.01)  # the first cell stored: the interrupt comes during a later one
        child.send_signal(signal.SIGINT)
        rest, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    done = 1 + rest.count("cell done")
    assert child.returncode == 130, err
    assert "interrupted" in err
    stored = sorted(store.glob("cell-*.nc"))
    assert 1 <= len(stored) <= done < 6  # never the cut cell
    if out.exists():  # a file, if any, says it is not a success
        with xr.open_dataset(out, engine="h5netcdf") as ds:
            assert ds.attrs["successful"] == 0
    computed = []
    real = pdg.phase_cell

    @functools.wraps(real)
    def counting(*a, **kw):
        computed.append(kw.get("beta", a[0] if a else None))
        return real(*a, **kw)

    monkeypatch.setattr(pdg, "phase_cell", counting)
    assert main([*args, "--resume"]) == 0
    assert len(computed) == 6 - len(stored)
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 1 and bool(np.isfinite(ds["probability"].values).all())


def test_interrupted_phase_diagram_in_python_keeps_what_finished(tmp_path, monkeypatch):
    """phase_diagram() from Python: Interrupted whose dataset holds the finished cells,
    completed (t_half) and marked unsuccessful; the cut cell is not in the store."""
    real = pdg.phase_cell
    calls = []

    @functools.wraps(real)
    def cut(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise Interrupted("simulated Ctrl-C inside a cell")
        return real(*a, **kw)

    monkeypatch.setattr(pdg, "phase_cell", cut)
    with pytest.raises(Interrupted) as info:
        phase_diagram(betas=[1.0, 2.0, 3.0], store=str(tmp_path), **SMALL)
    ds = info.value.dataset
    assert ds.attrs["successful"] == 0 and ds.attrs["solver"] == "validation.phase_diagram"
    assert np.isfinite(ds["probability"].sel(beta=1.0).values).all()
    assert np.isnan(ds["probability"].sel(beta=2.0).values).all() and "t_half" in ds
    assert [p.name for p in tmp_path.glob("cell-*.nc")] == ["cell-000000.nc"]


def _flaky(a: float, rng: np.random.Generator) -> xr.Dataset:
    if a in (1.0, 3.0):
        raise IntegrationError(f"cell a = {a} did not converge", None, 0.5, StopReason.NON_FINITE)
    return xr.Dataset({"y": ("k", a + rng.standard_normal(2)), "n": ("k", np.arange(2))})


@pytest.mark.parametrize("workers", [1, 2])
def test_failed_cells_stop_or_are_recorded_on_every_scheduler(tmp_path, workers):
    """The same rule in this process and on a (threaded) cluster: stop with SweepError naming
    the cell, or record it as NaN (integers become floats) with a count, never stored."""
    grid = {"a": [0.0, 1.0, 2.0, 3.0]}
    kw = dict(progress=False, workers=workers, processes=False, seed=3)
    with pytest.raises(SweepError, match=r"cell (1|3) \(a = (1|3)\.0\) failed: cell a = "
                                         r"(1|3)\.0 did not converge") as info:
        sweep(_flaky, grid, store=tmp_path / "stop", **kw)
    assert info.value.reason is StopReason.NON_FINITE and info.value.cell in (1, 3)
    stored = {p.name for p in (tmp_path / "stop").glob("cell-*.nc")}
    assert "cell-000001.nc" not in stored and "cell-000003.nc" not in stored
    ds = sweep(_flaky, grid, store=tmp_path / "rec", on_failure="record", **kw)
    assert ds.attrs["successful"] == 0 and ds.attrs["num_rejected"] == 2
    assert ds.attrs["num_accepted"] == 2 and "2 of 4 cells failed" in ds.attrs["stop_reason"]
    assert np.isnan(ds["y"].values[[1, 3]]).all() and np.isfinite(ds["y"].values[[0, 2]]).all()
    assert ds["n"].dtype.kind == "f" and np.isnan(ds["n"].values[1]).all()
    assert sorted(p.name for p in (tmp_path / "rec").glob("cell-*.nc")) == [
        "cell-000000.nc", "cell-000002.nc"]
    with pytest.raises(ValueError, match="on_failure must be one of"):
        sweep(_flaky, grid, on_failure="ignore", **kw)
