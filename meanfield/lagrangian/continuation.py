"""Continue a spectral run past its resolution limit by characteristics.

.. autosummary::
   continue_lagrangian

The spectral solver stops (:class:`meanfield.ResolutionError`) when the density concentrates
into clusters faster than refinement can follow. Its last resolved state is still a smooth,
band-limited density: the quadrature nodes of its own grid (:func:`meanfield.lagrangian.nodes.from_dataset`)
integrate it spectrally accurately, and the characteristics solver
(:func:`meanfield.solve_lagrangian`) carries it on, since moving nodes need no resolution.
The result is one Dataset: the Lagrangian part on the output times from the hand-over on, and
the spectral part before it as ``spectral_density`` (``spectral_time``, grid), with
the scalar ``handover_time`` and ``settings["handover"]`` saying where the one became the other.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import xarray as xr

from meanfield.lagrangian.solve import solve_lagrangian
from meanfield.model import Model


def continue_lagrangian(model: Model, spectral: xr.Dataset, t: Sequence[float] | np.ndarray,
                        **kwargs: Any) -> xr.Dataset:
    """Carry the last state of the spectral Dataset ``spectral`` on to ``t[-1]``.

    Args:
        model: the model of the spectral run.
        spectral: a Dataset written by :func:`meanfield.solve` (complete or partial, e.g.
            ``ResolutionError.dataset``).
        t: the output times of the whole run; those after the hand-over are computed.
        kwargs: passed to :func:`meanfield.solve_lagrangian`.

    Returns:
        The Lagrangian Dataset from the hand-over time on, with the spectral part attached.
    """
    from meanfield.lagrangian import nodes

    t_h = float(spectral["time"].values[-1])
    times = np.asarray(t, dtype=float)
    later = times[times > t_h * (1 + 1e-14) + 1e-300]
    if later.size == 0:
        msg = f"t ends at {times[-1]:g}, not after the spectral run's last time {t_h:g}"
        raise ValueError(msg)
    from meanfield.domains import ZonalSphere
    from meanfield.io import domain_of
    from meanfield.lagrangian.nodes_reduced import rings_from_dataset

    # a zonal state goes on as rings (docs/lagrangian.md section 8): degree + 1 nodes in any d
    zonal = isinstance(domain_of(spectral), ZonalSphere)
    start = rings_from_dataset(spectral, t_h) if zonal else nodes.from_dataset(spectral, t_h)
    settings = json.loads(spectral.attrs.get("settings", "{}"))
    handover = {"t": t_h, "from": "meanfield.solve", "domain": settings.get("domain"),
                "reason": spectral.attrs.get("stop_reason", "")}
    lag = solve_lagrangian(model, start, np.concatenate([[t_h], later]), handover=handover,
                           **kwargs)
    keep = {name: spectral[name] for name in ("density", "energy", "log_energy", "mass")
            if name in spectral}  # log_energy: where the spectral energy overflowed
    part = xr.Dataset(keep).rename({"time": "spectral_time"})
    if "s" in part.dims:  # the zonal grid's s is not the rings' s (time, node)
        part = part.rename({"s": "spectral_s"})
    part = part.rename({name: f"spectral_{name}" for name in keep})
    for name in keep:
        part[f"spectral_{name}"].attrs["long_name"] = (
            f"{spectral[name].attrs.get('long_name', name)}, spectral run before the hand-over")
    out = xr.merge([lag, part], combine_attrs="override")
    out.attrs = dict(lag.attrs)
    return out


__all__ = ["continue_lagrangian"]
