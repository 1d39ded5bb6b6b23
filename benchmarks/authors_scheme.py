"""The authors' scheme for Figure 3, for comparison in the benchmarks: explicit Euler with
step 0.1 and renormalisation (and Figure 3's grid, shared by the benchmarks), as in
github.com/borjanG/2023-transformers-rotf
``phase-diagrams.py``: ``x <- normalize(x + step * softmax(beta X Xᵀ) X)`` (SA with
``Q = K = V = I``, docs/equations.md section 2, without the tangent projection, which the
renormalisation replaces to first order).

On either array backend (:mod:`meanfield.backend`: NumPy, or torch on its tensor's device
and dtype). Used by ``bench_phase_diagram.py``, ``bench_engine.py`` and ``bench_backends.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from meanfield import backend as bk
from validation.phase_diagram import sample_tokens

TIMES = np.linspace(0.0, 30.0, 200)
"""Figure 3's output times."""

FIG3_BETAS = np.linspace(0.1, 9.0, 90)
"""Figure 3's betas."""


def beta_subset(k: int, grid: np.ndarray = FIG3_BETAS) -> np.ndarray:
    """``k`` of ``grid`` spread evenly (both ends included); all of them for ``k >= grid.size``."""
    if k >= grid.size:
        return grid
    return grid[np.round(np.linspace(0, grid.size - 1, k)).astype(int)]


def euler_pair_inner(x0: Any, beta: float, times: np.ndarray, step: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``<x_1, x_2>`` of every realisation at every output time, ``(len(times), R)`` (host
    NumPy), for the authors' scheme from ``x0`` ``(R, n, d)`` (NumPy or torch: runs there),
    and the times of the states reported: at output time ``t_k``, the first state with time
    ``>= t_k`` (as theirs)."""
    xp = bk.namespace(x0)
    x = xp.asarray(x0, copy=True)
    out = np.zeros((times.size, x.shape[0]))
    at = np.zeros(times.size)
    t, k = 0.0, 0
    while k < times.size:
        while k < times.size and t >= times[k] - 1e-12:
            out[k] = bk.to_numpy(bk.rows_dot(x[:, 0], x[:, 1]))
            at[k] = t
            k += 1
        s = bk.matmul(x, bk.swap_last(x))
        s -= 1.0
        s *= beta
        bk.exp_(s)
        s /= xp.sum(s, axis=-1, keepdims=True)
        x = x + step * bk.matmul(s, x)
        x /= xp.linalg.vector_norm(x, axis=-1, keepdims=True)
        t += step
    return out, at


def euler_cell(beta: float, rng: np.random.Generator, *, d: int, realizations: int,
               step: float, reduce: bool = True, backend: str = "numpy",
               device: str | None = None, dtype: str = "float64") -> xr.Dataset:
    """One beta of Figure 3 by the authors' scheme: the probability that ``<x_1, x_2> >=
    1 - 1e-3`` at :data:`TIMES`, from ``realizations`` starts of 32 i.i.d. uniform tokens
    on ``S^{d-1}``: the same starts as :func:`validation.phase_diagram.phase_cell` with the
    same ``rng`` (``reduce``: in ``min(d, 32)`` dimensions, exact by rotation invariance), or
    in ``d`` dimensions as theirs, at their cost (``reduce=False``)."""
    x = bk.get_backend(backend, device, dtype).asarray(
        sample_tokens(rng, realizations, 32, d, reduce=reduce))
    g12, _ = euler_pair_inner(x, beta, TIMES, step)
    return xr.Dataset({"probability": ("time", np.mean(g12 >= 1 - 1e-3, axis=-1))},
                      coords={"time": TIMES})
