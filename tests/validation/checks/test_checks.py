"""The validation checks: the record's numeric comparisons, conventions, statistics helpers,
and the cheap checks run for real."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

from validation.checks.common import fit_power_law, hemisphere_direction
from validation.checks.theory import (
    REFERENCE_RATES,
    collapse_rate,
    growth_rate,
    in_open_hemisphere,
    wendel_probability,
)
from validation.records import CheckResult, Comparison
from validation.runner import status_of
from validation.suites import CHECK_MODULES, get_suite

OWN = ("validation.checks.convergence", "validation.checks.energy", "validation.checks.exact",
       "validation.checks.schedule", "validation.checks.subspace",
       "validation.checks.fastsum", "validation.checks.rings",
       "validation.checks.theory")
QUICK = get_suite("quick")
FULL = get_suite("full")


# -- the record: passed is computed from numbers --------------------------------------------


@pytest.mark.parametrize(("comparison", "passed"), [
    (Comparison("a", 1.05, 1.0, 0.1, "abs"), True),
    (Comparison("a", 1.2, 1.0, 0.1, "abs"), False),
    (Comparison("a", 0.8, 1.0, 0.1, "abs"), False),
    (Comparison("r", 101.0, 100.0, 0.02, "rel"), True),
    (Comparison("r", 103.0, 100.0, 0.02, "rel"), False),
    (Comparison("r", -103.0, -100.0, 0.02, "rel"), False),  # |expected| scales the tolerance
    (Comparison("u", 1.0, 1.0, 0.0, "max"), True),
    (Comparison("u", 1.5, 1.0, 0.4, "max"), False),
    (Comparison("u", -9.0, 1.0, 0.0, "max"), True),
    (Comparison("l", -1e-12, 0.0, 1e-11, "min"), True),
    (Comparison("l", -1e-10, 0.0, 1e-11, "min"), False),
    (Comparison("c", -0.45, -0.5, kind="ci", low=-0.52, high=-0.38), True),
    (Comparison("c", -0.45, -0.5, kind="ci", low=-0.49, high=-0.38), False),
    (Comparison("c", -0.45, -0.5, kind="ci", low=-0.7, high=-0.51), False),
])
def test_comparison_rules(comparison: Comparison, passed: bool) -> None:
    assert comparison.passed is passed
    result = CheckResult(name="x.y", quantity="q", comparisons=(comparison, Comparison("ok", 0.0, 0.0, 0.0)))
    assert result.passed is passed and result.status == ("pass" if passed else "FAIL")
    if not passed:
        assert result.worst is comparison


@pytest.mark.parametrize("comparison", [
    Comparison("nan measured", math.nan, 0.0, 1.0, "abs"),
    Comparison("nan expected", 0.0, math.nan, 1.0, "rel"),
    Comparison("inf measured", math.inf, math.inf, 1.0, "abs"),  # inf - inf is nan
    Comparison("nan bound", 0.0, math.nan, 0.0, "max"),
    Comparison("nan interval", 0.0, 0.0, kind="ci", low=math.nan, high=1.0),
    Comparison("empty interval", 0.0, 0.0, kind="ci", low=math.inf, high=math.inf),
])
def test_non_finite_numbers_never_pass(comparison: Comparison) -> None:
    assert not comparison.passed
    assert CheckResult(name="x.y", quantity="q", comparisons=(comparison,)).status == "FAIL"


def test_a_measured_value_outside_its_tolerance_is_a_fail() -> None:
    good = Comparison("slope", -0.49, -0.5, 0.02, "abs")
    bad = Comparison("slope", -0.47, -0.5, 0.02, "abs")
    assert CheckResult(name="x.y", quantity="q", comparisons=(good,)).status == "pass"
    res = CheckResult(name="x.y", quantity="q", comparisons=(good, bad), description="-1/2 to 0.02")
    assert not res.passed and res.status == "FAIL" and res.worst is bad
    assert "passed" not in inspect.signature(CheckResult).parameters  # a check cannot assert it
    err = CheckResult(name="x.y", quantity="q", comparisons=(good,), error="Traceback ...")
    assert err.status == "ERROR" and not err.passed


def test_bad_records_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        Comparison("a", 1.0, 1.0, 0.1, "approx")
    with pytest.raises(ValueError, match="tolerance"):
        Comparison("a", 1.0, 1.0, -0.1)
    with pytest.raises(ValueError, match="tolerance"):
        Comparison("a", 1.0, 1.0, math.nan)
    with pytest.raises(ValueError, match="low and high"):
        Comparison("a", 1.0, 1.0, kind="ci", low=0.0)
    with pytest.raises(ValueError, match="measured"):
        Comparison("a", "one", 1.0, 0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="comparisons must not be empty"):
        CheckResult(name="x.y", quantity="q")


def test_the_record_round_trips_through_json() -> None:
    res = CheckResult(name="x.y", quantity="q", description="d", details={"a": 1},
                      comparisons=(Comparison("a", np.float64(1.0), 1, 0.5, "abs"),
                                   Comparison("c", 0.0, 0.0, kind="ci", low=-math.inf, high=1.0)))
    assert isinstance(res.comparisons[0].measured, float) and isinstance(res.comparisons[0].expected, float)
    rec = json.loads(res.to_json())
    assert rec["passed"] is True and rec["comparisons"][1]["low"] == "-inf"
    back = CheckResult.from_dict(rec)
    assert back == res and back.passed


# -- the registered checks ------------------------------------------------------------------


def test_no_check_module_guards_an_import_or_skips() -> None:
    """Every module a check needs ships with the package: an import that fails is an error
    of the check (ERROR), never a skip."""
    for module in CHECK_MODULES:
        source = inspect.getsource(__import__(module, fromlist=["_"]))
        assert "except ImportError" not in source, module
        assert "skipped" not in source, module


@pytest.mark.parametrize("entry", [e for e in FULL if e.func.__module__ in OWN], ids=lambda e: e.name)
def test_every_check_follows_the_convention_and_justifies_its_tolerance(entry) -> None:
    func = entry.func
    sig = inspect.signature(func)
    assert [p.name for p in sig.parameters.values()] == ["seed", "out_dir", "suite"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values())
    doc = inspect.getdoc(func) or ""
    assert "tolerance" in doc.lower(), f"{entry.name}: the docstring must justify the tolerance"
    assert "docs/equations.md" in inspect.getsource(inspect.getmodule(func))


def test_quick_suite_is_a_subset_of_full() -> None:
    quick = [e.name for e in QUICK]
    assert [e.name for e in FULL if e.name in quick] == quick


def test_fit_power_law_recovers_the_slope_with_honest_coverage(rng: np.random.Generator) -> None:
    n = np.repeat(np.geomspace(10, 1000, 7)[:, None], 8, 1)
    inside = 0
    for _ in range(200):
        d = 2.0 * n**-0.5 * np.exp(0.3 * rng.standard_normal(n.shape))
        fit = fit_power_law(n, d, level=0.9)
        inside += fit["lo"] <= -0.5 <= fit["hi"]
    assert 0.82 <= inside / 200 <= 0.97  # 90% nominal, binomial spread over 200 trials
    steep = fit_power_law(n, n**-1.0 * np.exp(0.3 * rng.standard_normal(n.shape)))
    assert not steep["lo"] <= -0.5 <= steep["hi"]  # a wrong law is detected


def test_reference_growth_rates_match_the_formula() -> None:
    for (dom, att, beta), ref in REFERENCE_RATES.items():
        d = 2 if dom == "circle" else 3
        for l, r in enumerate(ref, start=1):
            assert growth_rate(d, att, beta, l) == pytest.approx(r, abs=5e-5)


def test_wendel_helpers() -> None:
    assert wendel_probability(5, 2) == pytest.approx(5 / 16)
    assert wendel_probability(3, 3) == 1.0
    assert in_open_hemisphere(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]))
    assert not in_open_hemisphere(np.array([[1.0, 0.0], [-0.5, 0.8], [-0.5, -0.8]]))


def test_hemisphere_direction_agrees_with_the_hull_test() -> None:
    """The LP's direction certifies the hemisphere exactly when 0 is outside the hull."""
    w, margin = hemisphere_direction(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]))
    assert margin == pytest.approx(np.sqrt(0.5), abs=1e-9)  # w = (1, 1)/sqrt(2) maximises it
    np.testing.assert_allclose(w, [np.sqrt(0.5)] * 2, atol=1e-9)
    assert hemisphere_direction(np.array([[1.0, 0.0], [-0.5, 0.8], [-0.5, -0.8]]))[1] <= 0
    rng = np.random.default_rng(1)
    for _ in range(200):
        g = rng.standard_normal((6, 3))
        x = g / np.linalg.norm(g, axis=1, keepdims=True)
        assert (hemisphere_direction(x)[1] > 1e-9) == in_open_hemisphere(x)


def test_collapse_rate_is_the_linearised_rate() -> None:
    """``2c`` with the contraction ``c`` of ``e_i' = c (mean(e) - e_i)``: ``1`` for SA and
    ``e^beta`` for USA, whose weights near consensus are ``e^beta / n``."""
    assert collapse_rate("softmax", 3.0) == 2.0
    assert collapse_rate("unnormalized", 1.0) == pytest.approx(2 * np.e, rel=1e-15)


def _run(name: str, tmp_path: Path) -> CheckResult:
    entry = next(e for e in QUICK if e.name == name)
    res = entry(seed=0, out_dir=tmp_path, suite="quick")
    assert isinstance(res, CheckResult) and res.name == name
    assert res.figure is None or Path(res.figure).is_file()
    return res


@pytest.mark.parametrize("name", ["theory.noise_threshold", "theory.orthogonal_start"])
def test_cheap_quick_checks_pass(name: str, tmp_path: Path) -> None:
    """A check run alone, through its registry entry. (Every quick check runs, and must
    pass, in tests/validation/test_quick_suite.py; these two are the cheapest.)"""
    res = _run(name, tmp_path)
    assert status_of(res) == "pass", res
