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


def test_a_disk_without_room_is_refused_before_the_write(tmp_path, monkeypatch):
    """Less free space than the arrays need: ``OSError`` ENOSPC before h5netcdf opens the
    file (nothing half-written), then the fallback in the temporary folder."""
    import shutil
    from collections import namedtuple

    target = tmp_path / "r.nc"
    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda p: usage(1, 1, 100) if os.fspath(p) == os.fspath(tmp_path) else real(p))
    with pytest.raises(io.WriteError, match=r"has 100 bytes free and the result needs about") as info:
        io.write_netcdf(small(), target)
    assert not target.exists() and not list(tmp_path.glob(".r.nc.tmp-*"))
    xr.testing.assert_identical(io.read_netcdf(info.value.fallback), small())
    info.value.fallback.unlink()


FULL_DISK_CHILD = """
import numpy as np, xarray as xr
from meanfield import files
files.NETCDF_OVERHEAD = -10**12  # past the check: the disk fills during the write
ds = xr.Dataset({"a": (("t", "x"), np.arange(51200.0).reshape(200, 256))})
try:
    files.write_netcdf(ds, %r)
except files.WriteError as exc:
    print("WriteError", exc.fallback)
"""


def test_a_disk_that_fills_during_the_write_ends_cleanly(tmp_path):
    """A real full disk (a 96 KiB tmpfs; needs root to mount, skipped otherwise): h5netcdf's
    failed close left the file open and its ``__del__`` crashed the process at its end (exit
    139); now the write raises ``WriteError`` with the fallback, nothing is left on the full
    disk and the process exits 0; ``meanfield solve --out`` there exits 1 with the fallback's
    path."""
    import subprocess

    mount = tmp_path / "full"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)],
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    try:
        proc = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD % str(mount / "x.nc")],
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        out = proc.stdout.decode().split()
        assert out[0] == "WriteError" and out[1] != "None"
        assert os.listdir(mount) == []
        os.unlink(out[1])
        # the command as documented: a message naming the fallback, exit 1 (it was 139)
        cli = subprocess.run([sys.executable, "-m", "meanfield.cli", "solve", "circle",
                              "--resolution", "256", "--t-max", "1", "--times", "200",
                              "--out", str(mount / "r.nc"), "--no-progress"],
                             capture_output=True, timeout=300)
        err = cli.stderr.decode()
        assert cli.returncode == 1, err[-2000:]
        assert "could not write" in err and "saved to" in err
        os.unlink(err.split("saved to ")[1].split()[0])
        assert os.listdir(mount) == []
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
