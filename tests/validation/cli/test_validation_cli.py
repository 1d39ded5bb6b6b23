"""The validation package's commands: registration, drawing their files, interruption."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import numpy as np
import pytest
import xarray as xr

from meanfield.cli import GROUP, main

PNG = b"\x89PNG\r\n\x1a\n"


def test_registered_by_the_validation_package() -> None:
    eps = {e.name: e.value for e in entry_points(group=GROUP)}
    assert eps["validate"] == "validation.cli.validate"
    assert eps["phase-diagram"] == "validation.cli.phase_diagram"
    assert eps["metastability"] == "validation.cli.metastability"


def test_plot_draws_phase_diagram_and_metastability(tmp_path) -> None:
    pd = tmp_path / "pd.nc"
    assert main(["phase-diagram", "--n", "4", "--d", "3", "--betas", "2", "--t-max", "1",
                 "--times", "3", "--realizations", "4", "--out", str(pd), "--no-progress"]) == 0
    assert main(["plot", str(pd)]) == 0
    assert (tmp_path / "pd.png").read_bytes()[:8] == PNG
    ms = tmp_path / "ms.nc"
    assert main(["metastability", "--beta", "4", "--n", "4", "--seeds", "2", "--t-max", "1",
                 "--times", "3", "--out", str(ms), "--no-progress"]) == 0
    with xr.open_dataset(ms, engine="h5netcdf") as ds:
        assert ds.sizes["seed"] == 2  # the old spelling --seeds still sets --realizations
    assert main(["plot", str(ms), "--out", str(tmp_path / "ms.png")]) == 0
    assert (tmp_path / "ms.png").read_bytes()[:8] == PNG


def test_phase_diagram_interrupt_says_how_to_resume(tmp_path, monkeypatch, capsys) -> None:
    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules["validation.phase_diagram"], "phase_diagram", interrupted)
    out = tmp_path / "pd.nc"
    assert main(["phase-diagram", "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "pd.cells" in err and "--resume" in err and "Traceback" not in err
    assert not out.exists()


PD = ["phase-diagram", "--n", "3", "--d", "3", "--betas", "2", "--beta-max", "2", "--t-max",
      "0.5", "--times", "2", "--realizations", "2", "--no-progress"]


def test_validate_checks_its_folder_before_any_check(tmp_path, monkeypatch, capsys) -> None:
    import validation.runner

    monkeypatch.setattr(validation.runner, "run_suite", lambda *a, **k: pytest.fail("ran"))
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    for out, said in ((blocker, "is a file, not a folder"),
                      (blocker / "report", "lies under")):
        assert main(["validate", "--only", "theory.growth_rates", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--out: {out}" in err and said in err and "Traceback" not in err


def test_validate_refuses_an_earlier_run_without_resume_or_overwrite(tmp_path, monkeypatch,
                                                                     capsys) -> None:
    import validation.runner
    from validation.runner import exit_code

    calls = []
    monkeypatch.setattr(validation.runner, "run_suite", lambda *a, **k: calls.append(k) or [])
    out = tmp_path / "report"
    (out / "checks").mkdir(parents=True)
    argv = ["validate", "--only", "theory.growth_rates", "--no-progress", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds an earlier run" in err and "--resume" in err and "--overwrite" in err
    assert calls == []
    ran = exit_code([])  # the runner's code for no results: the command went ahead
    assert main([*argv, "--resume"]) == ran and calls[-1]["resume"] is True
    assert main([*argv, "--overwrite"]) == ran and calls[-1]["resume"] is False
    assert main(["validate", "--list", "--out", str(blocker := tmp_path / "f")]) == 0  # no output
    assert not blocker.exists()


def test_phase_diagram_never_deletes_a_store_without_overwrite(tmp_path, capsys) -> None:
    out, store = tmp_path / "a.nc", tmp_path / "kept"
    assert main([*PD, "--out", str(out), "--store", str(store), "--keep-cells"]) == 0
    cells = sorted(p.name for p in store.iterdir())
    assert any(name.startswith("cell-") for name in cells)
    out2 = tmp_path / "b.nc"  # another --out: only the store is in the way
    assert main([*PD, "--out", str(out2), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"--store: {store} holds the cells of an earlier run" in err
    assert sorted(p.name for p in store.iterdir()) == cells and not out2.exists()
    # the default store (OUT.cells) is named with where it comes from
    (tmp_path / "c.cells").mkdir()
    (tmp_path / "c.cells" / "cell-000000.nc").write_text("x")
    assert main([*PD, "--out", str(tmp_path / "c.nc")]) == 2
    assert "--store (default: " in capsys.readouterr().err
    assert main([*PD, "--out", str(out2), "--store", str(store), "--overwrite"]) == 0
    assert not store.exists()  # started again, and removed after success (no --keep-cells)


def test_resume_refusal_names_the_options_that_differ(tmp_path, capsys) -> None:
    out, store = tmp_path / "a.nc", tmp_path / "cells"
    assert main([*PD, "--out", str(out), "--store", str(store), "--keep-cells"]) == 0
    assert main([*PD, "--out", str(out), "--store", str(store), "--resume", "--overwrite",
                 "--realizations", "3", "--qk", "goe"]) == 2
    err = capsys.readouterr().err
    assert "--resume: the cells in" in err and "--realizations (2 then, 3 now)" in err
    assert "--qk ('identity' then, 'goe' now)" in err
    assert "kwargs" not in err and "resume=False" not in err and "Traceback" not in err


def test_metastability_interrupted_writes_the_finished_parts(tmp_path, monkeypatch, capsys) -> None:
    def interrupted(**kwargs):  # Ctrl-C during the cluster counts
        raise KeyboardInterrupt

    import validation.metastability

    monkeypatch.setattr(validation.metastability, "cluster_counts", interrupted)
    out = tmp_path / "ms.nc"
    assert main(["metastability", "--beta", "2", "5", "--n", "5", "--t-max", "0.4", "--times",
                 "3", "--no-progress", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "error: interrupted: during the cluster counts; the parts computed" in err and str(out) in err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and "interrupted" in ds.attrs["stop_reason"]
        assert ds["theta"].shape == (2, 3, 5)  # the trajectories, computed before, are kept
        assert bool(ds["theta"].notnull().all())


def test_metastability_interrupted_keeps_the_finished_betas_of_the_counts(tmp_path, monkeypatch,
                                                                         capsys) -> None:
    """Ctrl-C inside the sweep of the cluster counts after its first beta: the file holds the
    trajectories and the counts of that beta (the other NaN), successful = 0."""
    import functools

    import validation.metastability as vm

    real = vm.metastability_cell
    calls = []

    @functools.wraps(real)
    def cut(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(vm, "metastability_cell", cut)
    out = tmp_path / "ms.nc"
    assert main(["metastability", "--beta", "2", "5", "--n", "5", "--realizations", "4",
                 "--t-max", "0.4", "--times", "3", "--no-progress", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "during the cluster counts" in err and str(out) in err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert ds.attrs["successful"] == 0 and "interrupted" in ds.attrs["stop_reason"]
        assert bool(ds["theta"].notnull().all())
        counts = ds["clusters"].values
        assert np.all((counts[0] >= 1) & (counts[0] <= 5)) and np.all(np.isnan(counts[1]))


def test_metastability_ctrl_c_from_a_terminal_ends_with_130_and_an_unsuccessful_file(tmp_path) -> None:
    """The issue's reproduction as it happens: a real SIGINT to ``meanfield metastability``
    whose handler is Python's default (testkit.interrupt_command). It used to go
    on, exit 0 and write successful = 1 with one block cut short; now it exits 130 and any
    file it leaves says successful = 0 and holds no count from a cut block (whole numbers of
    clusters or NaN, never garbage)."""
    from testkit import interrupt_command

    out = tmp_path / "ms.nc"
    # 4 betas x 512 systems of 32 tokens to t = 200: minutes of work, cut after 6 s
    code, err = interrupt_command(["metastability", "--beta", "2", "4", "6", "9", "--n", "32",
                                   "--realizations", "512", "--t-max", "200", "--times", "201",
                                   "--no-progress", "--out", str(out)], b"started", after_s=6.0)
    assert code == 130, err
    assert "interrupted" in err
    if out.exists():
        with xr.open_dataset(out, engine="h5netcdf") as ds:
            assert ds.attrs["successful"] == 0 and "interrupted" in ds.attrs["stop_reason"]
            if "clusters" in ds:
                counts = ds["clusters"].values
                done = counts[np.isfinite(counts)]
                assert np.all((done >= 1) & (done <= 32) & (done == np.round(done)))
