"""The check schedule.gaussian_layers (validation/checks/schedule.py): it passes on the default
seed, and fails with a wrong start or a wrong constant in the closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import meanfield.gaussian as mg
from validation.checks import schedule as sc
from validation.records import CheckResult
from validation.runner import status_of
from validation.suites import get_suite


def _run(tmp_path: Path) -> CheckResult:
    entry = next(e for e in get_suite("quick") if e.name == "schedule.gaussian_layers")
    res = entry(seed=0, out_dir=tmp_path, suite="quick")
    assert isinstance(res, CheckResult) and res.name == "schedule.gaussian_layers"
    assert res.figure is not None and Path(res.figure).is_file()
    return res


def test_schedule_check_passes(tmp_path: Path) -> None:
    res = _run(tmp_path)
    assert status_of(res) == "pass", res.comparisons
    assert res.details["max_rel_error"] < sc.GAUSS_TOL


def test_schedule_check_fails_from_a_wrong_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    """Each layer of the closed form restarted from Sigma_0 instead of Sigma(t_k)."""
    real = mg.layered_covariance

    def restarted(schedule, cov0, t):  # type: ignore[no-untyped-def]
        t = np.asarray(t, dtype=float)
        out = np.empty((t.size,) + np.shape(cov0))
        for j, tau in enumerate(t):
            k = int(np.searchsorted(schedule.starts, tau, side="right")) - 1
            one = mg.Schedule([(schedule.starts[k], schedule.models[k])])
            out[j] = real(one, cov0, [schedule.starts[k], tau] if tau > schedule.starts[k]
                          else [tau])[-1]
        return out

    monkeypatch.setattr(sc.mg, "layered_covariance", restarted)
    res = _run(tmp_path)
    assert status_of(res) == "FAIL"
    assert not res.comparisons[0].passed and res.comparisons[1].passed


def test_schedule_check_fails_with_a_wrong_constant(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The rate A + A^T off by 1% (e.g. a beta mis-scaled in one layer)."""
    real = mg.interaction_matrix
    monkeypatch.setattr(mg, "interaction_matrix", lambda model, d: (real(model, d)[0],
                                                                    1.01 * real(model, d)[1]))
    res = _run(tmp_path)
    assert status_of(res) == "FAIL"
    assert not res.comparisons[0].passed and res.comparisons[1].passed


def test_schedule_check_fails_when_the_ensemble_skips_a_switch(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The ensemble run with the first layer's model throughout (a switch ignored)."""
    real = sc.ensemble_states

    def first_layer_only(x0, schedule, t, **kwargs):  # type: ignore[no-untyped-def]
        return real(x0, mg.Schedule([(schedule.starts[0], schedule.models[0])]), t, **kwargs)

    monkeypatch.setattr(sc, "ensemble_states", first_layer_only)
    res = _run(tmp_path)
    assert status_of(res) == "FAIL"
    assert res.comparisons[0].passed and not res.comparisons[3].passed
