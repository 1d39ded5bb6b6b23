"""Attention kernels: the weights ``A_ij`` of docs/equations.md section 2, tiled and batched.

.. autosummary::
   Kernel
   RowKernel
   Softmax
   L2
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
attention kinds of :mod:`meanfield.attention` that declare the ``"particles"`` solver, and a
kernel for any other name is refused when its class is defined. A kind whose rows are
independent (normalised by their sum or a count) needs no class: :func:`get_kernel` gives it
the generic :class:`RowKernel` (``unnormalized``, ``sigmoid``); a class of its own is written
only for what the entry cannot say (``l2``'s row bound, ``sinkhorn``'s iterations).

The package: :mod:`~meanfield.kernels.tiling` (the memory bound and the products of a tile),
:mod:`~meanfield.kernels.base` (the contract and the registry), :mod:`~meanfield.kernels.rows`
(the row kernel, softmax, L2), :mod:`~meanfield.kernels.sinkhorn`, the fast
summation of the field (:mod:`~meanfield.kernels.fastsum`, :mod:`~meanfield.kernels.fastsum_general`),
and :mod:`~meanfield.kernels.interaction`, the field and energy of a weighted measure of points
(what the particle system and the Lagrangian solver integrate).
"""

from __future__ import annotations

from meanfield.kernels.base import Kernel, get_kernel, prefix_mass, registered_kernels
from meanfield.kernels.rows import L2, RowKernel, Softmax
from meanfield.kernels.sinkhorn import Sinkhorn
from meanfield.kernels.tiling import DEFAULT_MEMORY_LIMIT, Tiling

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "L2",
    "Kernel",
    "RowKernel",
    "Sinkhorn",
    "Softmax",
    "Tiling",
    "get_kernel",
    "prefix_mass",
    "registered_kernels",
]
