"""The circle in angles: the form (7.1) of the paper.

.. autosummary::
   angle_velocity
   to_angles
   from_angles

For ``Q = K = I``, ``V = value I`` on ``S^1`` and ``x_i = (cos theta_i, sin theta_i)``::

    USA (7.1): theta_i' = -(value/n) sum_j e^{beta cos(theta_i - theta_j)} sin(theta_i - theta_j)
    SA:        the same divided by (1/n) sum_j e^{beta cos(theta_i - theta_j)}

(causal: sums over ``j <= i`` and ``n -> i + 1``). Written with the angle differences
directly, independently of :mod:`particles.velocity`, so that each checks the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, Tiling
from particles.inputs import as_angles


def check_angle_model(model: Any) -> None:
    """The angle form needs ``Q = K = I`` and attention ``softmax`` or ``unnormalized``."""
    if not model.is_identity:
        msg = "the angle form (7.1) needs Q = K = V = I (no matrices, no heads) in the model"
        raise ValueError(msg)
    attention_registry.require(model.attention, "angles")


def to_angles(x: np.ndarray) -> np.ndarray:
    """Angles in ``[0, 2 pi)`` of points ``(..., 2)`` on the circle."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] != 2:
        msg = f"points on the circle need d = 2, got shape {x.shape}"
        raise ValueError(msg)
    return np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)


def from_angles(theta: np.ndarray) -> np.ndarray:
    """Points ``(cos theta, sin theta)``, shape ``theta.shape + (2,)``."""
    theta = np.asarray(theta, dtype=float)
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def angle_velocity(
    model: Any, theta: Any, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, check: bool = True
) -> Any:
    """``theta_i'`` of (7.1) (USA) or its softmax version (SA); ``theta``: ``(n,)`` or
    ``(batch, n)``, a NumPy array or a torch tensor (:mod:`meanfield.backend`; the result has
    its backend, dtype and device). ``check``: validate the model and ``theta`` (on a host
    copy); the integrators validate once and skip it."""
    if check:
        check_angle_model(model)
        host = as_angles(bk.to_numpy(theta), "theta")
        theta = host if bk.is_numpy(theta) else theta
    xp = bk.namespace(theta)
    tb = theta if theta.ndim == 2 else theta[None]
    B, n = tb.shape
    out = bk.empty(tb, (B, n))
    beta = model.beta
    normalized = attention_registry.resolve(model.attention).normalized
    for bs, rs in Tiling(memory_limit, buffers=3).tiles(B, n, n):
        diff = tb[bs, rs, None] - tb[bs, None, :]  # theta_i - theta_j
        w = xp.exp(beta * (xp.cos(diff) - 1.0))  # shifted by e^{-beta}; cancels in SA
        rows = np.arange(rs.start, rs.stop)
        if model.causal:  # keep j <= i
            w = w * bk.like(w, np.arange(n)[None, :] <= rows[:, None])
            count = rows + 1.0
        else:
            count = np.full(rows.size, float(n))
        num = -xp.sum(w * xp.sin(diff), axis=-1)
        if normalized:  # SA: rows sum to 1
            out[bs, rs] = num / xp.sum(w, axis=-1)
        else:
            out[bs, rs] = num * float(np.exp(beta)) / bk.like(num, count)
    out *= model.value
    return out if theta.ndim == 2 else out[0]


__all__ = ["angle_velocity", "check_angle_model", "from_angles", "to_angles"]
