"""Sinkhorn attention: ``A = diag(a) E diag(b)``, ``E_ij = e^{beta <q_i, k_j>}``, rows and
columns summing to 1, by Sinkhorn iterations in the log domain (docs/equations.md section 2).

.. autosummary::
   Sinkhorn

A causal Sinkhorn matrix would be lower triangular and doubly stochastic, hence the identity:
that combination is rejected.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Iterator

import numpy as np
from scipy.special import logsumexp

from meanfield import backend as bk
from meanfield.kernels.base import Kernel
from meanfield.kernels.rows import Softmax, _log
from meanfield.kernels.tiling import Tiling, block_for, logit_tiles

_NEWTON_MAX_N = 1024
"""Largest ``n`` for the dense Newton polish of Sinkhorn (one ``(2n)^3`` solve per step)."""
_NEWTON_STEPS = 30



class Sinkhorn(Kernel):
    """``sinkhorn``: the doubly stochastic scaling ``A = diag(a) E diag(b)`` of
    ``E_ij = e^{beta <q_i, k_j>}`` (rows and columns sum to 1).

    Log-domain iterations on potentials ``f, g`` (``A_ij = e^{S_ij + f_i + g_j}``):
    ``g = -LSE_i(S + f)`` makes the columns exact, then ``f' = -LSE_j(S + g)``; the row sums
    before that update are ``e^{f - f'}``, so ``max |e^{f - f'} - 1| < tol`` stops the loop
    with the columns exact and the rows within ``tol``. Nothing overflows at any ``beta``.
    Without enough memory for ``S`` the logits are recomputed tile by tile each iteration.

    References:
        Sinkhorn, R. (1964). A relationship between arbitrary positive matrices and doubly
        stochastic matrices. Ann. Math. Statist. 35, 876-879.
    """

    name = "sinkhorn"

    def __init__(self, beta: float, causal: bool = False, *, iterations: int | None = None,
                 tol: float | None = None, **parameters: Any) -> None:
        """``iterations``, ``tol``: short names of ``sinkhorn_iterations``, ``sinkhorn_tol``."""
        for short, name in ((iterations, "sinkhorn_iterations"), (tol, "sinkhorn_tol")):
            if short is not None:
                parameters[name] = short
        super().__init__(beta, causal, **parameters)
        self.iterations = int(self.parameters["sinkhorn_iterations"])
        self.tol = float(self.parameters["sinkhorn_tol"])
        why = self.kind.causal_degenerate
        if self.causal and why is not None:
            msg = f"attention={self.name!r} with causal=True is degenerate: {why}"
            raise ValueError(msg)
        self.last_iterations = 0
        self.last_error = math.nan

    def potentials(
        self,
        q: np.ndarray,
        k: np.ndarray,
        tiling: Tiling,
        *,
        weights: np.ndarray | None = None,
        g0: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Potentials ``f, g`` (B, n) and a function that sweeps the logits tile by tile
        (:func:`meanfield.kernels.tiling.logit_tiles`: ``(batch slice, row slice, S)``).

        With ``weights`` ``w`` (B, n) (queries and keys the same nodes): the coupling
        ``pi_ij = w_i w_j e^{S_ij + f_i + g_j}`` with both marginals ``w`` (the weighted
        measure's Sinkhorn, docs/lagrangian.md), by the same iterations with ``log w`` added
        to the potential summed over; ``g0`` a warm start of ``g``.
        """
        xp = bk.namespace(q)
        dev = bk.device_of(q)
        lw = None if weights is None else _log(weights)
        B, n, _ = q.shape
        m = k.shape[1]
        qb = q * self.beta
        kt = bk.swap_last(k)
        # every iteration sweeps the logits twice: keep them when they fit (with two
        # temporaries of their size) in the memory limit, else recompute tile by tile
        size = bk.itemsize(q)
        keep = 3 * size * B * n * m <= tiling.memory_limit
        block = tiling.memory_limit if keep else block_for(q.shape[-1])
        tiles3 = Tiling(tiling.memory_limit, buffers=3, block=block, itemsize=size)
        kept = list(logit_tiles(qb, kt, tiles3, reuse=False)) if keep else None

        def sweep() -> Iterator[tuple[slice, slice, Any]]:
            return iter(kept) if kept is not None else logit_tiles(qb, kt, tiles3)

        def row_lse(g: Any) -> Any:
            out = bk.empty(q, (B, n))
            for bs, rs, S in sweep():
                out[bs, rs] = bk.logsumexp(S + g[bs, None, :], axis=-1)
            return out

        def col_lse(f: Any) -> Any:
            # streaming log-sum-exp over row tiles
            mx = xp.full((B, m), -math.inf, dtype=q.dtype, device=dev)
            acc = xp.zeros((B, m), dtype=q.dtype, device=dev)
            for bs, rs, S in sweep():
                T = S + f[bs, rs, None]
                tm = xp.max(T, axis=1)
                new = xp.maximum(mx[bs], tm)
                acc[bs] = acc[bs] * xp.exp(mx[bs] - new) + xp.sum(xp.exp(T - new[:, None, :]), axis=1)
                mx[bs] = new
            return mx + xp.log(acc)

        def plus(a: Any) -> Any:
            return a if lw is None else a + lw

        g = xp.zeros((B, m), dtype=q.dtype, device=dev) if g0 is None else g0
        f = -row_lse(plus(g) if (g0 is not None or lw is not None) else g)
        err = math.inf
        it = 0
        for it in range(1, self.iterations + 1):  # noqa: B007
            g = -col_lse(plus(f))
            f_new = -row_lse(plus(g))
            err = float(xp.max(xp.abs(xp.expm1(f - f_new))))
            if err < self.tol:
                break
            f = f_new
        if err >= self.tol and len(list(tiles3.tiles(B, n, m))) == 1 and n <= _NEWTON_MAX_N and lw is None:
            # the dense Newton polish runs in NumPy on the host (small n only)
            fn, gn, err = self._newton(bk.to_numpy(next(sweep())[2]),
                                       np.array(bk.to_numpy(f)), np.array(bk.to_numpy(g)))
            f, g = bk.like(q, fn), bk.like(q, gn)
        self.last_iterations = it
        self.last_error = err
        if err >= self.tol:
            msg = (
                f"Sinkhorn did not reach sinkhorn_tol={self.tol:g} in sinkhorn_iterations="
                f"{self.iterations} (row sums off by {err:.3g}); raise sinkhorn_iterations"
            )
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
        return f, g, sweep

    def _newton(
        self, S: np.ndarray, f: np.ndarray, g: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Polish the potentials by Newton's method on the convex dual
        ``F(f, g) = sum_ij e^{S_ij + f_i + g_j} - sum f - sum g`` (gradient: row and column
        sums minus 1; Hessian ``[[diag r, A], [A^T, diag c]]``, with ``g_n`` fixed as the
        gauge), for the small systems where plain Sinkhorn converges slowly (large ``beta``:
        the linear rate is ``sigma_2(A)^2``, close to 1 for a nearly diagonal ``A``).
        Quadratic convergence; a final column update makes the columns exact."""
        B, n, _ = S.shape
        err = math.inf
        for b in range(B):
            fb, gb = f[b].copy(), g[b].copy()
            for _ in range(_NEWTON_STEPS):
                A = np.exp(S[b] + fb[:, None] + gb[None, :])
                r, c = A.sum(axis=1), A.sum(axis=0)
                res = max(np.max(np.abs(r - 1)), np.max(np.abs(c - 1)))
                if res < 0.1 * self.tol:
                    break
                H = np.zeros((2 * n - 1, 2 * n - 1))
                H[:n, :n] = np.diag(r)
                H[:n, n:] = A[:, :-1]
                H[n:, :n] = A[:, :-1].T
                H[n:, n:] = np.diag(c[:-1])
                try:
                    step = np.linalg.solve(H, -np.concatenate([r - 1, c[:-1] - 1]))
                except np.linalg.LinAlgError:
                    break
                F0 = A.sum() - fb.sum() - gb.sum()
                t = 1.0
                while t > 1e-6:  # backtracking on the dual objective
                    fn = fb + t * step[:n]
                    gn = gb.copy()
                    gn[:-1] += t * step[n:]
                    F1 = np.exp(S[b] + fn[:, None] + gn[None, :]).sum() - fn.sum() - gn.sum()
                    if F1 <= F0:
                        break
                    t *= 0.5
                fb, gb = fn, gn
            gb = -logsumexp(S[b] + fb[:, None], axis=0)
            rows = np.exp(S[b] + fb[:, None] + gb[None, :]).sum(axis=1)
            f[b], g[b] = fb, gb
            err = max(err if err != math.inf else 0.0, float(np.max(np.abs(rows - 1))))
        return f, g, err

    def weights(self, q: np.ndarray, k: np.ndarray, tiling: Tiling) -> np.ndarray:
        """The full doubly stochastic matrices ``A`` (B, n, n) (for tests and plots)."""
        f, g, sweep = self.potentials(q, k, tiling)
        xp = bk.namespace(q)
        out = bk.empty(q, (q.shape[0], q.shape[1], k.shape[1]))
        for bs, rs, S in sweep():
            out[bs, rs] = xp.exp(S + f[bs, rs, None] + g[bs, None, :])
        return out

    def apply(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, tiling: Tiling, **kwargs: Any
    ) -> Any:
        """Softmax with the column bias ``g`` (:meth:`as_softmax`): rows exact, columns
        within ``tol``; the keywords of :meth:`_RowKernel.apply`."""
        softmax, g = self.as_softmax(q, k, tiling)
        return softmax.apply(q, k, v, tiling, bias=g, **kwargs)

    def as_softmax(
        self,
        q: np.ndarray,
        k: np.ndarray,
        tiling: Tiling,
        *,
        weights: np.ndarray | None = None,
        g0: np.ndarray | None = None,
    ) -> tuple[Softmax, np.ndarray]:
        """The Sinkhorn weights as softmax with a column bias: ``A_ij = w_j e^{S_ij + g_j} /
        sum_k w_k e^{S_ik + g_k}`` (the row potential ``f_i`` is the row normaliser), for the
        queries ``q`` of the nodes themselves (``k``'s tokens). Returns the softmax kernel
        and ``g`` (B, m), which stays fixed when the field is evaluated elsewhere."""
        _, g, _ = self.potentials(q, k, tiling, weights=weights, g0=g0)
        return Softmax(self.beta), g
