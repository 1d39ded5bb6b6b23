"""Row kernels: attention whose row ``i`` depends on the logits of row ``i`` only.

.. autosummary::
   RowKernel
   Softmax
   L2

One class, :class:`RowKernel`, computes every such kind from its registry entry (the
normalisation, the transform of the logits, the key bias); ``unnormalized`` and ``sigmoid``
have no class of their own (:func:`meanfield.kernels.get_kernel` gives them this one).
Conventions (docs/equations.md section 2):

* ``softmax``: ``A_ij = e^{beta <q_i, k_j>} / sum_k e^{beta <q_i, k_k>}`` (max-shifted).
* ``unnormalized``: ``A_ij = e^{beta <q_i, k_j>} / n``.
* ``l2``: ``A_ij`` proportional to ``e^{-beta |q_i - k_j|^2 / 2}``, rows summing to 1.
* ``sigmoid``: ``A_ij = sigmoid(beta <q_i, k_j> + b) / n``.

With the causal mask token ``i`` attends to ``j <= i`` only; the kernels that divide by ``n``
(``unnormalized``, ``sigmoid``) then divide by the number ``i + 1`` of attended tokens (the
empirical measure of the prefix).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from meanfield import backend as bk
from meanfield.kernels.base import GENERIC, Kernel
from meanfield.kernels.tiling import (
    Tiling,
    block_for,
    causal_mask,
    logit_tiles,
    tile_logits,
    value_columns,
    weighted_sum,
)

_SHIFT_SLACK = 600.0
"""A row bound ``c_i >= max_j S_ij`` replaces the row maximum (one pass saved) when it exceeds
a known logit of the row, the diagonal ``S_ii``, by less than this: then the largest weight
``e^{S_ij - c_i} >= e^{-600}`` cannot underflow, and weights below ``e^{-708}`` relative to
``c_i`` are below ``e^{-108}`` relative to the largest."""


class _RowKernel(Kernel):
    """A kernel whose rows are independent, written once as a loop over tiles of the logits
    ``S_ij = beta <q_i, k_j> + c_j`` (``c_j`` an optional column bias), on any array backend
    (:mod:`meanfield.backend`: NumPy or torch).

    Exponential kinds (``exponential = True``) take ``e^{S_ij - M_i}`` with ``M_i`` the row
    maximum, or a cheaper row bound (:meth:`row_bound`, see :data:`_SHIFT_SLACK`); the row
    sums needed by normalised kinds come out of the same product ``A [v, 1]``. Other kinds
    implement :meth:`transform`. On torch, the normalised exponential kinds without the
    Lagrangian solver's extras go through ``scaled_dot_product_attention`` (:meth:`_sdpa`).
    """

    def column_bias(self, k: Any) -> Any | None:
        """An additive term ``c_j`` of the logits: the entry's ``key_bias`` (``None``: zero)."""
        key_bias = self.kind.key_bias
        return None if key_bias is None else key_bias(self.beta, k)

    def row_bound(self, q: Any, k: Any) -> Any | None:
        """An upper bound ``c_i >= max_j S_ij`` (``q`` already times ``beta``), or ``None``.

        Cauchy-Schwarz: ``beta <q_i, k_j> <= beta |q_i| max_j |k_j|``.
        """
        xp = bk.namespace(q)
        kmax = xp.sqrt(xp.max(bk.rows_dot(k, k), axis=1))
        return xp.sqrt(bk.rows_dot(q, q)) * kmax[:, None]

    def transform(self, S: Any) -> None:
        """Non-exponential kinds: overwrite logits with weights (before ``/ count``), by the
        entry's :class:`~meanfield.attention.Transform`."""
        assert self.kind.transform is not None
        self.kind.transform.apply(S, self.parameters)

    def derivative(self, W: Any, out: Any) -> None:
        """Non-exponential kinds: ``phi'`` of the logits from the weights ``W`` into ``out``
        (the entry's :class:`~meanfield.attention.Transform`; a kind that declares the
        Lagrangian solver has it)."""
        transform = self.kind.transform
        if transform is None or transform.derivative is None:
            msg = (f"attention={self.name!r}: the derivative sums need the derivative of its "
                   "transform (Transform.derivative), which its entry does not give")
            raise ValueError(msg)
        transform.derivative(W, out)

    def _shift(self, qb: Any, k: Any, cb: Any | None) -> Any | None:
        if not self.exponential or qb.shape[1] != k.shape[1]:
            return None
        bound = self.row_bound(qb, k)
        if bound is None:
            return None
        xp = bk.namespace(qb)
        diag = bk.rows_dot(qb, k)
        if cb is not None:
            diag = diag + cb
        if not bool(xp.all(xp.isfinite(bound))) or float(xp.max(bound - diag)) > _SHIFT_SLACK:
            return None
        return bound

    def _sdpa(self, q: Any, k: Any, v: Any, cb: Any | None, tiling: Tiling) -> Any:
        """``out_i = sum_j A_ij v_j`` by ``torch.nn.functional.scaled_dot_product_attention``
        (which may dispatch to fused kernels), on the same tiles: the logits ``<beta q_i,
        k_j> + c_j`` (scale 1, the column bias and the causal mask as ``attn_mask``)."""
        import torch

        sdpa = torch.nn.functional.scaled_dot_product_attention
        B, n, _ = q.shape
        m = k.shape[1]
        qb = q * self.beta
        out = bk.empty(q, (B, n, v.shape[-1]))
        tiling = Tiling(tiling.memory_limit, buffers=2, block=block_for(q.shape[-1]),
                        itemsize=q.element_size())
        for bs, rs in tiling.tiles(B, n, m):
            mask = None if cb is None else cb[bs, None, :]
            whole = rs.start == 0 and rs.stop == n and n == m
            if self.causal and not (whole and mask is None):
                masked = causal_mask(rs.start, rs.stop, m, q)
                mask = (~masked if mask is None
                        else mask.expand(-1, rs.stop - rs.start, -1).masked_fill(masked, -math.inf))
            out[bs, rs] = sdpa(qb[bs, rs], k[bs], v[bs], attn_mask=mask, scale=1.0,
                               is_causal=self.causal and mask is None)
        return out

    def apply(
        self,
        q: Any,
        k: Any,
        v: Any,
        tiling: Tiling,
        *,
        weights: Any | None = None,
        bias: Any | None = None,
        labels: tuple[Any, Any] | None = None,
        mass: Any | None = None,
        extra: Any | None = None,
        second: float | tuple[Any, Any] | None = None,
    ) -> Any:
        """``out_i = sum_j A_ij v_j``; with the keywords, the weighted measure and the
        derivative sums of the Lagrangian solver (docs/lagrangian.md), in the same pass.

        Args:
            weights: ``(B, m)`` column weights ``w_j >= 0`` of a weighted measure: a column
                bias ``log w_j`` for the exponential kinds, folded into the values otherwise.
            bias: ``(B, m)`` a further column bias of the logits (Sinkhorn potentials).
            labels: ``(query labels (B, n), key labels (B, m))``: query ``i`` attends to the
                keys with label ``<=`` its own (replaces the index mask of ``causal``).
            mass: ``(B, n)`` divisor of the kinds that are not normalised (replaces ``n`` or
                ``i + 1``): the mass the query attends to.
            extra: ``(B, m, e)`` further value columns, summed with the derivative weights
                ``phi'(S_ij)`` (``phi`` the weight as a function of the logit; ``phi' = phi``
                for the exponential kinds) and divided like ``out``.
            second: the sums ``beta sum_j phi'(S_ij) t_ij u_ij`` with ``u_ij = <q_i, k_j>``
                and ``t_ij = <qt_i, kt_j>`` for ``second = (qt, kt)``, or ``t = second * u``
                for a number; divided like ``out``.

        Returns:
            ``out`` ``(B, n, dv)``; with ``extra`` or ``second``, the triple ``(out,
            extra_out (B, n, e) or None, second_out (B, n) or None)``.
        """
        derivs = extra is not None or second is not None
        cb = self._logit_bias(k, bias, weights)
        if (not bk.is_numpy(q) and self.exponential and self.normalized and not derivs
                and weights is None and labels is None and mass is None):
            return self._sdpa(q, k, v, cb, tiling)
        dv = v.shape[-1]
        run = _Pass(self, q, k, self._values(v, weights, extra), dv, tiling, cb, weights=weights,
                    labels=labels, mass=mass, extra=extra, second=second)
        for bs, rs, L in logit_tiles(run.qb, run.kt, run.tiling, columns=run.columns):
            run.tile(bs, rs, L)
        out, eout = run.out, run.eout
        if not derivs:
            return out
        main = out[..., :dv]
        if extra is not None and self.exponential:
            eout = out[..., dv:]
        return main, eout, run.sout

    def _logit_bias(self, k: Any, bias: Any | None, weights: Any | None) -> Any | None:
        """The column bias ``c_j`` of the logits: the kind's own, plus ``bias``, plus ``log
        w_j`` for the exponential kinds."""
        cb = self.column_bias(k)
        for c in (bias, None if weights is None or not self.exponential else _log(weights)):
            if c is not None:
                cb = c if cb is None else cb + c
        return cb

    def _values(self, v: Any, weights: Any | None, extra: Any | None) -> Any:
        """The value columns of the product ``A v``: ``v`` (times the weights for the other
        kinds), the ``extra`` columns for the exponential kinds (``phi' = phi``: the same
        product), and a column of ones for the row sums of the normalised kinds."""
        xp = bk.namespace(v)
        if weights is not None and not self.exponential:
            v = v * weights[..., None]
        if extra is not None and self.exponential:
            v = xp.concat([v, extra], axis=-1)  # phi' = phi: the same product
        if self.normalized:  # row sums from the same product: A [v, 1]
            v = xp.concat([v, xp.ones(tuple(v.shape[:2]) + (1,), dtype=v.dtype,
                                      device=bk.device_of(v))], axis=-1)
        return v


