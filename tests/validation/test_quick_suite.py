"""The quick validation suite (the README's main job) runs in CI and passes.

This is the same computation as ``meanfield validate`` with no arguments: every check of the
quick suite, on the default seed, with its report. Each check carries its own justified
tolerance; this test only asks that none fails or errors (there is no skipped status: a
check module that fails to import is an error).
"""

from __future__ import annotations

import io

from validation import Check, exit_code, get_suite, run_suite, status_of, write_report


def test_quick_suite_passes(tmp_path):
    quick = get_suite("quick")
    assert quick and all(isinstance(e, Check) for e in quick)  # no module failed to import
    table = io.StringIO()
    results = run_suite(quick, out_dir=tmp_path, seed=0, suite="quick", progress=False, stream=table)
    write_report(quick, tmp_path, suite="quick", seed=0)
    statuses = {r.name: status_of(r) for r in results}
    assert len(results) == len(quick) and exit_code(results) == 0
    assert all(s == "pass" for s in statuses.values()), (statuses, table.getvalue())
    assert (tmp_path / "report.md").read_text().count("pass") >= len(quick)
    assert (tmp_path / "report.html").exists()
