"""``meanfield particles`` as the particles package registers it (entry points, options)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import xarray as xr
from testkit import interrupt_command

import particles.cli as pcli
from meanfield.cli import GROUP, build_parser, main
from meanfield.integrate import RESULT_ATTRS, check_result_attrs
from particles.simulate import METHODS


def test_registered_by_the_particles_package() -> None:
    (ep,) = [e for e in entry_points(group=GROUP) if e.name == "particles"]
    assert ep.value == "particles.cli" and ep.load() is pcli
    (drawer,) = [e for e in entry_points(group="meanfield.plotters") if e.name == "particles"]
    assert drawer.load() is pcli


def test_method_choices_are_the_integrators(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["particles", "--help"])
    text = capsys.readouterr().out
    assert "{" + ",".join(METHODS) + "}" in text
    assert "(default: rk4)" in text and "(default: 301)" in text


def test_progress_flags(tmp_path: Path) -> None:
    parser = build_parser()
    assert parser.parse_args(["particles"]).progress is True
    assert parser.parse_args(["particles", "--no-progress"]).progress is False
    assert parser.parse_args(["particles", "--progress"]).progress is True  # the old flag


def test_run_with_the_one_spelling(tmp_path: Path) -> None:
    out = tmp_path / "p.nc"
    assert main(["particles", "--n", "4", "--d", "3", "--t-max", "0.2", "--times", "3",
                 "--seed", "1", "--no-progress", "--out", str(out)]) == 0
    ds = xr.load_dataset(out, engine="h5netcdf")
    assert ds.x.shape == (3, 4, 3) and pcli.accepts(ds)
    assert not pcli.accepts(ds.drop_vars("x"))
    # the command's seed and start went through the schema with the run's own settings
    assert set(ds.attrs) == set(RESULT_ATTRS)
    settings = json.loads(ds.attrs["settings"])
    assert settings["seed"] == 1 and settings["init"] == "sphere"
    assert settings["field_method_requested"] == "auto" and settings["method"] == "rk4"


def test_the_command_passes_its_settings_to_simulate(tmp_path: Path, monkeypatch) -> None:
    """Through ``simulate(settings=...)``, not by editing the JSON after the fact: the
    Dataset simulate returns already holds them."""
    import importlib

    psim = importlib.import_module("particles.simulate")  # the module, not the function

    seen = {}
    real = psim.simulate

    def spy(*args, **kwargs):
        seen["ds"] = real(*args, **kwargs)
        return seen["ds"]

    monkeypatch.setattr(psim, "simulate", spy)
    assert main(["particles", "--n", "3", "--d", "4", "--t-max", "0.1", "--times", "2",
                 "--seed", "7", "--init", "orthogonal", "--no-progress",
                 "--out", str(tmp_path / "q.nc")]) == 0
    check_result_attrs(seen["ds"].attrs)
    settings = json.loads(seen["ds"].attrs["settings"])
    assert settings["seed"] == 7 and settings["init"] == "orthogonal"


def test_gaussian_start_needs_euclidean(tmp_path: Path, capsys) -> None:
    assert main(["particles", "--init", "gaussian", "--out", str(tmp_path / "x.nc")]) == 2
    assert "--init gaussian needs --geometry euclidean" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")  # the blow-up is the point
def test_a_run_that_blows_up_says_so_and_exits_non_zero(tmp_path: Path, capsys) -> None:
    """USA at beta = 10 in R^d overflows at once: the file holds the finite states, the
    command says the run stopped early and exits 1 (it exited 0 with NaN before)."""
    out = tmp_path / "p.nc"
    code = main(["particles", "--n", "8", "--beta", "10", "--attention", "unnormalized",
                 "--geometry", "euclidean", "--init", "gaussian", "--t-max", "5", "--times", "6",
                 "--no-progress", "--no-observables", "--out", str(out)])
    assert code == 1
    assert "stopped early" in capsys.readouterr().err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and bool(ds["x"].notnull().all())


def test_outputs_are_checked_before_any_work(tmp_path: Path, capsys, monkeypatch) -> None:
    out = tmp_path / "p.nc"
    out.write_text("old")
    import sys

    # the package's `simulate` is the function; patch it in its module
    monkeypatch.setattr(sys.modules["particles.simulate"], "simulate",
                        lambda *a, **k: pytest.fail("computed"))
    argv = ["particles", "--n", "4", "--t-max", "0.1", "--times", "2", "--no-progress"]
    assert main(argv + ["--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "old"
    assert main(argv + ["--out", str(tmp_path)]) == 2  # a folder
    assert main(argv + ["--out", str(out / "x.nc")]) == 2  # under a file
    monkeypatch.undo()
    assert main(argv + ["--out", str(out), "--overwrite"]) == 0


def test_interrupted_run_writes_its_partial_result(tmp_path: Path) -> None:
    """Ctrl-C in a real process (SIGINT, default handler): exit 130, the message names the
    file, and the file holds the states up to the interruption with successful = 0."""
    import re

    out = tmp_path / "p.nc"
    # 5e5 steps of 0.01 (within max_steps = 1e6, which refuses a longer run up front): far
    # longer than the test waits
    argv = ["particles", "--n", "48", "--d", "3", "--t-max", "5e3", "--times", "5",
            "--method", "rk4", "--dt", "0.01", "--no-observables", "--out", str(out)]
    # SIGINT once the bar has moved: steps were taken
    code, err = interrupt_command(argv, re.compile(rb"\| t=[0-9.]*[1-9]"))
    assert code == 130, err
    assert "interrupted at t = " in err and f"written to {out}" in err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and "interrupt" in ds.attrs["stop_reason"]
        assert 0 < ds.attrs["t_reached"] < 5e3
        assert bool(ds["x"].notnull().all())  # the states written are the computed ones


@pytest.mark.parametrize("method", ["direct", "fast"])
def test_field_method_is_passed_on_and_recorded(method: str, tmp_path: Path) -> None:
    """``--field-method`` reaches ``particles.simulate``: the choice it made and the request
    are in ``settings``. Fast and direct are not the same scheme to round-off: the fast field
    evaluates an RK4 stage point (off the sphere) at ``x/|x|``, the direct sum at ``x``, a
    difference of RK4's order (measured, n = 6 on S^2, beta = 4, t = 0.2: 6.5e-9 at dt = 0.1,
    4.2e-10 at 0.05, 2.7e-11 at 0.025, falling like dt^4). At dt = 0.025, 1e-9 leaves a factor
    ~40 for this start; the fast sum's own error (1e-12 relative per point) is far below."""
    import json

    import numpy as np

    runs = {}
    for m in dict.fromkeys(("direct", method)):
        out = tmp_path / f"{m}.nc"
        assert main(["particles", "--n", "6", "--d", "3", "--t-max", "0.2", "--times", "3",
                     "--dt", "0.025", "--field-method", m, "--no-progress", "--out", str(out)]) == 0
        ds = xr.load_dataset(out, engine="h5netcdf")
        settings = json.loads(ds.attrs["settings"])
        assert settings["field_method"] == m and settings["field_method_requested"] == m
        runs[m] = ds.x.values
    np.testing.assert_allclose(runs[method], runs["direct"], rtol=0, atol=1e-9)


