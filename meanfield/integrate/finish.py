"""One way a run ends: the engine's :class:`Solution` turned into the caller's result.

.. autosummary::
   finish
   run_attrs
   mark_unsuccessful

Every solver (:func:`meanfield.solve`, :func:`meanfield.solve_lagrangian`,
``particles.simulate``) and every ensemble cell (``validation.phase_diagram``,
``validation.metastability``) ends through :func:`finish`: the partial result is written to
``out`` when given, an interrupted run raises :class:`Interrupted` (the command line exits
130), a run that did not succeed raises the caller's :class:`IntegrationError` (exit 1) or,
with ``throw=False``, returns its partial result, whose ``attrs`` (``successful = 0``,
``stop_reason``) say so. The rules for a sweep of such runs are those of
:func:`validation.sweep.sweep`.

The ``attrs`` that say how a run ended (its counters, ``stop_reason``, ``successful``,
``t_reached``, ``wall_time_s``) come from the engine's :class:`Solution` through one helper,
:func:`run_attrs`; a result assembled from parts one of which failed is marked by
:func:`mark_unsuccessful`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from meanfield.files import write_netcdf
from meanfield.integrate.driver import IntegrationError, Interrupted, Solution, StopReason
from meanfield.integrate.schema import result_attrs


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
        write_netcdf(result, out)
    if sol.reason is StopReason.INTERRUPTED:
        where = f"; partial results written to {out}" if out is not None else ""
        msg = f"{name} interrupted at t = {sol.t_reached:.6g}{where}"
        raise Interrupted(msg, result, handled_out=None if out is None else str(out))
    if not sol.successful and throw:
        where = f" (written to {out})" if out is not None else ""
        if result is None:  # nothing kept (an ensemble cell): only where it stopped
            kept = "it stopped at"
        said = "" if kept in sol.message else f"; {kept} t = {sol.t_reached:.6g}"
        msg = f"{name}: {sol.message}{said}{where}"
        exc = error(msg, result, sol.t_reached, sol.reason)
        if isinstance(exc, IntegrationError):
            exc.handled_out = None if out is None else str(out)
        raise exc
    return result


def run_attrs(sol: Solution, *, title: str, solver: str, model: str, settings: dict[str, Any],
              scheme: str, controller: str, rtol: float | None, atol: float | None,
              dt: float | None, stop_reason: str | None = None) -> dict[str, Any]:
    """The result schema's ``attrs`` (:func:`meanfield.integrate.result_attrs`) of a run that
    ended as ``sol``: the counters, ``stop_reason`` (the message and its detail, or the
    caller's ``stop_reason`` where its sentence says it whole, e.g. the Gaussian blow-up's),
    ``successful``, ``t_reached`` and ``wall_time_s`` from the engine; what the run was from
    the caller."""
    return result_attrs(title=title, solver=solver, model=model, settings=settings,
                        scheme=scheme, controller=controller, rtol=rtol, atol=atol, dt=dt,
                        stats=sol.stats(),
                        stop_reason=sol.message if stop_reason is None else stop_reason,
                        successful=sol.successful, t_reached=sol.t_reached,
                        wall_time_s=sol.wall_time_s)


def mark_unsuccessful(attrs: Any, reason: str) -> None:
    """Mark a result's ``attrs`` (a mapping, changed in place) ``successful = 0`` with
    ``reason``, after the reason it already gave where it had failed already (a result
    assembled from parts, one of which failed)."""
    before = "" if int(attrs.get("successful", 1)) else f"{attrs.get('stop_reason', '')}; "
    attrs["successful"] = 0
    attrs["stop_reason"] = f"{before}{reason}"


__all__ = ["finish", "mark_unsuccessful", "run_attrs"]
