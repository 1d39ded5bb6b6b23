"""The circle's transforms of the fast field (``meanfield.kernels.fastsum._sums_circle``): the points
are recognised as the nodes without a pass over them, and the shared plan and the batched
type-2 transform give the sums of separate transforms."""

from __future__ import annotations

import numpy as np

from meanfield import Model
from meanfield.kernels import fastsum


def _tokens(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 2))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_same_points() -> None:
    x = _tokens(50, 0)
    batch = x[None]
    assert fastsum._same_points(batch[0], batch[0])  # two views of one buffer
    assert fastsum._same_points(x, x.copy())  # equal values, other memory
    assert not fastsum._same_points(x, x[::-1])  # one buffer, other order
    assert not fastsum._same_points(x, x[:49])


def test_sums_match_separate_transforms() -> None:
    """Points = nodes (one plan for both transforms, ``Z + i G'`` and ``G''`` in one batched
    type-2 transform) against separate transforms written out here (a one-shot type-1, then
    two type-2 on their own plan), and points off the circle (a Runge-Kutta stage) against
    their projections: the same sums to the transforms' accuracy. Tolerance: NUFFT_ERROR's
    ``C eps max Z`` with ``eps = 3e-13``, ``C <= 2`` and ``max Z <= e^beta / beta`` (scaled
    sums, beta = 4), i.e. below 1e-11."""
    import ducc0

    n = 400
    x = _tokens(n, 1)
    w = np.random.default_rng(2).random(n)
    w /= w.sum()
    plan = fastsum._plan(Model(beta=4.0), 2, fastsum.DEFAULT_TOL)
    eps = max(fastsum.DEFAULT_TOL / 8, fastsum.NUFFT_EPS_MIN)
    Z, grad, lap = fastsum._sums_circle(x, x, w, plan.k, plan.g, plan.q, eps, True, 1)

    L = plan.L
    N = 2 * L + 2
    th = np.arctan2(x[:, 1], x[:, 0])[:, None]
    mu = ducc0.nufft.nu2u(points=w.astype(complex), coord=th, forward=True, epsilon=eps,
                          nthreads=1, out=np.empty(N, complex), fft_order=True)
    freq = np.fft.fftfreq(N, 1.0 / N)
    a = np.minimum(np.abs(freq).astype(int), L)
    keep = np.abs(freq) <= L  # the Nyquist slot is empty
    p2 = ducc0.nufft.plan(nu2u=False, coord=th, grid_shape=(N,), epsilon=eps, nthreads=1,
                          fft_order=True)
    z_ref = p2.u2nu(grid=keep * plan.k[a] * mu, forward=False).real
    dg_ref = p2.u2nu(grid=keep * 1j * freq * plan.g[a] * mu, forward=False).real
    lap_ref = p2.u2nu(grid=keep * plan.q[a] * mu, forward=False).real
    np.testing.assert_allclose(Z, z_ref, rtol=0, atol=1e-11)
    np.testing.assert_allclose(lap, lap_ref, rtol=0, atol=1e-11)
    np.testing.assert_allclose(grad, dg_ref[:, None] * np.stack([-x[:, 1], x[:, 0]], axis=1),
                               rtol=0, atol=1e-11)
    assert np.max(np.abs(grad)) > 1e-3  # a field 1e8 times the tolerance, not zeros

    off = fastsum._sums_circle(1.001 * x, x, w, plan.k, plan.g, plan.q, eps, True, 1)
    for got, want in zip(off, (Z, grad, lap)):  # the tangent direction (-y, x) / |x|
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)
