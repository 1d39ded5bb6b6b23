"""Map a function over a parameter grid, on Dask, with per-cell files and resume.

.. autosummary::
   sweep
   cell_seed
   task_chunks

A *grid* is an ordered mapping ``{name: values}``; its cells are the outer product, numbered
in C order (the last name varies fastest). Each cell calls ``func(**params, rng=rng,
**kwargs)`` where ``rng`` is a ``numpy.random.Generator`` seeded from ``(seed, cell index)``
by ``numpy.random.SeedSequence``: the numbers do not depend on how many workers run, in
which order the cells finish, or whether the sweep was resumed. ``func`` returns an
``xarray.Dataset`` (or a mapping that ``xarray.Dataset`` accepts); the sweep returns one
Dataset whose variables carry the grid dimensions in front of their own.

With ``store`` set, every cell is written there as NetCDF as soon as it finishes (to a
temporary name, then ``os.replace``) with the content hash of its computation
(:func:`cell_key`: function, parameters, seed, every keyword argument, code version), and
``resume=True`` skips the cells already written by the same computation (a stored cell
made by another one is computed again, with a warning; a cell read back is checked again,
so results of two computations are never mixed):
a sweep interrupted by a crash, a ``KeyboardInterrupt`` or a lost client finishes where it
stopped. Tasks on a lost worker are rerun by the Dask scheduler itself.

Execution: ``workers=1`` without ``scheduler`` runs the cells in this process (no cluster to
start); ``workers=K > 1`` starts a ``distributed.LocalCluster`` with ``K`` single-threaded
workers; ``scheduler`` may be a scheduler address (``"tcp://host:8786"``), a
``distributed.Client``, or ``"synchronous"`` (in this process, whatever ``workers``).
On a cluster the cells go in tasks (:func:`task_chunks`: about :data:`TASKS_PER_WORKER` tasks
per worker, cells interleaved); given ``cost``, an estimate of a cell's relative cost, the
most expensive cells are sent first, so that the last ones to run, which may leave a worker
idle, are the cheapest; each cell is still stored as soon as its task returns.
``device="cuda"`` pins one GPU per worker process of a local cluster
(:class:`validation.cluster.PinGPU`).

How a sweep ends (the one rule of every ensemble; a cell ends through
:func:`meanfield.integrate.finish`):

* a cell whose integration did not succeed is never stored as done (a resumed sweep computes
  it again);
* an interrupt (``KeyboardInterrupt``) ends the sweep with :class:`meanfield.integrate.Interrupted`
  (the command line exits 130): the finished cells are kept in ``store``, and its
  ``.dataset`` holds them (the others NaN) with ``successful = 0``;
* a failed cell (an :class:`meanfield.integrate.IntegrationError`, e.g.
  :class:`particles.ensemble.EnsembleError`) stops the sweep with :class:`SweepError` (exit
  1), naming the cell and its reason, the finished cells kept as above; with
  ``on_failure="record"`` the sweep goes on instead, and the failed cells are NaN in the
  result (integer variables become floats), left out of every statistic, counted in
  ``num_rejected`` and listed with their reasons in ``stop_reason`` and ``settings``
  (``failed_cells``), with ``successful = 0``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from meanfield.integrate import IntegrationError, Interrupted, StopReason, result_attrs
from meanfield.io import write_netcdf, write_text

TASKS_PER_WORKER = 32
"""Tasks per worker thread that :func:`task_chunks` aims at: enough for the last tasks to
balance the workers (a worker idles at most about one task, 1/32 of its share, at the end,
and less when the cheapest cells come last), few enough that each task is far longer than
Dask's cost per task (a few milliseconds; docs/sweeps.md)."""

_MANIFEST = "sweep.json"
_KEY = "cell_key"
"""The attribute of a stored cell holding :func:`cell_key`."""


ON_FAILURE = ("stop", "record")
"""What :func:`sweep` does with a failed cell: stop with :class:`SweepError`, or record it
(NaN, counted) and go on."""


