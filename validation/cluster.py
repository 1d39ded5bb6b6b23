"""The one Dask client setup of the project (sweeps, phase diagrams, validation runs).

.. autosummary::
   dask_client
   worker_environ
   PinThreads
   PinGPU
   gpu_for_worker
   check_main_guard

``dask_client(workers=K)`` starts a ``distributed.LocalCluster`` of ``K`` single-threaded
workers and closes it on exit; ``dask_client(scheduler=...)`` connects to an existing
scheduler (an address or a ``Client``, which is left open).

A local worker process is set up to compute as fast as one process does (docs/sweeps.md,
"How many workers, threads per worker, task size"):

* its BLAS, OpenMP and other native thread pools are pinned to ``threads`` (default 1), so
  that ``K`` workers use ``K`` cores: through the environment it is started with
  (:func:`worker_environ`) and again, once started, by :class:`PinThreads`
  (``threadpoolctl``), which also covers a library loaded before the environment was read;
* it runs with glibc's own ``malloc`` settings, as one process does. Dask's nanny starts
  workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which turns off glibc's adaptive ``mmap``
  threshold: every temporary array above 128 KiB is then mapped and unmapped, and its pages
  are faulted in and zeroed again on every use. Measured on the phase diagram (10 cells, 128
  starts each): 16x the page faults, 18x the system time, 1.7x the CPU time and the wall time
  of workers without it. :func:`dask_client` leaves it out;
* with ``device="cuda"`` (no index) it computes on one GPU of its own: worker ``i`` (its
  name, ``0 .. K-1`` in a ``LocalCluster``) sees GPU ``i mod G`` of the ``G`` GPUs the
  calling process sees (:func:`gpu_for_worker`), through ``CUDA_VISIBLE_DEVICES`` set by
  :class:`PinGPU` before torch initialises CUDA in the worker, so that ``"cuda"`` there
  means that GPU.

Worker processes start by importing the user's script again (the ``spawn`` method): a script
that starts a cluster at its top level, without an ``if __name__ == "__main__":`` guard,
would start clusters inside the workers, and Dask prints pages of "Nanny failed to start".
:func:`check_main_guard` finds this first and raises one error that says what to add.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from distributed import WorkerPlugin

from meanfield.arguments import count

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
"""Environment variables that size the native thread pools of a worker process."""

GPU_VARIABLE = "CUDA_VISIBLE_DEVICES"
"""The environment variable that says which GPUs a process sees (read when CUDA starts)."""

DROPPED_VARIABLES = ("MALLOC_TRIM_THRESHOLD_",)
"""Environment variables removed from a local worker's environment (see the module text)."""

