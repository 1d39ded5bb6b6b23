"""The suite runner: registry, selection, exit codes, errors, broken modules, resume after
Ctrl-C, Dask, report, CLI."""

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
from validation.records import CheckResult
from validation.report import write_report
from validation.runner import exit_code, load_record, run_check, run_suite, status_of
from validation.suites import CHECK_MODULES, BrokenModule, Check, Registry, get_suite, select

FAKE = textwrap.dedent('''
    """Fake checks for the runner tests (a counter file per call)."""
    from pathlib import Path
    import os
    import numpy as np
    import xarray as xr
    from validation.records import CheckResult, Comparison
    from validation.suites import Check, Registry

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
        return CheckResult(name=name, quantity="q",
                           comparisons=(Comparison("y", 1.0 if passed else 2.0, 1.0, 0.1, "abs"),),
                           description="y = 1 to 0.1", details={"v": np.float64(1.5)},
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

    def register(registry, names):
        for name in names:
            registry.register(Check(f"fake.{name}", globals()[name]))
        return registry
''')

BROKEN = textwrap.dedent('''
    """A check module with a bad import: its checks never register."""
    from validation.records import CheckResult
    from validation.suites import REGISTRY
    import no_such_module_for_the_broken_check

    @REGISTRY.check("fake.never_registered")
    def never(*, seed, out_dir, suite):
        raise AssertionError("not reached")
''')


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "fakechecks.py").write_text(FAKE)
    (pkg / "fakebroken.py").write_text(BROKEN)
    counts = tmp_path / "counts"
    counts.mkdir()
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_COUNTS", str(counts))
    for mod in ("fakechecks", "fakebroken"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    return counts


def registry(*names: str, modules: tuple[str, ...] = ()) -> Registry:
    """A registry holding the fake checks ``names`` (and importing ``modules`` when loaded)."""
    import fakechecks

    return fakechecks.register(Registry(modules), names)


def entries(*names: str) -> list:
    return registry(*names).suite("quick")


def calls(counts: Path, name: str) -> int:
    f = counts / name
    return int(f.read_text()) if f.exists() else 0


def test_a_failing_check_makes_the_exit_code_nonzero(fake: Path, tmp_path: Path) -> None:
    res = run_suite(entries("ok", "fail"), out_dir=tmp_path / "out", progress=False)
    assert [status_of(r) for r in res] == ["pass", "FAIL"]
    assert exit_code(res) == 1
    assert exit_code(res[:1]) == 0
    assert exit_code([]) == 1  # nothing ran: not a success


def test_a_raising_check_is_an_error_and_the_others_run(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ents = entries("boom", "ok")
    res = run_suite(ents, out_dir=out, progress=False)
    assert [status_of(r) for r in res] == ["ERROR", "pass"]
    assert "RuntimeError: the check blew up" in res[0].error
    assert exit_code(res) == 1
    md, html = write_report(ents, out, suite="quick", seed=0)
    text = md.read_text()
    assert "Traceback" in text and "the check blew up" in text
    assert "checks/fake.ok/fake.ok.png" in text and "checks/fake.ok/data.nc" in text
    assert "| y | 1 | 1 | 0.1 | abs | pass |" in text  # the numeric comparison, in the report
    assert "<table>" in html.read_text()


def test_a_broken_module_is_an_error_never_a_skip(fake: Path, tmp_path: Path) -> None:
    """The module's import fails: it stands in every suite and every selection as an ERROR
    record with the import's traceback, and the exit code is 1."""
    reg = registry("ok", modules=("fakebroken",))
    quick = reg.suite("quick")
    assert [type(e) for e in quick] == [BrokenModule, Check]
    assert [e.name for e in select(quick, "fake.ok")] == ["fakebroken", "fake.ok"]
    # a pattern naming a check of the broken module matches nothing else: the module still runs
    assert [e.name for e in select(quick, "fake.never_registered")] == ["fakebroken"]
    res = run_suite(select(quick, "fake.ok"), out_dir=tmp_path / "out", progress=False)
    assert [status_of(r) for r in res] == ["ERROR", "pass"]
    assert "no_such_module_for_the_broken_check" in res[0].error
    assert "fakebroken" in res[0].error
    assert exit_code(res) == 1
    assert "fake.never_registered" not in {c.name for c in suites.REGISTRY.checks()}


def test_a_check_returning_something_else_is_an_error(tmp_path: Path) -> None:
    reg = Registry()

    @reg.check("fake.dict")
    def returns_dict(*, seed, out_dir, suite):  # noqa: ANN001, ANN202 - a check written wrong
        return {"passed": True}

    res = run_check(reg.suite("quick")[0], seed=0, out_dir=tmp_path, suite="quick")
    assert status_of(res) == "ERROR" and "returned dict, not CheckResult" in res.error


def test_a_check_that_compares_nothing_is_an_error(tmp_path: Path) -> None:
    """``passed`` is never asserted by the check: a record without comparisons cannot be
    made, so the check raises and its record is an ERROR."""
    reg = Registry()

    @reg.check("fake.empty")
    def empty(*, seed, out_dir, suite):  # noqa: ANN001, ANN202
        return CheckResult(name="fake.empty", quantity="nothing")

    res = run_check(reg.suite("quick")[0], seed=0, out_dir=tmp_path, suite="quick")
    assert status_of(res) == "ERROR" and "comparisons must not be empty" in res.error


def test_the_decorator_registers_and_refuses_clashes() -> None:
    reg = Registry()

    @reg.check("x.one", suites=("full",))
    def one(*, seed, out_dir, suite):  # noqa: ANN001, ANN202
        raise AssertionError

    assert one.__name__ == "one"  # returned unchanged (pickles by reference)
    assert [e.name for e in reg.suite("full")] == ["x.one"] and reg.suite("quick") == []
    reg.check("x.one", suites=("full",))(one)  # the same function again (a reload): fine
    with pytest.raises(ValueError, match="taken"):
        reg.check("x.one")(lambda *, seed, out_dir, suite: None)
    with pytest.raises(ValueError, match="suites"):
        reg.check("x.two", suites=("medium",))(one)
    with pytest.raises(ValueError, match="check name"):
        reg.check("x.*")(one)
    with pytest.raises(ValueError, match="suite"):
        reg.suite("medium")


def test_only_matches_whole_names_or_globs() -> None:
    quick = get_suite("quick")
    names = lambda pattern: [e.name for e in select(quick, pattern)]  # noqa: E731
    assert names("energy.pde") == ["energy.pde"]  # not energy.pde_vs_particles
    assert names("energy.*") == ["energy.pde", "energy.particles", "energy.pde_vs_particles"]
    assert names("energy.pde_*") == ["energy.pde_vs_particles"]
    assert names(" theory.wendel , energy.pde ") == ["theory.wendel", "energy.pde"]  # suite order
    assert set(names("theory.*")) >= {"theory.wendel", "theory.growth_rates"}
    assert len(select(quick, None)) == len(quick)
    with pytest.raises(ValueError, match="'wendel' matches no check"):
        select(quick, "wendel")  # a substring is not a name
    with pytest.raises(ValueError, match="'energy.pd' matches no check"):
        select(quick, "energy.pde,energy.pd")  # one bad part is reported, not dropped


def test_the_suites_come_from_the_registry() -> None:
    quick, full = get_suite("quick"), get_suite("full")
    assert suites.REGISTRY.broken == []  # every shipped check module imports
    assert all(isinstance(e, Check) for e in full)
    assert {e.func.__module__ for e in full} == set(CHECK_MODULES)
    names = [e.name for e in full]
    assert len(names) == len(set(names))
    assert [n for n in names if n in {e.name for e in quick}] == [e.name for e in quick]
    assert {"zonal.meanfield_iid", "pde.self_convergence_sphere", "phase.transition_curve",
            "lagrangian.gaussian_3d", "lagrangian.gaussian_sinkhorn", "lagrangian.continuation",
            "lagrangian.particles_sinkhorn", "theory.noise_steady_state", "circle.noise_meanfield_iid",
            "circle.noise_weak_order",
            # moved out of the quick suite by issue 23 (tests/validation/test_quick_suite.py)
            "gaussian.particles", "theory.cone_collapse", "theory.mobius_sphere",
            "theory.repulsive_designs", "lagrangian.particles_multihead",
            "lagrangian.particles_sigmoid", "lagrangian.particles_causal",
            "fastsum.sphere_million", "fastsum.lagrangian_clusters_sphere",
            "fastsum.handover_sphere",  # issue 31: the S^2 hand-over, about 3 minutes
            "lagrangian.subspace_particles", "rings.collapse", "rings.high_dimension",
            "rings.particles",
            } == set(names) - {e.name for e in quick}


def test_records_are_saved_at_once(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_suite(entries("ok"), out_dir=out, progress=False, seed=7)
    rec = json.loads((out / "checks" / "fake.ok" / "result.json").read_text())
    assert rec["status"] == "pass" and rec["seed"] == 7 and rec["data_file"] == "data.nc"
    assert rec["comparisons"] == [{"what": "y", "measured": 1.0, "expected": 1.0, "tolerance": 0.1,
                                   "kind": "abs", "low": None, "high": None}]
    assert (out / "checks" / "fake.ok" / "data.nc").is_file()
    loaded, meta = load_record(out, "fake.ok")
    assert loaded.passed and Path(loaded.figure).is_file()
    assert loaded.comparisons[0].measured == 1.0 and loaded.comparisons[0].tolerance == 0.1


def test_interrupted_run_resumes_without_recomputing(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ents = entries("ok", "interrupt", "ok2")
    (fake / "STOP").write_text("")
    with pytest.raises(KeyboardInterrupt):
        run_suite(ents, out_dir=out, progress=False)
    assert (calls(fake, "ok"), calls(fake, "interrupt"), calls(fake, "ok2")) == (1, 1, 0)
    assert load_record(out, "fake.ok") is not None and load_record(out, "fake.ok2") is None
    (fake / "STOP").unlink()
    res = run_suite(ents, out_dir=out, progress=False, resume=True)
    assert [status_of(r) for r in res] == ["pass", "pass", "pass"]
    assert (calls(fake, "ok"), calls(fake, "interrupt"), calls(fake, "ok2")) == (1, 2, 1)
    # a different seed is not the same run: recomputed
    run_suite(ents[:1], out_dir=out, progress=False, resume=True, seed=1)
    assert calls(fake, "ok") == 2


def test_cli_exit_codes_and_resume(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(suites, "REGISTRY", registry("ok", "ok2", "fail", "interrupt"))
    out = tmp_path / "cli"
    assert main(["validate", "--out", str(out), "--no-progress", "--only", "fake.ok"]) == 0
    assert calls(fake, "ok2") == 0  # whole names: fake.ok does not select fake.ok2
    assert main(["validate", "--out", str(out), "--no-progress", "--only", "fake.nothing"]) == 2
    capsys.readouterr()
    # a folder holding an earlier run is refused before any check runs (issue 21: nothing
    # computed is lost), naming --out; --overwrite replaces it
    assert main(["validate", "--out", str(out), "--no-progress"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["validate", "--out", str(out), "--no-progress", "--overwrite"]) == 1
    assert "FAIL" in capsys.readouterr().out
    (fake / "STOP").write_text("")
    out2 = tmp_path / "cli2"
    assert main(["validate", "--out", str(out2), "--no-progress"]) == 130
    assert (out2 / "report.md").is_file() and "not run" in (out2 / "report.md").read_text()
    (fake / "STOP").unlink()
    before = calls(fake, "ok")
    assert main(["validate", "--out", str(out2), "--no-progress", "--resume"]) == 1  # fake.fail
    assert calls(fake, "ok") == before


def test_cli_with_a_broken_module_exits_nonzero(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(suites, "REGISTRY", registry("ok", modules=("fakebroken",)))
    out = tmp_path / "cli"
    assert main(["validate", "--out", str(out), "--no-progress", "--only", "fake.ok"]) == 1
    text = capsys.readouterr().out
    assert "fakebroken" in text and "ERROR" in text and "SKIP" not in text
    assert "no_such_module_for_the_broken_check" in (out / "report.md").read_text()
    assert main(["validate", "--list"]) == 1
    assert "IMPORT ERROR" in capsys.readouterr().out


def test_a_shipped_check_module_that_fails_to_import_fails_the_run(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: ``validation.checks.theory`` cannot be imported (``None`` in ``sys.modules``
    makes ``import`` raise), so a registry of the shipped modules reports it, and the CLI run
    selecting two of its checks errors instead of skipping them."""
    monkeypatch.setitem(sys.modules, "validation.checks.theory", None)
    monkeypatch.setattr(suites, "REGISTRY", Registry(CHECK_MODULES))
    assert [b.name for b in suites.REGISTRY.broken] == ["validation.checks.theory"]
    out = tmp_path / "v"
    assert main(["validate", "--only", "theory.wendel,theory.growth_rates", "--out", str(out),
                 "--no-progress"]) == 1
    rec = json.loads((out / "checks" / "validation.checks.theory" / "result.json").read_text())
    assert rec["status"] == "ERROR" and "CheckImportError" in rec["error"]


def test_meanfield_validate_exits_nonzero_on_a_bad_import(tmp_path: Path) -> None:
    """A fresh process whose ``validation.checks.theory`` raises ``ImportError`` on import
    (injected by an import hook): ``meanfield validate --only theory.wendel,theory.growth_rates``
    prints an ERROR and exits 1 (it used to print ``2 SKIP`` and exit 0)."""
    script = textwrap.dedent('''
        import sys
        from importlib.abc import MetaPathFinder

        class Broken(MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "validation.checks.theory":
                    raise ImportError("injected: a bad import in validation/checks/theory.py")
                return None

        sys.meta_path.insert(0, Broken())
        from meanfield.cli import main
        sys.exit(main())
    ''')
    out = tmp_path / "v"
    proc = subprocess.run(
        [sys.executable, "-c", script, "validate", "--only", "theory.wendel,theory.growth_rates",
         "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "validation.checks.theory" in proc.stdout and "ERROR" in proc.stdout
    assert "SKIP" not in proc.stdout
    assert not any(line.startswith("theory.") for line in proc.stdout.splitlines())  # nothing else ran
    assert "injected: a bad import" in (out / "report.md").read_text()


def test_dask_local_cluster(fake: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    res = run_suite(entries("ok", "fail", "boom", "ok2"), out_dir=tmp_path / "out", workers=2,
                    progress=False)
    assert [r.name for r in res] == ["fake.ok", "fake.fail", "fake.boom", "fake.ok2"]
    assert [status_of(r) for r in res] == ["pass", "FAIL", "ERROR", "pass"]
    assert (tmp_path / "out" / "checks" / "fake.ok2" / "fake.ok2.png").is_file()


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
        res = run_suite(entries("ok", "fail"), out_dir=tmp_path / "out", scheduler=cluster.scheduler_address,
                        progress=False)
    assert [status_of(r) for r in res] == ["pass", "FAIL"]


def test_resume_reruns_a_record_made_by_other_code(fake: Path, tmp_path: Path) -> None:
    """A stored record is reused only by the same computation: the same check function in
    the same source, seed, suite and version (its content hash). Editing the check's module
    makes ``--resume`` run it again instead of reporting the old verdict."""
    from validation.runner import record_key

    out = tmp_path / "out"
    ents = entries("ok")
    run_suite(ents, out_dir=out, progress=False)
    key = record_key(ents[0], 0, "quick")
    rec = json.loads((out / "checks" / "fake.ok" / "result.json").read_text())
    assert rec["key"] == key
    run_suite(ents, out_dir=out, progress=False, resume=True)
    assert calls(fake, "ok") == 1  # same computation: reused
    rec["key"] = "0" * 64  # a record made by other code (or an older version)
    (out / "checks" / "fake.ok" / "result.json").write_text(json.dumps(rec))
    run_suite(ents, out_dir=out, progress=False, resume=True)
    assert calls(fake, "ok") == 2


def test_the_run_ends_with_its_slowest_checks(fake: Path, tmp_path: Path) -> None:
    import io

    from validation.runner import slowest_table

    table = io.StringIO()
    out = tmp_path / "out"
    run_suite(entries("ok", "fail", "ok2"), out_dir=out, progress=False, stream=table, slowest=2)
    tail = table.getvalue().splitlines()[-3:]
    assert tail[0].startswith("slowest checks (of 3: wall ") and "CPU" in tail[0]
    walls = {n: json.loads((out / "checks" / n / "result.json").read_text())["wall_time_s"]
             for n in ("fake.ok", "fake.fail", "fake.ok2")}
    listed = [line.split()[0] for line in tail[1:]]
    assert listed == sorted(walls, key=walls.get, reverse=True)[:2]  # the two slowest, slowest first
    assert all(" wall " in line and " CPU " in line for line in tail[1:])
    resumed = io.StringIO()  # a resumed record keeps the times of the run that made it
    run_suite(entries("ok", "fail", "ok2"), out_dir=out, progress=False, stream=resumed, resume=True)
    assert resumed.getvalue().rstrip().endswith("(resumed)")
    quiet = io.StringIO()
    run_suite(entries("ok"), out_dir=tmp_path / "q", progress=False, stream=quiet, slowest=0)
    assert "slowest" not in quiet.getvalue()
    rows = slowest_table({"a": (1.0, 0.5, False), "b": (float("nan"), None, False),
                          "c": (3.0, 2.5, False)}, 5)
    assert [r.split()[0] for r in rows[1:]] == ["c", "a", "b"]  # a lost worker's NaN wall sorts last
    assert "n/a" in rows[3] and "CPU" not in rows[0]  # no CPU total when one is unknown
    assert slowest_table({}, 5) == []
    with pytest.raises(ValueError, match="count must be >= 0, got -1"):
        slowest_table({"a": (1.0, 1.0, False)}, -1)
    with pytest.raises(ValueError, match="slowest must be >= 0"):
        run_suite(entries("ok"), out_dir=tmp_path / "r", progress=False, slowest=-1)