class SweepError(IntegrationError):
    """A cell of a sweep did not succeed: ``.cell`` (its index), ``.params``, ``.reason``
    (the cell's :class:`meanfield.integrate.StopReason`), ``.dataset`` (the finished cells,
    the others NaN, ``successful = 0``; ``None`` if none finished)."""

    def __init__(self, msg: str, dataset: Any, t: float, reason: Any, cell: int = -1,
                 params: dict[str, Any] | None = None) -> None:
        super().__init__(msg, dataset, t, reason)
        self.cell = cell
        self.params = params or {}


def cell_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed of cell ``index``: ``SeedSequence(seed, spawn_key=(index,))``.

    Equal to ``SeedSequence(seed).spawn(N)[index]`` for any ``N > index``.
    """
    return np.random.SeedSequence(int(seed), spawn_key=(int(index),))


def _canonical_grid(grid: Mapping[str, Sequence[Any] | np.ndarray]) -> dict[str, np.ndarray]:
    if not isinstance(grid, Mapping) or not grid:
        msg = f"grid must be a non-empty mapping {{name: values}}, got {grid!r}"
        raise ValueError(msg)
    out = {}
    for name, values in grid.items():
        arr = np.atleast_1d(np.asarray(values))
        if arr.ndim != 1 or arr.size == 0:
            msg = f"grid[{name!r}] must be a non-empty 1-d sequence, got {values!r}"
            raise ValueError(msg)
        out[str(name)] = arr
    return out


def _cell_params(grid: dict[str, np.ndarray], index: int) -> dict[str, Any]:
    shape = tuple(len(v) for v in grid.values())
    pos = np.unravel_index(index, shape)
    return {name: values[p].item() for (name, values), p in zip(grid.items(), pos)}


def _run_cell(func: Callable[..., Any], params: dict[str, Any], seed: int, index: int,
              kwargs: dict[str, Any]) -> xr.Dataset:
    rng = np.random.default_rng(cell_seed(seed, index))
    result = func(**params, rng=rng, **kwargs)
    ds = result if isinstance(result, xr.Dataset) else xr.Dataset(result)
    return ds.load()


def task_chunks(todo: Sequence[int], workers: int, cells_per_task: int | None = None,
                costs: Sequence[float] | None = None) -> list[list[int]]:
    """The cells of ``todo`` grouped into tasks for ``workers`` worker threads, in the order
    to submit them.

    ``cells_per_task`` cells a task, by default ``ceil(len(todo) / (TASKS_PER_WORKER *
    workers))``; the tasks are interleaved (task ``k`` of ``m`` holds the ``k``-th, ``k+m``-th,
    ... cell), so that when the cost of a cell grows along the grid every task gets a
    similar share of the cost. With ``costs`` (an estimate for each cell of ``todo``, only
    their order matters) the cells are first sorted by decreasing cost, so that the tasks go
    most expensive first: the longest-processing-time-first rule, whose last tasks, the
    ones that may leave a worker idle at the end, are the cheapest.
    """
    from meanfield.arguments import count

    count(workers, "workers")
    todo = list(todo)
    if costs is not None:
        if len(costs) != len(todo):
            msg = f"costs must give one number per cell: {len(costs)} for {len(todo)} cells"
            raise ValueError(msg)
        order = sorted(range(len(todo)), key=lambda k: -float(costs[k]))  # stable
        todo = [todo[k] for k in order]
    if cells_per_task is None:
        cells_per_task = max(1, math.ceil(len(todo) / (TASKS_PER_WORKER * int(workers))))
    count(cells_per_task, "cells_per_task")
    n_tasks = math.ceil(len(todo) / int(cells_per_task))
    return [todo[k::n_tasks] for k in range(n_tasks)]


def _run_chunk(func: Callable[..., Any], cells: list[tuple[int, dict[str, Any]]], seed: int,
               kwargs: dict[str, Any], record: bool = False
               ) -> tuple[list[tuple[int, xr.Dataset | BaseException]], BaseException | None]:
    """Run the cells of one task in order; return the finished ones (with ``record``, a
    failed cell's :class:`IntegrationError` in place of its Dataset) and the exception that
    stopped the task (``None`` if none did), so that the finished cells are kept."""
    done: list[tuple[int, xr.Dataset | BaseException]] = []
    for index, params in cells:
        try:
            done.append((index, _run_cell(func, params, seed, index, kwargs)))
        except IntegrationError as exc:
            exc.sweep_cell = index  # type: ignore[attr-defined]  # pickled with it
            if not record:
                return done, exc
            done.append((index, exc))
        except Exception as exc:  # noqa: BLE001 - given back to the client, which raises it
            if hasattr(exc, "add_note"):  # Python >= 3.11: keep the worker's traceback
                exc.add_note(f"(in sweep cell {index}, parameters {params}; the worker's "
                             f"traceback:)\n{''.join(traceback.format_exception(exc))}")
            return done, exc
    return done, None


def _cell_path(store: Path, index: int) -> Path:
    return store / f"cell-{index:06d}.nc"


def _write_atomic(ds: xr.Dataset, path: Path) -> None:
    write_netcdf(ds, path)


def _stable(value: Any) -> Any:
    """A JSON form of a keyword argument that changes whenever its value does (a model by its
    full state, arrays by all their entries; never a truncated ``repr``)."""
    from meanfield import Model, Schedule

    if isinstance(value, (Model, Schedule)):  # a schedule by every piece's time and state
        return value.state()
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)


def cell_key(func: Callable[..., Any], params: dict[str, Any], seed: int, index: int,
             kwargs: dict[str, Any]) -> str:
    """The content hash of one cell's computation: the function, its parameters, the seed,
    the cell index, every keyword argument and the code version (SHA-256, hex). A stored cell
    is reused only under the same key."""
    from meanfield import __version__

    desc = {"function": f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}",
            "params": params, "seed": int(seed), "index": int(index), "kwargs": kwargs,
            "version": __version__}
    blob = json.dumps(desc, sort_keys=True, default=_stable)
    return hashlib.sha256(blob.encode()).hexdigest()


def _stored_key(path: Path) -> str | None:
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return ds.attrs.get(_KEY)
    except (OSError, ValueError):  # truncated or not NetCDF: recompute it
        return None


def _manifest(grid: dict[str, np.ndarray], seed: int, func: Callable[..., Any],
              kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "function": f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}",
        "seed": int(seed),
        "grid": {k: v.tolist() for k, v in grid.items()},
        "kwargs": json.loads(json.dumps(kwargs, default=_stable)),
    }


class ResumeMismatch(ValueError):
    """``resume=True`` on a store written by another sweep. ``differences`` maps each setting
    that differs (``seed``, ``function``, a grid axis, a keyword argument, by its name) to its
    ``(stored, new)`` values, so that a caller can name them as its user spells them."""

    def __init__(self, msg: str, store: Path, differences: dict[str, tuple[Any, Any]]) -> None:
        super().__init__(msg)
        self.store = store
        self.differences = differences


def _differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings of two manifests that differ: the grid axes and keyword arguments one by
    one (by name), the other entries whole."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key in ("grid", "kwargs") and isinstance(a, dict) and isinstance(b, dict):
            out.update({k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
                        if a.get(k) != b.get(k)})
        else:
            out[key] = (a, b)
    return out


def short(value: Any, most: int = 40) -> str:
    """``repr(value)``, cut to ``most`` characters (a long grid stays readable)."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _prepare_store(store: Path, manifest: dict[str, Any], resume: bool) -> None:
    store.mkdir(parents=True, exist_ok=True)
    path = store / _MANIFEST
    if resume and path.exists():
        old = json.loads(path.read_text())
        if old != manifest:
            diff = _differences(old, manifest)
            said = ", ".join(f"{k} ({short(a)} stored, {short(b)} now)" for k, (a, b) in diff.items())
            msg = (f"resume: the sweep stored in {store} differs from this one in {said}; "
                   f"use another store or resume=False")
            raise ResumeMismatch(msg, store, diff)
        return
    write_text(path, json.dumps(manifest, indent=1))


def _load_cell(path: Path) -> xr.Dataset:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


def _combine(grid: dict[str, np.ndarray], cells: list[xr.Dataset | None]) -> xr.Dataset:
    """The cells on the grid; a missing cell (``None``: failed, or not finished) is NaN, and a
    variable with a missing cell becomes floating point."""
    shape = tuple(len(v) for v in grid.values())
    template = next(ds for ds in cells if ds is not None)
    clash = set(grid) & (set(template.dims) | set(template.variables))
    if clash:
        msg = f"the cell results already use the grid names {sorted(clash)}"
        raise ValueError(msg)
    missing = any(ds is None for ds in cells)
    data_vars = {}
    for name, var in template.data_vars.items():
        dtype = np.result_type(var.dtype, np.float64) if missing and var.dtype.kind in "biu" else var.dtype
        out = np.empty(shape + var.shape, dtype=dtype)
        flat = out.reshape((-1,) + var.shape)
        for i, ds in enumerate(cells):
            if ds is None:
                flat[i] = np.nan if dtype.kind in "fc" else np.zeros(var.shape, dtype)
                continue
            if ds[name].shape != var.shape:
                msg = (f"cell {i} returned {name!r} of shape {ds[name].shape}, "
                       f"cell 0 of shape {var.shape}")
                raise ValueError(msg)
            flat[i] = ds[name].values
        data_vars[name] = xr.Variable(tuple(grid) + var.dims, out, attrs=var.attrs)
    coords = {k: (k, v) for k, v in grid.items()}
    coords.update({str(k): c.variable for k, c in template.coords.items()})
    return xr.Dataset(data_vars, coords=coords)


def _describe(index: int, params: dict[str, Any]) -> str:
    return f"cell {index} (" + ", ".join(f"{k} = {v}" for k, v in params.items()) + ")"


def sweep(
    func: Callable[..., Any],
    grid: Mapping[str, Sequence[Any] | np.ndarray],
    *,
    seed: int = 0,
    workers: int = 1,
    scheduler: Any = None,
    store: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: bool = True,
    processes: bool = True,
    kwargs: Mapping[str, Any] | None = None,
    desc: str | None = None,
    cells_per_task: int | None = None,
    device: str | None = None,
    cost: Callable[..., float] | None = None,
    on_failure: str = "stop",
) -> xr.Dataset:
    """Evaluate ``func`` on every cell of ``grid`` and gather the results in one Dataset.

    Args:
        func: called as ``func(**cell_params, rng=generator, **kwargs)``; returns an
            ``xarray.Dataset`` or a mapping accepted by it, with the same variables and
            shapes in every cell. Must be picklable for a cluster (module-level).
        grid: ``{name: values}``, each a non-empty 1-d sequence; cells are the outer product.
        seed: the root seed; cell ``i`` gets ``SeedSequence(seed, spawn_key=(i,))``.
        workers: number of single-threaded workers of the ``LocalCluster``; ``1`` runs in
            this process.
        scheduler: ``None`` (see ``workers``), a scheduler address, a ``distributed.Client``
            or ``"synchronous"``.
        store: directory for the per-cell NetCDF files and the manifest ``sweep.json``.
        resume: skip the cells already in ``store`` (the manifest must match).
        progress: show a tqdm progress bar.
        processes: for the ``LocalCluster``: worker processes (default) or threads.
        kwargs: fixed keyword arguments passed to every call.
        desc: label of the progress bar.
        cells_per_task: cells in one task of a cluster (:func:`task_chunks`); ``None``:
            about :data:`TASKS_PER_WORKER` tasks per worker thread.
        device: the device the cells compute on (a torch device string, ``None`` for the
            CPU); ``"cuda"`` (no index) gives each worker process of a local cluster one GPU
            of its own (:func:`validation.cluster.dask_client`). It does not reach ``func``:
            pass it in ``kwargs`` too, which also puts it in every cell's :func:`cell_key`.
        cost: ``cost(**cell_params)``, an estimate of a cell's relative cost (only the order
            matters); a cluster then runs the most expensive cells first
            (:func:`task_chunks`). It changes the order of work, never the results.
        on_failure: ``"stop"`` (a cell raising :class:`meanfield.integrate.IntegrationError`
            stops the sweep with :class:`SweepError`) or ``"record"`` (it is recorded as
            failed and the sweep goes on); see the module docstring, "How a sweep ends".

    Returns:
        The Dataset over the grid, with the result schema's ``attrs``
        (:data:`meanfield.integrate.RESULT_ATTRS`); ``settings`` holds the grid, the seed,
        the fixed keyword arguments, the first cell's own ``attrs`` and ``failed_cells``
        (``{index: reason}``, empty unless ``on_failure="record"`` met failures).

    Raises:
        Interrupted: on ``KeyboardInterrupt`` (the finished cells kept; ``.dataset``).
        SweepError: a failed cell with ``on_failure="stop"``.
    """
    wall0 = time.perf_counter()
    grid_ = _canonical_grid(grid)
    kwargs_ = dict(kwargs or {})
    _check_options(workers=workers, seed=seed, cells_per_task=cells_per_task, resume=resume,
                   store=store, on_failure=on_failure)
    n_cells = int(np.prod([len(v) for v in grid_.values()]))
    store_ = Path(store) if store is not None else None
    if store_ is not None:
        _prepare_store(store_, _manifest(grid_, seed, func, kwargs_), resume)
    keys = [cell_key(func, _cell_params(grid_, i), seed, i, kwargs_) for i in range(n_cells)]
    done = _resumed(store_, keys) if store_ is not None and resume else set()
    todo = [i for i in range(n_cells) if i not in done]
    cells = _Cells(func, grid_, seed, kwargs_, keys, store_, desc or "sweep", done, wall0)

    bar = tqdm(total=n_cells, initial=len(done), disable=not progress, desc=desc or "sweep")
    try:
        in_process = scheduler == "synchronous" or (scheduler is None and int(workers) == 1)
        if in_process:
            _run_in_process(func, grid_, seed, kwargs_, todo, cells.finish, bar,
                            record=on_failure == "record")
        elif todo:
            _run_distributed(func, grid_, seed, kwargs_, todo, cells.finish, bar,
                             workers=int(workers), scheduler=scheduler, processes=processes,
                             cells_per_task=cells_per_task, device=device, cost=cost,
                             record=on_failure == "record")
    except IntegrationError as exc:  # a failed cell: stop with its reason, keep the others
        raise cells.stopped(exc) from exc
    except KeyboardInterrupt as exc:  # an interrupt: the finished cells are kept
        raise cells.interrupted() from exc
    finally:
        bar.close()
    return cells.outcome()


def _check_options(*, workers: int, seed: int, cells_per_task: int | None, resume: bool,
                   store: Any, on_failure: str) -> None:
    """:func:`sweep`'s options, checked before any work (``ValueError`` naming the field)."""
    from meanfield.arguments import count

    count(workers, "workers")
    count(seed, "seed", minimum=0)
    if cells_per_task is not None:
        count(cells_per_task, "cells_per_task")
    if resume and store is None:
        msg = "resume=True needs a store directory"
        raise ValueError(msg)
    if on_failure not in ON_FAILURE:
        msg = f"on_failure must be one of {ON_FAILURE}, got {on_failure!r}"
        raise ValueError(msg)


def _resumed(store: Path, keys: list[str]) -> set[int]:
    """The cells stored in ``store`` by this computation (their :func:`cell_key` is
    ``keys[i]``); a stored cell made by another one is computed again, with a warning."""
    done: set[int] = set()
    stale = []
    for i in range(len(keys)):
        path = _cell_path(store, i)
        if path.exists():
            if _stored_key(path) == keys[i]:
                done.add(i)
            else:
                stale.append(i)
    if stale:  # stacklevel: the caller of sweep
        warnings.warn(f"resume: {len(stale)} stored cell(s) in {store} were made by another "
                      f"computation (cells {stale[:10]}{'...' if len(stale) > 10 else ''}); "
                      "they are computed again", RuntimeWarning, stacklevel=3)
    return done


def _run_in_process(func: Callable[..., Any], grid: dict[str, np.ndarray], seed: int,
                    kwargs: dict[str, Any], todo: list[int], finish: Callable[[int, Any], None],
                    bar: Any, *, record: bool) -> None:
    """Run the cells in ``todo`` one after the other in this process, ``finish`` each; a cell
    raising :class:`IntegrationError` stops the sweep (the exception, tagged with the cell's
    index, is raised) unless ``record``, where it is finished as failed."""
    for i in todo:
        try:
            cell: xr.Dataset | BaseException = _run_cell(
                func, _cell_params(grid, i), seed, i, kwargs)
        except IntegrationError as exc:
            exc.sweep_cell = i  # type: ignore[attr-defined]
            if not record:
                raise
            cell = exc
        finish(i, cell)
        bar.update()


class _Cells:
    """The cells of one :func:`sweep` as they finish: written to ``store`` (or kept in memory),
    the failed ones (``on_failure="record"``) with their reasons; gathered into the sweep's
    Dataset however the sweep ends (:meth:`outcome`, :meth:`stopped`, :meth:`interrupted`)."""

    def __init__(self, func: Callable[..., Any], grid: dict[str, np.ndarray], seed: int,
                 kwargs: dict[str, Any], keys: list[str], store: Path | None, desc: str,
                 done: set[int], wall0: float) -> None:
        self.func, self.grid, self.seed, self.kwargs = func, grid, seed, kwargs
        self.keys, self.store, self.desc, self.wall0 = keys, store, desc, wall0
        self.n_cells = len(keys)
        self.results: dict[int, xr.Dataset] = {}
        self.failed: dict[int, tuple[str, Any]] = {}  # index -> (what went wrong, StopReason)
        self.finished: set[int] = set(done)

    def finish(self, index: int, ds: xr.Dataset | BaseException) -> None:
        """Record cell ``index``: a Dataset is stored (tagged with its key), an exception is a
        failed cell (``on_failure="record"``), not stored."""
        if isinstance(ds, BaseException):
            self.failed[index] = (f"{_describe(index, _cell_params(self.grid, index))}: {ds}",
                                  getattr(ds, "reason", None))
            return
        ds.attrs[_KEY] = self.keys[index]
        if self.store is not None:
            _write_atomic(ds, _cell_path(self.store, index))
        else:
            self.results[index] = ds
        self.finished.add(index)

    def gather(self) -> list[xr.Dataset | None]:
        """Every cell's Dataset (``None`` where not finished); a stored cell read back must carry
        this computation's key."""
        if self.store is None:
            return [self.results.get(i) for i in range(self.n_cells)]
        cells: list[xr.Dataset | None] = []
        for i in range(self.n_cells):
            if i not in self.finished:
                cells.append(None)
                continue
            ds = _load_cell(_cell_path(self.store, i))
            if ds.attrs.get(_KEY) != self.keys[i]:  # never mix: every cell read must be this computation's
                msg = (f"the stored cell {_cell_path(self.store, i)} was made by another computation "
                       "(its content hash differs); remove it or use another store")
                raise ValueError(msg)
            cells.append(ds)
        return cells

    def result(self, stop_reason: str, successful: bool) -> xr.Dataset | None:
        """The Dataset over the grid with the result schema's ``attrs`` (``None`` when no cell
        finished)."""
        cells = self.gather()
        if all(ds is None for ds in cells):
            return None
        out = _combine(self.grid, cells)
        first = next(ds for ds in cells if ds is not None)
        failed, finished, func = self.failed, self.finished, self.func
        settings = {"grid": {k: v.tolist() for k, v in self.grid.items()}, "seed": int(self.seed),
                    "function": f"{func.__module__}.{func.__qualname__}", "kwargs": self.kwargs,
                    "cell_attrs": {k: v for k, v in first.attrs.items() if k != _KEY},
                    "failed_cells": {str(i): failed[i][0] for i in sorted(failed)},
                    "finished_cells": len(finished)}
        t_reached = float(out["time"].values.max()) if "time" in out.coords else math.nan
        out.attrs = result_attrs(
            title=self.desc, solver="validation.sweep", model="null", settings=settings,
            scheme="", controller="", rtol=None, atol=None, dt=None,
            stats={"num_steps": self.n_cells, "num_accepted": len(finished),
                   "num_rejected": len(failed)},
            stop_reason=stop_reason, successful=successful, t_reached=t_reached,
            wall_time_s=time.perf_counter() - self.wall0)
        return out

    def _kept(self) -> str:
        """Where the finished cells are kept (a store), for the messages of an early end."""
        return (f"; the {len(self.finished)} finished cells are kept in {self.store} (resume=True "
                "computes only the missing ones)") if self.store is not None else ""

    def stopped(self, exc: IntegrationError) -> SweepError:
        """The :class:`SweepError` of a failed cell (``on_failure="stop"``), with the partial
        result."""
        cell_index = int(getattr(exc, "sweep_cell", -1))
        params = _cell_params(self.grid, cell_index) if cell_index >= 0 else {}
        msg = (f"{self.desc}: {_describe(cell_index, params)} failed: {exc}{self._kept()}; "
               "on_failure='record' records such cells and goes on")
        partial = self.result(msg, False)
        return SweepError(msg, partial, exc.t, exc.reason, cell_index, params)

    def interrupted(self) -> Interrupted:
        """The :class:`Interrupted` of a ``KeyboardInterrupt``, with the partial result."""
        msg = (f"{self.desc} interrupted after {len(self.finished)} of {self.n_cells} "
               f"cells{self._kept()}")
        partial = self.result(f"{StopReason.INTERRUPTED.value}: {msg}", False)
        return Interrupted(msg, partial)

    def outcome(self) -> xr.Dataset:
        """The result of a sweep that ran every cell: successful, or (``on_failure="record"``)
        with its failed cells listed; every cell failed: :class:`SweepError`."""
        failed = self.failed
        if not failed:
            out = self.result(StopReason.SUCCESS.value, True)
            assert out is not None
            return out
        listed = "; ".join(failed[i][0] for i in sorted(failed)[:5]) + ("; ..." if len(failed) > 5 else "")
        reason = (f"{len(failed)} of {self.n_cells} cells failed and are NaN, left out of every "
                  f"statistic (on_failure='record'): {listed}")
        if len(self.finished) == 0:
            msg = f"{self.desc}: every cell failed: {listed}"
            first = min(failed)
            raise SweepError(msg, None, math.nan, failed[first][1], first,
                             _cell_params(self.grid, first))
        out = self.result(reason, False)
        assert out is not None
        return out


def _run_distributed(func: Callable[..., Any], grid: dict[str, np.ndarray], seed: int,
                     kwargs: dict[str, Any], todo: list[int],
                     finish: Callable[[int, Any], None], bar: Any, *, workers: int,
                     scheduler: Any, processes: bool, cells_per_task: int | None = None,
                     device: str | None = None, cost: Callable[..., float] | None = None,
                     record: bool = False) -> None:
    """Submit the cells in ``todo`` to a cluster in tasks of :func:`task_chunks`; ``finish``
    each cell as its task returns. A cell that raised stops its task: the cells finished
    before it are kept, then its exception is raised."""
    from distributed import as_completed

    from validation.cluster import dask_client

    with dask_client(workers=workers, scheduler=scheduler, processes=processes,
                     device=device) as client:
        threads = sum(client.nthreads().values()) or int(workers)
        params = {i: _cell_params(grid, i) for i in todo}
        costs = None if cost is None else [float(cost(**params[i])) for i in todo]
        chunks = task_chunks(todo, threads, cells_per_task, costs)
        futures = [
            client.submit(_run_chunk, func, [(i, params[i]) for i in chunk], seed,
                          kwargs, record, pure=False, key=f"sweep-cells-{chunk[0]}-{uuid.uuid4().hex}",
                          priority=len(chunks) - k)
            for k, chunk in enumerate(chunks)
        ]
        try:
            for fut in as_completed(futures):
                done, error = fut.result()
                for index, ds in done:
                    finish(index, ds)
                    bar.update()
                if error is not None:
                    raise error
        except BaseException:
            client.cancel(futures)
            raise


__all__ = ["ON_FAILURE", "TASKS_PER_WORKER", "ResumeMismatch", "SweepError", "cell_key", "cell_seed", "sweep",
           "task_chunks"]
