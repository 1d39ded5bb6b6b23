"""``meanfield particles`` as the particles package registers it (entry points, options)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
import xarray as xr

import particles.cli as pcli
from meanfield.cli import GROUP, build_parser, main
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


def test_gaussian_start_needs_euclidean(tmp_path: Path, capsys) -> None:
    assert main(["particles", "--init", "gaussian", "--out", str(tmp_path / "x.nc")]) == 2
    assert "--init gaussian needs --geometry euclidean" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()
