"""Writing files: results (NetCDF), text and figures, checked first and written atomically.

.. autosummary::
   check_writable
   check_folder
   write_netcdf
   write_text
   save_png
   figure_format

The one policy of every writer (library and command line):

* **Check first.** :func:`check_writable` runs before any computation: a path that is a
  folder, lies under a file, sits in a folder that cannot be written, or exists already
  (without ``overwrite=True``; the commands' ``--overwrite``) is refused with a
  ``ValueError`` naming it, so no hour of work ends in a failed write; an output folder
  (:func:`check_folder`) must not be a file and must be writable.
* **Atomic.** A file is written to ``.NAME.tmp-PID`` beside it, then renamed; a killed write
  never leaves a truncated file, and stale temporaries of dead processes are removed on the
  next write to the same path.
* **Nothing lost.** If the write still fails (a full disk, a folder made read-only
  meanwhile), the result is saved to a fallback file in the system's temporary folder and the
  error says where (:class:`WriteError`).
* **One mode.** Files are ``0644`` (less the user's umask), whichever writer made them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import xarray as xr


class WriteError(OSError):
    """A result could not be written to ``path``; it was saved to ``fallback`` instead (or
    ``fallback`` is ``None`` when that failed too)."""

    def __init__(self, msg: str, path: Path, fallback: Path | None) -> None:
        super().__init__(msg)
        self.path = path
        self.fallback = fallback


def _mode() -> int:
    """``0644`` less the process umask (read without changing it for good)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o644 & ~mask


def _again(name: str) -> str:
    """How to replace an existing output, in the caller's words: ``--overwrite`` for a
    command-line option (``name`` starting with ``--``), ``overwrite=True`` for a library
    argument."""
    return "pass --overwrite" if name.startswith("--") else "pass overwrite=True"


def _writable_parent(p: Path, name: str) -> None:
    """Refuse ``p`` if its nearest existing ancestor is a file or cannot be written in."""
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        msg = f"{name}: {p} lies under {parent}, which is a file, not a folder"
        raise ValueError(msg)
    if not os.access(parent, os.W_OK | os.X_OK):
        msg = f"{name}: cannot write in {parent} (permission denied)"
        raise ValueError(msg)


def check_writable(path: str | os.PathLike, *, overwrite: bool = False,
                   name: str = "out") -> Path:
    """``path`` as a ``Path`` if a result can be written there, else ``ValueError`` naming
    ``name`` and the reason (a folder, under a file, not writable, exists without
    ``overwrite``). Creates no file; missing parent folders are fine when they can be made.
    ``name`` is the argument as the caller knows it: ``"out"`` (library) or ``"--out"``
    (command line), which also words the remedy (``overwrite=True`` or ``--overwrite``)."""
    p = Path(path)
    if p.is_dir():
        msg = f"{name}: {p} is a folder; give a file name"
        raise ValueError(msg)
    if p.exists() and not overwrite:
        msg = f"{name}: {p} exists; {_again(name)} to replace it"
        raise ValueError(msg)
    _writable_parent(p, name)
    if p.exists() and not os.access(p, os.W_OK) and not os.access(p.parent, os.W_OK):
        msg = f"{name}: {p} is read-only"
        raise ValueError(msg)
    return p


