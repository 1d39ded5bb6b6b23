"""The suite runner: exit codes, errors, skips, resume after Ctrl-C, Dask, report, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from meanfield.cli import main
from validation import suites
from validation.report import write_report
from validation.runner import exit_code, load_record, run_suite, status_of
from validation.suites import SuiteEntry, get_suite, select

FAKE = textwrap.dedent('''
    """Fake checks for the runner tests (a counter file per call)."""
    from pathlib import Path
    import os
    import numpy as np
    import xarray as xr
    from validation.records import CheckResult

    def _count(out_dir, name):
        f = Path(os.environ["FAKE_COUNTS"]) / name
        n = int(f.read_text()) if f.exists() else 0
        f.write_text(str(n + 1))

    def _record(name, passed, out_dir):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        path = Path(out_dir) / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        data = xr.Dataset({"y": ("x", np.arange(3.0))}, attrs={"nested": {"a": 1}, "flag": True})
        return CheckResult(name=name, quantity="q", expected=1.0, measured=1.0 if passed else 2.0,
                           tolerance=0.1, passed=passed, details={"v": np.float64(1.5)},
                           data=data, figure=str(path))

    def ok(*, seed, out_dir, suite):
        """Passes. Tolerance: none."""
        _count(out_dir, "ok")
        return _record("fake.ok", True, out_dir)

    def ok2(*, seed, out_dir, suite):
        _count(out_dir, "ok2")
        return _record("fake.ok2", True, out_dir)

    def fail(*, seed, out_dir, suite):
        _count(out_dir, "fail")
        return _record("fake.fail", False, out_dir)

    def boom(*, seed, out_dir, suite):
        _count(out_dir, "boom")
        raise RuntimeError("the check blew up")

    def interrupt(*, seed, out_dir, suite):
        _count(out_dir, "interrupt")
        if (Path(os.environ["FAKE_COUNTS"]) / "STOP").exists():
            raise KeyboardInterrupt
        return _record("fake.interrupt", True, out_dir)
''')


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "fakechecks.py").write_text(FAKE)
    counts = tmp_path / "counts"
    counts.mkdir()
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_COUNTS", str(counts))
    return counts


def E(name: str) -> SuiteEntry:
    return SuiteEntry(f"fake.{name}", f"fakechecks:{name}")


def calls(counts: Path, name: str) -> int:
    f = counts / name
    return int(f.read_text()) if f.exists() else 0


def test_a_failing_check_makes_the_exit_code_nonzero(fake: Path, tmp_path: Path) -> None:
    res = run_suite([E("ok"), E("fail")], out_dir=tmp_path / "out", progress=False)
    assert [status_of(r) for r in res] == ["pass", "FAIL"]
    assert exit_code(res) == 1
    assert exit_code(res[:1]) == 0


def test_a_raising_check_is_an_error_and_the_others_run(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run_suite([E("boom"), E("ok")], out_dir=out, progress=False)
    assert [status_of(r) for r in res] == ["ERROR", "pass"]
    assert "RuntimeError: the check blew up" in res[0].error
    assert exit_code(res) == 1
    md, html = write_report([E("boom"), E("ok")], out, suite="quick", seed=0)
    text = md.read_text()
    assert "Traceback" in text and "the check blew up" in text
    assert "checks/fake.ok/fake.ok.png" in text and "checks/fake.ok/data.nc" in text
    assert "<table>" in html.read_text()


def test_a_missing_module_is_skipped_not_failed(tmp_path: Path) -> None:
    res = run_suite([SuiteEntry("x.missing", "no_such_module_here:check")], out_dir=tmp_path, progress=False)
    assert status_of(res[0]) == "SKIP"
    assert "no_such_module_here" in res[0].details["skipped"]
    assert exit_code(res) == 0


def test_records_are_saved_at_once(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_suite([E("ok")], out_dir=out, progress=False, seed=7)
    rec = json.loads((out / "checks" / "fake.ok" / "result.json").read_text())
    assert rec["status"] == "pass" and rec["seed"] == 7 and rec["data_file"] == "data.nc"
    assert (out / "checks" / "fake.ok" / "data.nc").is_file()
    loaded, meta = load_record(out, "fake.ok")
    assert loaded.passed and Path(loaded.figure).is_file()


def test_interrupted_run_resumes_without_recomputing(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    entries = [E("ok"), E("interrupt"), E("ok2")]
    (fake / "STOP").write_text("")
    with pytest.raises(KeyboardInterrupt):
        run_suite(entries, out_dir=out, progress=False)
    assert (calls(fake, "ok"), calls(fake, "interrupt"), calls(fake, "ok2")) == (1, 1, 0)
    assert load_record(out, "fake.ok") is not None and load_record(out, "fake.ok2") is None
    (fake / "STOP").unlink()
    res = run_suite(entries, out_dir=out, progress=False, resume=True)
    assert [status_of(r) for r in res] == ["pass", "pass", "pass"]
    assert (calls(fake, "ok"), calls(fake, "interrupt"), calls(fake, "ok2")) == (1, 2, 1)
    # a different seed is not the same run: recomputed
    run_suite(entries[:1], out_dir=out, progress=False, resume=True, seed=1)
    assert calls(fake, "ok") == 2


def test_cli_exit_codes_and_resume(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(suites.SUITES, "quick", [E("ok"), E("fail"), E("interrupt")])
    out = tmp_path / "cli"
    assert main(["validate", "--out", str(out), "--no-progress", "--only", "fake.ok"]) == 0
    assert main(["validate", "--out", str(out), "--no-progress"]) == 1
    assert "FAIL" in capsys.readouterr().out
    (fake / "STOP").write_text("")
    out2 = tmp_path / "cli2"
    assert main(["validate", "--out", str(out2), "--no-progress"]) == 130
    assert (out2 / "report.md").is_file() and "not run" in (out2 / "report.md").read_text()
    (fake / "STOP").unlink()
    before = calls(fake, "ok")
    assert main(["validate", "--out", str(out2), "--no-progress", "--resume"]) == 1  # fake.fail
    assert calls(fake, "ok") == before


def test_dask_local_cluster(fake: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    res = run_suite([E("ok"), E("fail"), E("boom"), E("ok2")], out_dir=tmp_path / "out", workers=2,
                    progress=False)
    assert [r.name for r in res] == ["fake.ok", "fake.fail", "fake.boom", "fake.ok2"]
    assert [status_of(r) for r in res] == ["pass", "FAIL", "ERROR", "pass"]
    assert (tmp_path / "out" / "checks" / "fake.ok2" / "fake.ok2.png").is_file()


def test_select_and_suites() -> None:
    quick = get_suite("quick")
    assert {e.name for e in select(quick, "theory.*")} >= {"theory.wendel", "theory.growth_rates"}
    assert [e.name for e in select(quick, "wendel")] == ["theory.wendel"]
    assert len(select(quick, None)) == len(quick)
    with pytest.raises(ValueError, match="matches no check"):
        select(quick, "nothing-like-this")
    with pytest.raises(ValueError, match="suite"):
        get_suite("medium")
    names = [e.name for e in get_suite("full")]
    assert len(names) == len(set(names)) and set(e.name for e in quick) <= set(names)


def test_meanfield_validate_end_to_end(tmp_path: Path) -> None:
    """The real command on a cheap real check, in a fresh process."""
    out = tmp_path / "v"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from meanfield.cli import main; sys.exit(main())",
         "validate", "--only", "theory.noise_threshold", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "theory.noise_threshold" in proc.stdout and "pass" in proc.stdout
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    assert (out / "checks" / "theory.noise_threshold" / "data.nc").is_file()
    assert (out / "checks" / "theory.noise_threshold" / "noise_threshold.png").is_file()


@pytest.mark.benchmark
def test_existing_scheduler(fake: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        res = run_suite([E("ok"), E("fail")], out_dir=tmp_path / "out", scheduler=cluster.scheduler_address,
                        progress=False)
    assert [status_of(r) for r in res] == ["pass", "FAIL"]