class _Pass:
    """One tiled pass of :meth:`_RowKernel.apply`: the constants of the call, its outputs
    and the work of one tile of logits (:func:`meanfield.kernels.tiling.logit_tiles`)."""

    def __init__(self, kernel: _RowKernel, q: Any, k: Any, v: Any, dv: int, tiling: Tiling,
                 cb: Any | None, *, weights: Any | None, labels: tuple[Any, Any] | None,
                 mass: Any | None, extra: Any | None,
                 second: float | tuple[Any, Any] | None) -> None:
        xp = bk.namespace(q)
        B, n, _ = q.shape
        m = k.shape[1]
        self.kernel, self.xp, self.dev, self.dtype, self.m = kernel, xp, bk.device_of(q), q.dtype, m
        self.v, self.cb, self.weights, self.labels, self.mass = v, cb, weights, labels, mass
        self.extra, self.second = extra, second
        self.derivs = extra is not None or second is not None
        self.dvt = v.shape[-1]
        self.out = bk.empty(q, (B, n, self.dvt - kernel.normalized))
        self.eout = (bk.empty(q, (B, n, extra.shape[-1]))
                     if (extra is not None and not kernel.exponential) else None)
        self.sout = bk.empty(q, (B, n)) if second is not None else None
        self.qb = q * kernel.beta if kernel.beta != 1.0 else q
        self.kt = bk.swap_last(k)
        shift = kernel._shift(self.qb, k, cb)
        if labels is not None and not (n == m and bool(xp.all(labels[0] == labels[1]))):
            shift = None  # the diagonal logit (the row bound's witness) may be masked
        self.shift = shift
        # keys sorted by label: a query attends to a prefix of the columns
        self.sorted_keys = (labels is not None
                            and bool(xp.all(labels[1][..., 1:] >= labels[1][..., :-1])))
        if self.sorted_keys:
            self.qlab, self.klab = (bk.to_numpy(a) for a in labels)  # type: ignore[union-attr]
        self.pair = isinstance(second, tuple)
        if self.pair:
            self.qt = second[0]  # type: ignore[index]
            self.ktt = bk.swap_last(second[1])  # type: ignore[index]
        self.vcols = value_columns(v, components=dv)
        # the tile plus one temporary of its size (broadcast logits, causal mask), plus the
        # unscaled logits, the t tile and the derivative weights when asked for
        nbuf = 2 + (second is not None) + self.pair + (self.derivs and not kernel.exponential)
        self.tiling = Tiling(tiling.memory_limit, buffers=nbuf, block=block_for(q.shape[-1]),
                             itemsize=bk.itemsize(q))
        size = self.tiling.tile_entries(B, n, m)
        # the buffer of logit_tiles holds the tile, or with second the logits beside it
        self.buf = bk.empty(q, (size,)) if second is not None else None
        self.tbuf = bk.empty(q, (size,)) if self.pair else None
        self.pbuf = bk.empty(q, (size,)) if self.derivs and not kernel.exponential else None
        self.index_causal = kernel.causal and labels is None

    def columns(self, bs: slice, rs: slice) -> int:
        """The columns the rows ``rs`` attend to: a prefix when causal or sorted by label."""
        mm = min(self.m, rs.stop) if self.index_causal else self.m  # causal: j <= i < r1 only
        if self.sorted_keys:
            top = float(np.max(self.qlab[bs, rs]))
            mm = max(1, max(int(np.searchsorted(self.klab[i], top, side="right"))
                            for i in range(bs.start, bs.stop)))
        return mm

    def tile(self, bs: slice, rs: slice, L: Any) -> None:
        """The outputs of the rows ``rs`` from their logits ``L`` (overwritten)."""
        if self.buf is None:
            S, U = L, None
        else:  # keep the logits beta u_ij next to the weights
            S, U = _view(self.buf, L.shape), L
            S[...] = U
        mm = S.shape[-1]
        if self.cb is not None:
            S += self.cb[bs, None, :mm]
        count = self.mask(bs, rs, S)
        P, M = self.weigh(bs, rs, S)
        res = weighted_sum(S, self.v[bs, :mm], None if self.vcols is None else self.vcols[:, bs, :mm])
        if self.eout is not None:
            self.eout[bs, rs] = bk.matmul(P, self.extra[bs, :mm])  # type: ignore[index]
        if self.sout is not None:
            self.second_sums(bs, rs, P, U)
        self.store(bs, rs, res, M, count)

    def mask(self, bs: slice, rs: slice, S: Any) -> Any:
        """Mask the logits ``S`` (``-inf``) of the keys a row does not attend to; return the
        divisor of the kinds that are not normalised."""
        xp, r0, r1, mm = self.xp, rs.start, rs.stop, S.shape[-1]
        if self.index_causal:
            count = xp.arange(r0 + 1, r1 + 1, dtype=self.dtype, device=self.dev)[None, :, None]
            bk.masked_fill_(S, causal_mask(r0, r1, mm, S), -math.inf)
        else:
            count = xp.full((1, 1, 1), float(self.m), dtype=self.dtype, device=self.dev)
        if self.labels is not None:
            bk.masked_fill_(S, self.labels[1][bs, None, :mm] > self.labels[0][bs, rs, None],
                            -math.inf)
        if self.mass is not None:
            count = self.mass[bs, rs, None]
        return count

    def weigh(self, bs: slice, rs: slice, S: Any) -> tuple[Any, Any | None]:
        """Logits ``S`` to weights in place; return the derivative weights ``phi'(S)`` and
        the shift ``M`` of the exponential kinds (``None`` otherwise)."""
        kernel = self.kernel
        P, M = S, None
        if kernel.exponential:
            M = self.xp.max(S, axis=-1, keepdims=True) if self.shift is None else self.shift[bs, rs, None]
            S -= M
            bk.exp_(S)
        else:
            kernel.transform(S)
            if self.derivs:
                P = _view(self.pbuf, S.shape)
                kernel.derivative(S, P)  # phi' from the weights phi (the kind's Transform)
                if self.weights is not None:
                    P *= self.weights[bs, None, : S.shape[-1]]
        return P, M

    def second_sums(self, bs: slice, rs: slice, P: Any, U: Any) -> None:
        """``beta sum_j phi'(S_ij) t_ij u_ij`` of the rows ``rs`` (before the division)."""
        sout, beta = self.sout, self.kernel.beta
        if self.pair:  # beta sum P t u = sum P t (beta u)
            T = _view(self.tbuf, U.shape)
            tile_logits(self.qt[bs, rs], self.ktt[bs, :, : U.shape[-1]], T)
            sout[bs, rs] = bk.einsum("brm,brm,brm->br", P, T, U)  # type: ignore[index]
        elif beta != 0:  # t = s u: beta sum P s u^2 = s sum P (beta u)^2 / beta
            sout[bs, rs] = bk.einsum("brm,brm,brm->br", P, U, U) * (  # type: ignore[index]
                float(self.second) / beta)  # type: ignore[arg-type]
        else:
            sout[bs, rs] = 0.0  # type: ignore[index]

    def store(self, bs: slice, rs: slice, res: Any, M: Any | None, count: Any) -> None:
        """Divide the sums ``res = A [v, 1]`` of the rows ``rs`` (by the row sums, the
        shifted ``n`` or the mass) into the outputs."""
        out, eout, sout, dvt = self.out, self.eout, self.sout, self.dvt
        if self.kernel.normalized:
            den = res[..., dvt - 1:]
            out[bs, rs] = res[..., : dvt - 1] / den
            if sout is not None:
                sout[bs, rs] /= den[..., 0]
        elif self.kernel.exponential:
            scale = self.xp.exp(M) / count
            out[bs, rs] = res * scale
            if sout is not None:
                sout[bs, rs] *= scale[..., 0]
        else:
            out[bs, rs] = res / count
            if eout is not None:
                eout[bs, rs] /= count
            if sout is not None:
                sout[bs, rs] /= count[..., 0]


