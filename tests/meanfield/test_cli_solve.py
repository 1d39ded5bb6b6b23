"""`meanfield solve circle` and `meanfield plot` end to end (in-process)."""

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.io import read_netcdf


def test_solve_circle_writes_netcdf_and_plot(tmp_path, capsys):
    out = tmp_path / "sol.nc"
    png = tmp_path / "sol.png"
    code = main(["solve", "circle", "--beta", "2", "--N", "32", "--t-max", "1", "--times", "5",
                 "--out", str(out), "--plot", str(png), "--no-progress"])
    assert code == 0
    ds = read_netcdf(out)
    assert ds.density.shape[0] == 5 and ds.attrs["successful"] == 1
    np.testing.assert_allclose(ds.mass, 1.0, atol=1e-12)
    assert png.stat().st_size > 10_000  # a real figure, not an empty file
    png2 = tmp_path / "again.png"
    assert main(["plot", str(out), "--out", str(png2)]) == 0
    assert png2.exists()
    assert "wrote" in capsys.readouterr().out


def test_cli_reports_bad_input(capsys):
    assert main(["solve", "circle", "--beta", "-1", "--no-progress"]) == 2
    assert "beta" in capsys.readouterr().err
    assert main(["plot", "/nonexistent/file.nc"]) == 2


def test_cli_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for name in ("solve", "plot"):
        assert name in text
