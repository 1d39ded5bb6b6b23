"""Fixtures of the particle tests: unit rows, random weights near the identity, a dense
attention written independently of the package. Each fixture is the function itself
(session-scoped: no state, and usable with hypothesis' ``@given``)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from meanfield import Model


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _random_matrices(d: int, seed: int, scale: float = 0.5) -> tuple[np.ndarray, ...]:
    """``Q, K, V`` near the identity (well-conditioned, dynamics of moderate speed)."""
    g = np.random.default_rng(seed)
    return tuple(np.eye(d) + scale * g.standard_normal((d, d)) / np.sqrt(d) for _ in range(3))


def _naive_attention(model: Model, x: np.ndarray) -> np.ndarray:
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


@pytest.fixture(scope="session")
def unit() -> Callable[[np.ndarray], np.ndarray]:
    """``unit(x)``: the rows of ``x`` divided by their norms."""
    return _unit


@pytest.fixture(scope="session")
def random_matrices() -> Callable[..., tuple[np.ndarray, ...]]:
    """``random_matrices(d, seed, scale=0.5)``: ``Q, K, V`` near the identity."""
    return _random_matrices


@pytest.fixture(scope="session")
def naive_attention() -> Callable[[Model, np.ndarray], np.ndarray]:
    """``naive_attention(model, x)``: the dense attention of docs/equations.md section 2."""
    return _naive_attention
