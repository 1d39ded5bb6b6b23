"""One way a run ends: the engine's :class:`Solution` turned into the caller's result.

.. autosummary::
   finish

Every solver (:func:`meanfield.solve`, :func:`meanfield.solve_lagrangian`,
``particles.simulate``) and every ensemble cell (``validation.phase_diagram``,
``validation.metastability``) ends through :func:`finish`: the partial result is written to
``out`` when given, an interrupted run raises :class:`Interrupted` (the command line exits
130), a run that did not succeed raises the caller's :class:`IntegrationError` (exit 1) or,
with ``throw=False``, returns its partial result, whose ``attrs`` (``successful = 0``,
``stop_reason``) say so. The rules for a sweep of such runs are those of
:func:`validation.sweep.sweep`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .driver import IntegrationError, Interrupted, Solution, StopReason


def finish(sol: Solution, result: Any, *, name: str,
           error: Callable[[str, Any, float, StopReason], BaseException] = IntegrationError,
           throw: bool = True,
           out: str | Path | None = None, kept: str = "results are kept up to") -> Any:
    """End a run: write, raise or return (see the module docstring).

    Args:
        sol: how the engine's integration ended (:func:`meanfield.integrate.integrate`).
        result: the assembled result (an ``xarray.Dataset`` whose ``attrs`` already say how
            the run ended), or ``None`` where there is none (an ensemble cell).
        name: who ran (``"solve"``, ``"particles"``, ``"phase diagram cell beta = 4"``), the
            start of every message.
        error: the :class:`IntegrationError` subclass raised when the run did not succeed
            (or a function of ``(message, result, t_reached, reason)`` that makes it, for
            an error that carries more, like :class:`meanfield.gaussian.BlowUpError`).
        throw: raise ``error`` (else return ``result``, marked unsuccessful by its ``attrs``).
        out: the NetCDF file the result is written to, whatever the outcome.
        kept: the words before the time reached in the error's message.

    Returns:
        ``result``, after a successful run or with ``throw=False``.

    Raises:
        Interrupted: the run was interrupted (``.dataset``: ``result``).
        IntegrationError: ``error``, the run ended early and ``throw`` is set (``.dataset``,
            ``.t``, ``.reason``).
    """
    if out is not None and result is not None:
        from ..io import write_netcdf

        write_netcdf(result, out)
    if sol.reason is StopReason.INTERRUPTED:
        where = f"; partial results written to {out}" if out is not None else ""
        msg = f"{name} interrupted at t = {sol.t_reached:.6g}{where}"
        raise Interrupted(msg, result)
    if not sol.successful and throw:
        where = f" (written to {out})" if out is not None else ""
        if result is None:  # nothing kept (an ensemble cell): only where it stopped
            kept = "it stopped at"
        said = "" if kept in sol.message else f"; {kept} t = {sol.t_reached:.6g}"
        msg = f"{name}: {sol.message}{said}{where}"
        raise error(msg, result, sol.t_reached, sol.reason)
    return result


__all__ = ["finish"]
