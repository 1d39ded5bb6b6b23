"""Helpers of the particle tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import numpy as np

from meanfield import Model


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def random_matrices(d: int, seed: int, scale: float = 0.5) -> tuple[np.ndarray, ...]:
    """``Q, K, V`` near the identity (well-conditioned, dynamics of moderate speed)."""
    g = np.random.default_rng(seed)
    return tuple(np.eye(d) + scale * g.standard_normal((d, d)) / np.sqrt(d) for _ in range(3))


def naive_attention(model: Model, x: np.ndarray) -> np.ndarray:
    """``sum_h sum_j A_ij V x_j`` from the dense weights of docs/equations.md section 2, one system
    ``(n, d)``, written independently of ``meanfield.kernels`` (no shift, no tiles)."""
    n, d = x.shape
    out = np.zeros_like(x)
    for Q, K, V in model.matrices(d):
        q, k, v = x @ Q.T, x @ K.T, x @ V.T
        S = model.beta * q @ k.T
        kind = model.attention
        if kind in ("softmax", "unnormalized"):
            W = np.exp(S)
        elif kind == "l2":
            W = np.exp(-model.beta * ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / 2)
        elif kind == "sigmoid":
            W = 1.0 / (1.0 + np.exp(-(S + model.sigmoid_bias)))
        else:
            raise AssertionError(kind)
        if model.causal:
            W = np.tril(W)
        count = np.arange(1, n + 1)[:, None] if model.causal else n
        if kind in ("softmax", "l2"):
            W = W / W.sum(axis=1, keepdims=True)
        else:
            W = W / count
        out += W @ v
    return out