def check_folder(path: str | os.PathLike, *, name: str = "out") -> Path:
    """``path`` as a ``Path`` if results can be written into it as a folder, else
    ``ValueError`` naming ``name`` and the reason (a file, under a file, not writable). An
    existing folder is accepted: whether its contents may be replaced is the caller's rule
    (check each file with :func:`check_writable`). Creates nothing."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        msg = f"{name}: {p} is a file, not a folder"
        raise ValueError(msg)
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            msg = f"{name}: cannot write in {p} (permission denied)"
            raise ValueError(msg)
        return p
    _writable_parent(p, name)
    return p


def _remove_stale_temporaries(path: Path) -> None:
    """Delete ``.NAME.tmp-PID`` files beside ``path`` whose process is gone."""
    try:
        candidates = list(path.parent.glob(f".{path.name}.tmp-*"))
    except OSError:
        return
    for tmp in candidates:
        pid = tmp.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except OSError:  # another user's live process: leave it
            continue


def _write_atomically(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` to a temporary name beside ``path``, then rename it to ``path``: an
    interrupted write never leaves a truncated file under ``path``. Mode ``0644``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.chmod(tmp, _mode())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


NETCDF_OVERHEAD = 1 << 20
"""Bytes a NetCDF-4 file needs beyond its variables' (headers, attributes, chunk indices):
:func:`_to_netcdf` refuses a write where the disk has less than ``ds.nbytes`` plus this free."""


def _to_netcdf(ds: xr.Dataset, tmp: Path) -> None:
    """``ds.to_netcdf(tmp)`` through h5netcdf, refused before it starts (``OSError`` ENOSPC)
    where the disk cannot hold it, and, where the write fails anyway (the disk filled during
    it), with the half-written file forgotten: h5netcdf's ``File.close`` raises on a full disk
    and leaves the file open, and its ``__del__`` then closes it again on the broken HDF5
    handle, which crashed the process with a segmentation fault at its end (exit 139,
    measured on a 96 KiB tmpfs with h5netcdf 1.x)."""
    import errno
    import shutil

    need = int(ds.nbytes) + NETCDF_OVERHEAD
    free = shutil.disk_usage(tmp.parent).free
    if free < need:
        msg = (f"{tmp.parent} has {free} bytes free and the result needs about {need} "
               "(its arrays and the file's headers)")
        raise OSError(errno.ENOSPC, msg)
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
    except BaseException:
        _forget_open_files(tmp)
        raise


def _forget_open_files(tmp: Path) -> None:
    """Mark the h5netcdf files still open on ``tmp`` as closed, so that neither their
    ``__del__`` nor xarray's file cache touches the broken HDF5 handle again (the file is
    removed by :func:`_write_atomically`)."""
    import gc

    import h5netcdf

    target = os.path.abspath(os.fspath(tmp))
    for obj in gc.get_objects():
        # _filename: the path as given (the public filename asks the broken HDF5 handle)
        if isinstance(obj, h5netcdf.File) and os.path.abspath(os.fspath(obj._filename)) == target:
            obj._closed = True  # h5netcdf's own flag: close() and __del__ then do nothing


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike, *, fallback: bool = True) -> Path:
    """Write ``ds`` to ``path`` atomically (NetCDF-4 through h5netcdf).

    If the write fails and ``fallback`` is true, ``ds`` is saved to a new file in the
    system's temporary folder and :class:`WriteError` says where (nothing computed is lost).
    """
    path = Path(path)
    try:
        return _write_atomically(path, lambda tmp: _to_netcdf(ds, tmp))
    except (OSError, ValueError, RuntimeError) as exc:
        if not fallback:
            raise
        import tempfile

        saved: Path | None = None
        try:
            fd, name = tempfile.mkstemp(prefix=f"meanfield-{path.stem}-", suffix=".nc")
            os.close(fd)
            saved = _write_atomically(name, lambda tmp: _to_netcdf(ds, tmp))
        except (OSError, ValueError, RuntimeError):
            saved = None
        where = f"; the result was saved to {saved} instead" if saved else "; no fallback could be written"
        msg = f"could not write {path}: {exc}{where}"
        raise WriteError(msg, path, saved) from exc


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return _write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def figure_format(path: str | os.PathLike, name: str = "path") -> str:
    """The image format named by ``path``'s extension (``png``, ``jpg``, ``pdf``, ``svg``, ...:
    those matplotlib writes); a ``ValueError`` naming ``name`` (the option, ``--out`` say)
    and the extension when there is none or matplotlib cannot write it, so that a file never
    holds another format than its name says (a ``.jpg`` of PNG bytes)."""
    from matplotlib.backend_bases import FigureCanvasBase

    known = FigureCanvasBase.get_supported_filetypes()
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in known:
        said = f"extension .{ext}" if ext else "no extension"
        msg = (f"{name}: {os.fspath(path)!r} has {said}; a figure is written in the format its "
               f"extension names, one of {', '.join('.' + k for k in sorted(known))}")
        raise ValueError(msg)
    return ext


FIGURE_CHECKS: list[Callable[[Any, Path], None]] = []
"""Checks run on every figure :func:`save_png` writes, before it is written (``check(fig,
path)``; one that raises stops the write). Empty unless a caller adds one: the project's tests
add the readability check of tests/testkit.py (``checked_figures``) for the duration of a
block."""


def save_png(fig: Any, path: str | os.PathLike, dpi: int = 120, tight: bool = False,
             name: str = "path") -> Path:
    """Write a matplotlib figure to ``path`` atomically, in the format its extension names
    (:func:`figure_format`: PNG for ``.png``, JPEG for ``.jpg``, PDF, SVG, ...; another
    extension is refused with a ``ValueError`` naming ``name``); ``tight`` trims the margins
    (``bbox_inches="tight"``); the checks of :data:`FIGURE_CHECKS` run first. The figure stays
    open."""
    fmt = figure_format(path, name)
    for check in tuple(FIGURE_CHECKS):
        check(fig, Path(path))
    extra = {"bbox_inches": "tight"} if tight else {}
    return _write_atomically(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, **extra))


__all__ = ["FIGURE_CHECKS", "WriteError", "check_folder", "check_writable", "figure_format",
           "save_png", "write_netcdf", "write_text"]
