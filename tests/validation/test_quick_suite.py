"""The quick validation suite (the README's main job) runs in CI and passes.

This is the computation of ``meanfield validate`` with no arguments: every check of the
quick suite on the default seed, each through the runner with its report, one test per
check (so that parallel test workers share them out). Each check carries its own justified
tolerance; these tests only ask that none fails or errors (there is no skipped status: a
check module that fails to import is an error), and that every figure a check writes passes
:func:`meanfield.testing.assert_figure_readable` (a defect makes the check an error).
"""

from __future__ import annotations

import io

import pytest

from meanfield.testing import checked_figures
from validation import Check, exit_code, get_suite, run_suite, status_of, write_report

QUICK = get_suite("quick")

LONG: set[str] = set()
"""Checks of a minute or more (marked ``long``: started first); none since issue 23 made
gaussian.particles cheaper (13 s of CPU)."""


def test_quick_suite_has_every_module():
    assert QUICK and all(isinstance(e, Check) for e in QUICK)  # no module failed to import


@pytest.mark.parametrize("entry", [
    pytest.param(e, id=e.name, marks=[pytest.mark.long] if e.name in LONG else [])
    for e in QUICK])
def test_quick_check_passes_with_its_report(entry, tmp_path):
    table = io.StringIO()
    with checked_figures():  # every figure the check writes is readable (issue 21)
        results = run_suite([entry], out_dir=tmp_path, seed=0, suite="quick", progress=False,
                            stream=table)
    write_report([entry], tmp_path, suite="quick", seed=0)
    assert [status_of(r) for r in results] == ["pass"], table.getvalue()
    assert exit_code(results) == 0
    assert "pass" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.html").exists()
