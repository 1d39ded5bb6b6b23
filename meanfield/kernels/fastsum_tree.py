r"""Source cells for the re-centred sums (docs/equations.md section 7, "Fast summation far
from the mass"): a tree of the nodes, pruned by magnitude and compressed by Chebyshev proxies,
so that a cap of :mod:`meanfield.kernels.fastsum_local` (or a lone target) sums over a number of
points that does not grow with the number of nodes.

**The tree.** On ``S^2`` the cube's six faces, each a quadtree in the gnomonic coordinates
(level ``l``: ``2^l x 2^l`` squares per face); on ``S^1`` arcs (level ``l``: ``2^l`` arcs, from
level 2). The nodes are sorted by the Morton code of their finest cell, so every cell of every
level is a contiguous range. Each cell ``B`` has its mass ``W_B = sum_{y in B} w_y`` (the
weights are ``>= 0``), a tangent frame ``(s, e_1, e_2)`` at its geometric centre, the box
``[a_-, a_+] x [b_-, b_+]`` of its nodes' tangent coordinates ``a = <y, e_1>``, ``b = <y,
e_2>`` (``y = a e_1 + b e_2 + sqrt(1 - a^2 - b^2) s``), the point ``s'`` of the box's centre and
the nodes' largest distance ``rho_B`` from it.

**Bounds at a cap** of centre ``c`` and radius ``r`` (its targets ``x`` have ``|x - c| <=
r``): ``|<x, y> - <c, s'>| <= r + rho_B``, so the cell adds between ``W_B e^{beta (<c, s'> - r
- rho_B)}`` and ``U_B = W_B e^{beta (<c, s'> + r + rho_B)}`` to every target's ``Z``; the
leaves' lower bounds add up to ``Lambda <= Z(x)``.

* A cell with ``U_B <= eta Lambda / (2 K)`` is left out (``K`` the number of terminal cells,
  at most :data:`CELL_SHARES`); the sum of the left-out ``U_B`` is the pruning bound.
* A cell is replaced by its **proxies**: the ``q^{d-1}`` Chebyshev points (second kind) of its
  box, with weights ``W_k = sum_y w_y l_k(a_y, b_y)`` (``l_k`` the tensor Lagrange basis), so
  ``sum_k W_k f(g_k) = sum_y w_y (I_q f)(y)`` for every ``f``; ``W = A M A^T`` from the
  cell's Chebyshev moments ``M_ab = sum_y w_y T_a(t_y) T_b(u_y)`` (:func:`_lobatto_map`), so
  one pass over its nodes serves every order the caps ask for. For ``f = e^{beta <x, y>}`` the
  interpolation error is bounded through the Bernstein polyellipse ``E_R^2`` of the box
  (Trefethen, *Approximation Theory and Approximation Practice*, Theorem 8.2, in each variable):

  .. math::  \|f - I_q f\|_B \le (1 + \Lambda_{q-1})^{d-2} \frac{4 M_R R^{1-q}}{R - 1},
             \qquad M_R \le e^{\beta <x, s'>} e^{\beta D_R},

  with ``Lambda_n <= (2/pi) log(n + 1) + 1`` the Lebesgue constant and ``D_R`` a bound on
  ``|<x, y - s'>|`` over the complex polyellipse (:func:`_excursion`: the tangent part
  ``sqrt(delta_a^2 + delta_b^2)``, ``delta`` the ellipses' semi-major axes, and the change of
  ``sqrt(1 - a^2 - b^2)``). The gradient's and the Laplacian's integrands carry ``|y| <= Y``
  and ``beta (1 + t^2) + (d - 1) |t|``, ``|t| <= Y``, more. A cell is compressed at the least
  ``q`` whose bound is below ``eta Lambda max(U_B / U, 1 / K) / 2`` (``U`` the terminal
  cells' ``sum U_B``), where that is fewer points than it has; the sum of the compressed cells'
  bounds is the compression bound.
* Otherwise the cell is refined; a leaf (or a cell of at most :data:`RAW_MAX` nodes) gives its
  nodes.

The thresholds aim both bounds at about ``eta Lambda`` (:data:`TREE_SHARE` ``min(tol,
1e-14)``), far below the sums' measured error; the bounds reported are the sums over the cells
actually left out or compressed, whatever their number. They are a priori and the same in
every frame, so :mod:`meanfield.kernels.fastsum_local` adds them to its estimate. The proxies
are computed anew in the rotated frame of the pair, so that their round-off is measured with
the rest. A cap then sums over its near cells' nodes and far cells'
few proxies: their number depends on the measure's shape and on ``beta``, not on the number
of nodes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from meanfield.kernels.fastsum_frames import node_angles

TREE_SHARE = 1e-3
"""``eta / min(tol, 1e-14)``: the share of the tolerance the tree's a priori bounds (pruning
and compression, each at most ``eta / 2`` of ``Lambda <= Z``) may take."""

LEAF_RADIUS = 1.0
"""The finest cells' size in units of ``1 / beta``: a leaf's half side is about ``1 /
beta`` (its nodes' kernels vary by ``e^{~2}`` over it), at most :data:`MAX_LEVEL` levels."""

MAX_LEVEL = 12
"""The deepest level (``S^2``: ``4096^2`` squares per face, sides ``~4e-4``)."""

CELL_SHARES = 64
"""The most shares the thresholds split ``eta Lambda`` into (module docstring): with ``1 / K``
for ``K`` up to ``10^5`` terminal cells, the thresholds would ask far cells for accuracy that no
proxy set of fewer points than they have reaches (measured on ``far_nodes`` of
benchmarks/bench_fastsum.py, ``n = 5 10^4``, ``beta = 30``: 21 159 points per cap at ``1 / K``,
19 194 at ``1 / 64``); the bounds reported are the actual sums either way."""

RAW_MAX = 8
"""A cell of at most this many nodes gives them as they are (exact, and no more points than
the smallest proxy set)."""

PROXY_ORDERS = (2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24)
"""The Chebyshev orders ``q`` (points per direction) tried, smallest first."""

ELLIPSES = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0])
"""The Bernstein parameters ``R`` over which each cell's bound is minimised."""