def _view(buf: Any, shape: tuple[int, ...]) -> Any:
    """The first entries of the flat buffer ``buf`` as an array of ``shape``."""
    return buf[: math.prod(shape)].reshape(shape)


def _log(w: Any) -> Any:
    """``log w`` with ``log 0 = -inf`` (a zero weight drops the column), silently."""
    if bk.is_numpy(w):
        with np.errstate(divide="ignore"):
            return np.log(w)
    return bk.namespace(w).log(w)

class Softmax(_RowKernel):
    """``softmax``: SA (2.3), ``A_ij`` the row-normalised ``e^{beta <q_i, k_j>}``,
    max-shifted (by the row maximum or a row bound within ``600`` of it): no overflow at any
    ``beta``."""

    name = "softmax"


class L2(_RowKernel):
    """``l2``: ``A_ij`` proportional to ``e^{-beta |q_i - k_j|^2 / 2}``, rows summing to 1.

    ``-|q_i - k_j|^2 / 2 = <q_i, k_j> - |k_j|^2 / 2 - |q_i|^2 / 2``; the last term is constant
    along a row and cancels, so this is softmax with the column bias ``-beta |k_j|^2 / 2``,
    and the logits are bounded by ``beta |q_i|^2 / 2`` (completing the square).
    """

    name = "l2"

    def row_bound(self, q: Any, k: Any) -> Any:
        # q is beta q: beta (<q, k> - |k|^2/2) <= beta |q|^2 / 2 = |beta q|^2 / (2 beta)
        if self.beta == 0:
            return bk.namespace(q).zeros(tuple(q.shape[:2]), dtype=q.dtype, device=bk.device_of(q))
        return bk.rows_dot(q, q) / (2.0 * self.beta)


RowKernel = _RowKernel
"""The tiled row kernel under a public name: the kernel of every kind whose row ``i`` depends
on the logits of row ``i`` only (docs/extending.md). It takes the normalisation, the transform
of the logits (and its derivative) and the column bias from the kind's registry entry, so such
a kind needs no class (:data:`meanfield.kernels.base.GENERIC`: ``unnormalized`` and
``sigmoid`` have none); a subclass adds what the entry cannot say (``l2``'s row bound)."""

GENERIC.update(rows=_RowKernel, count=_RowKernel)