def test_field_method_auto_records_the_choice(tmp_path: Path) -> None:
    """``auto`` (the default) at n = 4 is below every crossover: the direct sum, said so."""
    import json

    out = tmp_path / "auto.nc"
    assert main(["particles", "--n", "4", "--d", "3", "--t-max", "0.1", "--times", "2",
                 "--no-progress", "--out", str(out)]) == 0
    settings = json.loads(xr.load_dataset(out, engine="h5netcdf").attrs["settings"])
    assert settings["field_method_requested"] == "auto" and settings["field_method"] == "direct"


def test_field_method_fast_where_it_does_not_apply_is_refused(tmp_path: Path, capsys) -> None:
    """Tokens in R^d have no fast field: ``--field-method fast`` is a one-line error naming
    the reason, exit 2, nothing written."""
    out = tmp_path / "x.nc"
    assert main(["particles", "--geometry", "euclidean", "--init", "gaussian", "--n", "4",
                 "--d", "3", "--field-method", "fast", "--no-progress", "--out", str(out)]) == 2
    assert "method='fast' does not apply" in capsys.readouterr().err
    assert not out.exists()


def test_field_method_choices(capsys) -> None:
    from meanfield.kernels import fastsum

    assert main(["particles", "--field-method", "fastest"]) == 2
    assert "--field-method must be one of auto, direct, fast" in capsys.readouterr().err
    assert build_parser().parse_args(["particles"]).field_method == "auto"
    assert options_choices() == fastsum.FIELD_METHODS


def options_choices() -> tuple[str, ...]:
    from meanfield.cli.options import OPTIONS

    return tuple(OPTIONS["field_method"].choices or ())
