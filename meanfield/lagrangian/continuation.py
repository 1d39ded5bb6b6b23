"""Continue a spectral run past its resolution limit by characteristics.

.. autosummary::
   continue_lagrangian
   handover_nodes

The spectral solver stops (:class:`meanfield.ResolutionError`) when the density concentrates
into clusters faster than refinement can follow. Its last resolved state is still a smooth,
band-limited density: the quadrature nodes of its own grid (:func:`meanfield.lagrangian.nodes.from_dataset`)
integrate it spectrally accurately, and the characteristics solver
(:func:`meanfield.solve_lagrangian`) carries it on, since moving nodes need no resolution.
The result is one Dataset: the Lagrangian part on the output times from the hand-over on, and
the spectral part before it as ``spectral_density`` (``spectral_time``, grid), with
the scalar ``handover_time`` and ``settings["handover"]`` saying where the one became the other.
The domain says which nodes carry its state on (:attr:`meanfield.domains.Domain.lagrangian_reduction`):
the full nodes of its :meth:`~meanfield.domains.Domain.node_rule`, or a symmetry reduction of
:data:`meanfield.lagrangian.node_set.REDUCTIONS` (its ``from_spectral``).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import xarray as xr

from meanfield.lagrangian import nodes_reduced  # noqa: F401  (registers rings and subspace)
from meanfield.lagrangian.node_set import REDUCTIONS
from meanfield.lagrangian.solve import solve_lagrangian
from meanfield.model import Model


def handover_nodes(spectral: xr.Dataset, time: float) -> Any:
    """The nodes that carry the density of the spectral Dataset ``spectral`` at the saved
    ``time`` on: those of its domain's symmetry reduction
    (:attr:`~meanfield.domains.Domain.lagrangian_reduction`, a class of
    :data:`meanfield.lagrangian.node_set.REDUCTIONS` and its ``from_spectral``), else
    :func:`meanfield.lagrangian.nodes.from_dataset` (the domain's node rule)."""
    from meanfield.io import domain_of
    from meanfield.lagrangian import nodes

    domain = domain_of(spectral)
    reduction = domain.lagrangian_reduction
    if reduction is None:
        return nodes.from_dataset(spectral, time)
    if reduction not in REDUCTIONS:
        msg = (f"domain {domain!r}: lagrangian_reduction={reduction!r} is not a reduction the "
               f"Lagrangian solver knows; registered: {sorted(REDUCTIONS)}")
        raise ValueError(msg)
    return REDUCTIONS[reduction].from_spectral(spectral, time)


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
    t_h = float(spectral["time"].values[-1])
    times = np.asarray(t, dtype=float)
    later = times[times > t_h * (1 + 1e-14) + 1e-300]
    if later.size == 0:
        msg = f"t ends at {times[-1]:g}, not after the spectral run's last time {t_h:g}"
        raise ValueError(msg)
    start = handover_nodes(spectral, t_h)
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


__all__ = ["continue_lagrangian", "handover_nodes"]
