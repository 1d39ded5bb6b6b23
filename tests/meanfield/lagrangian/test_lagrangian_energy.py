"""The interaction energy of a weighted measure (meanfield.kernels.interaction.weighted_energy),
which is also the particle energy (weights 1/n)."""

from __future__ import annotations

import numpy as np
import pytest

import meanfield.kernels.interaction as le
from meanfield import Model
from particles import energy

RNG = np.random.default_rng(4)
X = RNG.normal(size=(2, 40, 3))
X /= np.linalg.norm(X, axis=-1, keepdims=True)
W = RNG.random((2, 40)) + 0.05
W /= W.sum(axis=1, keepdims=True)


def direct(beta: float, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The definitions, with the dense matrix: E = sum w_i w_j expm1(beta s_ij) / (2 beta),
    Z - 1 = sum_j w_j expm1(beta s_ij)."""
    S = np.einsum("bid,bjd->bij", x, x)
    E1 = np.expm1(beta * S)
    return np.einsum("bi,bij,bj->b", w, E1, w) / (2 * beta), np.einsum("bij,bj->bi", E1, w)


@pytest.mark.parametrize("beta", [0.5, 4.0, 40.0])
def test_energy_and_partition_are_the_definitions(beta: float) -> None:
    """Sums of 40^2 terms of size up to e^beta: round-off ~ 40 eps relative; gate 1e-12."""
    e, z = le.weighted_energy(Model(beta), X, W, partition=True)
    e0, z0 = direct(beta, X, W)
    np.testing.assert_allclose(e, e0, rtol=1e-12)
    np.testing.assert_allclose(z, z0, rtol=1e-12)


def test_beta_zero_is_the_limit() -> None:
    """At beta = 0 the energy is (1/2) sum w_i w_j s_ij exactly (the beta -> 0 limit); at
    beta = 1e-9 the Taylor branch adds (beta / 4) sum w_i w_j s_ij^2, and the next term,
    beta^2 s^3 / 12 ~ 1e-19, is far below the gate (1e-12 relative)."""
    e0, z0 = le.weighted_energy(Model(0.0), X, W, partition=True)
    S = np.einsum("bid,bjd->bij", X, X)
    np.testing.assert_allclose(e0, np.einsum("bi,bij,bj->b", W, S, W) / 2, rtol=1e-13)
    assert z0 is not None and np.all(z0 == 0)
    tiny = le.weighted_energy(Model(1e-9), X, W)[0]
    np.testing.assert_allclose(tiny, e0 + 1e-9 / 4 * np.einsum("bi,bij,bj->b", W, S * S, W),
                               rtol=1e-12)


def test_shifted_exponents_agree_with_direct_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forcing the overflow-safe path (exponents shifted by their bound, scaled back once) at
    beta = 40, where both paths are representable: the same values to round-off of exponents
    of size 40 (40 eps ~ 1e-14; gate 1e-12), energy and partition alike."""
    model = Model(40.0)
    plain = le.weighted_energy(model, X, W, partition=True)
    monkeypatch.setattr(le, "EXP_SAFE", 1.0)
    shifted = le.weighted_energy(model, X, W, partition=True)
    np.testing.assert_allclose(shifted[0], plain[0], rtol=1e-12)
    np.testing.assert_allclose(shifted[1], plain[1], rtol=1e-12)


def test_particle_energy_is_the_weighted_energy_with_equal_weights() -> None:
    model = Model(3.0)
    n = X.shape[1]
    np.testing.assert_allclose(energy(model, X),
                               le.weighted_energy(model, X, np.full((2, n), 1 / n))[0],
                               rtol=0, atol=0)
    np.testing.assert_allclose(energy(model, X), direct(3.0, X, np.full((2, n), 1 / n))[0],
                               rtol=1e-12)
