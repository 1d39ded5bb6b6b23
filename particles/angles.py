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
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, Tiling

from .inputs import as_angles


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
    model: Any, theta: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT
) -> np.ndarray:
    """``theta_i'`` of (7.1) (USA) or its softmax version (SA); ``theta``: ``(n,)`` or
    ``(batch, n)``."""
    check_angle_model(model)
    th = as_angles(theta, "theta")
    tb = th if th.ndim == 2 else th[None]
    B, n = tb.shape
    out = np.empty_like(tb)
    beta = model.beta
    for bs, rs in Tiling(memory_limit, buffers=3).tiles(B, n, n):
        diff = tb[bs, rs, None] - tb[bs, None, :]  # theta_i - theta_j
        w = np.exp(beta * (np.cos(diff) - 1.0))  # shifted by e^{-beta}; cancels in SA
        if model.causal:
            w[:, np.arange(n)[None, :] > np.arange(rs.start, rs.stop)[:, None]] = 0.0
            count = np.arange(rs.start + 1, rs.stop + 1, dtype=float)
        else:
            count = np.full(rs.stop - rs.start, float(n))
        num = -np.sum(w * np.sin(diff), axis=-1)
        if model.attention == "softmax":
            out[bs, rs] = num / np.sum(w, axis=-1)
        else:
            out[bs, rs] = num * np.exp(beta) / count
    out *= model.value
    return out if th.ndim == 2 else out[0]


__all__ = ["angle_velocity", "check_angle_model", "from_angles", "to_angles"]
