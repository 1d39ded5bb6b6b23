r"""Fast summation for general weights on ``S^1`` and ``S^2``: any ``(Q, K, V)``, several
heads, l2 with any ``Q, K``, Sinkhorn, and the causal mask (docs/particles.md section "Fast
field"; docs/equations.md section 2; docs/lagrangian.md sections 1-2).

.. autosummary::
   general_reason
   general_field
   kernel_table

**The expansion.** With ``A = Q^T K`` the logit is ``beta <Q x, K y> = beta <A^T x, y> =
beta rho_x <v_x, y>``, ``rho_x = |A^T x|``, ``v_x = A^T x / rho_x``: for each point a zonal
kernel around ``v_x`` with its own concentration ``kappa = beta rho_x``. Scaled per point by
``e^{-beta rho_x}`` (its supremum over the nodes is then at most 1),

.. math::  e^{\beta \rho (<v, y> - 1)} = \sum_l k_l(\beta \rho) N_l P_l(<v, y>),

``k_l(kappa)`` the Funk–Hecke multipliers of ``e^{kappa (t - 1)}``
(:func:`meanfield.special.scaled_kernel_multipliers`, a modified Bessel function), entire in
``kappa``; on ``[beta rho_min, beta rho_max]`` of the points each is replaced by its Chebyshev
expansion ``sum_{c < C} a_{c l} T_c(s(kappa))`` (:func:`kernel_table`). Then a sum ``S(x) =
sum_j W_j e^{beta (<A^T x, y_j> - rho_x)}`` is ``sum_c T_c(s_x) g_c(v_x)`` with ``g_c = sum_l
a_{cl} N_l (mu_W * P_l)``: one adjoint transform of the weights ``W`` at the nodes, and ``C``
syntheses at the directions ``v_x`` (one per Chebyshev term). The per-point scaling keeps
``S(x)`` of the size of the mass ``x`` sees, as for the zonal kernels (a scaling by a global
``e^{-beta max rho}`` would make ``S`` vary like ``e^{beta (rho_x - max rho)}`` over the points,
and the transforms' error, relative to the largest values, swamp the small ones).

**The field.** For one head with node weights ``w_j`` (times ``e^{c_j}``, a column bias: l2's
``-beta |K y_j|^2 / 2``, Sinkhorn's potential ``g_j``) the direct code
(:func:`meanfield.kernels.interaction.ambient_field`) computes ``F = sum_j a_j V y_j`` with ``a_j``
the (normalised) weights, ``tr DF = beta (sum_j a_j <V y_j, A y_j> - <F, A ybar>)`` and ``x^T
DF x = beta (sum_j a_j <x, V y_j><x, A y_j> - <x, F><x, A ybar>)`` (normalised kinds;
unnormalized: without the second terms, divided by the mass). All of these are sums of the
kernel with weight vectors linear in ``w``: ``Z`` (the weights), ``d`` for ``V y``, ``d`` for
``A y``, one for ``<V y, A y>`` and ``d(d+1)/2`` for the symmetric part of ``V y (A y)^T``
(:func:`_weight_vectors`). Heads add. The velocity is ``P_x F`` and the surface divergence
``tr DF - x^T DF x - (d - 1) <x, F>``, as the direct code.

**Accuracy.** Each scaled sum ``S_i`` has an absolute error at most ``delta_i = tail ||W_i||_1
+ C_N eps max_j |W_ij / w_j| G``: ``tail`` the band-limit tail (:func:`meanfield.kernels.fastsum.
band_limit` at ``beta rho_max``) plus the Chebyshev tail ``sum_{c >= C} sum_l N_l |a_{cl}|``;
the second term the transforms' error (:data:`GENERAL_NUFFT_ERROR`, measured, as
:data:`meanfield.kernels.fastsum.NUFFT_ERROR`), ``G = sum_c max |g_c|`` over the points' directions
and the nodes (:func:`_gsup`). These are carried to the velocity and divergence to first order
(:func:`_head_field`), relative to the scales that bound the direct sum's rounding error
(``sum_h |V_h|`` for the normalised kinds, ``sum_h |V_h| e^{beta rho_x} Z_h / mass`` for
unnormalized; the divergence times ``4 beta |A| + d - 1``); every point over ``tol`` is
recomputed by the direct sum, as for the zonal kernels.

**Causal mask.** Node ``j`` is seen from a point of label ``>= label_j`` (particles: the index).
The nodes sorted by label are cut into blocks at label changes; a point whose label falls in
block ``k`` sees blocks ``0 .. k-1`` whole (their coefficients summed cumulatively, ``C``
syntheses per block of points) and block ``k`` through a short direct masked sum
(:func:`_masked_sums`).

**Sinkhorn.** The log-domain iterations of :class:`meanfield.kernels.Sinkhorn` are row and
column log-sum-exps, i.e. kernel sums ``log sum_j e^{beta <x, A y_j> + c_j}`` (columns: with
``A^T``): the same loop, the same stopping rule and iteration cap, each sum fast
(:func:`_sinkhorn_potentials`); the field is then softmax with the column bias ``g``.

What stays direct and why: ``R^d`` (no harmonic transform: the kernel is not a function on a
compact homogeneous space with a fast transform here), ``S^{d-1}`` for ``d >= 4`` (no
nonuniform harmonic transform in ducc0 there), sigmoid with ``Q^T K`` not a multiple of the
identity (its profile is not an exponential: the per-degree factor would need a quadrature at
every Chebyshev node; not built), the feed-forward term (pointwise, cheap; but the models with
it stay on one path), torch tensors.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import ducc0
import numpy as np
import scipy.fft
from scipy.special import logsumexp

from meanfield import attention as attention_registry
from meanfield.kernels import fastsum, prefix_mass
from meanfield.kernels.fastsum import general_kinds, general_reason
from meanfield.special import scaled_kernel_multipliers

GENERAL_NUFFT_ERROR = {2: 1.3, 3: 0.25}
"""``C_N`` by ``d``: the transforms' absolute error of a scaled sum is at most ``C_N eps max_j
|W_j / w_j| G`` (``G`` of :func:`_gsup`). Measured at ``eps = 3e-13`` over random, clustered,
near-Dirac (also at a pole), two-Dirac and mixed sets of 400 nodes, ``beta`` 1, 4, 12, 30,
``A = I + 0.4 G`` (``G`` Gaussian) and ``A`` a rotation, every weight vector of the
divergence, three seeds (240 configurations): largest ratios 0.635 (``S^1``) and 0.114
(``S^2``); these are twice that or more (the convention of
:data:`meanfield.kernels.fastsum.NUFFT_ERROR`)."""

CHEB_TAIL_FRACTION = 1e-3
"""The Chebyshev tail is at most this times ``tol`` (above the DCT's round-off, ~``1e-16``
per term; the band limit's :data:`meanfield.kernels.fastsum.TAIL_FRACTION` ``= 1e-4`` would put the
target at the round-off itself)."""

CHEB_MAX = 512
"""Largest Chebyshev expansion in the radius (beyond it: ``ValueError``)."""

BLOCK_NODES = 256
"""Causal mask: target number of nodes per label block (the direct part costs ``n`` times
this; the fast part one transform per block and per weight vector)."""


# -- which models ------------------------------------------------------------------------

# -- the expansion in the radius --------------------------------------------------------

class Table:
    """The Chebyshev-by-degree coefficients of the scaled kernel (module docstring).

    Attributes:
        coef: ``(C, L + 1)``, ``a_{cl}``.
        kmin, kmax: ``beta rho_min``, ``beta rho_max`` (the points' concentrations).
        tail: band-limit tail plus Chebyshev tail (the kernel's supremum is 1).
    """

    def __init__(self, coef: np.ndarray, kmin: float, kmax: float, tail: float) -> None:
        self.coef, self.kmin, self.kmax, self.tail = coef, kmin, kmax, tail

    @property
    def L(self) -> int:
        return self.coef.shape[1] - 1

    @property
    def C(self) -> int:
        return self.coef.shape[0]

    def chebyshev(self, kappa: np.ndarray) -> np.ndarray:
        """``T_c(s(kappa))`` ``(C, n)`` at concentrations ``kappa`` (three-term recurrence)."""
        half = 0.5 * (self.kmax - self.kmin)
        s = (np.zeros_like(kappa) if half == 0
             else np.clip((kappa - 0.5 * (self.kmax + self.kmin)) / half, -1.0, 1.0))
        T = np.empty((self.C, len(kappa)))
        T[0] = 1.0
        if self.C > 1:
            T[1] = s
        for c in range(2, self.C):
            T[c] = 2 * s * T[c - 1] - T[c - 2]
        return T


def _scaled(kappa: float, d: int, L: int) -> np.ndarray:
    """``f_l = k_l(kappa)``, ``l = 0..L``: the multipliers of ``e^{kappa (t - 1)}``."""
    return scaled_kernel_multipliers(np.arange(L + 1, dtype=float), kappa, d)


def kernel_table(kmin: float, kmax: float, d: int, tol: float) -> Table:
    """The expansion of ``e^{kappa (t - 1)}`` for ``kappa`` in ``[kmin, kmax]``: band limit
    from :func:`meanfield.kernels.fastsum.band_limit` at ``kmax`` (the tail of ``k_l(kappa)`` grows
    with ``kappa``), Chebyshev degree the smallest whose tail ``sum_{c >= C} sum_l N_l
    |a_{cl}|`` (coefficients from ``M >= 2 C`` Chebyshev points by a DCT; ``M`` doubled until
    so) is below ``CHEB_TAIL_FRACTION tol``."""
    L, band_tail = fastsum.band_limit(kmax, d, tol)
    N = fastsum._degree_weights(d, L)[0]
    target = CHEB_TAIL_FRACTION * tol
    if kmax - kmin <= 1e-14 * max(kmax, 1.0):
        return Table(_scaled(kmax, d, L)[None], kmax, kmax, band_tail)
    mid, half = 0.5 * (kmax + kmin), 0.5 * (kmax - kmin)
    M = 32
    while True:
        s = np.cos(np.pi * (np.arange(M) + 0.5) / M)
        F = np.stack([_scaled(mid + half * si, d, L) for si in s])  # (M, L + 1)
        a = scipy.fft.dct(F, type=2, axis=0) / M
        a[0] *= 0.5
        # below ~64 ulp of a degree's largest coefficient the DCT's round-off dominates:
        # those entries are not a truncation error (and not resolvable)
        mag = np.abs(a)
        mag = np.where(mag > 64 * np.finfo(float).eps * np.max(mag, axis=0), mag, 0.0)
        mags = mag @ N  # per Chebyshev degree
        tails = np.concatenate([np.cumsum(mags[::-1])[::-1][1:], [0.0]])  # sum_{c' > c}
        ok = np.nonzero(tails <= target)[0]
        if ok.size and ok[0] + 1 <= M // 2:
            C = int(ok[0]) + 1
            return Table(np.ascontiguousarray(a[:C]), kmin, kmax, band_tail + float(tails[C - 1]))
        if M >= CHEB_MAX:
            msg = (f"kernel_table: beta r in [{kmin:g}, {kmax:g}] needs more than {CHEB_MAX} "
                   f"Chebyshev terms for tol={tol:g}")
            raise ValueError(msg)
        M *= 2


# -- transforms -----------------------------------------------------------------------------

class _Transform:
    """Adjoint transforms at fixed nodes and syntheses at fixed points (``S^1``: NUFFT;
    ``S^2``: ``ducc0.sht``), degree-by-degree multipliers in between."""

    def __init__(self, d: int, L: int, eps: float, nthreads: int) -> None:
        self.d, self.L, self.eps, self.nthreads = d, L, eps, nthreads
        if d == 3:
            self.ls = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])
            self.size = len(self.ls)
        else:
            self.N = 2 * L + 2
            freq = np.fft.fftfreq(self.N, 1.0 / self.N)
            self.ls = np.minimum(np.abs(freq).astype(int), L)
            self.nyq = L + 1  # the Nyquist slot stays empty
            self.size = self.N

    def loc(self, x: np.ndarray) -> np.ndarray:
        if self.d == 3:
            return fastsum._sphere_angles(x)
        return np.arctan2(x[:, 1], x[:, 0])[:, None]

    def adjoint(self, loc: np.ndarray, w: np.ndarray) -> np.ndarray:
        if len(w) == 0:
            return np.zeros(self.size, complex)
        if self.d == 3:
            return ducc0.sht.adjoint_synthesis_general(
                map=w[None], spin=0, lmax=self.L, loc=loc, epsilon=self.eps,
                nthreads=self.nthreads)[0]
        return ducc0.nufft.nu2u(points=w.astype(complex), coord=loc, forward=True,
                                epsilon=self.eps, nthreads=self.nthreads,
                                out=np.empty(self.N, complex), fft_order=True)

    def multipliers(self, f: np.ndarray) -> np.ndarray:
        """``f_l`` laid out as the coefficients (times ``4 pi`` on ``S^2``)."""
        if self.d == 3:
            return 4 * np.pi * f[self.ls]
        out = f[self.ls].copy()
        out[self.nyq] = 0.0
        return out

    def synthesis(self, loc: np.ndarray, coef: np.ndarray) -> np.ndarray:
        if len(loc) == 0:
            return np.zeros(0)
        if self.d == 3:
            return ducc0.sht.synthesis_general(alm=coef[None], spin=0, lmax=self.L, loc=loc,
                                               epsilon=self.eps, nthreads=self.nthreads)[0]
        return ducc0.nufft.u2nu(grid=coef, coord=loc, forward=False, epsilon=self.eps,
                                nthreads=self.nthreads, fft_order=True).real


def _masked_sums(zx: np.ndarray, rho: np.ndarray, y: np.ndarray, beta: float, W: np.ndarray,
                 mask: np.ndarray | None) -> np.ndarray:
    """The scaled sums ``sum_j W_ij e^{beta (<A^T x, y_j> - |A^T x|)}`` directly (``mask``
    (p, m): ``True`` where node ``j`` is seen)."""
    E = np.exp(beta * (zx @ y.T - rho[:, None]))
    if mask is not None:
        E = np.where(mask, E, 0.0)
    return W @ E.T


def _unit_rows(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``|z_i|`` and ``z_i / |z_i|`` (the pole where ``z_i = 0``: the kernel is constant)."""
    r = np.linalg.norm(z, axis=1)
    u = z / np.where(r > 0, r, 1.0)[:, None]
    u[r == 0] = 0.0
    u[r == 0, -1] = 1.0
    return r, u


def _sums(zx: np.ndarray, plab: np.ndarray | None, y: np.ndarray, nlab: np.ndarray | None,
          W: np.ndarray, beta: float, table: Table, eps: float,
          nthreads: int) -> tuple[np.ndarray, float]:
    """The scaled sums ``(m_w, p)`` ``S_i(x) = sum_{j seen} W_ij e^{beta (<A^T x, y_j> -
    rho_x)}``, ``zx = A^T x`` ``(p, d)``, ``rho_x = |A^T x|``; with labels, node ``j`` is seen
    from labels ``>= nlab_j``. Also the scale of the transforms' error (:func:`_gsup`)."""
    d = zx.shape[1]
    tr = _Transform(d, table.L, eps, nthreads)
    rho, v = _unit_rows(zx)
    T = table.chebyshev(beta * rho)
    loc_n, loc_p = tr.loc(y), tr.loc(v)
    mult = [tr.multipliers(table.coef[c]) for c in range(table.C)]

    def synth(idx: Any, mu: np.ndarray) -> np.ndarray:
        return np.sum([T[c, idx] * tr.synthesis(loc_p[idx], mult[c] * mu)
                       for c in range(table.C)], axis=0)

    p = len(zx)
    out = np.zeros((len(W), p))
    if nlab is None or plab is None:
        mus = [tr.adjoint(loc_n, Wi) for Wi in W]
        for i, mu in enumerate(mus):
            out[i] = synth(slice(None), mu)
        return out, _gsup(tr, loc_p, loc_n, mult, mus[0])
    order = np.argsort(nlab, kind="stable")
    sl = nlab[order]
    m = len(sl)
    # block starts at label changes, near multiples of BLOCK_NODES
    starts = [0]
    for target in range(BLOCK_NODES, m, BLOCK_NODES):
        s = int(np.searchsorted(sl, sl[target], side="left"))
        if s > starts[-1]:
            starts.append(s)
    ends = [*starts[1:], m]
    block_of = np.searchsorted(sl[starts], plab, side="right") - 1  # -1: sees nothing
    cum = np.zeros((len(W), tr.size), complex)
    for k, (s0, s1) in enumerate(zip(starts, ends)):
        pts = np.nonzero(block_of == k)[0]
        idx = order[s0:s1]
        if pts.size:
            if k > 0:
                for i in range(len(W)):
                    out[i, pts] = synth(pts, cum[i])
            mask = nlab[idx][None, :] <= plab[pts][:, None]
            out[:, pts] += _masked_sums(zx[pts], rho[pts], y[idx], beta, W[:, idx], mask)
        for i in range(len(W)):
            cum[i] += tr.adjoint(loc_n[idx], W[i, idx])
    return out, _gsup(tr, loc_p, loc_n, mult, cum[0])


def _gsup(tr: _Transform, loc_p: np.ndarray, loc_n: np.ndarray, mult: list[np.ndarray],
          mu: np.ndarray) -> float:
    """``sum_c max |g_c|``, ``g_c`` the function synthesised for Chebyshev term ``c`` from the
    coefficients ``mu`` of the weights ``w``, its maximum over the points' directions and the
    nodes (near which it peaks): the scale of the transforms' error (relative to the
    coefficients, i.e. to the size of ``g_c`` on the whole sphere, not only at the points)."""
    loc = np.concatenate([loc_p, loc_n])
    return float(sum(np.max(np.abs(tr.synthesis(loc, mc * mu))) for mc in mult))


# -- one head ----------------------------------------------------------------------------

def _sym_pairs(d: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(d) for b in range(a, d)]


def _weight_vectors(w: np.ndarray, vy: np.ndarray, ay: np.ndarray, normalized: bool,
                    divergence: bool) -> np.ndarray:
    """Rows: ``w``; ``w (V y)_a``; with the divergence: ``w (A y)_a`` (normalised kinds),
    ``w <V y, A y>``, ``w sym(V y (A y)^T)_{ab}`` (``a <= b``)."""
    rows = [w, *(w * vy.T)]
    if divergence:
        if normalized:
            rows += list(w * ay.T)
        rows.append(w * np.sum(vy * ay, axis=1))
        rows += [w * 0.5 * (vy[:, a] * ay[:, b] + vy[:, b] * ay[:, a])
                 for a, b in _sym_pairs(vy.shape[1])]
    return np.stack(rows)


class _HeadOut:
    """One head's ``F``, ``tr DF``, ``x^T DF x`` and their error bounds and scales."""

    def __init__(self, F: np.ndarray, tr: Any, xdx: Any, dF: np.ndarray, ddiv: Any,
                 scale: np.ndarray) -> None:
        self.F, self.tr, self.xdx, self.dF, self.ddiv, self.scale = F, tr, xdx, dF, ddiv, scale


def _head_field(points: np.ndarray, S: np.ndarray, delta: np.ndarray, *, beta: float,
                normalized: bool, factor: np.ndarray, divergence: bool, normA: float,
                normV: float) -> _HeadOut:
    """Assemble one head from its scaled sums ``S`` ``(m_w, p)`` and their error bounds
    ``delta`` ``(m_w,)`` (module docstring); ``factor`` ``(p,)`` the unscaling of the
    unnormalized kind (``e^{beta r_max} / mass``)."""
    d = points.shape[1]
    Z = S[0]
    dZ = delta[0]
    zlo = np.maximum(Z - dZ, 1e-300)  # a lower bound of the exact Z
    bad = ~(Z - dZ > 0)
    SV, dV = S[1 : d + 1].T, float(np.linalg.norm(delta[1 : d + 1]))
    if normalized:
        F = SV / Z[:, None]
        nF = np.linalg.norm(F, axis=1)
        dF = (dV + nF * dZ) / zlo
        scale = np.full(len(Z), normV)
    else:
        F = SV * factor[:, None]
        dF = dV * factor
        scale = normV * factor * np.maximum(Z, 0.0)
    tr = xdx = ddiv = None
    if divergence:
        i = d + 1
        if normalized:
            SA, dA = S[i : i + d].T, float(np.linalg.norm(delta[i : i + d]))
            i += d
        Str, dtr = S[i], delta[i]
        pairs = _sym_pairs(d)
        ST, dT = S[i + 1 :], delta[i + 1 :]
        cx = np.stack([(1.0 if a == b else 2.0) * points[:, a] * points[:, b] for a, b in pairs])
        xTx = np.sum(cx * ST, axis=0)
        dxTx = np.abs(cx).T @ dT
        if normalized:
            Abar = SA / Z[:, None]
            nA = np.linalg.norm(Abar, axis=1)
            dAbar = (dA + nA * dZ) / zlo
            Rtr, RxTx = Str / Z, xTx / Z
            cross = nF * dAbar + nA * dF
            tr = beta * (Rtr - np.sum(F * Abar, axis=1))
            xdx = beta * (RxTx - np.sum(points * F, axis=1) * np.sum(points * Abar, axis=1))
            ddiv = beta * ((dtr + np.abs(Rtr) * dZ) / zlo + (dxTx + np.abs(RxTx) * dZ) / zlo
                           + 2 * cross) + (d - 1) * dF
        else:
            tr, xdx = beta * Str * factor, beta * xTx * factor
            ddiv = beta * (dtr + dxTx) * factor + (d - 1) * dF
    dF = np.where(bad, np.inf, dF)
    if ddiv is not None:
        ddiv = np.where(bad, np.inf, ddiv)
    return _HeadOut(F, tr, xdx, dF, ddiv, scale)


def _delta(W: np.ndarray, w: np.ndarray, zmax: float, tail: float, eps: float,
           d: int) -> np.ndarray:
    """Absolute error bounds of the scaled sums (module docstring)."""
    pos = w > 0
    ratio = np.max(np.abs(W[:, pos] / w[pos]), axis=1) if np.any(pos) else np.zeros(len(W))
    return tail * np.sum(np.abs(W), axis=1) + GENERAL_NUFFT_ERROR[d] * eps * ratio * zmax


def _table_for(zx: np.ndarray, beta: float, d: int, tol: float) -> Table:
    """The table for the points' concentrations ``beta |A^T x|``."""
    r = np.linalg.norm(zx, axis=1)
    return kernel_table(beta * float(np.min(r)), beta * float(np.max(r)), d, tol)


# -- Sinkhorn -------------------------------------------------------------------------------

class _LSE:
    """``log sum_j e^{beta <x_i, A y_j> + c_j}`` at fixed points ``x`` and nodes ``y``, fast,
    with the points whose relative error estimate exceeds ``tol`` recomputed directly."""

    def __init__(self, points: np.ndarray, y: np.ndarray, A: np.ndarray, beta: float,
                 tol: float, eps: float, nthreads: int) -> None:
        self.zx, self.y, self.beta, self.tol, self.eps, self.nthreads = (
            points @ A, y, beta, tol, eps, nthreads)
        self.rho = np.linalg.norm(self.zx, axis=1)
        self.table = _table_for(self.zx, beta, points.shape[1], tol)
        self.corrected = 0

    def __call__(self, c: np.ndarray) -> np.ndarray:
        cmax = float(np.max(c))
        w = np.exp(c - cmax)
        S, gsup = _sums(self.zx, None, self.y, None, w[None], self.beta, self.table,
                        self.eps, self.nthreads)
        Z = S[0]
        dz = _delta(w[None], w, gsup, self.table.tail, self.eps, self.zx.shape[1])[0]
        out = np.log(np.maximum(Z, 1e-300)) + self.beta * self.rho + cmax
        bad = np.nonzero(~(dz <= self.tol * np.maximum(Z - dz, 0.0)))[0]
        if bad.size:
            out[bad] = logsumexp(self.beta * (self.zx[bad] @ self.y.T) + c[None], axis=1)
            self.corrected += int(bad.size)
        return out


def _sinkhorn_potentials(model: Any, x: np.ndarray, A: np.ndarray, w: np.ndarray | None,
                         g0: np.ndarray | None, tol: float, eps: float,
                         nthreads: int) -> tuple[np.ndarray, int]:
    """The column potential ``g`` of :meth:`meanfield.kernels.Sinkhorn.potentials` (queries
    and keys the nodes ``x`` (n, d), logits ``beta <x_i, A x_j>``), the same iterations and
    stopping rule with fast log-sum-exps; the dense Newton polish where the direct code
    would use it. Returns ``(g, points recomputed directly)``."""
    from meanfield.kernels.sinkhorn import _NEWTON_MAX_N, Sinkhorn

    beta = float(model.beta)
    iterations, stol = int(model.sinkhorn_iterations), float(model.sinkhorn_tol)
    lw = None if w is None else np.log(np.where(w > 0, w, 1.0)) + np.where(w > 0, 0.0, -np.inf)
    row = _LSE(x, x, A, beta, tol, eps, nthreads)  # row i: sum over j of beta <x_i, A x_j>
    col = _LSE(x, x, A.T, beta, tol, eps, nthreads)  # column j: over i of beta <x_j, A^T x_i>
    n = len(x)

    def plus(a: np.ndarray) -> np.ndarray:
        return a if lw is None else a + lw

    g = np.zeros(n) if g0 is None else np.asarray(g0, dtype=float)
    f = -row(plus(g))
    err = math.inf
    for _ in range(iterations):
        g = -col(plus(f))
        f_new = -row(plus(g))
        err = float(np.max(np.abs(np.expm1(f - f_new))))
        if err < stol:
            break
        f = f_new
    if err >= stol and n <= _NEWTON_MAX_N and lw is None:
        S = beta * (x @ A @ x.T)
        kern = Sinkhorn(beta, iterations=iterations, tol=stol)
        fn, gn, err = kern._newton(S[None], f[None].copy(), g[None].copy())
        g = gn[0]
    if err >= stol:
        msg = (f"Sinkhorn did not reach sinkhorn_tol={stol:g} in sinkhorn_iterations="
               f"{iterations} (row sums off by {err:.3g}); raise sinkhorn_iterations")
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
    return g, row.corrected + col.corrected


# -- the field ----------------------------------------------------------------------------

DirectAt = Callable[[int, np.ndarray], "tuple[np.ndarray, np.ndarray | None]"]


GENERAL_EPS_MIN = 3e-13
"""The general path's transforms run at ``max(tol GENERAL_EPS_FRACTION, GENERAL_EPS_MIN)``: the
accuracy at which :data:`GENERAL_NUFFT_ERROR` was measured (its a priori estimate has no
second frame to check it; the zonal path's finer ``1e-14`` is checked by its pair)."""

GENERAL_EPS_FRACTION = 1 / 1024
"""See :data:`GENERAL_EPS_MIN`."""


def general_field(
    model: Any,
    points: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray | None,
    *,
    divergence: bool,
    labels: tuple[np.ndarray, np.ndarray] | None = None,
    potentials: tuple[np.ndarray, ...] | None = None,
    tol: float = fastsum.FIELD_TOL,
    nthreads: int = 0,
    direct: DirectAt | None = None,
    keep: Callable[[int, tuple[np.ndarray, ...]], None] | None = None,
) -> tuple[np.ndarray, np.ndarray | None, fastsum.FastSettings, tuple[np.ndarray, ...] | None]:
    """The tangent field ``P_x F`` and its surface divergence at ``points`` (B, p, d) of
    ``sum_j w_j delta_{nodes_j}`` (weights (B, m); ``None``: the particle system, ``1/m``,
    causal by index) for any heads ``(Q, K, V)`` of the kinds :func:`general_kinds` (module
    docstring). No validation (the callers validate; the model must pass
    :func:`general_reason`).

    Args:
        labels: ``(point labels (B, p), node labels (B, m))`` of a causal model; ``None`` with
            ``weights=None`` and ``model.causal``: by index.
        potentials: Sinkhorn warm start, one ``(B, m)`` per head.
        direct: ``direct(b, idx) -> (velocity (1, k, d), divergence (1, k) or None)`` at
            ``points[b, idx]``, the exact field where the estimate exceeds ``tol``.
        keep: ``keep(b, potentials)`` is told batch item ``b``'s Sinkhorn potentials (one
            ``(m,)`` per head) before ``direct`` is called for it (a warm start).

    Returns:
        ``(velocity, divergence or None, settings, Sinkhorn potentials per head or None)``.
    """
    B, p, d = points.shape
    m = nodes.shape[1]
    eps = max(tol * GENERAL_EPS_FRACTION, GENERAL_EPS_MIN)
    beta = float(model.beta)
    kind = attention_registry.resolve(model.attention)
    normalized = kind.normalized
    doubly = kind.normalization == "doubly"  # Sinkhorn: the column potentials
    heads = model.matrices(d)
    vel = np.empty(points.shape)
    div = np.empty((B, p)) if divergence else None
    pots: list[np.ndarray] = [np.empty((B, m)) for _ in heads] if doubly else []
    worst, corrected, Lmax, Cmax, tail_max = 0.0, 0, 0, 0, 0.0
    for b in range(B):
        # off the sphere (a Runge-Kutta stage) the field of x / |x|, as the zonal path
        pts = points[b] / np.linalg.norm(points[b], axis=1, keepdims=True)
        y = nodes[b]
        w = np.full(m, 1.0 / m) if weights is None else np.asarray(weights[b], dtype=float)
        plab = nlab = None
        if labels is not None:
            plab, nlab = (np.asarray(a[b], dtype=float) for a in labels)
        elif weights is None and model.causal:
            plab, nlab = np.arange(p, dtype=float), np.arange(m, dtype=float)
        if not normalized:
            if nlab is None:
                mass = np.full(p, float(np.sum(w)))
            else:
                mass = prefix_mass(w[None], plab[None], nlab[None])[0]  # type: ignore[index]
        F = np.zeros((p, d))
        tr = np.zeros(p)
        dF = np.zeros(p)
        ddiv = np.zeros(p)
        sv = np.zeros(p)
        sd = np.zeros(p)
        for h, (Q, K, V) in enumerate(heads):
            A = Q.T @ K
            z = y @ A.T  # A y_j
            wb = w
            if kind.key_bias is not None:  # l2: the column bias -beta |K y|^2 / 2
                c = -0.5 * beta * np.sum((y @ K.T) ** 2, axis=1)
                wb = w * np.exp(c - np.max(c))
            elif doubly:
                g0 = None if potentials is None else potentials[h][b]
                g, nc = _sinkhorn_potentials(model, y, A, None if weights is None else w, g0,
                                             tol, eps, nthreads)
                pots[h][b] = g
                corrected += nc
                wb = w * np.exp(g - np.max(g))
            zx = pts @ A  # A^T x: the expansion is in the points' concentrations
            table = _table_for(zx, beta, d, tol)
            Lmax, Cmax, tail_max = max(Lmax, table.L), max(Cmax, table.C), max(tail_max, table.tail)
            vy = y @ V.T
            W = _weight_vectors(wb, vy, z, normalized, divergence)
            S, gsup = _sums(zx, plab, y, nlab, W, beta, table, eps, nthreads)
            delta = _delta(W, wb, gsup, table.tail, eps, d)
            factor = (np.exp(beta * np.linalg.norm(zx, axis=1)) / np.where(mass > 0, mass, np.inf)
                      if not normalized else np.ones(p))
            normA, normV = float(np.linalg.norm(A, 2)), float(np.linalg.norm(V, 2))
            out = _head_field(pts, S, delta, beta=beta, normalized=normalized, factor=factor,
                              divergence=divergence, normA=normA, normV=normV)
            F += out.F
            dF += out.dF
            sv += out.scale
            if divergence:
                tr += out.tr - out.xdx
                ddiv += out.ddiv
                sd += out.scale * (4 * beta * normA + d - 1)
        vel[b] = F - np.sum(pts * F, axis=1)[:, None] * pts
        est = dF / np.where(sv > 0, sv, 1.0)
        est = np.where(sv > 0, est, np.where(dF > 0, np.inf, 0.0))
        if divergence:
            div[b] = tr - (d - 1) * np.sum(pts * F, axis=1)  # type: ignore[index]
            ed = ddiv / np.where(sd > 0, sd, 1.0)
            est = np.maximum(est, np.where(sd > 0, ed, np.where(ddiv > 0, np.inf, 0.0)))
        est = np.where(np.isfinite(est), est, np.inf)
        bad = np.nonzero(~(est <= tol))[0] if direct is not None else np.array([], dtype=int)
        if pots and keep is not None:
            keep(b, tuple(g[b] for g in pots))
        if bad.size:
            vb, db = direct(b, bad)  # type: ignore[misc]
            vel[b, bad] = vb[0]
            if divergence:
                div[b, bad] = db[0]  # type: ignore[index]
            corrected += int(bad.size)
        good = np.ones(p, dtype=bool)
        good[bad] = False
        if np.any(good):
            worst = max(worst, float(np.max(est[good])))
    settings = fastsum.FastSettings(tol=tol, band_limit=Lmax, epsilon=eps, tail=tail_max,
                                    error_estimate=worst, corrected=corrected, chebyshev=Cmax)
    return vel, div, settings, (tuple(pots) if pots else None)


__all__ = ["general_field", "general_kinds", "general_reason", "kernel_table"]
