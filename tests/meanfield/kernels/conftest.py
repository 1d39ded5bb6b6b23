"""Fixtures of the kernel tests: point sets on the sphere that stress the fast summation.
Each fixture is the function itself (session-scoped: no state)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _points(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    centres = _unit(rng.normal(size=(3, d)))
    pole = np.zeros(d)
    pole[-1] = 1.0
    if kind == "uniform":
        return _unit(rng.normal(size=(n, d)))
    if kind == "clusters":
        return _unit(centres[rng.integers(0, 3, n)] + 0.05 * rng.normal(size=(n, d)))
    if kind == "dirac-pole":  # near-Dirac at the pole, where arccos would lose digits
        return _unit(pole + 1e-7 * rng.normal(size=(n, d)))
    if kind == "two-dirac":
        return _unit(centres[rng.integers(0, 2, n)] + 1e-6 * rng.normal(size=(n, d)))
    # mixed: a near-Dirac cluster and a few isolated points, which see almost no mass (their
    # Z is ~ e^{-2 beta} of the cluster's): the fast sums cannot vouch for them at 1e-12,
    # so they must be recomputed directly
    return np.concatenate([_unit(centres[0] + 1e-5 * rng.normal(size=(n - 5, d))),
                           _unit(rng.normal(size=(5, d)))])


@pytest.fixture(scope="session")
def point_set() -> Callable[[str, int, int, np.random.Generator], np.ndarray]:
    """``point_set(kind, n, d, rng)``: ``n`` unit vectors of ``R^d`` of the ``kind``
    ``uniform``, ``clusters``, ``dirac-pole``, ``two-dirac`` or (any other) ``mixed``."""
    return _points
