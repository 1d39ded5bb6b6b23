"""Reading and writing results (NetCDF and PNG figures, written atomically).

.. autosummary::
   read_netcdf
   model_of
   domain_of

The readers are here; the writers and their policy (check first, atomic, nothing lost, one
mode) are :mod:`meanfield.files`, whose names this module also gives (``check_writable``,
``check_folder``, ``write_netcdf``, ``write_text``, ``save_png``, ``figure_format``,
``WriteError``), so that a script imports its reading and writing from one place. The engine
(:mod:`meanfield.integrate`) writes through :mod:`meanfield.files`, below the model and the
domains that the readers rebuild.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import xarray as xr

from meanfield.domains.base import Domain
from meanfield.files import (
    WriteError,
    check_folder,
    check_writable,
    figure_format,
    save_png,
    write_netcdf,
    write_text,
)
from meanfield.model import Model
from meanfield.schedule import Schedule


def read_netcdf(path: str | os.PathLike) -> xr.Dataset:
    """Load a result file fully into memory (the file is closed afterwards)."""
    path = Path(path)
    if not path.exists():
        msg = f"no such file: {path}"
        raise ValueError(msg)
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def model_of(ds: xr.Dataset) -> Model | Schedule:
    """The :class:`Model` recorded in a result's ``attrs``, or the
    :class:`meanfield.schedule.Schedule` of a run under a schedule of models."""
    state = json.loads(ds.attrs["model"])
    if "schedule" in state:
        return Schedule.from_state(state)
    return Model.from_state(state)


def domain_of(ds: xr.Dataset) -> Domain:
    """The (final) :class:`Domain` recorded in a result's ``attrs["settings"]``."""
    from meanfield.integrate.schema import settings_of

    settings = settings_of(ds)
    if "domain" not in settings:
        msg = f"the Dataset (solver {ds.attrs.get('solver')!r}) records no domain"
        raise ValueError(msg)
    return Domain.from_state(settings["domain"])


__all__ = ["WriteError", "check_folder", "check_writable", "domain_of", "figure_format", "model_of",
           "read_netcdf", "save_png", "write_netcdf", "write_text"]
