"""The one Dask client setup of the project (sweeps, phase diagrams, validation runs).

.. autosummary::
   dask_client
   check_main_guard

``dask_client(workers=K)`` starts a ``distributed.LocalCluster`` of ``K`` single-threaded
workers (one BLAS/FFT thread each, so that ``K`` workers use ``K`` cores) and closes it on
exit; ``dask_client(scheduler=...)`` connects to an existing scheduler (an address or a
``Client``, which is left open).

Worker processes start by importing the user's script again (the ``spawn`` method): a script
that starts a cluster at its top level, without an ``if __name__ == "__main__":`` guard,
would start clusters inside the workers, and Dask prints pages of "Nanny failed to start".
:func:`check_main_guard` finds this first and raises one error that says what to add.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import sys
from collections.abc import Iterator
from typing import Any

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


@contextlib.contextmanager
def dask_client(*, workers: int = 1, scheduler: Any = None, processes: bool = True
                ) -> Iterator[Any]:
    """A ``distributed.Client``: on ``scheduler`` (address or ``Client``), else on a new
    ``LocalCluster`` of ``workers`` single-threaded workers (processes or threads)."""
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
    if processes:
        check_main_guard()
    cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=processes,
                           dashboard_address=":0")  # any free port, no warning
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


__all__ = ["GUARD_MESSAGE", "MainGuardError", "check_main_guard", "dask_client"]