_GUARD = re.compile(r"""^\s*if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.MULTILINE)

GUARD_MESSAGE = (
    "starting Dask worker processes needs the script's top-level code under\n"
    "    if __name__ == \"__main__\":\n"
    "(each worker imports the script again, and would start workers of its own); move the "
    "calls into that block, or pass workers=1 or processes=False"
)


class MainGuardError(RuntimeError):
    """A cluster of worker processes was started from a script without a main guard."""


def check_main_guard() -> None:
    """Raise :class:`MainGuardError` when worker processes cannot start cleanly: this is a
    worker re-importing the user's script, or the script (``__main__`` from a file) has no
    ``if __name__ == "__main__":`` block."""
    main = sys.modules.get("__main__")
    if main is None:
        return
    if getattr(main, "__name__", "") == "__mp_main__" or multiprocessing.parent_process() is not None:
        raise MainGuardError(GUARD_MESSAGE)
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if path is None or spec is not None:  # interactive, -c, or -m (module mains run guarded)
        return
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError:
        return
    if not _GUARD.search(source):
        raise MainGuardError(GUARD_MESSAGE + f" (script: {path})")


def worker_environ(threads: int = 1) -> dict[str, str]:
    """The variables a local worker process is started with: every native thread pool
    (:data:`THREAD_VARIABLES`) sized ``threads``."""
    count(threads, "threads")
    return dict.fromkeys(THREAD_VARIABLES, str(int(threads)))


class PinThreads(WorkerPlugin):
    """A Dask worker plugin: limits every native thread pool of the worker process (BLAS,
    OpenMP, ... as ``threadpoolctl`` finds them) to ``threads`` when the worker starts."""

    name = "meanfield-pin-threads"

    def __init__(self, threads: int = 1) -> None:
        count(threads, "threads")
        self.threads = int(threads)

    def setup(self, worker: Any) -> None:
        from threadpoolctl import threadpool_limits

        # no context manager: the limit holds for the life of the worker process
        threadpool_limits(limits=self.threads)


def visible_gpus(environ: Mapping[str, str], count: int) -> list[str]:
    """The GPUs a process may use: the entries of ``CUDA_VISIBLE_DEVICES`` when it is set
    (indices or UUIDs, comma-separated; empty: none), else ``"0" .. str(count - 1)``."""
    if int(count) < 0:
        msg = f"count must be >= 0, got {count!r}"
        raise ValueError(msg)
    value = environ.get(GPU_VARIABLE)
    if value is None:
        return [str(i) for i in range(int(count))]
    return [g.strip() for g in value.split(",") if g.strip()]


def worker_index(name: Any) -> int | None:
    """A worker's index from its name: ``LocalCluster`` names its workers ``0 .. K-1``, and
    ``dask worker --nworkers K --name N`` names them ``N-0 .. N-(K-1)`` (the trailing
    integer); ``None`` for a name without one (an address)."""
    if isinstance(name, int) and not isinstance(name, bool):
        return name if name >= 0 else None
    found = re.search(r"(?:^|-)(\d+)$", str(name))
    return int(found.group(1)) if found else None


def gpu_for_worker(index: int, gpus: Sequence[str] | int) -> str:
    """The GPU of worker ``index``: ``gpus[index mod len(gpus)]`` (``gpus``: the visible
    GPUs, or their number ``G`` for ``"0" .. str(G - 1)``), so that ``K`` workers on ``G``
    GPUs share them round-robin: ``ceil(K / G)`` workers at most on one GPU."""
    count(index, "index", minimum=0)
    names = [str(i) for i in range(int(gpus))] if isinstance(gpus, int) else list(gpus)
    if not names:
        msg = f"gpus must name at least one GPU, got {gpus!r}"
        raise ValueError(msg)
    return names[int(index) % len(names)]


def pins_gpus(device: Any) -> bool:
    """Whether a run on ``device`` gives each worker process its own GPU: a CUDA device
    without an index (``"cuda"``); an explicit ``"cuda:1"`` is used as given."""
    return device is not None and str(device) == "cuda"


def cuda_device_count() -> int:
    """The GPUs torch sees in this process (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count())


class PinGPU(WorkerPlugin):
    """A Dask worker plugin: gives the worker one GPU, :func:`gpu_for_worker` of its index
    (:func:`worker_index`) among the GPUs it may use (:func:`visible_gpus`; ``gpus``: their
    number, as the calling process counted them, when the worker's ``CUDA_VISIBLE_DEVICES``
    is unset). It sets ``CUDA_VISIBLE_DEVICES`` to that one GPU, which torch reads when it
    first uses CUDA; in a worker where CUDA already runs it selects the GPU instead
    (``torch.cuda.set_device``)."""

    name = "meanfield-pin-gpu"

    def __init__(self, gpus: int) -> None:
        count(gpus, "gpus")
        self.gpus = int(gpus)

    def setup(self, worker: Any) -> None:
        index = worker_index(getattr(worker, "name", None))
        visible = visible_gpus(os.environ, self.gpus)
        if index is None or not visible:
            warnings.warn(f"PinGPU: worker {getattr(worker, 'name', None)!r} has no index or "
                          "sees no GPU; its GPUs are left as they are", RuntimeWarning,
                          stacklevel=2)
            return
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():  # too late for the environment
            torch.cuda.set_device(index % len(visible))
            return
        os.environ[GPU_VARIABLE] = gpu_for_worker(index, visible)


def worker_plugins(*, processes: bool, threads: int, device: Any = None,
                   gpus: int | None = None) -> list[WorkerPlugin]:
    """The plugins :func:`dask_client` registers on the worker processes of a local cluster:
    :class:`PinThreads`, and :class:`PinGPU` when ``device`` asks for it (:func:`pins_gpus`)
    and there are GPUs (``gpus``: default :func:`cuda_device_count`). Thread workers
    (``processes=False``) share this process and get none."""
    if not processes:
        return []
    plugins: list[WorkerPlugin] = [PinThreads(int(threads))]
    if pins_gpus(device):
        gpus = cuda_device_count() if gpus is None else int(gpus)
        if gpus > 0:
            plugins.append(PinGPU(gpus))
    return plugins


@contextlib.contextmanager
def _spawn_environ(threads: int) -> Iterator[None]:
    """While local workers are started: their environment is this one with
    :func:`worker_environ` and without :data:`DROPPED_VARIABLES`; this process's own
    environment is restored after (the nanny writes into it before it spawns a worker)."""
    import dask

    touched = (*THREAD_VARIABLES, *DROPPED_VARIABLES, "PYTHONHASHSEED")
    saved = {k: os.environ.get(k) for k in touched}
    for k in DROPPED_VARIABLES:
        os.environ.pop(k, None)
    os.environ.update(worker_environ(threads))  # the nanny lets these win over its config
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ(threads),
                              # Dask samples every worker's stack each 10 ms (its profiler),
                              # taking the GIL from our many short NumPy calls
                              "distributed.worker.profile.enabled": False}):
            yield
    finally:
        for k, value in saved.items():
            if value is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = value


@contextlib.contextmanager
def dask_client(*, workers: int = 1, scheduler: Any = None, processes: bool = True,
                threads: int = 1, device: Any = None) -> Iterator[Any]:
    """A ``distributed.Client``: on ``scheduler`` (address or ``Client``; its workers are
    left as they are), else on a new ``LocalCluster`` of ``workers`` single-threaded workers
    (processes or threads) whose native thread pools are pinned to ``threads`` each; with
    ``device="cuda"``, worker process ``i`` computes on GPU ``i mod G`` (:class:`PinGPU`)."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        if isinstance(scheduler, Client):
            yield scheduler
            return
        client = Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    count(workers, "workers")
    count(threads, "threads")
    if not processes:  # worker threads share this process: pin its pools while they run
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=int(threads)), LocalCluster(
                n_workers=int(workers), threads_per_worker=1, processes=False,
                dashboard_address=":0") as cluster, Client(cluster) as client:
            yield client
        return
    check_main_guard()
    with _spawn_environ(int(threads)):
        cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True,
                               dashboard_address=":0")  # any free port, no warning
    try:
        client = Client(cluster)
        try:
            for plugin in worker_plugins(processes=True, threads=int(threads), device=device):
                client.register_plugin(plugin)
            yield client
        finally:
            client.close()
    finally:
        with _spawn_environ(int(threads)):  # a worker restarted while closing
            cluster.close()


__all__ = [
    "DROPPED_VARIABLES", "GPU_VARIABLE", "GUARD_MESSAGE", "THREAD_VARIABLES", "MainGuardError",
    "PinGPU", "PinThreads", "check_main_guard", "cuda_device_count", "dask_client",
    "gpu_for_worker", "pins_gpus", "visible_gpus", "worker_environ", "worker_index",
    "worker_plugins",
]