def _lebesgue(q: int) -> float:
    """The Chebyshev (second kind) Lebesgue constant's bound at ``q`` points."""
    return 2 / math.pi * math.log(q) + 1


def _lobatto_map(q: int) -> tuple[np.ndarray, np.ndarray]:
    """``(A, x)``: the ``q`` Chebyshev points of the second kind ``x_j = cos(pi j / N)``, ``N =
    q - 1``, and the matrix with ``l_j(t) = sum_k A[j, k] T_k(t)`` for their Lagrange basis
    (discrete orthogonality: ``A[j, k] = (2 / N) g_j g_k T_k(x_j)``, ``g`` = 1/2 at the ends,
    1 inside)."""
    N = q - 1
    j = np.arange(q)
    x = np.cos(np.pi * j / N)
    g = np.ones(q)
    g[[0, -1]] = 0.5
    A = (2 / N) * g[:, None] * g[None, :] * np.cos(np.pi * np.outer(j, j) / N)
    return A, x


def _chebyshev_rows(t: np.ndarray, q: int) -> np.ndarray:
    """``T_k(t)`` for ``k < q`` (rows) at ``t`` in ``[-1, 1]`` (three-term recurrence; error
    ``O(k u)``)."""
    T = np.empty((q, t.size))
    T[0] = 1.0
    if q > 1:
        T[1] = t
    two_t = 2 * t
    for k in range(2, q):
        np.multiply(two_t, T[k - 1], out=T[k])
        T[k] -= T[k - 2]
    return T


