"""Run a suite of checks: a table as it goes, records on disk at once, resumable, parallel.

.. autosummary::
   run_check
   run_suite
   status_of
   save_record
   load_record
   exit_code
   slowest_table

Each finished check is saved immediately under ``out_dir/checks/<name>/``: ``result.json``
(the record, its status, seed, suite and wall time), ``data.nc`` (the raw numbers, NetCDF,
written atomically) and the check's PNG figure. An interrupted run (Ctrl-C) therefore loses
only the checks in flight, and ``resume=True`` skips every check whose record is there and
was made by the same computation (:func:`record_key`: the check's function and module
source, seed, suite and code version; status pass or FAIL; errors are run again). A check that raises, returns
something else than a :class:`~validation.records.CheckResult`, or whose module failed to
import (:class:`~validation.suites.BrokenModule`) becomes an ``ERROR`` record carrying its
traceback; the others still run. Only ``pass`` is a success: there is no skipped status. With
``workers > 1`` independent checks run on a Dask ``LocalCluster`` (one thread per worker
process); ``scheduler="tcp://..."`` sends them to an existing Dask cluster. At the end the
run prints its slowest checks, wall and CPU seconds (:func:`slowest_table`): wall time alone
is inflated by whatever else loads the machine, the CPU time (all threads of the process
that ran the check) is not.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from validation.records import CheckResult, json_safe
from validation.suites import SuiteEntry

STATUSES = ("pass", "FAIL", "ERROR")
"""The statuses of a record; only ``"pass"`` lets the run succeed."""


def status_of(result: CheckResult) -> str:
    """``pass``, ``FAIL`` or ``ERROR`` (:attr:`CheckResult.status`)."""
    return result.status


def check_dir(out_dir: Path, name: str) -> Path:
    """Where the records of check ``name`` live."""
    return Path(out_dir) / "checks" / name


def _error_record(entry: SuiteEntry, exc: BaseException) -> CheckResult:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return CheckResult(name=entry.name, quantity="-", description=f"{entry.target} raised", error=tb)


def run_check(entry: SuiteEntry, *, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Run one check; never raises for the check's own failures (except Ctrl-C).

    An exception (a module that failed to import included) gives an ``ERROR`` record with
    the traceback; a record named otherwise than the entry is renamed to the entry's name.
    """
    target_dir = check_dir(out_dir, entry.name)
    target_dir.mkdir(parents=True, exist_ok=True)
    try:
        result = entry(seed=int(seed), out_dir=target_dir, suite=suite)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing check must not stop the suite
        return _error_record(entry, exc)
    if not isinstance(result, CheckResult):
        msg = f"check {entry.target} returned {type(result).__name__}, not CheckResult"
        return _error_record(entry, TypeError(msg))
    if result.name != entry.name:
        result = replace(result, details={**result.details, "record_name": result.name}, name=entry.name)
    return result


