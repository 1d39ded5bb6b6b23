"""``meanfield plot`` redraws every Dataset this tool writes (issue 15): one file of each kind,
at tiny sizes, written by its own command (or, for the token studies, by the function that
command calls, on a small random encoder), then ``meanfield plot FILE`` exits 0 and writes a
PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.io import write_netcdf

PNG = b"\x89PNG\r\n\x1a\n"
QUIET = ["--no-progress"]

COMMANDS = {
    "solve": ["solve", "circle", "--resolution", "16", "--t-max", "0.2", "--times", "3", *QUIET],
    "particles": ["particles", "--n", "6", "--d", "3", "--t-max", "0.5", "--times", "3", *QUIET],
    "gaussian": ["gaussian", "--mean", "[0,0]", "--cov", "[[1,0.2],[0.2,1]]", "--t-max", "0.2",
                 "--times", "3"],
    "phase-diagram": ["phase-diagram", "--n", "4", "--d", "3", "--betas", "2", "--t-max", "1",
                      "--times", "3", "--realizations", "4", *QUIET],
    "metastability": ["metastability", "--beta", "4", "--n", "4", "--realizations", "2",
                      "--t-max", "1", "--times", "3", *QUIET],
    "convergence": ["convergence", "--beta", "1", "--kappa", "1", "--t-max", "0.3", "--times",
                    "3", "--resolution", "16", "--levels", "3", "--tolerances", "1e-6,1e-7,1e-8",
                    "--tail-tol", "1e-3"],
}


def _plot(path: Path) -> None:
    png = path.with_suffix(".png")
    assert main(["plot", str(path), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_plot_draws_the_file_of_every_command(kind: str, tmp_path: Path) -> None:
    out = tmp_path / f"{kind}.nc"
    assert main([*COMMANDS[kind], "--out", str(out)]) == 0
    _plot(out)


def test_plot_draws_a_validation_check_s_data(tmp_path: Path) -> None:
    folder = tmp_path / "val"
    assert main(["validate", "--only", "theory.wendel", "--out", str(folder), *QUIET]) == 0
    (data,) = folder.glob("checks/*/data.nc")
    _plot(data)


def test_plot_draws_the_token_studies(tmp_path: Path) -> None:
    from particles.trained import random_encoder
    from validation import tokens as study

    encoder = random_encoder(np.random.default_rng(0))
    passages = ["one two three four five six seven", "alpha beta gamma delta epsilon"]
    tokens = tmp_path / "tokens.nc"
    dynamics = tmp_path / "dynamics.nc"
    write_netcdf(study.token_study(encoder, passages, bins=8), tokens)
    # dt = 0.0625: h L <= 0.73 on these passages (L up to 11.7), RK4 far from its bound 2.785
    write_netcdf(study.dynamics_study(encoder, passages, bins=8, dt=0.0625, fit_beta=False), dynamics)
    _plot(tokens)  # has a "clusters" variable: once mistaken for a metastability study
    _plot(dynamics)


def test_plot_still_refuses_a_file_not_of_this_tool(tmp_path: Path, capsys) -> None:
    import xarray as xr

    path = tmp_path / "other.nc"
    xr.Dataset({"y": ("k", np.arange(3.0))}).to_netcdf(path, engine="h5netcdf")
    assert main(["plot", str(path)]) == 2
    assert "cannot draw" in capsys.readouterr().err
