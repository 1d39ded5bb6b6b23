"""The quick validation suite (the README's main job) runs in CI and passes.

This is the same computation as ``meanfield validate`` with no arguments: every check of the
quick suite, on the default seed, with its report. Each check carries its own justified
tolerance; this test only asks that none fails, errors or is skipped.
"""

from __future__ import annotations

import io

from validation import QUICK, run_suite, status_of, write_report


def test_quick_suite_passes(tmp_path):
    table = io.StringIO()
    results = run_suite(QUICK, out_dir=tmp_path, seed=0, suite="quick", progress=False, stream=table)
    write_report(QUICK, tmp_path, suite="quick", seed=0)
    statuses = {r.name: status_of(r) for r in results}
    assert len(results) == len(QUICK)
    assert all(s == "pass" for s in statuses.values()), (statuses, table.getvalue())
    assert (tmp_path / "report.md").read_text().count("pass") >= len(QUICK)
    assert (tmp_path / "report.html").exists()
