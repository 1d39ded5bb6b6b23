"""How the ensemble commands end on the command line (issue 21 items 1, 4, 5): a run that
did not succeed exits 1 with one line (its reason; --debug adds the traceback, same exit
code) and writes its partial result to --out; --on-failure record writes the file with the
failed cells NaN and counted, successful = 0, and exits 1."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xarray as xr

from meanfield.cli import main

# small runs: each cell well under a second
PD = ["phase-diagram", "--n", "8", "--betas", "2", "--beta-min", "1", "--t-max", "20",
      "--times", "11", "--realizations", "16", "--no-progress"]
MS = ["metastability", "--n", "8", "--realizations", "8", "--t-max", "20", "--times", "11",
      "--no-progress"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the step-size warnings, numpy's overflow warnings
        code = main(argv)
    return code, capsys.readouterr().err


def _attrs(path) -> dict:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return dict(ds.attrs)


@pytest.mark.parametrize("debug", [False, True])
def test_phase_diagram_with_a_step_beyond_the_bound_exits_1_in_one_line(tmp_path, capsys,
                                                                        debug):
    """The issue's --dt 3: it used to end in an uncaught SweepError traceback. Now one line
    naming the step bound and the option to change; --debug: the traceback, then the line,
    the same exit code."""
    out = tmp_path / "pd.nc"
    argv = [*PD, "--beta-max", "5", "--dt", "3", "--out", str(out)] + (["--debug"] if debug
                                                                      else [])
    code, err = _run(argv, capsys)
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("meanfield phase-diagram: error: phase diagram: cell 0")
    assert "h L = " in line and "stability bound 2.785 of rk4" in line and "take dt <=" in line
    assert "--on-failure record" in line and "on_failure=" not in line  # the option as typed
    assert ("Traceback" in err) is debug and (len(err.strip().splitlines()) == 1) is not debug
    assert not out.exists()  # no cell finished: nothing to write


def test_a_failed_cell_writes_the_finished_ones_to_out(tmp_path, capsys):
    """--on-failure stop (the default): beta = 1e300 (non-finite states) stops the sweep after
    beta = 1 finished; that cell is written to --out (successful = 0) and the line says so;
    --resume then accepts the partial --out (and only a partial one)."""
    out = tmp_path / "pd.nc"
    code, err = _run([*PD, "--beta-max", "1e300", "--out", str(out)], capsys)
    assert code == 1, err
    assert "non-finite" in err and f"partial results written to {out}" in err
    attrs = _attrs(out)
    assert attrs["successful"] == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert bool(np.isfinite(ds["probability"].sel(beta=1.0)).all())
        assert bool(np.isnan(ds["probability"].sel(beta=1e300)).all())
    # --resume continues the run whose partial result --out holds: not refused up front
    code, err = _run([*PD, "--beta-max", "1e300", "--out", str(out), "--resume"], capsys)
    assert code == 1 and "exists" not in err and "non-finite" in err


def test_phase_diagram_record_writes_the_failed_cells_counted_and_exits_1(tmp_path, capsys):
    """--on-failure record: the failed cell is NaN, counted (num_rejected = 1, failed_cells),
    the file successful = 0, the other cell computed; exit 1 (the file is not the diagram
    asked for), the line naming the failure."""
    out = tmp_path / "pd.nc"
    code, err = _run([*PD, "--beta-max", "1e300", "--on-failure", "record", "--out",
                      str(out)], capsys)
    assert code == 1, err
    assert "1 of 2 cells failed" in err and "--on-failure record" in err
    assert "successful = 0" in err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and ds.attrs["num_rejected"] == 1
        assert list(json.loads(ds.attrs["settings"])["failed_cells"]) == ["1"]
        assert bool(np.isfinite(ds["probability"].sel(beta=1.0)).all())
        assert bool(np.isnan(ds["probability"].sel(beta=1e300)).all())


@pytest.mark.parametrize("debug", [False, True])
def test_metastability_with_a_failing_beta_exits_1_in_one_line(tmp_path, capsys, debug):
    """beta = 1e300 (non-finite states): exit 1, one line with the reason (--debug: the
    traceback before it, the same exit code); the trajectories fail first, so nothing is
    finished and the line says nothing is written."""
    out = tmp_path / "ms.nc"
    code, err = _run([*MS, "--beta", "4", "1e300", "--out", str(out)]
                     + (["--debug"] if debug else []), capsys)
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("meanfield metastability: error: trajectories at beta = 1e+300")
    assert "non-finite" in line and f"nothing is written to {out}" in line
    assert ("Traceback" in err) is debug and (len(err.strip().splitlines()) == 1) is not debug
    assert not out.exists()


def test_metastability_record_writes_the_file_and_exits_1(tmp_path, capsys):
    """--on-failure record: the failed beta's trajectories and counts are NaN, counted, the
    file successful = 0 with both failures in stop_reason; the other beta is whole counts."""
    out = tmp_path / "ms.nc"
    code, err = _run([*MS, "--beta", "4", "1e300", "--on-failure", "record", "--out",
                      str(out)], capsys)
    assert code == 1, err
    assert "1 of 2 cells failed" in err and "successful = 0" in err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and ds.attrs["num_rejected"] == 1
        assert "the trajectories of 1 beta(s) failed" in ds.attrs["stop_reason"]
        counts = ds["clusters"].values
        assert np.all(np.isnan(counts[1])) and np.all((counts[0] >= 1) & (counts[0] <= 8))
        theta = ds["theta"].values
        assert np.all(np.isnan(theta[1])) and np.all(np.isfinite(theta[0]))


def test_on_failure_is_declared_with_its_meaning():
    """--on-failure in both commands' --help, from the one option table, saying what record
    does and why it exits 1."""
    from meanfield.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in ("phase-diagram", "metastability"):
        text = " ".join(sub[name].format_help().split())
        assert "--on-failure {stop,record}" in text
        assert "num_rejected" in text and "failed_cells" in text and "successful = 0" in text
        assert "exit code 1" in text
