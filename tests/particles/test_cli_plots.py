"""``meanfield particles`` and the trajectory plots."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

import particles  # noqa: E402
from meanfield import Model  # noqa: E402
from meanfield.cli import main  # noqa: E402
from particles.plots import (  # noqa: E402
    plot_circle_trajectories,
    plot_inner_product_histograms,
    plot_sphere_trajectories,
)

PNG = b"\x89PNG\r\n\x1a\n"


def test_cli_writes_netcdf_and_png(tmp_path: Path) -> None:
    out, png = tmp_path / "run.nc", tmp_path / "run.png"
    code = main(["particles", "--n", "8", "--d", "2", "--beta", "4", "--t-max", "1",
                 "--times", "5", "--seed", "3", "--out", str(out), "--plot", str(png)])
    assert code == 0
    ds = xr.load_dataset(out, engine="h5netcdf")
    assert ds.x.shape == (5, 8, 2)
    assert Model.from_state(ds.attrs["model"]).beta == 4.0
    assert json.loads(ds.attrs["settings"])["method"] == "rk4"
    assert json.loads(ds.attrs["settings"])["seed"] == 3
    assert png.read_bytes()[:8] == PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.nc", "run.png"]  # no temp left


def test_cli_same_seed_same_file(tmp_path: Path) -> None:
    args = ["particles", "--n", "5", "--d", "3", "--batch", "2", "--t-max", "0.5", "--times",
            "3", "--method", "dopri5", "--attention", "l2", "--seed", "7"]
    assert main([*args, "--out", str(tmp_path / "a.nc")]) == 0
    assert main([*args, "--out", str(tmp_path / "b.nc")]) == 0
    a = xr.load_dataset(tmp_path / "a.nc", engine="h5netcdf")
    b = xr.load_dataset(tmp_path / "b.nc", engine="h5netcdf")
    np.testing.assert_array_equal(a.x.values, b.x.values)
    assert a.x.dims == ("time", "batch", "token", "dim")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--times", "1"], "--times must be >= 2"),
        (["--beta", "-1"], "beta must be finite and >= 0"),
        (["--init", "orthogonal", "--n", "5", "--d", "3"], "d >= n"),
        (["--init", "gaussian"], "needs --geometry euclidean"),
        (["--noise", "0.1"], "euler_maruyama"),
    ],
)
def test_cli_bad_options(tmp_path, capsys, extra, message) -> None:  # type: ignore[no-untyped-def]
    code = main(["particles", "--out", str(tmp_path / "x.nc"), "--times", "3", "--t-max",
                 "0.1", *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()


def test_plots(tmp_path: Path) -> None:
    t = np.linspace(0, 2, 11)
    circ = particles.simulate(Model(beta=4.0), particles.sample_sphere(12, 2, 0, batch=2), t)
    fig = plot_circle_trajectories(circ, tmp_path / "c.png", batch=1)
    assert len(fig.axes[0].lines) == 12
    sph = particles.simulate(Model(beta=2.0), particles.sample_sphere(6, 3, 1), t)
    plot_sphere_trajectories(sph, tmp_path / "s.png")
    plot_inner_product_histograms(sph, tmp_path / "h.png", times=3)
    for name in ("c.png", "s.png", "h.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="d = 2"):
        plot_circle_trajectories(sph)
    with pytest.raises(ValueError, match="batch must be in"):
        plot_circle_trajectories(circ, batch=5)
    plt.close("all")


def test_meanfield_plot_draws_a_particle_file(tmp_path: Path) -> None:
    # ``meanfield plot FILE`` hands particle files (variable ``x``) to particles.plots
    out = tmp_path / "run.nc"
    assert main(["particles", "--n", "6", "--d", "3", "--t-max", "0.5", "--times", "3",
                 "--out", str(out)]) == 0
    assert main(["plot", str(out), "--out", str(tmp_path / "run.png")]) == 0
    assert (tmp_path / "run.png").read_bytes()[:8] == PNG
    plt.close("all")
