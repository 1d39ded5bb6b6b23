"""The one result schema: the ``attrs`` every result Dataset of this project carries.

.. autosummary::
   RESULT_ATTRS
   result_attrs
   revise_attrs
   check_result_attrs
   settings_of
   setting_of

Every solver (``solve``, ``solve_gaussian``, ``particles.simulate``, the phase diagram and
the sweeps) and every study (``meanfield.spectral.convergence``, ``validation.tokens``) writes exactly
these keys, with these types, through :func:`result_attrs`, so that a file alone says how it
was made and whether it can be trusted (see ``docs/results.md``). Settings particular to one
solver (the domain, the CFL number, the number of realisations, ...) go into ``settings``, a
JSON object; :func:`setting_of` reads one back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from meanfield._version import __version__

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


STATS: tuple[str, ...] = ("num_steps", "num_accepted", "num_rejected", "num_evaluations")
"""The counters of :data:`RESULT_ATTRS` (:meth:`meanfield.integrate.Solution.stats`); a missing
one is 0 (not counted)."""


def summed_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The counters :data:`STATS` summed over ``parts`` (results' ``attrs`` or
    :meth:`meanfield.integrate.Solution.stats`; a missing counter counts 0): the ``stats`` of a
    result made of several runs."""
    total = dict.fromkeys(STATS, 0)
    for part in parts:
        for key in STATS:
            total[key] += int(part.get(key, 0))
    return total


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def result_attrs(*, title: str, solver: str, model: str, settings: dict[str, Any],
                 scheme: str, controller: str, rtol: float | None, atol: float | None,
                 dt: float | None, stats: dict[str, int], stop_reason: str, successful: bool,
                 t_reached: float, wall_time_s: float) -> dict[str, Any]:
    """The ``attrs`` of :data:`RESULT_ATTRS`, checked and typed.

    Raises:
        ValueError: ``stats`` holds a key that is not one of :data:`STATS` (it would be
            dropped: a solver's own numbers go into ``settings``).
    """
    unknown = sorted(set(stats) - set(STATS))
    if unknown:
        msg = (f"stats must hold only the counters {STATS}, got {unknown!r} "
               "(a solver's own numbers go into settings)")
        raise ValueError(msg)
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
    check_result_attrs(out)
    return out


def revise_attrs(attrs: Any, **changes: Any) -> dict[str, Any]:
    """``attrs`` (the schema's, of a result being completed: a sweep's cells made into a
    study) with ``changes``, made again by :func:`result_attrs` (checked and typed; ``created``
    is the time of the revision). ``changes`` are arguments of :func:`result_attrs`
    (``settings`` a dict, ``stats`` the counters to change).

    Raises:
        ValueError: ``attrs`` lacks a key of the schema, or ``changes`` names something that
            is not an argument of :func:`result_attrs`.
    """
    missing = sorted(set(RESULT_ATTRS) - set(attrs))
    if missing:
        msg = f"attrs must hold the keys of RESULT_ATTRS to be revised, missing {missing}"
        raise ValueError(msg)
    fields: dict[str, Any] = {k: attrs[k] for k in (
        "title", "solver", "model", "scheme", "controller", "rtol", "atol", "dt", "stop_reason",
        "t_reached", "wall_time_s")}
    fields.update(settings=json.loads(attrs["settings"]), successful=bool(attrs["successful"]),
                  stats={k: int(attrs[k]) for k in STATS})
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        msg = f"changes must be arguments of result_attrs {sorted(fields)}, got {unknown!r}"
        raise ValueError(msg)
    stats = dict(fields["stats"], **changes.pop("stats", {}))
    fields.update(changes, stats=stats)
    return result_attrs(**fields)


def check_result_attrs(attrs: Any) -> None:
    """Check that ``attrs`` follow the schema: exactly the keys of :data:`RESULT_ATTRS`, each
    of its type, ``successful`` 0 or 1, ``model`` and ``settings`` JSON (``settings`` an object).

    Raises:
        ValueError: naming the first key that does not.
    """
    keys = set(attrs)
    missing, extra = sorted(set(RESULT_ATTRS) - keys), sorted(keys - set(RESULT_ATTRS))
    if missing or extra:
        msg = f"attrs must hold exactly the keys of RESULT_ATTRS: missing {missing}, extra {extra}"
        raise ValueError(msg)
    for key, typ in RESULT_ATTRS.items():
        if type(attrs[key]) is not typ:
            msg = f"attrs[{key!r}] must be a {typ.__name__}, got {attrs[key]!r}"
            raise ValueError(msg)
    if attrs["successful"] not in (0, 1):
        msg = f"attrs['successful'] must be 0 or 1, got {attrs['successful']!r}"
        raise ValueError(msg)
    for key in ("model", "settings"):
        try:
            value = json.loads(attrs[key])
        except ValueError:
            msg = f"attrs[{key!r}] must be JSON, got {attrs[key]!r}"
            raise ValueError(msg) from None
        if key == "settings" and not isinstance(value, dict):
            msg = f"attrs['settings'] must be a JSON object, got {attrs[key]!r}"
            raise ValueError(msg)


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


_MISSING: Any = object()


def setting_of(ds: Any, key: str, default: Any = _MISSING) -> Any:
    """One entry of :func:`settings_of`; in a file written before that entry moved into
    ``settings``, the attribute of the same name; else ``default``.

    Raises:
        KeyError: none of these holds ``key`` and no ``default`` is given.
    """
    settings = settings_of(ds) if "settings" in ds.attrs else {}
    if key in settings:
        return settings[key]
    if key in ds.attrs:
        return ds.attrs[key]
    if default is _MISSING:
        msg = f"the Dataset records no setting {key!r} (settings: {sorted(settings)})"
        raise KeyError(msg)
    return default


__all__ = ["RESULT_ATTRS", "STATS", "check_result_attrs", "result_attrs", "revise_attrs",
           "setting_of", "settings_of", "summed_stats"]