def _remote(entry: SuiteEntry, seed: int, out_dir: str, suite: str
            ) -> tuple[CheckResult, float, float, bytes | None]:
    """Worker side of a Dask run: the record, its wall and CPU times and the figure's bytes
    (so that the figure reaches the client even when the workers do not share its disk)."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_check(entry, seed=seed, out_dir=Path(out_dir), suite=suite)
    png = None
    if result.figure and Path(result.figure).is_file():
        png = Path(result.figure).read_bytes()
    return result, time.perf_counter() - t0, time.process_time() - c0, png


def _netcdf_safe(ds: Any) -> Any:
    ds = ds.copy()
    for obj in [ds, *ds.variables.values()]:
        for k, v in list(obj.attrs.items()):
            if isinstance(v, bool):
                obj.attrs[k] = int(v)
            elif not isinstance(v, (str, int, float)) and not hasattr(v, "dtype"):
                obj.attrs[k] = json.dumps(json_safe(v))
    return ds


def _atomic_text(path: Path, text: str) -> None:
    from meanfield.io import write_text

    write_text(path, text)


def record_key(entry: Any, seed: int, suite: str) -> str:
    """The content hash of one check's computation: its name, its function and the source of
    the module that defines it, the seed, the suite and the code version (SHA-256, hex). A
    resumed run reuses a stored record only under the same key."""
    import hashlib
    import inspect
    import sys as _sys

    from meanfield import __version__

    func = getattr(entry, "func", None)
    source = ""
    if func is not None:
        module = _sys.modules.get(func.__module__)
        try:
            source = inspect.getsource(module) if module is not None else ""
        except (OSError, TypeError):
            source = ""
    desc = json.dumps({"name": entry.name, "target": entry.target, "seed": int(seed),
                       "suite": suite, "version": __version__,
                       "source": hashlib.sha256(source.encode()).hexdigest()}, sort_keys=True)
    return hashlib.sha256(desc.encode()).hexdigest()


def save_record(result: CheckResult, out_dir: Path, *, seed: int, suite: str, wall_time: float,
                cpu_time: float | None = None, png: bytes | None = None,
                key: str | None = None) -> Path:
    """Write ``result.json`` and ``data.nc`` (and the figure's bytes if given) atomically."""
    from meanfield.io import write_netcdf

    d = check_dir(out_dir, result.name)
    d.mkdir(parents=True, exist_ok=True)
    figure = result.figure
    if figure and png is not None and not Path(figure).is_file():
        figure = str(d / Path(figure).name)
        Path(figure).write_bytes(png)
    data_file = None
    if result.data is not None:
        try:
            data = _netcdf_safe(result.data)
            data.attrs.setdefault("check", result.name)  # meanfield plot knows it by this
            data.attrs.setdefault("title", f"data of the validation check {result.name}")
            write_netcdf(data, d / "data.nc")
            data_file = "data.nc"
        except Exception as exc:  # noqa: BLE001 - keep the record even if the data won't serialise
            data_file = f"(not written: {type(exc).__name__}: {exc})"
    rec = json_safe(result.to_dict())
    if figure:
        rec["figure"] = os.path.relpath(Path(figure).resolve(), d.resolve())
    rec.update({"status": status_of(result), "seed": int(seed), "suite": suite, "key": key,
                "wall_time_s": float(wall_time),
                "cpu_time_s": None if cpu_time is None else float(cpu_time), "data_file": data_file,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    _atomic_text(d / "result.json", json.dumps(rec, indent=1))
    return d / "result.json"


def load_record(out_dir: Path, name: str) -> tuple[CheckResult, dict[str, Any]] | None:
    """The saved record of check ``name`` and its run metadata, or ``None``."""
    d = check_dir(out_dir, name)
    path = d / "result.json"
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    meta = {k: rec.pop(k, None) for k in ("status", "seed", "suite", "key", "wall_time_s", "cpu_time_s",
                                          "data_file", "finished")}
    figure = rec.get("figure")
    if figure:
        rec["figure"] = str((d / figure).resolve())
    data = None
    if meta.get("data_file") == "data.nc" and (d / "data.nc").is_file():
        data = d / "data.nc"
    try:
        result = CheckResult.from_dict(rec)
    except (KeyError, TypeError, ValueError):  # a record of an older format: run the check again
        return None
    meta["data_path"] = str(data) if data else None
    return result, meta


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 when every check passed, 1 otherwise (a failure, an error, or no check at all)."""
    results = list(results)
    return 0 if results and all(status_of(r) == "pass" for r in results) else 1


def _short(value: Any, width: int) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(result: CheckResult) -> str:
    """One line for a record: its worst comparison (:attr:`CheckResult.worst`) and how many
    passed, or the last line of its traceback."""
    if result.error is not None:
        lines = result.error.strip().splitlines()
        return lines[-1] if lines else "error"
    w = result.worst
    n, ok = len(result.comparisons), sum(c.passed for c in result.comparisons)
    head = f"{ok}/{n} ok; " if n > 1 else ""
    return head + ("" if w is None else w.describe())


def format_row(result: CheckResult, wall: float | None = None, note: str = "") -> str:
    """One line of the table: check, status, worst comparison, time."""
    w = "" if wall is None else f"{wall:6.1f}s"
    return f"{_short(result.name, 26):26s} {status_of(result):5s} {_short(summary(result), 96):96s} {w}{note}"


def header() -> str:
    return f"{'check':26s} {'pass':5s} {'worst comparison (measured vs expected)':96s} {'time':>7s}"


SLOWEST = 5
"""How many of the slowest checks :func:`run_suite` lists at the end of a run."""


def slowest_table(times: dict[str, tuple[float, float | None, bool]], count: int = SLOWEST) -> list[str]:
    """The lines listing the ``count`` slowest checks by wall time, with their CPU time.

    Args:
        times: ``name -> (wall s, CPU s or None, resumed)``; a resumed check shows the times
            of the run that made its record, marked ``(resumed)``; a NaN wall (a lost Dask
            worker) sorts last.
        count: how many lines (``0``: none, and no heading).

    Returns:
        A heading and one line per check (``[]`` when ``count`` is 0 or nothing ran).

    Raises:
        ValueError: ``count`` is negative.
    """
    if int(count) < 0:
        msg = f"count must be >= 0, got {count!r}"
        raise ValueError(msg)
    if not times or not count:
        return []

    def key(item: tuple[str, tuple[float, float | None, bool]]) -> float:
        wall = item[1][0]
        return -wall if wall is not None and math.isfinite(wall) else math.inf

    rows = sorted(times.items(), key=key)[: int(count)]
    total_wall = sum(w for w, _, _ in times.values() if w is not None and math.isfinite(w))
    cpus = [c for _, c, _ in times.values() if c is not None]
    total_cpu = f", CPU {sum(cpus):.1f} s" if len(cpus) == len(times) else ""
    lines = [f"slowest checks (of {len(times)}: wall {total_wall:.1f} s in all{total_cpu}):"]
    for name, (wall, cpu, resumed) in rows:
        w = "   n/a" if wall is None or not math.isfinite(wall) else f"{wall:6.1f}"
        c = "   n/a" if cpu is None else f"{cpu:6.1f}"
        lines.append(f"  {_short(name, 26):26s} wall {w} s  CPU {c} s" + ("  (resumed)" if resumed else ""))
    return lines


def run_suite(
    entries: list[SuiteEntry],
    *,
    out_dir: Path,
    seed: int = 0,
    suite: str = "quick",
    workers: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    slowest: int = SLOWEST,
) -> list[CheckResult]:
    """Run ``entries`` and return their records in suite order (docs/equations.md sections 3–6 checks).

    Args:
        entries: the checks (see :mod:`validation.suites`).
        out_dir: output folder (records under ``out_dir/checks``).
        seed: passed to every check.
        suite: ``"quick"`` or ``"full"`` (the sizes each check uses).
        workers: ``> 1``: a Dask ``LocalCluster`` with that many single-threaded processes.
        scheduler: address of an existing Dask scheduler (overrides ``workers``).
        resume: reuse finished records (same seed and suite; pass or FAIL).
        progress: show a tqdm progress bar (on stderr).
        stream: where the table goes (default stdout).
        on_result: called with each record as it is saved.
        slowest: after the table, list this many of the slowest checks with their wall and
            CPU seconds (:func:`slowest_table`; ``0``: no list).

    Raises:
        KeyboardInterrupt: after saving what finished (the caller writes the report).
    """
    from tqdm import tqdm

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if int(workers) < 1:
        msg = f"workers must be >= 1, got {workers!r}"
        raise ValueError(msg)
    if int(slowest) < 0:
        msg = f"slowest must be >= 0, got {slowest!r}"
        raise ValueError(msg)
    stream = stream or sys.stdout
    results: dict[str, CheckResult] = {}
    times: dict[str, tuple[float, float | None, bool]] = {}
    pending: list[SuiteEntry] = []
    bar = tqdm(total=len(entries), desc="validate", unit="check", disable=not progress, file=sys.stderr,
               leave=False)

    def emit(line: str) -> None:
        if progress:
            bar.write(line, file=stream)
        else:
            print(line, file=stream, flush=True)

    emit(header())
    for e in entries:
        if resume:
            old = load_record(out_dir, e.name)
            if old is not None:
                res, meta = old
                same = meta.get("key") == record_key(e, seed, suite)  # same computation
                if same and meta.get("status") in ("pass", "FAIL"):
                    results[e.name] = res
                    times[e.name] = (float(meta.get("wall_time_s") or math.nan), meta.get("cpu_time_s"), True)
                    emit(format_row(res, meta.get("wall_time_s"), "  (resumed)"))
                    bar.update(1)
                    continue
        pending.append(e)

    def finish(entry: SuiteEntry, res: CheckResult, wall: float, cpu: float | None = None,
               png: bytes | None = None) -> None:
        save_record(res, out_dir, seed=seed, suite=suite, wall_time=wall, cpu_time=cpu, png=png,
                    key=record_key(entry, seed, suite))
        results[entry.name] = res
        times[entry.name] = (float(wall), cpu, False)
        emit(format_row(res, wall))
        bar.update(1)
        if on_result is not None:
            on_result(res)

    try:
        if pending and (scheduler or int(workers) > 1):
            _run_dask(pending, finish, out_dir=out_dir, seed=seed, suite=suite, workers=int(workers),
                      scheduler=scheduler)
        else:
            for e in pending:
                bar.set_postfix_str(e.name)
                t0, c0 = time.perf_counter(), time.process_time()
                res = run_check(e, seed=seed, out_dir=out_dir, suite=suite)
                finish(e, res, time.perf_counter() - t0, time.process_time() - c0)
    finally:
        bar.close()
    for line in slowest_table(times, slowest):
        print(line, file=stream, flush=True)
    return [results[e.name] for e in entries if e.name in results]


def _run_dask(pending: list[SuiteEntry], finish: Callable[..., None], *, out_dir: Path, seed: int,
              suite: str, workers: int, scheduler: str | None) -> None:
    from distributed import as_completed

    from validation.cluster import dask_client

    with dask_client(workers=workers, scheduler=scheduler or None) as client:
        _submit_all(client, as_completed, pending, finish, out_dir=out_dir, seed=seed, suite=suite)


def _submit_all(client: Any, as_completed: Any, pending: list[SuiteEntry], finish: Callable[..., None],
                *, out_dir: Path, seed: int, suite: str) -> None:
    futures = {}
    try:
        for e in pending:
            fut = client.submit(_remote, e, int(seed), str(Path(out_dir).resolve()), suite,
                                pure=False, key=f"check-{e.name}-{time.time_ns()}")
            futures[fut] = e
        for fut in as_completed(list(futures)):
            e = futures[fut]
            try:
                res, wall, cpu, png = fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker is an error of that check
                res, wall, cpu, png = _error_record(e, exc), float("nan"), None, None
            finish(e, res, wall, cpu, png)
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()
        raise


__all__ = [
    "check_dir",
    "exit_code",
    "format_row",
    "load_record",
    "run_check",
    "run_suite",
    "save_record",
    "slowest_table",
    "status_of",
    "summary",
]
