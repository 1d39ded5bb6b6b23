"""Layers with their own weights: a piecewise-constant schedule of models.

.. autosummary::
   Schedule
   run_schedule

A Transformer has one ``(Q, K, V)`` per layer; the second paper's PDE takes ``(Q, K, V)`` as
functions of time (docs/equations.md section 2, "Layers with their own weights"). A
:class:`Schedule` is the piecewise-constant case: model ``k`` acts on ``[t_k, t_{k+1})``.
Every solver that takes a schedule runs it through :func:`run_schedule`, the one place that
implements it: the solver is run once per piece with the
output times inside the piece plus the switch time as its end point, and the state at the switch
is handed to the next piece. No step crosses a switch, so a schedule equals the composition of
single-model runs to round-off (the same steps: bitwise).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import xarray as xr

from meanfield.arguments import output_times
from meanfield.files import check_writable, write_netcdf
from meanfield.integrate.driver import IntegrationError, Interrupted
from meanfield.integrate.schema import revise_attrs, summed_stats
from meanfield.model import Model


class Schedule:
    """Models switched at given times (docs/equations.md section 2, "Layers with their own
    weights").

    Args:
        pieces: ``[(t_0, model_0), (t_1, model_1), ...]`` with strictly increasing finite
            start times; ``model_k`` acts on ``[t_k, t_{k+1})``, the last one to the end.
            A run's start time must be ``>= t_0``.

    Example::

        >>> from meanfield import Model
        >>> from meanfield.schedule import Schedule
        >>> s = Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=4.0))])
        >>> s.model_at(0.5).beta, s.model_at(1.0).beta
        (1.0, 4.0)
    """

    def __init__(self, pieces: Sequence[tuple[float, Model]]) -> None:
        items = list(pieces)
        if not items:
            msg = "Schedule needs at least one (start time, model) piece, got none"
            raise ValueError(msg)
        starts: list[float] = []
        models: list[Model] = []
        for k, piece in enumerate(items):
            try:
                t_k, m_k = piece
            except (TypeError, ValueError):
                msg = f"Schedule piece {k} must be a pair (start time, Model), got {piece!r}"
                raise ValueError(msg) from None
            if isinstance(t_k, (str, bytes, bool)) or not math.isfinite(float(t_k)):
                msg = f"Schedule piece {k}: the start time must be a finite number, got {t_k!r}"
                raise ValueError(msg)
            if not isinstance(m_k, Model):
                msg = f"Schedule piece {k}: expected a meanfield.Model, got {type(m_k).__name__}"
                raise ValueError(msg)
            starts.append(float(t_k))
            models.append(m_k)
        if any(b <= a for a, b in zip(starts, starts[1:])):
            msg = f"Schedule start times must be strictly increasing, got {starts}"
            raise ValueError(msg)
        dims = {m.dim for m in models if m.dim is not None}
        if len(dims) > 1:
            msg = f"Schedule models must share one dimension d, got {sorted(dims)}"
            raise ValueError(msg)
        self.starts: tuple[float, ...] = tuple(starts)
        self.models: tuple[Model, ...] = tuple(models)

    def __len__(self) -> int:
        return len(self.models)

    def __iter__(self) -> Iterator[tuple[float, Model]]:
        return iter(zip(self.starts, self.models))

    def __repr__(self) -> str:
        return f"Schedule({list(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return self.starts == other.starts and self.models == other.models

    def __hash__(self) -> int:
        return hash(self.to_json())

    @property
    def noise(self) -> float:
        """The largest noise of the pieces (a solver's choice of scheme depends on it)."""
        return max(m.noise for m in self.models)

    def model_at(self, t: float) -> Model:
        """The model acting at time ``t`` (the piece with the last start ``<= t``)."""
        k = int(np.searchsorted(self.starts, float(t), side="right")) - 1
        if k < 0:
            msg = f"time t = {t!r} is before the schedule's first start time {self.starts[0]!r}"
            raise ValueError(msg)
        return self.models[k]

    def state(self) -> dict[str, Any]:
        """JSON-able: ``{"schedule": [{"start": t_k, "model": model_k.state()}, ...]}``."""
        return {"schedule": [{"start": t, "model": m.state()} for t, m in self]}

    def to_json(self) -> str:
        return json.dumps(self.state(), sort_keys=True)

    @classmethod
    def from_state(cls, state: dict[str, Any] | str) -> Schedule:
        if isinstance(state, str):
            state = json.loads(state)
        assert isinstance(state, dict)
        return cls([(p["start"], Model.from_state(p["model"])) for p in state["schedule"]])

    def pieces(self, t: Any) -> list[tuple[Model, np.ndarray]]:
        """The runs that cover the output times ``t``: ``(model, times)`` per piece met, where
        ``times`` holds the piece's start (``t[0]`` or a switch), the output times inside it,
        and its end (the next switch, or ``t[-1]``)."""
        times = output_times(t)
        if times[0] < self.starts[0]:
            msg = (f"t[0] = {times[0]!r} is before the schedule's first start time "
                   f"{self.starts[0]!r}")
            raise ValueError(msg)
        cuts = [s for s in self.starts if times[0] < s < times[-1]]
        edges = [float(times[0]), *cuts, float(times[-1])]
        out: list[tuple[Model, np.ndarray]] = []
        for a, b in zip(edges, edges[1:]):
            inside = times[(times > a) & (times < b)]
            out.append((self.model_at(a), np.concatenate([[a], inside, [b]])))
        if not out:  # a single output time
            out.append((self.model_at(times[0]), times[:1]))
        return out


def forwarded(solver: Callable[..., Any], given: dict[str, Any], *, positional: int,
              skip: Sequence[str] = ()) -> dict[str, Any]:
    """The keyword arguments a front door hands to each piece of a schedule: those of
    ``solver`` after its first ``positional`` parameters, read from ``given`` (the front
    door's ``locals()``), except ``skip`` (what the schedule runner does once: ``out``,
    ``overwrite``)."""
    names = tuple(inspect.signature(solver).parameters)[positional:]
    return {name: given[name] for name in names if name not in skip}


def run_schedule(schedule: Schedule, t: Any, start: Any,
                 run: Callable[[Model, np.ndarray, Any], xr.Dataset],
                 handover: Callable[[xr.Dataset], Any],
                 carry: Callable[[xr.Dataset, xr.Dataset], xr.Dataset] | None = None,
                 join: Callable[[list[xr.Dataset]], list[xr.Dataset]] | None = None, *,
                 out: str | os.PathLike[str] | None = None, overwrite: bool = False
                 ) -> xr.Dataset:
    """Run a solver piece by piece (the one implementation of a schedule).

    Args:
        schedule: the models and their switch times.
        t: the caller's output times.
        start: the initial state, handed to ``run`` for the first piece.
        run: ``run(model, times, state) -> Dataset``: one single-model run over ``times``
            (:meth:`Schedule.pieces`), with the caller's ``throw``.
        handover: the state at the last time of a piece's Dataset, for the next piece.
        carry: ``carry(piece, previous)``: a piece's Dataset made continuous with the previous
            piece's where a variable restarts at each piece (e.g. ``log J`` of the
            characteristics, which starts at 0 from the nodes handed over).
        join: the pieces' Datasets brought onto one grid before they are joined (e.g. the
            spectral solver's densities, on the finest grid any piece reached).
        out, overwrite: write the joined result to this NetCDF file (checked before the first
            piece runs; on a stop or an interrupt the partial result is written, then the
            error raised).

    Returns:
        The pieces' Datasets joined along ``time`` at the caller's output times (a switch
        time that is not one is dropped; the last time reached is kept when a piece stopped
        early), with ``attrs`` from the last piece run but ``model`` the schedule's JSON and
        the step counters and wall time summed over the pieces.

    Raises:
        IntegrationError, Interrupted: as the solver raises them, with ``.dataset`` the
            joined result up to where it stopped.
    """
    times = output_times(t)
    parts: list[xr.Dataset] = []
    state = start

    def joined(last: xr.Dataset | None) -> xr.Dataset:
        dss = parts + ([last] if last is not None else [])
        if join is not None:
            dss = join(dss)
        cut = [dss[0]] + [ds.isel(time=slice(1, None)) for ds in dss[1:]]  # shared ends
        ds = xr.concat(cut, dim="time", data_vars="minimal", coords="minimal",
                       combine_attrs="override")
        reached = ds["time"].values
        keep = np.isin(reached, times)
        keep[-1] = keep[-1] or not bool(dss[-1].attrs.get("successful", 1))
        ds = ds.isel(time=np.flatnonzero(keep))
        ds.attrs = revise_attrs(
            dss[-1].attrs, model=schedule.to_json(),
            stats=summed_stats(p.attrs for p in dss),
            wall_time_s=sum(float(p.attrs["wall_time_s"]) for p in dss))
        return ds

    if out is not None:
        check_writable(out, overwrite=overwrite, name="out")
    try:
        with _once_per_schedule():
            ds = _run_pieces(schedule, times, run, state, handover, carry, joined, parts)
    except (IntegrationError, Interrupted, KeyboardInterrupt) as exc:
        partial = getattr(exc, "dataset", None)  # a KeyboardInterrupt outside a run has none
        if out is not None and partial is not None:
            write_netcdf(partial, out)
        raise
    if out is not None:
        write_netcdf(ds, out)
    return ds


@contextlib.contextmanager
def _once_per_schedule() -> Iterator[None]:
    """Each piece runs its own monitors, which warn once per run: a warning of the same
    category from later pieces (the step-size monitor near its bound in every layer, say) is
    said once, with how many more there were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            first: dict[type, tuple[warnings.WarningMessage, int]] = {}
            for w in caught:
                seen = first.get(w.category)
                first[w.category] = (w, 1) if seen is None else (seen[0], seen[1] + 1)
    for w, count in first.values():
        more = f" ({count - 1} more such warning(s) in later pieces of the schedule)" if count > 1 else ""
        warnings.warn_explicit(str(w.message) + more, w.category, w.filename, w.lineno)


def _run_pieces(schedule: Schedule, times: np.ndarray, run: Callable[..., xr.Dataset], state: Any,
                handover: Callable[[xr.Dataset], Any], carry: Any, joined: Callable[..., xr.Dataset],
                parts: list[xr.Dataset]) -> xr.Dataset:
    for model, piece_times in schedule.pieces(times):
        try:
            ds = run(model, piece_times, state)
            if carry is not None and parts:
                ds = carry(ds, parts[-1])
        except (IntegrationError, Interrupted) as exc:
            partial = getattr(exc, "dataset", None)
            if carry is not None and parts and partial is not None:
                partial = carry(partial, parts[-1])
            if parts or partial is not None:
                exc.dataset = joined(partial)
            raise
        if not ds.attrs.get("successful", 1) or ds["time"].values[-1] < piece_times[-1]:
            return joined(ds)
        parts.append(ds)
        state = handover(ds)
    return joined(None)


__all__ = ["Schedule", "forwarded", "run_schedule"]
