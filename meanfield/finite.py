"""No non-finite number without a word: notes on overflowing values, log-energies, the check.

.. autosummary::
   NOTE
   note_nonfinite
   note_variables
   energy_variables
   unexplained_nonfinite

Some quantities of a result exceed the float64 range where the mathematics is finite: the
energy ``E_beta ~ e^beta / (2 beta)`` of docs/equations.md (3.5) beyond ``beta ~ 710``, the
dissipation (``~ e^{2 beta}`` for USA), the density of a collapsing cluster. The project's rule
(issue 21): every non-finite value in a returned Dataset comes either with
``attrs["successful"] = 0`` or with a note, ``attrs["note"]`` of its variable, that says why it
is not finite and where the value is kept in a form that fits (``log_energy``,
``log_density``). :func:`unexplained_nonfinite` is the check of that rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

NOTE = "note"
"""The attribute of a data variable that explains its non-finite values."""

ENERGY_NOTE = ("inf where E_beta exceeds the float64 range (about 1.8e308; e^beta / (2 beta) "
               "beyond beta ~ 710): log_energy holds log E_beta at every time")
LOG_ENERGY_NOTE = ("+inf where beta <Q x_i, K x_j> itself exceeds float64 (tokens in R^d at "
                   "huge beta), -inf where E_beta = 0, NaN where E_beta < 0 (energy holds those)")
DISSIPATION_NOTE = ("non-finite where the dissipation exceeds the float64 range (it carries "
                    "e^beta, e^{2 beta} for unnormalized attention): the energy's overflow, "
                    "see energy and log_energy")


def _nonfinite(values: Any) -> bool:
    a = np.asarray(values)
    return a.dtype.kind in "fc" and not bool(np.all(np.isfinite(a)))


def note_nonfinite(attrs: dict[str, Any], values: Any, note: str) -> dict[str, Any]:
    """``attrs`` with ``attrs["note"] = note`` added when ``values`` holds a NaN or an inf (the
    note is the word that the rule of this module asks for); ``attrs`` itself otherwise."""
    if _nonfinite(values):
        return {**attrs, NOTE: note}
    return attrs


def note_variables(ds: xr.Dataset, notes: dict[str, str]) -> xr.Dataset:
    """Add ``notes[name]`` to each variable of ``ds`` named there that holds a NaN or an inf
    (in place; ``ds`` is returned): for Datasets assembled from parts (a sweep's cells), whose
    parts carried a note only where their own values were not finite."""
    for name, note in notes.items():
        if name in ds and _nonfinite(ds[name].values):
            ds[name].attrs[NOTE] = note
    return ds


def energy_variables(dims: str | tuple[str, ...], energy: np.ndarray, log_energy: np.ndarray,
                     attrs: dict[str, Any]) -> dict[str, tuple[Any, np.ndarray, dict[str, Any]]]:
    """The data variables of an energy: ``energy`` (with ``attrs``), and, when some value
    overflowed float64, the note on it and ``log_energy`` (natural log of ``E_beta``, finite
    wherever ``E_beta > 0``, computed with shifted exponents: docs/equations.md (3.5)).

    Without an overflow the Dataset is unchanged (no ``log_energy``): ``log(energy)`` is then
    exact to round-off and a reader can take it."""
    energy = np.asarray(energy, dtype=float)
    out: dict[str, tuple[Any, np.ndarray, dict[str, Any]]] = {}
    if not np.any(np.isinf(energy)):
        out["energy"] = (dims, energy, note_nonfinite(attrs, energy, ENERGY_NOTE))
        return out
    log_energy = np.asarray(log_energy, dtype=float)
    out["energy"] = (dims, energy, {**attrs, NOTE: ENERGY_NOTE})
    out["log_energy"] = (dims, log_energy, note_nonfinite(
        {"long_name": "natural log of E_beta (finite where E_beta overflows)"},
        log_energy, LOG_ENERGY_NOTE))
    return out


def unexplained_nonfinite(ds: xr.Dataset) -> list[str]:
    """The data variables of ``ds`` that hold a NaN or an inf without a word: an empty list
    when ``ds.attrs["successful"] == 0`` (the run says it cannot be trusted) or when every
    such variable carries ``attrs["note"]``."""
    if ds.attrs.get("successful", 1) == 0:
        return []
    return [str(name) for name, var in ds.data_vars.items()
            if _nonfinite(var.values) and not var.attrs.get(NOTE)]


__all__ = ["DISSIPATION_NOTE", "ENERGY_NOTE", "NOTE", "energy_variables", "note_nonfinite",
           "note_variables", "unexplained_nonfinite"]