def _excursion(centre: np.ndarray, half: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(D_R, S_R)`` per cell and ``R``: ``D_R`` bounds ``|<x, y(a, b) - s'>|`` for real unit
    ``x`` and complex ``(a, b)`` in the polyellipse of parameter ``R`` around the box
    (``centre``, ``half``: (K, p)); ``S_R`` bounds ``|a^2 + b^2|`` there (``>= 1``: no bound).

    ``y - s' = da e_1 + db e_2 + (sqrt(1 - w) - sqrt(1 - w')) s``, ``w = a^2 + b^2``: the first
    part is at most ``sqrt(|da|^2 + |db|^2)``, ``|da| <= delta = half (R + 1/R) / 2``; the
    second ``|w - w'| / (Re sqrt(1 - w) + sqrt(1 - w'))`` with ``Re sqrt(1 - w) >= sqrt((1 -
    |w|) / 2)`` and ``|w - w'| <= sum delta (2 |a'| + delta)``."""
    delta = half[:, None, :] * ((R + 1 / R) / 2)[None, :, None]  # (K, nR, p)
    ac = np.abs(centre)[:, None, :]
    S = np.sum((ac + delta) ** 2, axis=-1)
    S0 = np.sum(centre**2, axis=-1)[:, None]
    dw = np.sum(delta * (2 * ac + delta), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.sqrt(np.maximum(1 - S, 0) / 2) + np.sqrt(np.maximum(1 - S0, 0))
        D = np.sqrt(np.sum(delta**2, axis=-1)) + dw / den
    D = np.where(S < 1, D, np.inf)
    return D, S


class _Level(NamedTuple):
    codes: np.ndarray  # (K,) Morton codes at this level, sorted
    start: np.ndarray  # (K,) first node (in sorted order)
    stop: np.ndarray
    mass: np.ndarray  # W_B
    frame: np.ndarray  # (K, 3, d): s, e_1, (e_2)
    box_centre: np.ndarray  # (K, p)
    box_half: np.ndarray  # (K, p)
    centre: np.ndarray  # (K, d): s'
    radius: np.ndarray  # rho_B
    log_bound: np.ndarray  # (K, len(PROXY_ORDERS)): log of the bound per unit W e^{beta <x,s'>}
    grow: np.ndarray  # (K, len(PROXY_ORDERS)): Y at the minimising R
    child_lo: np.ndarray | None
    child_hi: np.ndarray | None


class Selection(NamedTuple):
    """What a cap sums over: points and weights (its near cells' nodes, far cells' proxies),
    the same in the rotated frame, and the logs of the a priori bounds on what that changes
    in ``Z``, ``grad G`` and ``Delta G`` (pruning plus compression; unscaled: the caller
    subtracts its exponent scale)."""

    points: np.ndarray
    weights: np.ndarray
    turned_points: np.ndarray  # the same in the rotated frame (R y), proxies computed anew
    turned_weights: np.ndarray
    log_bound_z: float
    log_bound_grad: float
    log_bound_lap: float
    proxies: int  # cells replaced by proxies
    pruned: int  # cells left out
    raw: np.ndarray  # the tree's (sorted) indices of the nodes at the front of ``points``


def _logsumexp(a: np.ndarray) -> float:
    if a.size == 0:
        return -math.inf
    m = float(np.max(a))
    if m == -math.inf:
        return m
    return m + math.log(float(np.sum(np.exp(a - m))))


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The concatenated ``arange(start_i, stop_i)``."""
    lens = stop - start
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=int)
    offs = np.repeat(start - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return np.arange(total) + offs


def _morton2(i: np.ndarray, j: np.ndarray, bits: int) -> np.ndarray:
    code = np.zeros_like(i)
    for k in range(bits):
        code |= ((i >> k) & 1) << (2 * k + 1) | ((j >> k) & 1) << (2 * k)
    return code


class SourceTree:
    """The tree of the module docstring over ``nodes`` (m, d) with weights ``w >= 0``, at
    inverse temperature ``beta``; ``rotation``: the second frame of the rotated pair
    (:func:`meanfield.kernels.fastsum_frames._rotation`), in which :meth:`select` gives its
    points a second time."""

    def __init__(self, nodes: np.ndarray, w: np.ndarray, beta: float,
                 rotation: np.ndarray) -> None:
        m, d = nodes.shape
        self.R = rotation
        if np.any(w < 0):
            msg = (f"weights: the source tree needs w >= 0 (its bounds use Z >= the sum of the "
                   f"cells' lower bounds); the smallest is {float(np.min(w))!r}")
            raise ValueError(msg)
        self.d, self.p, self.beta = d, d - 1, float(beta)
        top = 0 if d == 3 else 2
        size = 2.0 if d == 3 else 2 * math.pi  # a face's side in gnomonic units, the circle
        L = math.ceil(math.log2(max(size * beta / (2 * LEAF_RADIUS), 1.0)))
        L = int(min(max(L, top), MAX_LEVEL))
        self.top, self.L = top, L
        if d == 3:
            rows = np.arange(m)
            ax = np.argmax(np.abs(nodes), axis=1)
            lead = nodes[rows, ax]
            ga = nodes[rows, (ax + 1) % 3] / np.abs(lead)
            gb = nodes[rows, (ax + 2) % 3] / np.abs(lead)
            n_side = 1 << L
            ia = np.clip(((ga + 1) / 2 * n_side).astype(np.int64), 0, n_side - 1)
            ib = np.clip(((gb + 1) / 2 * n_side).astype(np.int64), 0, n_side - 1)
            face = 2 * ax + (lead > 0)
            code = (face.astype(np.int64) << (2 * L)) | _morton2(ia, ib, L)
        else:
            phi = np.mod(np.arctan2(nodes[:, 1], nodes[:, 0]), 2 * np.pi)
            code = np.clip((phi / (2 * np.pi) * (1 << L)).astype(np.int64), 0, (1 << L) - 1)
        order = np.argsort(code, kind="stable")
        self.order = order
        self.nodes = nodes[order]
        self.w = np.asarray(w, dtype=float)[order]
        code = code[order]
        self.levels: list[_Level] = []
        # a cell of at most RAW_MAX nodes is never refined: the next level is built under the
        # larger cells only (each cell's nodes stay contiguous: the sort is by Morton code)
        under = np.arange(m)
        ends: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # terminal cells
        for lev in range(top, L + 1):
            codes, first, counts = np.unique(code[under] >> (self.p * (L - lev)),
                                             return_index=True, return_counts=True)
            start = under[first]
            stop = start + counts
            level = self._level(lev, codes, start, stop, under, first)
            self.levels.append(level)
            big = counts > RAW_MAX
            end = ~big if lev < L else np.ones(len(codes), dtype=bool)
            ends.append((level.centre[end], level.radius[end], level.mass[end]))
            if lev == L or not np.any(big):
                break
            under = _ranges(start[big], stop[big])
        for k in range(len(self.levels) - 1):
            up, down = self.levels[k], self.levels[k + 1]
            lo = np.searchsorted(down.codes, up.codes << self.p)
            hi = np.searchsorted(down.codes, (up.codes + 1) << self.p)
            self.levels[k] = up._replace(child_lo=lo, child_hi=hi)
        self.end_centre = np.concatenate([e[0] for e in ends])
        self.end_radius = np.concatenate([e[1] for e in ends])
        with np.errstate(divide="ignore"):
            self.end_log_mass = np.log(np.concatenate([e[2] for e in ends]))
        self.n_leaves = len(self.end_radius)
        self._proxies: dict[tuple[int, int, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._angles: dict[str, np.ndarray] = {}
        self.turned_nodes = self.nodes @ rotation.T
        self._moments: dict[tuple[int, int, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _level(self, lev: int, codes: np.ndarray, start: np.ndarray, stop: np.ndarray,
               under: np.ndarray, first: np.ndarray) -> _Level:
        """The cells of level ``lev`` (their nodes ``under[first_i : first_i + count_i]``)."""
        d, p, beta = self.d, self.p, self.beta
        y, w = self.nodes[under], self.w[under]
        counts = stop - start
        mass = np.add.reduceat(w, first)
        if d == 3:
            n_side = 1 << lev
            face = codes >> (2 * lev)
            local = codes & ((1 << (2 * lev)) - 1)
            ia = np.zeros_like(local)
            ib = np.zeros_like(local)
            for k in range(lev):
                ia |= ((local >> (2 * k + 1)) & 1) << k
                ib |= ((local >> (2 * k)) & 1) << k
            ga = -1 + (2 * ia + 1) / n_side
            gb = -1 + (2 * ib + 1) / n_side
            ax, sign = face // 2, np.where(face % 2 == 1, 1.0, -1.0)
            s = np.zeros((len(codes), 3))
            rows = np.arange(len(codes))
            s[rows, ax] = sign
            s[rows, (ax + 1) % 3] = ga
            s[rows, (ax + 2) % 3] = gb
            s /= np.linalg.norm(s, axis=1, keepdims=True)
            e1 = np.zeros_like(s)
            e1[rows, (ax + 1) % 3] = 1.0
            e1 -= np.sum(e1 * s, axis=1)[:, None] * s
            e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
            e2 = np.cross(s, e1)
            frame = np.stack([s, e1, e2], axis=1)
        else:
            phi = 2 * np.pi * (codes + 0.5) / (1 << lev)
            s = np.stack([np.cos(phi), np.sin(phi)], axis=1)
            e1 = np.stack([-np.sin(phi), np.cos(phi)], axis=1)
            frame = np.stack([s, e1], axis=1)
        cell = np.repeat(np.arange(len(codes)), counts)
        tang = np.einsum("nd,nkd->nk", y, frame[cell, 1:])  # (m, p)
        lo = np.minimum.reduceat(tang, first, axis=0)
        hi = np.maximum.reduceat(tang, first, axis=0)
        box_centre, box_half = (lo + hi) / 2, (hi - lo) / 2
        sq = np.sqrt(np.maximum(1 - np.sum(box_centre**2, axis=1), 0.0))
        centre = np.einsum("kp,kpd->kd", box_centre, frame[:, 1:]) + sq[:, None] * frame[:, 0]
        centre /= np.linalg.norm(centre, axis=1, keepdims=True)
        radius = np.maximum.reduceat(np.linalg.norm(y - centre[cell], axis=1), first)
        # the interpolation bound per order q, minimised over R (module docstring); only
        # cells of more than RAW_MAX nodes are ever compressed
        nq = len(PROXY_ORDERS)
        log_bound = np.full((len(codes), nq), np.inf)
        grow = np.ones((len(codes), nq))
        big = np.nonzero(counts > RAW_MAX)[0]
        if big.size:
            D, S = _excursion(box_centre[big], np.maximum(box_half[big], 1e-300), ELLIPSES)
            Y = 1 + 2 * np.sqrt(np.minimum(S, 1.0))
            qs = np.array(PROXY_ORDERS, dtype=float)
            leb = np.array([_lebesgue(q) for q in PROXY_ORDERS])
            logR = np.log(ELLIPSES)
            with np.errstate(invalid="ignore"):
                lb = (np.log(4.0) + (p - 1) * np.log1p(leb)[None, None, :] + beta * D[:, :, None]
                      - (qs[None, None, :] - 1) * logR[None, :, None]
                      - np.log(ELLIPSES - 1)[None, :, None] + 2 * np.log(Y)[:, :, None])
            lb = np.where(np.isfinite(lb), lb, np.inf)
            best = np.argmin(lb, axis=1)  # (K, nq)
            log_bound[big] = np.take_along_axis(lb, best[:, None, :], axis=1)[:, 0, :]
            grow[big] = np.take_along_axis(Y, best, axis=1)
        return _Level(codes, start, stop, mass, frame, box_centre, box_half, centre, radius,
                      log_bound, grow, None, None)

    def _cell_moments(self, k: int, cell: int,
                      turned: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(M, centre, half)`` of cell ``cell`` of level index ``k``: its box in tangent
        coordinates and its Chebyshev moments ``M[a, b] = sum_y w_y T_a(t_y) T_b(u_y)`` (``t, u``
        the coordinates scaled to ``[-1, 1]``) to the highest order of :data:`PROXY_ORDERS`
        (cached; one pass over the cell's nodes serves every order); ``turned``: computed anew
        in the rotated frame, so that their round-off is a second draw."""
        key = (k, cell, turned)
        hit = self._moments.get(key)
        if hit is not None:
            return hit
        lev = self.levels[k]
        a0, b0 = int(lev.start[cell]), int(lev.stop[cell])
        frame = lev.frame[cell]
        y = self.nodes[a0:b0]
        if turned:
            frame, y = frame @ self.R.T, y @ self.R.T
        tang = y @ frame[1:].T  # (c, p)
        if turned:
            lo, hi = tang.min(axis=0), tang.max(axis=0)
            centre_t, half_t = (lo + hi) / 2, np.maximum((hi - lo) / 2, 1e-300)
        else:
            centre_t, half_t = lev.box_centre[cell], np.maximum(lev.box_half[cell], 1e-300)
        q = PROXY_ORDERS[-1]
        rows = [_chebyshev_rows((tang[:, i] - centre_t[i]) / half_t[i], q)
                for i in range(self.p)]
        w = self.w[a0:b0]
        M = rows[0] @ w if self.p == 1 else (rows[0] * w[None]) @ rows[1].T
        self._moments[key] = (M, centre_t, half_t)
        return M, centre_t, half_t

    def _proxy(self, k: int, cell: int, qi: int, turned: bool) -> tuple[np.ndarray, np.ndarray]:
        """The proxies ``(g, W)`` of cell ``cell`` of level index ``k`` at order ``q =
        PROXY_ORDERS[qi]`` (cached): ``W_j = sum_y w_y l_j(a_y, b_y) = (A M A^T)_j`` from the
        cell's moments of degree ``< q`` (:func:`_lobatto_map`); ``turned``: in the rotated
        frame (positions ``R g``)."""
        key = (k, cell, qi, turned)
        hit = self._proxies.get(key)
        if hit is not None:
            return hit
        q = PROXY_ORDERS[qi]
        frame = self.levels[k].frame[cell]
        if turned:
            frame = frame @ self.R.T
        M, centre_t, half_t = self._cell_moments(k, cell, turned)
        A, cheb = _lobatto_map(q)
        nodes_1d = [centre_t[i] + half_t[i] * cheb for i in range(self.p)]
        if self.p == 1:
            W = A @ M[:q]
            t = nodes_1d[0][:, None]
        else:
            W = (A @ M[:q, :q] @ A.T).ravel()
            G, H = np.meshgrid(nodes_1d[0], nodes_1d[1], indexing="ij")
            t = np.stack([G.ravel(), H.ravel()], axis=1)
        g = t @ frame[1:] + np.sqrt(np.maximum(1 - np.sum(t * t, axis=1), 0.0))[:, None] * frame[0]
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        self._proxies[key] = (g, W)
        return g, W

    def select(self, c: np.ndarray, r: float, eta: float) -> Selection:
        """The points a cap of centre ``c`` and radius ``r`` sums over, with the a priori bounds
        of the module docstring at share ``eta`` of ``Lambda``."""
        beta, d = self.beta, self.d
        cs = self.end_centre @ c
        logW = self.end_log_mass
        log_lower = _logsumexp(logW + beta * (cs - r - self.end_radius))
        log_upper = _logsumexp(logW + beta * (cs + r + self.end_radius))
        K = self.n_leaves
        log_prune = math.log(eta / 2) + log_lower - math.log(min(K, CELL_SHARES))
        raw: list[tuple[np.ndarray, np.ndarray]] = []
        prox_pts: list[np.ndarray] = []
        prox_w: list[np.ndarray] = []
        prox_turned: list[np.ndarray] = []
        prox_turned_w: list[np.ndarray] = []
        pruned_logs: list[np.ndarray] = []
        comp_logs: list[np.ndarray] = []
        comp_grow: list[np.ndarray] = []
        n_pruned = n_prox = 0
        act = np.arange(len(self.levels[0].codes))
        lap_factor = beta + d
        for k, lev in enumerate(self.levels):
            if act.size == 0:
                break
            with np.errstate(divide="ignore"):
                lw = np.log(lev.mass[act])
            cc = lev.centre[act] @ c
            logU = lw + beta * (cc + r + lev.radius[act])
            prune = logU <= log_prune
            if np.any(prune):
                pruned_logs.append(logU[prune])
                n_pruned += int(np.count_nonzero(prune))
            keep = ~prune
            act, logU, lw, cc = act[keep], logU[keep], lw[keep], cc[keep]
            counts = lev.stop[act] - lev.start[act]
            small = counts <= RAW_MAX
            last = k == len(self.levels) - 1
            # compression: the least order whose bound fits the cell's budget
            budget = (math.log(eta / 2) + log_lower
                      + np.maximum(logU - log_upper, -math.log(min(K, CELL_SHARES))))
            need = budget[:, None] - (lw + beta * (cc + r))[:, None] - math.log(lap_factor)
            fits = lev.log_bound[act] <= need
            qi = np.where(np.any(fits, axis=1), np.argmax(fits, axis=1), -1)
            npts = np.array(PROXY_ORDERS)[np.maximum(qi, 0)] ** self.p
            comp = (~small) & (qi >= 0) & (npts < counts)
            take_raw = small | (last & ~comp)
            if np.any(take_raw):
                raw.append((lev.start[act[take_raw]], lev.stop[act[take_raw]]))
            for cell, q in zip(act[comp], qi[comp]):
                for turned in (False, True):
                    g, W = self._proxy(k, int(cell), int(q), turned)
                    (prox_turned if turned else prox_pts).append(g)
                    (prox_turned_w if turned else prox_w).append(W)
            if np.any(comp):
                sel = np.nonzero(comp)[0]
                lb = lev.log_bound[act[sel], qi[sel]]
                comp_logs.append(lb + lw[sel] + beta * (cc[sel] + r))
                comp_grow.append(lev.grow[act[sel], qi[sel]])
                n_prox += int(sel.size)
            refine = ~(take_raw | comp)
            if last or not np.any(refine):
                break
            par = act[refine]
            act = _ranges(lev.child_lo[par], lev.child_hi[par])  # type: ignore[index]
        idx = (_ranges(np.concatenate([a for a, _ in raw]), np.concatenate([b for _, b in raw]))
               if raw else np.zeros(0, dtype=int))
        raw_nodes = self.nodes[idx]
        points = np.concatenate([raw_nodes] + prox_pts)
        weights = np.concatenate([self.w[idx]] + prox_w)
        turned_points = np.concatenate([self.turned_nodes[idx]] + prox_turned)
        turned_weights = np.concatenate([self.w[idx]] + prox_turned_w)
        lp = _logsumexp(np.concatenate(pruned_logs)) if pruned_logs else -math.inf
        if comp_logs:
            cl = np.concatenate(comp_logs)
            gr = np.concatenate(comp_grow)
            # the logged bound carries Y^2 (module docstring): Z's part is that over Y^2,
            # the gradient's over Y, the Laplacian's (beta (1 + Y^2) + (d - 1) Y) / Y^2
            lz = _logsumexp(cl - 2 * np.log(gr))
            lg = _logsumexp(cl - np.log(gr))
            ll = _logsumexp(cl + np.log((beta * (1 + gr**2) + (d - 1) * gr) / gr**2))
        else:
            lz = lg = ll = -math.inf
        lpl = lp + math.log(1 + beta) if lp > -math.inf else lp  # |grad| <= |y| Z, |lap| <= (beta+d) Z
        return Selection(points, weights, turned_points, turned_weights,
                         float(np.logaddexp(lz, lp)), float(np.logaddexp(lg, lp)),
                         float(np.logaddexp(ll, lpl + math.log(1 + d / (1 + beta)))),
                         n_prox, n_pruned, idx)

    def angles(self, sel: Selection, turned: bool) -> np.ndarray:
        """The transforms' coordinates (:func:`meanfield.kernels.fastsum_frames.node_angles`)
        of ``sel.points`` (``turned``: of ``sel.turned_points``): the nodes' from one
        computation per tree and frame, the proxies' anew."""
        key = "turned" if turned else "first"
        cached = self._angles.get(key)
        if cached is None:
            cached = node_angles(self.turned_nodes if turned else self.nodes)
            self._angles[key] = cached
        pts = sel.turned_points if turned else sel.points
        return np.concatenate([cached[sel.raw], node_angles(pts[len(sel.raw):])])
