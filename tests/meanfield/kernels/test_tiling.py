"""The tiled pass of the kernels (meanfield.kernels.tiling.logit_tiles) and the zonal sums of the
fast summation (meanfield.kernels.fastsum.zonal_sums) that the energy's fast partition uses."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield import Model
from meanfield.kernels import fastsum
from meanfield.kernels.tiling import Tiling, logit_tiles, value_columns, weighted_sum

RNG = np.random.default_rng(3)


@pytest.mark.parametrize(("B", "n", "m", "d", "limit"), [
    (3, 40, 40, 3, 2**28),  # whole systems per tile (batched)
    (2, 300, 280, 2, 2**14),  # row tiles, broadcast products (d <= 4, long rows)
    (2, 50, 60, 8, 2**12),  # row tiles, BLAS products
    (1, 3, 5000, 3, 2**12),  # one row longer than a tile (512 entries): a tile per row
])
def test_logit_tiles_cover_every_row_once_with_the_logits(B: int, n: int, m: int, d: int,
                                                          limit: int) -> None:
    """Every row of every batch appears in exactly one tile, with ``q k^T`` to round-off (a
    sum of ``d`` products of numbers of size 1: a few ulps, gate ``1e-14``); a row longer
    than the tile's entries still gets a tile of its own (the direct field of one point
    against 10^6 nodes failed on this before)."""
    q, k = RNG.normal(size=(B, n, d)), RNG.normal(size=(B, m, d))
    kt = np.ascontiguousarray(np.swapaxes(k, 1, 2))
    seen = np.zeros((B, n), dtype=int)
    full = q @ kt
    for bs, rs, S in logit_tiles(q, kt, Tiling(limit)):
        assert S.shape == (bs.stop - bs.start, rs.stop - rs.start, m)
        np.testing.assert_allclose(S, full[bs, rs], rtol=0, atol=1e-14 * d)
        seen[bs, rs] += 1
    assert np.all(seen == 1)


def test_logit_tiles_take_a_column_prefix_and_keep_tiles_on_request() -> None:
    """``columns`` cuts each tile to a prefix of the keys (the causal mask's ``j <= i``);
    ``reuse=False`` gives each tile its own array, so that the tiles can be kept."""
    q = RNG.normal(size=(1, 300, 3))
    kt = np.ascontiguousarray(np.swapaxes(q, 1, 2))
    tiling = Tiling(2**14)
    kept = list(logit_tiles(q, kt, tiling, columns=lambda bs, rs: rs.stop, reuse=False))
    assert len(kept) > 1
    for bs, rs, S in kept:
        assert S.shape[-1] == rs.stop
        np.testing.assert_allclose(S, (q @ kt)[bs, rs, : rs.stop], rtol=0, atol=3e-14)
    assert len({id(S.base if S.base is not None else S) for *_, S in kept}) == len(kept)
    reused = [S for *_, S in logit_tiles(q, kt, tiling)]
    assert len({S.__array_interface__["data"][0] for S in reused}) == 1  # one buffer


@pytest.mark.parametrize("dv", [2, 3, 7])
def test_weighted_sum_by_columns_is_the_product(dv: int) -> None:
    """``S v`` one component at a time (small ``dv``, long rows) or by ``matmul``: the same
    sums to round-off (300 terms of size 1: gate ``1e-12``)."""
    S, v = RNG.random((2, 5, 300)), RNG.normal(size=(2, 300, dv))
    vcols = value_columns(v)
    assert (vcols is None) == (dv > 4)
    np.testing.assert_allclose(weighted_sum(S, v, vcols), S @ v, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
def test_zonal_sums_are_the_scaled_partition_function(d: int) -> None:
    """``sum_j w_j e^{beta (<x_i, x_j> - 1)}`` by fast summation against the direct sum: the
    sums are at most 1 and the coefficients are accurate to ``DEFAULT_TOL / 8`` relative
    (module docstring of fastsum; the band-limit tail is below ``DEFAULT_TOL``): gate
    ``1e-10``."""
    x = RNG.normal(size=(2, 200, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    w = RNG.random((2, 200))
    w /= w.sum(axis=1, keepdims=True)
    beta = 4.0
    direct = np.einsum("bij,bj->bi", np.exp(beta * (x @ np.swapaxes(x, 1, 2) - 1.0)), w)
    np.testing.assert_allclose(fastsum.zonal_sums(Model(beta), x, w), direct, rtol=0, atol=1e-10)
