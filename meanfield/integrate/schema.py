"""The one result schema: the ``attrs`` every result Dataset of this project carries.

.. autosummary::
   RESULT_ATTRS
   result_attrs
   settings_of

Every solver (``solve``, ``solve_gaussian``, ``particles.simulate``, the phase diagram and
the sweeps) writes exactly these keys, with these types, so that a file alone says how it was
made and whether it can be trusted (see ``docs/results.md``). Settings particular to one
solver (the domain, the CFL number, the number of realisations, ...) go into ``settings``, a
JSON object.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from .._version import __version__

RESULT_ATTRS: dict[str, type] = {
    "title": str,
    "solver": str,
    "model": str,
    "settings": str,
    "scheme": str,
    "controller": str,
    "rtol": float,
    "atol": float,
    "dt": float,
    "num_steps": int,
    "num_accepted": int,
    "num_rejected": int,
    "num_evaluations": int,
    "stop_reason": str,
    "successful": int,
    "t_reached": float,
    "wall_time_s": float,
    "meanfield_version": str,
    "created": str,
}
"""Key -> type of every result's ``attrs``. ``model`` and ``settings`` are JSON; ``rtol``,
``atol`` and ``dt`` are NaN where they do not apply; ``successful`` is 0 or 1."""


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def result_attrs(*, title: str, solver: str, model: str, settings: dict[str, Any],
                 scheme: str, controller: str, rtol: float | None, atol: float | None,
                 dt: float | None, stats: dict[str, int], stop_reason: str, successful: bool,
                 t_reached: float, wall_time_s: float) -> dict[str, Any]:
    """The ``attrs`` of :data:`RESULT_ATTRS`, checked and typed."""
    out = {
        "title": str(title),
        "solver": str(solver),
        "model": str(model),
        "settings": json.dumps(settings, sort_keys=True, default=_json_default),
        "scheme": str(scheme),
        "controller": str(controller),
        "rtol": _float(rtol),
        "atol": _float(atol),
        "dt": _float(dt),
        "num_steps": int(stats.get("num_steps", 0)),
        "num_accepted": int(stats.get("num_accepted", 0)),
        "num_rejected": int(stats.get("num_rejected", 0)),
        "num_evaluations": int(stats.get("num_evaluations", 0)),
        "stop_reason": str(stop_reason),
        "successful": int(bool(successful)),
        "t_reached": float(t_reached),
        "wall_time_s": float(wall_time_s),
        "meanfield_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    assert set(out) == set(RESULT_ATTRS)
    return out


def _json_default(v: Any) -> Any:
    try:
        return v.tolist()  # numpy scalars and arrays
    except AttributeError:
        return str(v)


def settings_of(ds: Any) -> dict[str, Any]:
    """The solver-specific settings recorded in a result's ``attrs["settings"]``."""
    raw = ds.attrs.get("settings")
    if raw is None:
        msg = "the Dataset has no 'settings' attribute: was it written by meanfield?"
        raise ValueError(msg)
    return json.loads(raw)


__all__ = ["RESULT_ATTRS", "result_attrs", "settings_of"]
