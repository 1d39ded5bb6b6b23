r"""Re-centred expansions for the points the global fast sums cannot vouch for
(docs/equations.md section 7, "Fast summation far from the mass"; docs/particles.md "Fast field").

The global expansion of :mod:`meanfield.kernels.fastsum` has an absolute error of about
``1e-14`` in the scaled sums: at a point that sees little mass (``Z(x)`` far below its
maximum: a token between clusters, a quadrature node where ``rho ~ 0``) that is a large
relative error. There, the targets are grouped in caps of chord radius ``r`` around centres
``c`` (:data:`LOCAL_RADIUS` ``= beta r``) and each cap gets an expansion of its own:

.. math::  e^{\beta <x, y>} = e^{\beta <c, y>} \, e^{<u, y>}, \qquad u = \beta (x - c),
           \quad |u| \le z = \beta r.

The first factor is a weight: the tilted measure ``mu_c = sum_j w_j e^{beta <c, y_j>}
delta_{y_j}`` carries the mass that the cap sees. The second is smooth in ``y`` with a
dynamic range of only ``e^{2z}``: its plane-wave expansion ``e^{<u, y>} = sum_l (2l + 1)
i_l(|u|) P_l(<u/|u|, y>)`` (``S^1``: ``sum_m I_m(|u|) e^{i m (phi_y - phi_u)}``) converges
like ``z^l / (2l + 1)!!``. Projecting ``mu_c`` on the degrees ``l <= P`` (one adjoint
nonuniform transform at the nodes, :func:`_tilted_coefficients`) and sampling the
projection on a Gauss–Legendre grid (``S^1``: ``2P + 1`` equispaced angles) gives
*equivalent sources* ``(g_k, W_k)``, exact for every integrand of degree ``<= P`` in ``y``;
the field at the cap's targets is their direct sum, ``O((P + 1)(2P + 1))`` terms per target
instead of ``m``. Cost per cap: one adjoint transform of the ``m`` nodes (``O(m)``) in each of
two frames, shared by all of its targets.

**Error.** Two parts, both checked at run time (:func:`local_sums`):

* the truncation: with ``Lambda_P <= P + 1`` the Lebesgue constant of the projection
  (``||K_P(., y)||_1 <= sqrt(4 pi) ||K_P(., y)||_2``), every sum is off by at most
  ``(P + 2)^2 (beta + d) tau_{P - 1}(z) sum_j |w_j'|`` with ``tau_P(z) = sum_{l > P} (2l + 1)
  i_l(z)`` (``S^1``: ``2 sum_{m > P} I_m(z)``), the tail of the expansion bounded on the
  cap's ball (the gradient and the Laplacian integrate ``y`` and ``<x, y>^2`` against it:
  one and two degrees more, the ``beta + d`` the Laplacian kernel's factor). ``P`` is the
  least degree that puts this under ``LOCAL_TRUNCATION`` of the smallest value a target can
  take (``e^{-z} sum_j w_j'`` for positive weights);
* the transforms' error, measured by the rotated pair of :mod:`meanfield.kernels.fastsum`
  (:data:`meanfield.kernels.fastsum_frames.PAIR_SAFETY` times the largest difference between the
  cap's sums in two frames, at its targets and :data:`LOCAL_PROBES` probes), plus the
  round-off the two frames share (the tilt's exponents, :func:`roundoff`: ``~7 beta 2^-53``
  relative, which the direct sum's exponents carry as well).

A target whose estimate still exceeds the tolerance stays with the direct sum.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import ducc0
import numpy as np
from scipy.special import ive, spherical_in

from meanfield.kernels import fastsum_frames as frames
from meanfield.kernels.fastsum_tree import TREE_SHARE, SourceTree

LOCAL_RADIUS = 3.0
"""``z = beta r``, the caps' radius in units of ``1 / beta`` (the cells' circumradius is about
``r``; each cap's ``z`` is measured from its targets). The transforms' error is amplified by
up to ``e^{2z}`` against the smallest value in a cap, partly in a way common to both frames
of the pair (the kernel's deconvolution, the same at every position); the number of caps
falls as ``z^{-(d - 1)}``, the equivalent sources grow as ``z^2``. Measured on the S^2
hand-over state (138 780 nodes, 9 248 targets, SA ``beta = 6``, the velocity and divergence;
one run, 2 cores): ``z = 2`` 24 caps 0.65 s, ``z = 3`` 12 caps 0.45 s, ``z = 4`` 3 caps 0.34
s, the largest relative error ``4e-15`` to ``7e-15`` and the estimate ``3e-14`` to ``9e-14``
in each case; but at ``z = 4`` on ``S^1`` (three caps at ``beta = 4``,
tests/meanfield/kernels/test_fastsum_local.py) the error reached 1.2 times the estimate,
which at ``z = 3`` it stays below on every set tested."""

LOCAL_TRUNCATION = 1e-4
"""The truncation bound's share of the tolerance (at most ``1e-14``): the degree ``P`` costs
little (the adjoint transforms' work is ``O(m)``), so the truncation is kept far below the
transforms' measured error."""

LOCAL_PROBES = 16
"""Probe points per cap (two rings at half and the full radius) added to its targets for the
rotated pair, so that a cap of one target still has :data:`meanfield.kernels.fastsum_frames.
PAIR_MIN_SAMPLES` samples of the transforms' error."""

LOCAL_PROBE_RADIUS = 0.5
"""The least radius of a cap, in units of ``1 / beta``, for its probes and its selection: the
probes must differ from the targets in every rounding (a lone target's cap has radius 0,
where all 16 probes would repeat its own arithmetic and the pair's difference would be one
draw: measured, the estimate then missed the error by 1.3 at one of 400 lone targets,
unnormalized ``beta = 100``); at ``0.5 / beta`` the kernel changes by at most ``e^{1/2}``, so
the probes see the targets' mass and their round-off is of the same scale."""

LOCAL_PAIR_SAMPLE = 32
"""At most this many of a cap's targets (an even stride) are evaluated in the second frame,
with its :data:`LOCAL_PROBES` probes."""

LOCAL_MIN_TARGETS = 4
"""A cap of fewer targets is summed directly over its cells (:mod:`meanfield.kernels.
fastsum_tree`, both frames) instead of by its expansion: the two adjoint transforms of a cap
cost about as much as direct sums at 3-4 targets (measured on the hand-over state: an adjoint
transform of 138 780 nodes 7 ms, the tilt 3 ms, the direct field 1.4 ms per target)."""

TREE_PAIRS_PER_NODE = 70.0
LONE_CAP_PAIRS = 2e5
CAP_PAIRS_PER_POINT = 30.0
"""The cost model of the choice between the re-centred sums and the direct field (where the
caller has one), in units of one term of the direct field (one target, one node, with the
divergence): building the tree costs ``70 m`` (so at most 70 points go to the direct sum
at once, :func:`direct_is_cheaper`), a cap of fewer than :data:`LOCAL_MIN_TARGETS` targets
(its selection and sums in two frames) ``2 10^5``, a larger cap (two adjoint transforms of its
selection) ``30`` per selected point; a cap whose ``k`` targets cost less directly (``k m``
terms) is left to the direct sum (:func:`local_sums`, ``direct_terms``). Measured on
benchmarks/bench_fastsum.py sections (e) and (f), ``beta = 10, 30``, 2 cores: the direct field
``1.4-1.5e-8`` s per term at ``m = 5 10^4 ... 10^6``, the tree ``~1e-6`` s per node, a lone
cap 2.5-3.3 ms, a cap of ``far_nodes`` ~30 ms at ``m = 2 10^5`` (selections of ~7 10^4
points). Both paths meet ``tol``; the model only picks the cheaper one."""


def direct_is_cheaper(n: int) -> bool:
    """Whether the direct field at ``n`` points over the tolerance costs less than building the
    tree (``n m <= 70 m`` terms, :data:`TREE_PAIRS_PER_NODE`)."""
    return n <= TREE_PAIRS_PER_NODE


LOCAL_EPS = frames.NUFFT_EPS_MIN
"""The adjoint transforms' accuracy: the finest ducc0 accepts (``1e-14`` on 0.42), at about
the cost of ``3e-13`` for these low degrees (10.3 against 10.7 ms for 138 780 nodes, ``P =
25``). The cap amplifies the coefficients' error by up to ``e^{2z}``; part of it (the
kernel's deconvolution) is common to both frames, which the pair cannot see: at ``3e-13``
that part reached ``1.7`` times the estimate on ``S^1`` (errors ``7e-14``), at ``1e-14`` it
stays below it (the coefficients' error measured against direct sums: ``S^1`` ``5e-15`` to
``7e-16``, ``S^2`` ``1.1e-15`` to ``3e-16`` of ``sum w``)."""

MAX_DEGREE = 200
"""The largest degree :func:`degree` tries (``z`` up to about 60)."""


@functools.lru_cache(maxsize=256)
def _tails(d: int, z: float) -> np.ndarray:
    """``tau_P(z)`` for ``P = 0 .. MAX_DEGREE``: the expansion's tail past degree ``P``
    (module docstring), scaled by ``e^{-z}`` for ``S^1`` (``ive``) and unscaled for ``S^2``
    (``spherical_in``; the caller scales)."""
    ell = np.arange(MAX_DEGREE + 64)
    with np.errstate(under="ignore", over="ignore"):
        if d == 2:
            terms = 2 * ive(ell, z) * math.exp(z)
        else:
            terms = (2 * ell + 1) * spherical_in(ell, z)
    tails = np.cumsum(terms[::-1])[::-1]  # sum_{l >= P}
    return tails[1 : MAX_DEGREE + 2]  # sum_{l > P}, P = 0 .. MAX_DEGREE


def truncation(d: int, z: float, P: int, beta: float) -> float:
    """The bound on the truncation error of every sum at degree ``P``, relative to ``sum_j
    |w_j'|`` (module docstring)."""
    tau = _tails(d, round(z, 12))[max(P - 1, 0)]
    return float((P + 2) ** 2 * (beta + d) * tau)


def degree(d: int, z: float, beta: float, tol: float) -> int | None:
    """The least ``P`` whose truncation bound is below ``LOCAL_TRUNCATION min(tol, 1e-14)
    e^{-z}`` (``None``: none up to :data:`MAX_DEGREE`)."""
    target = LOCAL_TRUNCATION * min(tol, 1e-14) * math.exp(-z)
    for P in range(2, MAX_DEGREE + 1):
        if truncation(d, z, P, beta) <= target:
            return P
    return None


def roundoff(beta: float) -> float:
    """The relative error of every term common to both frames of the pair: the tilt's
    exponent ``beta (<c, y_j> - <c, y_max>)`` off by ``<= 7 beta 2^-53`` (the dot product
    ``3 u``, the product and the difference over a range ``<= 2 beta`` ``2 u`` each, ``u =
    2^-53``), its exponential by one unit more; doubled, as :func:`meanfield.kernels.fastsum.
    _kernel_errors`' parts. The direct sum's exponent carries the same order of error."""
    return 2 * (7 * beta + 2) * 2.0**-53


def common_roundoff(beta: float, shift: float) -> float:
    """The relative error common to both frames of a direct sum over a cap's cells (each
    frame computes its products, exponents and proxies anew, :mod:`meanfield.kernels.
    fastsum_tree`): the shift ``e_0 - beta`` of the unnormalised kinds rounded once (``u
    |shift|``) and its exponential (``2 u``); doubled, as :func:`roundoff`."""
    return 2 * (abs(shift) + 2) * 2.0**-53


class _Grid(NamedTuple):
    """Equivalent-source positions ``(K, d)`` and what synthesises the weights there."""

    points: np.ndarray
    weights: np.ndarray  # quadrature weights (S^2) or 1 / (2P + 1) (S^1)


@functools.lru_cache(maxsize=64)
def _grid(d: int, P: int) -> _Grid:
    """The Gauss–Legendre grid of degree ``P`` (``S^2``: ``(P + 1) x (2P + 1)``, exact for
    degree ``2P + 1``) or ``2P + 1`` equispaced angles (``S^1``, exact for ``2P``)."""
    if d == 2:
        phi = 2 * np.pi * np.arange(2 * P + 1) / (2 * P + 1)
        pts = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        q = np.full(2 * P + 1, 1.0 / (2 * P + 1))
    else:
        th = ducc0.misc.GL_thetas(P + 1)
        ph = 2 * np.pi * np.arange(2 * P + 1) / (2 * P + 1)
        T, F = np.meshgrid(th, ph, indexing="ij")
        pts = np.stack([np.sin(T) * np.cos(F), np.sin(T) * np.sin(F), np.cos(T)],
                       axis=-1).reshape(-1, 3)
        q = np.repeat(ducc0.misc.GL_weights(P + 1, 2 * P + 1), 2 * P + 1)
    for a in (pts, q):
        a.setflags(write=False)
    return _Grid(pts, q)


def _tilted_coefficients(angles: np.ndarray, w: np.ndarray, d: int, P: int, eps: float,
                         nthreads: int) -> np.ndarray:
    """The equivalent weights ``W_k`` on :func:`_grid` of the measure ``sum_j w_j
    delta_{y_j}`` (``angles``: ``(theta, phi)`` on ``S^2``, ``phi`` on ``S^1``) projected on
    the degrees ``<= P``: ``W_k = q_k (proj_P mu)(g_k)``."""
    grid = _grid(d, P)
    if d == 2:
        N = 2 * P + 1
        a = ducc0.nufft.nu2u(points=w.astype(complex), coord=angles[:, None], forward=True,
                             epsilon=eps, nthreads=nthreads, out=np.empty(N, complex),
                             fft_order=True)  # a_m = sum_j w_j e^{-i m phi_j}, m = 0..P, -P..-1
        # (proj mu)(phi_k) / (2 pi) = (1 / 2 pi) sum_m a_m e^{i m phi_k}; times the trapezoid
        # weight 2 pi / N: W_k = (1 / N) sum_m a_m e^{i m phi_k} = ifft(a)_k
        return np.fft.ifft(a).real * N * grid.weights
    alm = ducc0.sht.adjoint_synthesis_general(map=w[None], spin=0, lmax=P, loc=angles,
                                              epsilon=eps, nthreads=nthreads)
    mp = ducc0.sht.synthesis_2d(alm=alm, spin=0, lmax=P, geometry="GL", ntheta=P + 1,
                                nphi=2 * P + 1, nthreads=nthreads)[0]
    return mp.ravel() * grid.weights


def _equivalent_sums(x: np.ndarray, c: np.ndarray, g: np.ndarray, W: np.ndarray,
                     beta: float, shift: float, laplacian: bool) -> frames._Sums:
    """Scaled ``Z``, ``grad G`` and ``Delta G`` at ``x`` of the equivalent sources ``(g, W)``
    of a tilted measure: ``sum_k W_k e^{beta <x - c, g_k> + shift}`` (``shift = e_0 -
    beta``, the tilt's normalisation)."""
    d = x.shape[1]
    t = x @ g.T
    E = np.exp(beta * (t - (g @ c)[None]) + shift) * W
    Z = E.sum(axis=1)
    grad = E @ g
    grad -= np.sum(grad * x, axis=1)[:, None] * x
    lap = (E * (beta * (1 - t * t) - (d - 1) * t)).sum(axis=1) if laplacian else None
    return frames._Sums(Z, grad, lap)


def _caps(x: np.ndarray, r: float) -> list[np.ndarray]:
    """The targets' indices grouped in cells of circumradius about ``r`` (``S^2``: the cube's
    six faces, each an ``m x m`` grid in the gnomonic coordinates; ``S^1``: arcs)."""
    n, d = x.shape
    if d == 2:
        m = max(1, round(math.pi / r))
        phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        label = np.minimum((phi / (2 * np.pi) * m).astype(int), m - 1)
    else:
        m = max(1, round(math.sqrt(2.0) / r))
        rows = np.arange(n)
        ax = np.argmax(np.abs(x), axis=1)
        top = np.abs(x[rows, ax])
        a = x[rows, (ax + 1) % 3] / top
        b = x[rows, (ax + 2) % 3] / top
        ia = np.minimum(((a + 1) / 2 * m).astype(int), m - 1)
        ib = np.minimum(((b + 1) / 2 * m).astype(int), m - 1)
        face = 2 * ax + (x[rows, ax] > 0)
        label = (face * m + ia) * m + ib
    order = np.argsort(label, kind="stable")
    _, start = np.unique(label[order], return_index=True)
    return np.split(order, start[1:])


def _cap_probes(c: np.ndarray, rad: float) -> np.ndarray:
    """:data:`LOCAL_PROBES` points of the cap of centre ``c`` and chord radius ``rad``."""
    d = len(c)
    if d == 2:
        arc = 2 * np.arcsin(np.clip(np.linspace(-1, 1, LOCAL_PROBES) * rad / 2, -1, 1))
        e = np.array([-c[1], c[0]])
        return np.cos(arc)[:, None] * c + np.sin(arc)[:, None] * e
    e1 = np.cross(c, [1.0, 0.0, 0.0] if abs(c[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(c, e1)
    half = LOCAL_PROBES // 2
    psi = 2 * np.pi * np.arange(half) / half
    rings = []
    for share, turn in ((0.5, 0.0), (1.0, np.pi / half)):
        alpha = 2 * math.asin(min(share * rad / 2, 1.0))
        u = np.cos(psi + turn)[:, None] * e1 + np.sin(psi + turn)[:, None] * e2
        rings.append(math.cos(alpha) * c + math.sin(alpha) * u)
    return np.concatenate(rings)


class LocalResult(NamedTuple):
    """:func:`local_sums`' result at the targets: the scaled sums (``NaN`` where a cap was
    not computed), each target's relative error estimate (``inf`` there) and how many caps
    were computed."""

    sums: frames._Sums
    estimate: np.ndarray
    caps: int


def local_sums(plan: Any, points: np.ndarray, nodes: np.ndarray, w: np.ndarray, *,
               laplacian: bool, tol: float, eps: float = LOCAL_EPS, nthreads: int = 0,
               min_targets: int = 1, angles: np.ndarray | None = None,
               turned: np.ndarray | None = None, direct_terms: int | None = None) -> LocalResult:
    """The scaled sums ``Z``, ``grad G``, ``Delta G`` of :mod:`meanfield.kernels.fastsum` at
    ``points`` (n, d) of ``sum_j w_j delta_{nodes_j}`` by the re-centred expansions of the
    module docstring (exponential kernels: softmax, unnormalized, l2), with the per-target
    relative estimate of :func:`meanfield.kernels.frames._estimate`. Caps of fewer than
    ``min_targets`` targets are left out (``NaN``, estimate ``inf``). ``angles``, ``turned``:
    the nodes' :func:`meanfield.kernels.frames.node_angles` in the two frames, where the
    caller has them. ``direct_terms``: where the caller has a direct sum, its cost per target
    (the number of nodes); a cap that costs less there (:data:`CAP_PAIRS_PER_POINT`) is left
    out for it. The tree is built at the first cap that needs it."""
    n, d = points.shape
    beta = plan.beta
    Z = np.full(n, np.nan)
    grad = np.full((n, d), np.nan)
    lap = np.full(n, np.nan) if laplacian else None
    est = np.full(n, np.inf)
    R = frames._rotation(d)
    ref_div = 4 * beta + d - 1
    computed = 0
    positive = bool(np.all(w >= 0))
    tree: SourceTree | None = None
    eta = TREE_SHARE * min(tol, 1e-14)
    a = roundoff(beta)
    for idx in _caps(points, LOCAL_RADIUS / beta):
        if len(idx) < min_targets:
            continue
        x = points[idx]
        c = x.sum(axis=0)
        c /= np.linalg.norm(c)
        # a cap of one target (or of coincident ones) probed at radius 0 would sample one
        # point's round-off 17 times: the probes' rings stay at least LOCAL_PROBE_RADIUS / beta out
        rad = max(float(np.max(np.linalg.norm(x - c, axis=1))), LOCAL_PROBE_RADIUS / beta)
        z = beta * rad
        P = degree(d, z, beta, tol)
        if P is None:
            continue
        k = len(idx)
        lone = k < LOCAL_MIN_TARGETS
        if direct_terms is not None and lone and k * direct_terms <= LONE_CAP_PAIRS:
            continue  # cheaper directly
        if positive:
            if tree is None:
                tree = SourceTree(nodes, w, beta, R)
            sel = tree.select(c, rad, eta)
            if (direct_terms is not None and not lone
                    and k * direct_terms <= CAP_PAIRS_PER_POINT * len(sel.points)):
                continue  # cheaper directly
            ys, ws, ys_r, ws_r = sel.points, sel.weights, sel.turned_points, sel.turned_weights
            tree_logs = (sel.log_bound_z, sel.log_bound_grad, sel.log_bound_lap)
        else:
            ys, ws, ys_r, ws_r = nodes, w, None, None
            tree_logs = (-math.inf, -math.inf, -math.inf)
        if ys.shape[0] == 0:
            continue
        e = beta * (ys @ c)
        e0 = float(np.max(e))
        tilt = np.exp(e - e0)
        wt = ws * tilt
        mass = float(np.abs(ws) @ tilt)
        # the normalised kinds need only ratios: the sums at the tilt's own scale, which keeps
        # them representable where e^{beta (t - 1)} underflows (beta = 300, far from all mass)
        shift = 0.0 if plan.normalized else e0 - beta
        bz, bg, bq = (math.exp(t - e0 + shift) if t > -math.inf else 0.0 for t in tree_logs)
        at = np.concatenate([x, _cap_probes(c, rad)])  # the targets and the probes
        c_r = R @ c
        # the tilt in the rotated frame, rounded anew on the selection's points there
        wt_r = wt if ys_r is None or ws_r is None else ws_r * np.exp(beta * (ys_r @ c_r) - e0)
        if lone and ys_r is not None and ws_r is not None:
            # a lone target: the direct sum over the cap's cells, its round-off measured by
            # the same sum in the rotated frame (every product and exponent rounded anew)
            first = _equivalent_sums(at, c, ys, wt, beta, shift, laplacian)
            turned_sums = _equivalent_sums(at @ R.T, c_r, ys_r, wt_r, beta, shift, laplacian)
            second = turned_sums._replace(grad=turned_sums.grad @ R)
            # what both frames share: the scale's exponent, rounded once
            common = common_roundoff(beta, shift)
            local_plan = plan._replace(kernel=(common, bz, common, bg, common * (beta + d), bq))
            err = frames._paired_estimate(local_plan, first, second)
        else:
            if tree is not None:
                ang, turn = tree.angles(sel, False), tree.angles(sel, True)
            else:
                ang = frames.node_angles(nodes) if angles is None else angles
                turn = frames.node_angles(nodes @ R.T) if turned is None else turned
            grid = _grid(d, P)
            sample = np.concatenate([np.arange(k) if k <= LOCAL_PAIR_SAMPLE else
                                     np.linspace(0, k - 1, LOCAL_PAIR_SAMPLE).astype(int),
                                     k + np.arange(LOCAL_PROBES)])
            first = _equivalent_sums(at, c, grid.points, _tilted_coefficients(
                ang, wt, d, P, eps, nthreads), beta, shift, laplacian)
            second = _equivalent_sums(at[sample], c, grid.points @ R, _tilted_coefficients(
                turn, wt_r, d, P, eps, nthreads), beta, shift, laplacian)
            bound = truncation(d, z, P, beta) * mass * math.exp(shift)
            local_plan = plan._replace(kernel=(a, bound + bz, a, bound + bg, a * (beta + d),
                                               bound + bq))
            err = frames._paired_estimate(local_plan, first.take(sample), second)
        if err is None:
            continue
        Z[idx] = first.Z[:k]
        grad[idx] = first.grad[:k]
        lap_k = None if first.lap is None else first.lap[:k]
        if lap is not None:
            lap[idx] = lap_k
        est[idx] = frames._estimate(err, first.Z[:k], lap_k, ref_div)
        computed += 1
    return LocalResult(frames._Sums(Z, grad, lap), est, computed)
