"""Self-convergence studies of PDE runs (meanfield.convergence, meanfield convergence)."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield import Circle, Model
from meanfield.cli import main
from meanfield.convergence import convergence_table, self_convergence
from meanfield.io import read_netcdf


def _rho0(th: np.ndarray) -> np.ndarray:
    return np.exp(np.cos(th)) * (1 + 0.3 * np.sin(3 * th))


@pytest.fixture(scope="module")
def study():
    model = Model(beta=4.0, attention="softmax")
    return self_convergence(model, Circle(32), _rho0, np.linspace(0, 1.2, 4), levels=3,
                            tolerances=(1e-6, 1e-7, 1e-8, 1e-9), tail_tol=1e-2)


def test_dataset_layout(study) -> None:
    assert list(study["resolution"].values) == [32, 64, 128]
    assert study["difference_resolution"].dims == ("resolution", "time")
    assert study["order_tolerance"].dims == ("tolerance", "time")
    assert np.all(study["t_resolved"].values == pytest.approx(1.2))
    assert "model" in study.attrs and "domain" in study.attrs


def test_resolution_differences_fall_spectrally(study) -> None:
    diff = study["difference_resolution"].values[:, -1]
    assert diff[1] < 1e-4 * diff[0]  # far faster than any fixed algebraic order
    assert study["order_resolution"].values[0, -1] > 10


def test_tolerance_order_is_near_one(study) -> None:
    d = study["difference_tolerance"].values[:-1, -1]
    tol = study["tolerance"].values[:-1]
    q = np.polyfit(np.log(tol), np.log(d), 1)[0]
    assert 0.6 < q < 1.4


def test_table_mentions_every_level(study) -> None:
    table = convergence_table(study)
    for r in (32, 64, 128):
        assert f"| {r} |" in table
    assert "Tolerance study" in table


def test_unresolved_initial_density_is_reported_not_raised() -> None:
    model = Model(beta=1.0, attention="softmax")
    ds = self_convergence(model, Circle(8), lambda th: np.exp(8 * np.cos(th)), [0.0, 0.1], levels=2,
                          tolerances=())
    assert ds["t_resolved"].values[0] == -np.inf
    assert ds.sizes["tolerance"] == 0


def test_bad_arguments() -> None:
    model = Model(beta=1.0)
    with pytest.raises(ValueError, match="levels"):
        self_convergence(model, Circle(16), _rho0, [0, 1], levels=1)
    with pytest.raises(ValueError, match="tolerances"):
        self_convergence(model, Circle(16), _rho0, [0, 1], tolerances=(1e-8, 1e-6))


def test_cli_writes_netcdf_and_table(tmp_path, capsys) -> None:
    out = tmp_path / "conv.nc"
    rc = main(["convergence", "--beta", "1", "--kappa", "1", "--t-end", "0.5", "--num", "3",
               "--resolution", "16", "--levels", "2", "--tolerances", "1e-6,1e-7,1e-8",
               "--tail-tol", "1e-3", "--out", str(out)])
    assert rc == 0
    assert "Resolution study" in capsys.readouterr().out
    ds = read_netcdf(out)
    assert list(ds["resolution"].values) == [16, 32]


def test_cli_bad_input_exits_2(capsys) -> None:
    assert main(["convergence", "--t-end", "-1"]) == 2
    assert "t-end" in capsys.readouterr().err
