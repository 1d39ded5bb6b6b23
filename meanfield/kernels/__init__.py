"""Attention kernels: the weights ``A_ij`` of docs/equations.md section 2, tiled and batched.

.. autosummary::
   Kernel
   Softmax
   Unnormalized
   L2
   Sigmoid
   Sinkhorn
   registered_kernels
   get_kernel
   Tiling

Every kernel maps queries ``q``, keys ``k`` and values ``v`` (shapes ``(B, n, d)``) to the
attention output ``out_i = sum_j A_ij v_j`` (shape ``(B, n, d)``), *before* the projection
``P_x^perp``. The ``n x n`` weights never exist at once unless they fit: rows are processed in
tiles whose size is set by a memory limit (:class:`Tiling`), and every tile is two matrix
products (``q k^T`` and ``A v``) plus elementwise work done in place.

Kernels register themselves by ``name`` through ``__init_subclass__``; the names are the
attention kinds of :mod:`meanfield.attention` that declare the ``"particles"`` solver: one
kernel class per such kind, and a kernel for any other name is refused when its class is
defined.

Conventions (docs/equations.md section 2):

* ``softmax``: ``A_ij = e^{beta <q_i, k_j>} / sum_k e^{beta <q_i, k_k>}`` (max-shifted).
* ``unnormalized``: ``A_ij = e^{beta <q_i, k_j>} / n``.
* ``l2``: ``A_ij`` proportional to ``e^{-beta |q_i - k_j|^2 / 2}``, rows summing to 1.
* ``sigmoid``: ``A_ij = sigmoid(beta <q_i, k_j> + b) / n``.
* ``sinkhorn``: ``A = diag(a) E diag(b)``, ``E_ij = e^{beta <q_i, k_j>}``, rows and columns
  summing to 1, by Sinkhorn iterations in the log domain.

With the causal mask token ``i`` attends to ``j <= i`` only; the kernels that divide by ``n``
(``unnormalized``, ``sigmoid``) then divide by the number ``i + 1`` of attended tokens (the
empirical measure of the prefix). A causal Sinkhorn matrix would be lower triangular and
doubly stochastic, hence the identity: that combination is rejected.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

import numpy as np
from scipy.special import logsumexp

from meanfield import attention as attention_registry
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


_NEWTON_MAX_N = 1024
"""Largest ``n`` for the dense Newton polish of Sinkhorn (one ``(2n)^3`` solve per step)."""
_NEWTON_STEPS = 30


def _causal_mask(r0: int, r1: int, m: int, like: Any) -> Any:
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

_SHIFT_SLACK = 600.0
"""A row bound ``c_i >= max_j S_ij`` replaces the row maximum (one pass saved) when it exceeds
a known logit of the row, the diagonal ``S_ii``, by less than this: then the largest weight
``e^{S_ij - c_i} >= e^{-600}`` cannot underflow, and weights below ``e^{-708}`` relative to
``c_i`` are below ``e^{-108}`` relative to the largest."""


def block_for(d: int) -> int:
    """Preferred tile bytes for inner dimension ``d``: small (cache) when memory-bound, large
    (few BLAS calls) when compute-bound."""
    return _DEFAULT_BLOCK if d <= _SMALL_D else _LARGE_BLOCK


def _logits(q: Any, kt: Any, out: Any) -> Any:
    """``out = q @ kt`` for ``q`` (b, r, d), ``kt`` (b, d, m) (NumPy or torch)."""
    d = q.shape[-1]
    if d > _SMALL_D or kt.shape[-1] < _LONG_ROW:
        return bk.matmul(q, kt, out=out)
    bk.multiply(q[:, :, 0, None], kt[:, None, 0, :], out=out)
    for c in range(1, d):
        out += q[:, :, c, None] * kt[:, None, c, :]
    return out


def _weighted_sum(S: Any, v: Any, vcols: Any | None) -> Any:
    """``S @ v`` for ``S`` (b, r, m), ``v`` (b, m, dv); ``vcols`` (dv, b, m) (small ``dv``,
    long rows): one component at a time without BLAS."""
    if vcols is None or S.shape[-1] < _LONG_ROW:
        return bk.matmul(S, v)
    out = bk.empty(S, tuple(S.shape[:2]) + (vcols.shape[0],))
    for c in range(vcols.shape[0]):
        out[..., c] = bk.einsum("brm,bm->br", S, vcols[c])
    return out


class Kernel(ABC):
    """An attention kind (abstract). Subclasses set ``name`` and register themselves.

    Args:
        beta: inverse temperature.
        causal: apply the causal mask.
        bias: additive bias inside the kernel (used by ``sigmoid``).
        iterations, tol: Sinkhorn settings.
    """

    name: ClassVar[str]
    """The attention kind: a canonical name of :mod:`meanfield.attention` whose entry
    declares ``"particles"``."""
    normalized: ClassVar[bool]
    """Whether the rows of ``A`` sum to 1 (then ``beta = 0`` gives the plain mean)."""
    registry: ClassVar[dict[str, type[Kernel]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            kind = attention_registry.require(cls.name, "particles")
            if kind.name != cls.name:
                msg = (f"Kernel {cls.__name__}.name must be the canonical name {kind.name!r} "
                       f"of its attention kind, got the alias {cls.name!r}")
                raise ValueError(msg)
            Kernel.registry[cls.name] = cls

    def __init__(
        self,
        beta: float,
        causal: bool = False,
        bias: float = 0.0,
        iterations: int = 200,
        tol: float = 1e-10,
    ) -> None:
        self.beta = float(beta)
        self.causal = bool(causal)
        self.bias = float(bias)
        self.iterations = int(iterations)
        self.tol = float(tol)

    @classmethod
    def from_model(cls, model: Any) -> Kernel:
        """The kernel of a :class:`meanfield.Model` (its attention kind and settings)."""
        kernel_cls = get_kernel(model.attention)
        return kernel_cls(
            beta=model.beta,
            causal=model.causal,
            bias=model.sigmoid_bias,
            iterations=model.sinkhorn_iterations,
            tol=model.sinkhorn_tol,
        )

    @abstractmethod
    def apply(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, tiling: Tiling
    ) -> np.ndarray:
        """``out_i = sum_j A_ij v_j`` for ``q, k, v`` of shape ``(B, n, d)``."""


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

    exponential: ClassVar[bool] = True

    def column_bias(self, k: Any) -> Any | None:
        """An additive term ``c_j`` of the logits (``None``: zero)."""
        return None

    def row_bound(self, q: Any, k: Any) -> Any | None:
        """An upper bound ``c_i >= max_j S_ij`` (``q`` already times ``beta``), or ``None``.

        Cauchy-Schwarz: ``beta <q_i, k_j> <= beta |q_i| max_j |k_j|``.
        """
        xp = bk.namespace(q)
        kmax = xp.sqrt(xp.max(bk.rows_dot(k, k), axis=1))
        return xp.sqrt(bk.rows_dot(q, q)) * kmax[:, None]

    def transform(self, S: Any) -> None:
        """Non-exponential kinds: overwrite logits with weights (before ``/ count``)."""
        raise NotImplementedError

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
                masked = _causal_mask(rs.start, rs.stop, m, q)
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
        xp = bk.namespace(q)
        dev = bk.device_of(q)
        B, n, _ = q.shape
        m = k.shape[1]
        dv = v.shape[-1]
        derivs = extra is not None or second is not None
        ne = 0 if extra is None else extra.shape[-1]
        cb = self.column_bias(k)
        for c in (bias, None if weights is None or not self.exponential else _log(weights)):
            if c is not None:
                cb = c if cb is None else cb + c
        if (not bk.is_numpy(q) and self.exponential and self.normalized and not derivs
                and weights is None and labels is None and mass is None):
            return self._sdpa(q, k, v, cb, tiling)
        if weights is not None and not self.exponential:
            v = v * weights[..., None]
        if extra is not None and self.exponential:
            v = xp.concat([v, extra], axis=-1)  # phi' = phi: the same product
        if self.normalized:  # row sums from the same product: A [v, 1]
            v = xp.concat([v, xp.ones(tuple(v.shape[:2]) + (1,), dtype=v.dtype, device=dev)],
                          axis=-1)
        dvt = v.shape[-1]
        out = bk.empty(q, (B, n, dvt - self.normalized))
        eout = bk.empty(q, (B, n, ne)) if (extra is not None and not self.exponential) else None
        sout = bk.empty(q, (B, n)) if second is not None else None
        qb = q * self.beta if self.beta != 1.0 else q
        kt = bk.swap_last(k)
        shift = self._shift(qb, k, cb)
        if labels is not None and not (n == m and bool(xp.all(labels[0] == labels[1]))):
            shift = None  # the diagonal logit (the row bound's witness) may be masked
        # keys sorted by label: a query attends to a prefix of the columns
        sorted_keys = labels is not None and bool(xp.all(labels[1][..., 1:] >= labels[1][..., :-1]))
        if sorted_keys:
            qlab, klab = (bk.to_numpy(a) for a in labels)  # type: ignore[union-attr]
        pair = isinstance(second, tuple)
        if pair:
            qt = second[0]  # type: ignore[index]
            ktt = bk.swap_last(second[1])  # type: ignore[index]
        small = dv <= _SMALL_D and m >= _LONG_ROW
        vcols = bk.contiguous(xp.permute_dims(v, (2, 0, 1))) if small else None
        # the tile plus one temporary of its size (broadcast logits, causal mask), plus the
        # unscaled logits, the t tile and the derivative weights when asked for
        nbuf = 2 + (second is not None) + pair + (derivs and not self.exponential)
        tiling = Tiling(tiling.memory_limit, buffers=nbuf, block=block_for(q.shape[-1]),
                        itemsize=bk.itemsize(q))
        size = min(tiling.entries(), B * n * m)
        buf = bk.empty(q, (size,))
        ubuf = bk.empty(q, (size,)) if second is not None else None
        tbuf = bk.empty(q, (size,)) if pair else None
        pbuf = bk.empty(q, (size,)) if derivs and not self.exponential else None
        index_causal = self.causal and labels is None
        for bs, rs in tiling.tiles(B, n, m):
            b = bs.stop - bs.start
            r0, r1 = rs.start, rs.stop
            mm = min(m, r1) if index_causal else m  # causal: columns j <= i < r1 only
            if sorted_keys:
                top = float(np.max(qlab[bs, rs]))
                mm = max(1, max(int(np.searchsorted(klab[i], top, side="right"))
                                for i in range(bs.start, bs.stop)))
            shape = (b, r1 - r0, mm)
            S = buf[: b * (r1 - r0) * mm].reshape(shape)
            if ubuf is None:
                _logits(qb[bs, rs], kt[bs, :, :mm], S)
                if cb is not None:
                    S += cb[bs, None, :mm]
            else:  # keep the logits beta u_ij next to the weights
                U = ubuf[: b * (r1 - r0) * mm].reshape(shape)
                _logits(qb[bs, rs], kt[bs, :, :mm], U)
                S[...] = U
                if cb is not None:
                    S += cb[bs, None, :mm]
            if index_causal:
                count = xp.arange(r0 + 1, r1 + 1, dtype=q.dtype, device=dev)[None, :, None]
                bk.masked_fill_(S, _causal_mask(r0, r1, mm, S), -math.inf)
            else:
                count = xp.full((1, 1, 1), float(m), dtype=q.dtype, device=dev)
            if labels is not None:
                bk.masked_fill_(S, labels[1][bs, None, :mm] > labels[0][bs, rs, None], -math.inf)
            if mass is not None:
                count = mass[bs, rs, None]
            P = S
            if self.exponential:
                M = xp.max(S, axis=-1, keepdims=True) if shift is None else shift[bs, rs, None]
                S -= M
                bk.exp_(S)
            else:
                self.transform(S)
                if derivs:
                    P = pbuf[: b * (r1 - r0) * mm].reshape(shape)  # type: ignore[index]
                    bk.multiply(S, -1.0, out=P)
                    P += 1.0
                    P *= S  # sigmoid' = sigmoid (1 - sigmoid)
                    if weights is not None:
                        P *= weights[bs, None, :mm]
            res = _weighted_sum(S, v[bs, :mm], None if vcols is None else vcols[:, bs, :mm])
            if eout is not None:
                eout[bs, rs] = bk.matmul(P, extra[bs, :mm])  # type: ignore[index]
            if sout is not None:
                if pair:  # beta sum P t u = sum P t (beta u)
                    T = tbuf[: b * (r1 - r0) * mm].reshape(shape)  # type: ignore[index]
                    _logits(qt[bs, rs], ktt[bs, :, :mm], T)
                    sout[bs, rs] = bk.einsum("brm,brm,brm->br", P, T, U)
                elif self.beta != 0:  # t = s u: beta sum P s u^2 = s sum P (beta u)^2 / beta
                    sout[bs, rs] = bk.einsum("brm,brm,brm->br", P, U, U) * (
                        float(second) / self.beta)  # type: ignore[arg-type]
                else:
                    sout[bs, rs] = 0.0
            if self.normalized:
                den = res[..., dvt - 1:]
                out[bs, rs] = res[..., : dvt - 1] / den
                if sout is not None:
                    sout[bs, rs] /= den[..., 0]
            elif self.exponential:
                scale = xp.exp(M) / count
                out[bs, rs] = res * scale
                if sout is not None:
                    sout[bs, rs] *= scale[..., 0]
            else:
                out[bs, rs] = res / count
                if eout is not None:
                    eout[bs, rs] /= count
                if sout is not None:
                    sout[bs, rs] /= count[..., 0]
        if not derivs:
            return out
        main = out[..., :dv]
        if extra is not None and self.exponential:
            eout = out[..., dv:]
        return main, eout, sout


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
    normalized = True


class L2(_RowKernel):
    """``l2``: ``A_ij`` proportional to ``e^{-beta |q_i - k_j|^2 / 2}``, rows summing to 1.

    ``-|q_i - k_j|^2 / 2 = <q_i, k_j> - |k_j|^2 / 2 - |q_i|^2 / 2``; the last term is constant
    along a row and cancels, so this is softmax with the column bias ``-beta |k_j|^2 / 2``,
    and the logits are bounded by ``beta |q_i|^2 / 2`` (completing the square).
    """

    name = "l2"
    normalized = True

    def column_bias(self, k: Any) -> Any:
        return -0.5 * self.beta * bk.rows_dot(k, k)

    def row_bound(self, q: Any, k: Any) -> Any:
        # q is beta q: beta (<q, k> - |k|^2/2) <= beta |q|^2 / 2 = |beta q|^2 / (2 beta)
        if self.beta == 0:
            return bk.namespace(q).zeros(tuple(q.shape[:2]), dtype=q.dtype, device=bk.device_of(q))
        return bk.rows_dot(q, q) / (2.0 * self.beta)


class Unnormalized(_RowKernel):
    """``unnormalized``: USA, ``A_ij = e^{beta <q_i, k_j>} / n`` (``/(i+1)`` if causal).

    Computed as ``e^{M_i} sum_j e^{S_ij - M_i}`` with ``M_i`` the row maximum (or bound): the
    shifted sum cannot overflow; the result overflows only where the true value does.
    """

    name = "unnormalized"
    normalized = False


class Sigmoid(_RowKernel):
    """``sigmoid``: ``A_ij = sigmoid(beta <q_i, k_j> + b) / n`` (``/(i+1)`` if causal)."""

    name = "sigmoid"
    normalized = False
    exponential = False

    def transform(self, S: Any) -> None:
        if self.bias:
            S += self.bias
        bk.sigmoid_(S)  # sigmoid(-inf) = 0: the causal mask carries over


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
    normalized = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.causal:
            msg = (
                "attention='sinkhorn' with causal=True is degenerate: the only lower-"
                "triangular doubly stochastic matrix is the identity"
            )
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
        """Potentials ``f, g`` (B, n) and a function giving the logits of a tile.

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
        tiles = list(Tiling(tiling.memory_limit, buffers=3, block=block, itemsize=size)
                     .tiles(B, n, m))
        cache: dict[tuple[int, int, int, int], Any] = {}

        def logits(bs: slice, rs: slice) -> Any:
            key = (bs.start, bs.stop, rs.start, rs.stop)
            if key in cache:
                return cache[key]
            S = _logits(qb[bs, rs], kt[bs], bk.empty(q, (bs.stop - bs.start, rs.stop - rs.start, m)))
            if keep:
                cache[key] = S
            return S

        def row_lse(g: Any) -> Any:
            out = bk.empty(q, (B, n))
            for bs, rs in tiles:
                out[bs, rs] = bk.logsumexp(logits(bs, rs) + g[bs, None, :], axis=-1)
            return out

        def col_lse(f: Any) -> Any:
            # streaming log-sum-exp over row tiles
            mx = xp.full((B, m), -math.inf, dtype=q.dtype, device=dev)
            acc = xp.zeros((B, m), dtype=q.dtype, device=dev)
            for bs, rs in tiles:
                T = logits(bs, rs) + f[bs, rs, None]
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
        if err >= self.tol and len(tiles) == 1 and n <= _NEWTON_MAX_N and lw is None:
            # the dense Newton polish runs in NumPy on the host (small n only)
            fn, gn, err = self._newton(bk.to_numpy(logits(tiles[0][0], tiles[0][1])),
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
        return f, g, (logits, tiles)

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
        f, g, (logits, tiles) = self.potentials(q, k, tiling)
        xp = bk.namespace(q)
        out = bk.empty(q, (q.shape[0], q.shape[1], k.shape[1]))
        for bs, rs in tiles:
            out[bs, rs] = xp.exp(logits(bs, rs) + f[bs, rs, None] + g[bs, None, :])
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


def registered_kernels() -> tuple[str, ...]:
    """Names of the registered attention kernels."""
    return tuple(sorted(Kernel.registry))


def get_kernel(name: str) -> type[Kernel]:
    """The kernel class of the attention kind ``name`` (an alias or any case will do).

    ``ValueError`` for an unknown kind (listing the known ones), for a kind the particle
    system does not support (naming the solvers that do), and for a supported kind whose
    kernel class is missing.
    """
    kind = attention_registry.require(name, "particles")
    try:
        return Kernel.registry[kind.name]
    except KeyError:
        msg = (f"attention={kind.name!r} declares the 'particles' solver but no kernel is "
               f"registered for it (registered: {registered_kernels()}); define a "
               f"meanfield.kernels.Kernel subclass with name = {kind.name!r}")
        raise ValueError(msg) from None



def prefix_mass(weights: np.ndarray, qlab: np.ndarray, klab: np.ndarray) -> np.ndarray:
    """``sum_{j: label_j <= label_i} w_j`` for every query ``i``: ``(B, n)`` (the mass a
    causal mask lets query ``i`` see; docs/equations.md section 2, causal attention)."""
    out = np.empty(qlab.shape)
    for b in range(qlab.shape[0]):
        order = np.argsort(klab[b], kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(weights[b][order])])
        out[b] = cum[np.searchsorted(klab[b][order], qlab[b], side="right")]
    return out


__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "L2",
    "Kernel",
    "Sigmoid",
    "Sinkhorn",
    "Softmax",
    "Tiling",
    "Unnormalized",
    "get_kernel",
    "prefix_mass",
    "registered_kernels",
]
