"""Self-convergence studies of PDE runs (meanfield.spectral.convergence, meanfield convergence)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from meanfield import Circle, Domain, Model
from meanfield.cli import main
from meanfield.integrate import Interrupted, StopReason, check_result_attrs, settings_of
from meanfield.io import read_netcdf
from meanfield.spectral.convergence import convergence_table, diagnose, self_convergence, table_time


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
    assert Model.from_state(study.attrs["model"]) == Model(beta=4.0, attention="softmax")


def test_attrs_come_from_the_result_schema(study) -> None:
    """Exactly the schema's keys and types (``meanfield_version``, never a hand-built
    ``version``); the study's own settings in ``settings``; the counters the sum over its
    3 resolution and 4 tolerance runs (each run's ``num_accepted`` is its ``steps_*``)."""
    check_result_attrs(study.attrs)
    s = settings_of(study)
    assert Domain.from_state(s["domain"]) == Circle(32)
    assert s["tolerance_resolution"] == 32 and s["form"] == "continuity" and s["tail_tol"] == 1e-2
    assert len(s["stop_reasons"]) == 3
    assert study.attrs["solver"] == "meanfield.convergence"
    assert study.attrs["successful"] == 1 and study.attrs["stop_reason"] == StopReason.SUCCESS.value
    assert study.attrs["t_reached"] == 1.2 and study.attrs["scheme"] == "dopri5"
    assert study.attrs["rtol"] == 1e-10 and study.attrs["atol"] == 1e-14
    steps = int(study["steps_resolution"].sum() + study["steps_tolerance"].sum())
    assert study.attrs["num_accepted"] == steps > 0


def test_an_interrupted_study_keeps_the_schema(monkeypatch) -> None:
    """Ctrl-C during the second run: the partial study's attrs are the schema's, unsuccessful,
    with the runs finished counted."""
    import meanfield.spectral.convergence as conv

    calls = [0]
    real = conv.solve

    def solve(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(conv, "solve", solve)
    with pytest.raises(Interrupted) as info:
        self_convergence(Model(beta=1.0), Circle(32), _rho0, [0.0, 0.2], levels=2,
                         tolerances=(1e-6,), tail_tol=1e-2)
    ds = info.value.dataset
    check_result_attrs(ds.attrs)
    assert ds.attrs["successful"] == 0
    assert ds.attrs["stop_reason"].startswith(
        "interrupted by the user: self_convergence interrupted while running resolution 64")
    assert ds.attrs["num_accepted"] == int(ds["steps_resolution"].values[0]) > 0
    assert ds.attrs["t_reached"] == 0.2


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


# -- studies that fall short of their final time (issue 15) ----------------------------------
# SA at beta = 4 from exp(cos theta) on the circle: with the default tail_tol = 1e-10 the
# resolution monitor stops N = 32 at t = 0.19 (measured), while N = 64 and finer reach t = 1.


def test_no_comparison_after_the_start_prints_no_table_and_says_what_to_change(capsys) -> None:
    # N = 32 stops before the first output after the start (t = 0.25): the only comparison is
    # at t = 0, where every run starts from the same coefficients
    rc = main(["convergence", "--beta", "4", "--kappa", "1", "--t-max", "1", "--resolution", "32",
               "--levels", "2", "--tolerances", ""])
    cap = capsys.readouterr()
    assert rc == 1
    assert "Resolution study" not in cap.out
    assert "nothing to compare" in cap.err
    assert "raise --resolution to 64" in cap.err and "lower --t-max to 0.19" in cap.err


def test_a_study_resolved_part_way_says_how_far(capsys) -> None:
    rc = main(["convergence", "--beta", "4", "--kappa", "1", "--t-max", "1", "--times", "11",
               "--resolution", "32", "--levels", "2", "--tolerances", ""])
    cap = capsys.readouterr()
    assert rc == 1
    # N = 32 is resolved to t = 0.1 or 0.2 (the monitor checks after every step, which land
    # on the output times): the table is there, and the message says so
    t = re.search(r"Resolution study at t = (0\.[12]) ", cap.out)
    assert t is not None, cap.out
    assert f"resolved only to t = {t.group(1)} of t = 1" in cap.err
    assert "raise --resolution to 64" in cap.err and "Note:" not in cap.out


def test_table_is_at_the_final_time_when_two_levels_reach_it() -> None:
    # N = 32 stops at t = 0.19, N = 64 and 128 reach t = 1: the table compares those at t = 1
    # (it used to pick t = 0, where the most runs agree, to round-off, about nothing)
    ds = self_convergence(Model(beta=4.0), Circle(32), lambda th: np.exp(np.cos(th)),
                          np.linspace(0, 1, 5), levels=3, tolerances=())
    assert ds["t_resolved"].values[0] < 0.25 and np.all(ds["t_resolved"].values[1:] == 1.0)
    assert convergence_table(ds).startswith("Resolution study at t = 1 ")
    assert diagnose(ds) is None and table_time(ds) == 1.0


def test_an_unresolved_start_raises_its_own_class() -> None:
    """``solve`` refuses a start its grid does not resolve with :class:`meanfield.UnresolvedStartError`
    (a ``ValueError`` carrying the resolution and the tail), which the convergence study and
    ``meanfield solve`` catch by class, not by the message's words."""
    import meanfield as mf

    circle = mf.Circle(8)
    rho0 = mf.initial.von_mises(circle, [1.0, 0.0], 40.0)  # far too sharp for 8 points
    with pytest.raises(mf.UnresolvedStartError) as info:
        mf.solve(mf.Model(beta=1.0), circle, rho0, [0.0, 0.1])
    assert isinstance(info.value, ValueError)
    assert info.value.resolution == 8 and info.value.tail > 1e-10
