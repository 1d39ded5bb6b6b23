"""Reading and writing results (NetCDF and PNG figures, written atomically).

.. autosummary::
   write_netcdf
   save_png
   read_netcdf
   model_of
   domain_of
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import xarray as xr

from .domains.base import Domain
from .model import Model


def _write_atomically(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` to a temporary name beside ``path``, then rename it to ``path``: an
    interrupted write never leaves a truncated file under ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to ``path`` atomically (NetCDF-4 through h5netcdf)."""
    return _write_atomically(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def save_png(fig: Any, path: str | os.PathLike, dpi: int = 120, tight: bool = False) -> Path:
    """Write a matplotlib figure to ``path`` as PNG, atomically; ``tight`` trims the margins
    (``bbox_inches="tight"``). The figure stays open."""
    extra = {"bbox_inches": "tight"} if tight else {}
    return _write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi, **extra))


def read_netcdf(path: str | os.PathLike) -> xr.Dataset:
    """Load a result file fully into memory (the file is closed afterwards)."""
    path = Path(path)
    if not path.exists():
        msg = f"no such file: {path}"
        raise ValueError(msg)
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def model_of(ds: xr.Dataset) -> Model:
    """The :class:`Model` recorded in a result's ``attrs``."""
    return Model.from_state(json.loads(ds.attrs["model"]))


def domain_of(ds: xr.Dataset) -> Domain:
    """The (final) :class:`Domain` recorded in a result's ``attrs["settings"]``."""
    from .integrate import settings_of

    settings = settings_of(ds)
    if "domain" not in settings:
        msg = f"the Dataset (solver {ds.attrs.get('solver')!r}) records no domain"
        raise ValueError(msg)
    return Domain.from_state(settings["domain"])


__all__ = ["domain_of", "model_of", "read_netcdf", "save_png", "write_netcdf"]
