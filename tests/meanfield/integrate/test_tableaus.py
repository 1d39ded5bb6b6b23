"""The tableau registry: consistency checks, order conditions, one class for the project."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import particles
from meanfield.integrate import SCHEMES, ButcherTableau, get_scheme, register_scheme, tableaus

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_registered_schemes_satisfy_their_order_conditions(name):
    """The bushy-tree conditions sum_i b_i c_i^k = 1/(k+1), k < order (and for the embedded
    solution b - b_error up to error_order); exact rationals, so round-off only (1e-14)."""
    tab = SCHEMES[name]
    for k in range(tab.order):
        assert float(np.sum(tab.b * tab.c**k)) == pytest.approx(1 / (k + 1), abs=1e-14)
    if tab.b_error is not None:
        bhat = tab.b - tab.b_error
        for k in range(tab.error_order):
            assert float(np.sum(bhat * tab.c**k)) == pytest.approx(1 / (k + 1), abs=1e-14)
        # the embedded pair differs at the order of the method: some condition fails there
        assert abs(float(np.sum(bhat * tab.c**tab.error_order)) - 1 / (tab.error_order + 1)) > 1e-6
    assert tab.citation


def test_tableaus_are_frozen_and_read_only():
    tab = get_scheme("dopri5")
    with pytest.raises(ValueError):
        tab.b[0] = 1.0
    with pytest.raises(AttributeError):
        tab.order = 3  # type: ignore[misc]
    assert tab.fsal and not get_scheme("rk4").fsal


def _rk(c, a, b, b_error=None, order=1, error_order=0):
    return ButcherTableau("bad", np.array(c, float), np.array(a, float), np.array(b, float),
                          None if b_error is None else np.array(b_error, float), order,
                          error_order, "test")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(c=[0, 0.5], a=[[0, 0], [0.4, 0]], b=[0, 1]), "rows of a must sum to c"),
        (dict(c=[0, 0.5], a=[[0, 0], [0.5, 0]], b=[0.5, 0.6]), "must sum to 1"),
        (dict(c=[0, 0.5], a=[[0, 0.1], [0.4, 0]], b=[0, 1]), "strictly lower triangular"),
        (dict(c=[0, 0.5], a=[[0, 0], [0.5, 0]], b=[0, 1], b_error=[0.1, 0.0], error_order=1),
         "error weights must sum to 0"),
        (dict(c=[0, 0.5], a=[[0, 0], [0.5, 0]], b=[0, 1], b_error=[0.1, -0.1]),
         "error_order > 0 exactly when"),
        (dict(c=[0, 0.5, 1], a=[[0, 0], [0.5, 0]], b=[0, 1]), "must be 2x2"),
    ],
)
def test_inconsistent_tableaus_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        _rk(**kw)


def test_registry_lookup_and_registration():
    with pytest.raises(ValueError, match="scheme must be one of"):
        get_scheme("rk45")
    with pytest.raises(ValueError, match="already registered"):
        register_scheme(ButcherTableau("rk4", np.array([0.0]), np.zeros((1, 1)), np.array([1.0]),
                                       None, 1, 0, "dup"))
    assert register_scheme(tableaus.RK4) is tableaus.RK4  # the same object again is fine


def test_one_tableau_class_and_one_registry_for_pde_and_particles():
    assert particles.DOPRI5 is SCHEMES["dopri5"] and particles.RK4 is SCHEMES["rk4"]
    assert particles.ButcherTableau is ButcherTableau
    out = subprocess.run(["git", "grep", "-l", "-E", "^class ButcherTableau\\b", "--", "*.py"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["meanfield/integrate/tableaus.py"]


def test_euler_is_one_residual_step():
    tab = get_scheme("euler")
    assert tab.stages == 1 and tab.order == 1 and not tab.adaptive and math.isclose(tab.b[0], 1)
