"""Memory estimates: refuse a run that cannot fit before it starts, with the figure.

.. autosummary::
   available_memory
   check_memory
   check_solve_memory
   check_particles_memory
   solve_bytes
   particles_bytes

A PDE solve at ``Sphere(5000)`` or a particle run of ``n = 10^6`` tokens in ``d = 512`` with
1000 output times would not crash at once: it would swap for an hour, or be killed by the
kernel with nothing kept. :func:`check_memory` compares an estimate of the bytes a run needs
with the memory the machine has available now and raises ``ValueError`` naming the option to
change, the estimate and the available memory (in GiB). The estimates count the arrays that
scale with the problem (states, stages, work arrays, stored outputs) and leave out
everything of fixed size; they are meant to be right within a factor of about two, which is
all a refusal needs: a run that needs twice the memory there is does not fit either way.
"""

from __future__ import annotations

import os
from typing import Any

_GIB = float(2**30)


def _meminfo_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (Linux), else ``None``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available() -> int | None:
    """What the process's cgroup (v2) still allows, in bytes, else ``None`` (no limit)."""
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
            used = int(fh.read().strip())
        return max(int(limit) - used, 0)
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Bytes of memory available to this process now (``MemAvailable``, capped by a cgroup
    limit; ``os.sysconf`` where ``/proc`` is missing), or ``None`` when unknown."""
    found = [m for m in (_meminfo_available(), _cgroup_available()) if m is not None]
    if not found:
        try:
            found = [os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
        except (AttributeError, ValueError, OSError):
            return None
    return min(found)


def check_memory(bytes_needed: float, what: str, advice: str) -> None:
    """Refuse a run of ``bytes_needed`` bytes that exceeds the available memory.

    Args:
        bytes_needed: the estimate (:func:`solve_bytes`, :func:`particles_bytes`).
        what: the run, with the options that set its size (``"solve at --resolution 5000
            with 11 output times"``).
        advice: what to change, naming the options (``"lower --resolution or --times"``).

    Raises:
        ValueError: ``what needs about X GiB of memory, Y GiB are available; advice``.
    """
    have = available_memory()
    if have is None or bytes_needed <= have:
        return
    msg = (f"{what} needs about {bytes_needed / _GIB:.3g} GiB of memory, but only "
           f"{have / _GIB:.3g} GiB are available: {advice}")
    raise ValueError(msg)


_SOLVE_WORK = 40
"""Arrays of the size of one grid a solve holds besides its outputs: the state, the stages of
Dormand–Prince (7), error and candidate, the flow's work arrays on the 3/2-rule grid (padded
by ``(3/2)^2`` on the sphere) and the transforms' buffers; counted generously."""


def solve_bytes(domain: Any, outputs: int) -> float:
    """Estimated bytes of :func:`meanfield.solve` on ``domain`` with ``outputs`` output times:
    ``8 G (40 + 2 outputs)`` for ``G`` grid points (every output is kept as coefficients and
    assembled as grid values), plus the transforms' own tables (``domain.transform_bytes``:
    the dense Gegenbauer matrices of the zonal domain, a few of ``L x 3L/2``); ``G`` is
    ``domain.point_count`` (the grid is not built)."""
    G = int(domain.point_count)
    return 8.0 * G * (_SOLVE_WORK + 2 * outputs) + float(domain.transform_bytes)


def particles_bytes(tokens: int, d: int, outputs: int, memory_limit: int, adaptive: bool = False
                    ) -> float:
    """Estimated bytes of :func:`particles.simulate` for ``tokens`` tokens in total (batch
    times ``n``) in ``R^d``: the stored states ``8 tokens d outputs``, about 12 more states
    (the stages of the scheme, its work arrays, the projected queries and keys), 8 more for an
    ``adaptive`` scheme (its stages and error estimate), and the attention tiles
    (``memory_limit``)."""
    states = outputs + 12 + (8 if adaptive else 0)
    return 8.0 * tokens * d * states + float(memory_limit)


def check_solve_memory(domain: Any, outputs: int) -> None:
    """:func:`check_memory` for :func:`meanfield.solve` on ``domain`` with ``outputs`` output
    times (the library's names and the command line's options, both)."""
    check_memory(solve_bytes(domain, outputs),
                 f"a solve on the {domain.name} at resolution {domain.resolution} (--resolution) "
                 f"with {outputs} output times (t, --times)",
                 "lower the resolution or the number of output times")


def check_particles_memory(batch: int, n: int, d: int, outputs: int, memory_limit: int,
                           adaptive: bool) -> None:
    """:func:`check_memory` for :func:`particles.simulate` (library and command line)."""
    systems = f"{batch} systems of " if batch > 1 else ""
    check_memory(particles_bytes(batch * n, d, outputs, memory_limit, adaptive),
                 f"a particle run of {systems}n = {n} tokens (--n) in d = {d} (--d) with "
                 f"{outputs} output times (t, --times)",
                 "lower n, d, the batch (--batch) or the number of output times")


__all__ = ["available_memory", "check_memory", "check_particles_memory", "check_solve_memory",
           "particles_bytes", "solve_bytes"]
