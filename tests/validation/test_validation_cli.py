"""The validation package's commands: registration, drawing their files, interruption."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import xarray as xr

from meanfield.cli import GROUP, main

PNG = b"\x89PNG\r\n\x1a\n"


def test_registered_by_the_validation_package() -> None:
    eps = {e.name: e.value for e in entry_points(group=GROUP)}
    assert eps["validate"] == "validation.cli.validate"
    assert eps["phase-diagram"] == "validation.cli.phase_diagram"
    assert eps["metastability"] == "validation.cli.metastability"


def test_plot_draws_phase_diagram_and_metastability(tmp_path) -> None:
    pd = tmp_path / "pd.nc"
    assert main(["phase-diagram", "--n", "4", "--d", "3", "--betas", "2", "--t-max", "1",
                 "--times", "3", "--realizations", "4", "--out", str(pd), "--no-progress"]) == 0
    assert main(["plot", str(pd)]) == 0
    assert (tmp_path / "pd.png").read_bytes()[:8] == PNG
    ms = tmp_path / "ms.nc"
    assert main(["metastability", "--beta", "4", "--n", "4", "--seeds", "2", "--t-max", "1",
                 "--times", "3", "--out", str(ms), "--no-progress"]) == 0
    with xr.open_dataset(ms, engine="h5netcdf") as ds:
        assert ds.sizes["seed"] == 2  # the old spelling --seeds still sets --realizations
    assert main(["plot", str(ms), "--out", str(tmp_path / "ms.png")]) == 0
    assert (tmp_path / "ms.png").read_bytes()[:8] == PNG


def test_phase_diagram_interrupt_says_how_to_resume(tmp_path, monkeypatch, capsys) -> None:
    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["validation.phase_diagram"], "phase_diagram", interrupted)
    out = tmp_path / "pd.nc"
    assert main(["phase-diagram", "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "pd.cells" in err and "--resume" in err and "Traceback" not in err
    assert not out.exists()
