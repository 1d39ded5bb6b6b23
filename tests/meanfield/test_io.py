"""meanfield.io: the one writing policy (check first, atomic, nothing lost, one mode)."""

from __future__ import annotations

import os
import stat
import sys

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
from meanfield import files, io


def small() -> xr.Dataset:
    return xr.Dataset({"a": ("x", np.arange(3.0))})


def test_check_writable_refuses_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "exists.nc").write_text("x")
    cases = {
        tmp_path: "is a folder",
        tmp_path / "file" / "r.nc": "which is a file",
        tmp_path / "exists.nc": "exists; pass overwrite=True to replace",
    }
    for path, match in cases.items():
        with pytest.raises(ValueError, match=match):
            io.check_writable(path)
    assert io.check_writable(tmp_path / "exists.nc", overwrite=True) == tmp_path / "exists.nc"
    assert io.check_writable(tmp_path / "new" / "deep" / "r.nc").name == "r.nc"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="permission denied"):
            io.check_writable(ro / "r.nc")
    finally:
        ro.chmod(0o700)


def test_solve_checks_out_before_computing(tmp_path, monkeypatch):
    circle = mf.Circle(16)
    calls = []
    solve_module = sys.modules["meanfield.spectral.solve"]  # the package's `solve` is the function
    monkeypatch.setattr(solve_module, "integrate", lambda *a, **k: calls.append(1))
    (tmp_path / "r.nc").write_text("old")
    with pytest.raises(ValueError, match="exists"):
        mf.solve(mf.Model(beta=1.0), circle, np.ones(16), [0, 1], out=tmp_path / "r.nc")
    assert calls == [] and (tmp_path / "r.nc").read_text() == "old"


def test_failed_write_saves_a_fallback_and_says_where(tmp_path, monkeypatch):
    target = tmp_path / "r.nc"
    real = files._write_atomically  # the writers live in meanfield.files

    def failing(path, write):
        if path == target:
            raise OSError(28, "No space left on device")
        return real(path, write)

    monkeypatch.setattr(files, "_write_atomically", failing)
    with pytest.raises(io.WriteError, match="saved to") as info:
        io.write_netcdf(small(), target)
    assert info.value.fallback is not None and info.value.fallback.exists()
    xr.testing.assert_identical(io.read_netcdf(info.value.fallback), small())
    info.value.fallback.unlink()


def test_stale_temporaries_are_removed_and_mode_is_0644(tmp_path):
    target = tmp_path / "r.nc"
    stale = tmp_path / ".r.nc.tmp-999999999"  # no such process
    stale.write_text("partial")
    io.write_netcdf(small(), target)
    assert not stale.exists() and target.exists()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 & ~mask
