r"""Frames of the fast sums (:mod:`meanfield.kernels.fastsum`, docs/particles.md "Fast
field"): the nodes' coordinates for the transforms, the finest accuracy ducc0 takes, and the
error estimate from the same sums in a second, rotated frame (the rotated pair), which the
global expansion and the re-centred one (:mod:`meanfield.kernels.fastsum_local`) share.

.. autosummary::
   NUFFT_EPS_MIN
   PAIR_SAFETY
   node_angles
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import ducc0
import numpy as np


def _finest_epsilon(candidates: tuple[float, ...] = (1e-14, 3e-14, 1e-13, 3e-13)) -> float:
    """The smallest of ``candidates`` that this ducc0 accepts for both kinds of transform used
    here (a 1-D NUFFT and the nonuniform SHT); older releases refuse ``epsilon <= 2e-13`` in
    double precision ("No appropriate kernel found"), 0.42 accepts ``1e-14``."""
    loc = np.array([[0.5, 0.5]])
    for eps in candidates:
        try:
            ducc0.nufft.nu2u(points=np.ones(1, complex), coord=np.zeros((1, 1)), forward=True,
                             epsilon=eps, nthreads=1, out=np.empty(4, complex))
            ducc0.sht.adjoint_synthesis_general(map=np.ones((1, 1)), spin=0, lmax=2, loc=loc,
                                                epsilon=eps, nthreads=1)
        except (RuntimeError, ValueError):
            continue
        return eps
    return candidates[-1]


NUFFT_EPS_MIN = _finest_epsilon()
"""Smallest ``epsilon`` used: the finest this ducc0 accepts in double precision
(:func:`_finest_epsilon`: ``1e-14`` on ducc0 0.42, ``3e-13`` on releases that refuse less); the
field's transforms run at ``max(tol EPS_FRACTION, NUFFT_EPS_MIN)``. At ``1e-14`` the
transforms cost what they do at ``3e-13`` (the S^2 hand-over state, 138 780 nodes, ``L =
30``: 0.078 s against 0.077 s per evaluation; 2 10^5 uniform tokens 0.058 s both) and their
error is 10-20 times smaller, which leaves no node of that state to the re-centred
expansions (9 260 at ``3e-13``, 2 348 at ``1e-13``)."""

def _sphere_angles(x: np.ndarray) -> np.ndarray:
    """``(colatitude, longitude)`` of unit vectors (n, 3), accurate at the poles
    (``atan2(rho, z)``, not ``arccos z``, which loses half the digits there)."""
    theta = np.arctan2(np.hypot(x[:, 0], x[:, 1]), x[:, 2])
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    return np.stack([theta, phi], axis=-1)


def node_angles(x: np.ndarray) -> np.ndarray:
    """The nodes' coordinates of the transforms: ``(colatitude, longitude)`` on ``S^2``
    (:func:`_sphere_angles`), the angle on ``S^1``."""
    return _sphere_angles(x) if x.shape[1] == 3 else np.arctan2(x[:, 1], x[:, 0])



# -- the rotated pair ------------------------------------------------------------------

PAIR_SAFETY = 4.0
"""``kappa`` of the paired estimate (:func:`_paired_estimate`). The error of a fast sum at a
point is the nonuniform transforms' error, a field of about uniform size over the sphere (the
transforms' interpolation error depends on where a point falls between the oversampled
grid's nodes, not on the measure). A second evaluation in a rotated frame puts every point
and node elsewhere on that grid: its error ``e'`` is a second draw from the same law, and
``|e - e'|`` samples the error's size at each point of the sample. The largest of at least
:data:`PAIR_MIN_SAMPLES` such samples is at least ``sqrt 2`` times the typical error, the
largest error over ``10^6`` points at most about ``5.5 / 1.7`` times the typical one for a
Gaussian law (``1.7 sqrt 2``: the lowest percentile of the maximum of 64 differences): a
factor 4 covers that with room, and keeps the estimate within a few times the error
(measured in tests/meanfield/kernels/test_fastsum_estimate.py)."""

PAIR_SAMPLE = 512
"""At most this many of the targets (an even stride through them) are evaluated again in the
rotated frame, with :data:`PAIR_PROBES` fixed probe points: the second frame costs one
adjoint transform at the nodes and a synthesis at ``<= 576`` points."""

PAIR_PROBES = 64
"""Fixed probe points (a Fibonacci lattice on ``S^2``, equispaced on ``S^1``) evaluated in
both frames, so that a few targets still give enough samples of the error."""

PAIR_MIN_SAMPLES = 16
"""Fewer samples whose ``Z`` is resolved (``|Z - Z'| <= 1e-3 Z``) than this: the a priori
estimate (:data:`NUFFT_ERROR`) is used instead (recorded as ``estimator="a priori"``)."""


@functools.lru_cache(maxsize=4)
def _rotation(d: int) -> np.ndarray:
    """The second frame's fixed rotation (``S^1``: by the golden angle; ``S^2``: the ``Q`` of
    a fixed Gaussian matrix, ``det = +1``), read-only."""
    if d == 2:
        a = math.pi * (3.0 - math.sqrt(5.0))
        r = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    else:
        r, upper = np.linalg.qr(np.random.default_rng(20261207).normal(size=(d, d)))
        r = r * np.sign(np.diag(upper))
        if np.linalg.det(r) < 0:
            r[:, 0] = -r[:, 0]
    r.setflags(write=False)
    return r


@functools.lru_cache(maxsize=4)
def _probes(d: int) -> np.ndarray:
    """:data:`PAIR_PROBES` fixed points of ``S^{d-1}`` (read-only)."""
    i = np.arange(PAIR_PROBES) + 0.5
    if d == 2:
        a = 2 * np.pi * i / PAIR_PROBES + 0.1
        p = np.stack([np.cos(a), np.sin(a)], axis=1)
    else:
        z = 1 - 2 * i / PAIR_PROBES
        phi = np.pi * (3.0 - math.sqrt(5.0)) * i
        r = np.sqrt(1 - z * z)
        p = np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    p.setflags(write=False)
    return p


def _sample_indices(n: int) -> np.ndarray:
    """An even stride of at most :data:`PAIR_SAMPLE` of ``n`` targets."""
    return np.arange(n) if n <= PAIR_SAMPLE else np.linspace(0, n - 1, PAIR_SAMPLE).astype(int)


class _Sums(NamedTuple):
    """Scaled ``Z``, ``grad G`` and ``Delta G`` (or ``None``) at a set of points."""

    Z: np.ndarray
    grad: np.ndarray
    lap: np.ndarray | None

    def take(self, idx: np.ndarray) -> _Sums:
        return _Sums(self.Z[idx], self.grad[idx], None if self.lap is None else self.lap[idx])

    def join(self, other: _Sums) -> _Sums:
        lap = None if self.lap is None else np.concatenate([self.lap, other.lap])  # type: ignore[list-item]
        return _Sums(np.concatenate([self.Z, other.Z]), np.concatenate([self.grad, other.grad]),
                     lap)


class _Errors(NamedTuple):
    """Error scales of one evaluation, each ``abs + rel Z(x)`` at a point: of ``Z``
    (``dz``), of the velocity's numerator (``nv``: ``Z |v - v_exact|`` for the normalised
    kinds, ``|grad G - exact|`` otherwise), of the divergence's (``nd``), and which estimator
    gave them."""

    dz: float
    nv: float
    nd: float
    estimator: str
    rz: float = 0.0
    rv: float = 0.0
    rd: float = 0.0


def _paired_estimate(plan: Any, first: _Sums, second: _Sums, *,
                     min_samples: int = PAIR_MIN_SAMPLES) -> _Errors | None:
    """The error scales from the same sums in two frames (:data:`PAIR_SAFETY`): ``kappa``
    times the largest difference over the samples, plus the expansion's own error
    (:func:`_kernel_errors`: the same in both frames, so not in the difference). The
    normalised kinds' velocity ``v = grad G / Z`` is compared as ``Z |v - v'|``, which keeps
    the errors of ``grad G`` and ``Z`` that cancel in the ratio (they are correlated: a
    transform error common to both sums); the divergence ``lap / Z - beta |v|^2`` likewise.
    ``None``: fewer than ``min_samples`` resolved samples. With ``second = first`` (and
    ``min_samples=1``) it gives the a priori part alone: the scales of a sum without
    transforms (:mod:`meanfield.kernels.fastsum_local`'s direct sums over a cap's cells)."""
    kappa = PAIR_SAFETY
    ak, bk, ag, bg, aq, bq = plan.kernel
    dZ = np.abs(first.Z - second.Z)
    ok = (first.Z > 0) & (second.Z > 0) & (dZ <= 1e-3 * first.Z)
    if np.count_nonzero(ok) < min_samples:
        return None
    dz = kappa * float(np.max(dZ)) + bk
    with_lap = first.lap is not None and second.lap is not None
    if not plan.normalized:
        nv = kappa * float(np.max(np.linalg.norm(first.grad - second.grad, axis=-1))) + bg
        nd = kappa * float(np.max(np.abs(first.lap - second.lap))) + bq if with_lap else 0.0  # type: ignore[operator]
        return _Errors(dz, nv, nd, "rotated pair", ak, ag, aq)
    Z1, Z2 = first.Z[ok], second.Z[ok]
    v1, v2 = first.grad[ok] / Z1[:, None], second.grad[ok] / Z2[:, None]
    # Z |v - v_exact| <= |grad G - exact| + |v| |Z - exact|, |v| <= 1
    nv = kappa * float(np.max(Z1 * np.linalg.norm(v1 - v2, axis=-1))) + bg + bk
    nd, rd = 0.0, 0.0
    if with_lap:
        d1 = first.lap[ok] / Z1 - plan.beta * np.sum(v1 * v1, axis=-1)  # type: ignore[index]
        d2 = second.lap[ok] / Z2 - plan.beta * np.sum(v2 * v2, axis=-1)  # type: ignore[index]
        lz = float(np.max(np.abs(first.lap[ok] / Z1)))  # type: ignore[index]
        # Z |d div| <= |d lap| + |lap / Z| |d Z| + 2 beta Z |v| |d v|
        nd = kappa * float(np.max(Z1 * np.abs(d1 - d2))) + bq + lz * bk + 2 * plan.beta * (bg + bk)
        rd = aq + lz * ak + 2 * plan.beta * (ag + ak)
    return _Errors(dz, nv, nd, "rotated pair", ak, ag + ak, rd)


def _estimate(err: _Errors, Z: np.ndarray, lap: np.ndarray | None,
              ref_div: float) -> np.ndarray:
    """Per point, the relative error estimate of the velocity (and, with ``lap``, of the
    divergence, relative to ``ref_div`` times the velocity's scale): the error scales over a
    lower bound ``Z - dz`` of the exact ``Z``."""
    zpos = np.maximum(Z - err.dz - err.rz * np.abs(Z), 1e-300)
    est = (err.nv + err.rv * np.abs(Z)) / zpos
    if lap is not None:
        est = np.maximum(est, (err.nd + err.rd * np.abs(Z)) / zpos / ref_div)
    return est
