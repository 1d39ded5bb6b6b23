"""Tiles of the ``n x n`` attention weights: the memory bound and the two products of a tile.

.. autosummary::
   Tiling
   block_for
   logit_tiles
   tile_logits
   causal_mask
   value_columns
   weighted_sum

The weights never exist at once unless they fit: rows are processed in tiles whose size is set
by a memory limit (:class:`Tiling`), and every tile is two matrix products (the logits
``q k^T`` and ``A v``) plus elementwise work done in place (docs/equations.md section 2).
Every tiled pass of the package (the row kernels, Sinkhorn, the energy of a weighted measure,
the particles' energy gradient) is a loop over :func:`logit_tiles`: the logits of each tile,
written into one reused buffer, then the pass's own elementwise work and
:func:`weighted_sum`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from meanfield import backend as bk

DEFAULT_MEMORY_LIMIT = 256 * 2**20
"""Default bound (bytes) on the temporary ``n x n`` attention tiles: 256 MiB."""

_DEFAULT_BLOCK = 4 * 2**20
"""Preferred tile size (bytes) for memory-bound tiles (small ``d``): tiles of a few MB stay in
cache between the passes (logits, shift, exp) and the second product."""

_LARGE_BLOCK = 64 * 2**20
"""Preferred tile size (bytes) when the products are compute-bound (``d`` above
:data:`_SMALL_D`): few large BLAS calls, since every call synchronises the BLAS threads
(costly when other processes share the cores)."""


@dataclass(frozen=True)
class Tiling:
    """How the ``(B, n, m)`` weight array is cut into ``(b, r, m)`` tiles.

    Args:
        memory_limit: bytes allowed for temporaries of size ``b * r * m`` (all buffers).
        buffers: how many such temporaries a kernel holds at once.
        block: preferred bytes per tile (when the limit allows).
    """

    memory_limit: int = DEFAULT_MEMORY_LIMIT
    buffers: int = 1
    block: int = _DEFAULT_BLOCK
    itemsize: int = 8

    def __post_init__(self) -> None:
        if not (isinstance(self.memory_limit, (int, np.integer)) and self.memory_limit > 0):
            msg = f"memory_limit must be a positive number of bytes, got {self.memory_limit!r}"
            raise ValueError(msg)

    def entries(self) -> int:
        """Entries (of ``itemsize`` bytes) per tile: ``block``, capped by the memory limit."""
        limit = self.memory_limit // (self.itemsize * self.buffers)
        return max(1, min(limit, self.block // self.itemsize))

    def tile_entries(self, B: int, n: int, m: int) -> int:
        """The entries of the largest tile :meth:`tiles` gives: at most :meth:`entries`, except
        that a tile holds at least one whole row (``m`` entries)."""
        return min(B * n * m, max(self.entries(), m))

    def tiles(self, B: int, n: int, m: int) -> Iterator[tuple[slice, slice]]:
        """``(batch slice, row slice)`` pairs covering ``B x n`` rows of length ``m``."""
        per = self.entries()
        if n * m <= per:
            b = max(1, per // (n * m))
            for b0 in range(0, B, b):
                yield slice(b0, min(B, b0 + b)), slice(0, n)
            return
        r = max(1, per // max(m, 1))
        for b0 in range(B):
            for r0 in range(0, n, r):
                yield slice(b0, b0 + 1), slice(r0, min(n, r0 + r))

def causal_mask(r0: int, r1: int, m: int, like: Any) -> Any:
    """``True`` where column ``j > i`` (masked), rows ``i = r0..r1-1``, columns ``0..m-1``."""
    xp = bk.namespace(like)
    dev = bk.device_of(like)
    return xp.arange(m, device=dev)[None, :] > xp.arange(r0, r1, device=dev)[:, None]


_SMALL_D = 4
"""Up to this many components, and for rows of at least :data:`_LONG_ROW` entries, the two
products (logits ``q k^T`` and ``A v``) are formed without BLAS (broadcasting, ``einsum``):
they are memory-bound, and a multi-threaded BLAS call gains nothing while it stalls badly
(10-30x measured) when other processes share the cores. Short rows (small ``n``, large
batches) use ``matmul``, whose small products are fast and single-threaded."""

_LONG_ROW = 256


def block_for(d: int) -> int:
    """Preferred tile bytes for inner dimension ``d``: small (cache) when memory-bound, large
    (few BLAS calls) when compute-bound."""
    return _DEFAULT_BLOCK if d <= _SMALL_D else _LARGE_BLOCK


def tile_logits(q: Any, kt: Any, out: Any) -> Any:
    """``out = q @ kt`` for ``q`` (b, r, d), ``kt`` (b, d, m) (NumPy or torch)."""
    d = q.shape[-1]
    if d > _SMALL_D or kt.shape[-1] < _LONG_ROW:
        return bk.matmul(q, kt, out=out)
    bk.multiply(q[:, :, 0, None], kt[:, None, 0, :], out=out)
    for c in range(1, d):
        out += q[:, :, c, None] * kt[:, None, c, :]
    return out


def logit_tiles(
    q: Any,
    kt: Any,
    tiling: Tiling,
    *,
    columns: Callable[[slice, slice], int] | None = None,
    reuse: bool = True,
) -> Iterator[tuple[slice, slice, Any]]:
    """The logits ``S_ij = <q_i, k_j>`` tile by tile: ``(batch slice, row slice, S)`` for
    every tile of ``tiling.tiles(B, n, m)``, ``S = q[bs, rs] @ kt[bs, :, :mm]`` of shape
    ``(b, r, mm)`` (NumPy or torch, the dtype and device of ``q``).

    Args:
        q: ``(B, n, d)`` queries (any factor ``beta`` already applied).
        kt: ``(B, d, m)`` the keys transposed.
        tiling: the tiles; the buffer of this function is one of ``tiling.buffers``.
        columns: ``columns(bs, rs) -> mm``, the columns ``0..mm-1`` a tile needs (a causal
            prefix; the rows ``rs`` attend to no later column); ``None``: all ``m``.
        reuse: write every tile into one buffer, overwritten by the next tile (the caller
            works on ``S`` in place); ``False``: each tile its own array (to be kept).
    """
    B, n, _ = q.shape
    m = kt.shape[-1]
    size = tiling.tile_entries(B, n, m)
    buf = bk.empty(q, (size,)) if reuse else None
    for bs, rs in tiling.tiles(B, n, m):
        mm = m if columns is None else columns(bs, rs)
        shape = (bs.stop - bs.start, rs.stop - rs.start, mm)
        S = bk.empty(q, shape) if buf is None else buf[: shape[0] * shape[1] * mm].reshape(shape)
        yield bs, rs, tile_logits(q[bs, rs], kt[bs, :, :mm], S)


def value_columns(v: Any, *, components: int | None = None) -> Any | None:
    """The values ``v`` (B, m, dv) as columns ``(dv, B, m)`` for :func:`weighted_sum` where
    one component at a time beats BLAS (at most 4 components, rows of at least 256 entries;
    see :data:`_SMALL_D`), else ``None``. ``components``: the count that decides (default
    ``dv``; the row kernels count the values proper, not the columns they append)."""
    dv = v.shape[-1] if components is None else components
    if dv <= _SMALL_D and v.shape[1] >= _LONG_ROW:
        return bk.contiguous(bk.namespace(v).permute_dims(v, (2, 0, 1)))
    return None


def weighted_sum(S: Any, v: Any, vcols: Any | None) -> Any:
    """``S @ v`` for ``S`` (b, r, m), ``v`` (b, m, dv); ``vcols`` (dv, b, m) (small ``dv``,
    long rows, :func:`value_columns`): one component at a time without BLAS."""
    if vcols is None or S.shape[-1] < _LONG_ROW:
        return bk.matmul(S, v)
    out = bk.empty(S, tuple(S.shape[:2]) + (vcols.shape[0],))
    for c in range(vcols.shape[0]):
        out[..., c] = bk.einsum("brm,bm->br", S, vcols[c])
    return out

