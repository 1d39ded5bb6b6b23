"""Observables: energy and dissipation (docs/equations.md section 2), Gram matrix, Figure 1 histogram,
clusters, Kuramoto order, mean and covariance."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model


def test_energy_formula() -> None:
    # E = (1/(2 beta n^2)) sum_{i,j} (e^{beta <x_i, x_j>} - 1), batched
    x = particles.sample_sphere(17, 3, 0, batch=3)
    beta = 2.5
    G = np.einsum("bid,bjd->bij", x, x)
    want = (np.exp(beta * G) - 1).sum(axis=(1, 2)) / (2 * beta * 17**2)
    np.testing.assert_allclose(particles.energy(Model(beta=beta), x), want, rtol=1e-13)


def test_energy_beta_zero_limit() -> None:
    # beta = 0: |mean|^2 / 2 exactly. Small beta: E = mean(G)/2 + beta mean(G^2)/4 + O(beta^2)
    # (Taylor of expm1); at beta = 1e-7 the remainder beta^2 mean|G|^3 / 12 ~ 1e-15 is far
    # below 1e-11 relative, and expm1 has no cancellation, so the limit is continuous
    x = particles.sample_sphere(11, 4, 1)
    G = x @ x.T
    half = 0.5 * np.sum(x.mean(axis=0) ** 2)
    assert particles.energy(Model(beta=0.0), x) == pytest.approx(half, rel=1e-14)
    beta = 1e-7
    taylor = 0.5 * G.mean() + beta * (G**2).mean() / 4
    assert particles.energy(Model(beta=beta), x) == pytest.approx(taylor, rel=1e-11)
    # down to subnormal beta (expm1(beta s) / beta would lose all digits there)
    for tiny in (1e-200, 5e-324):
        assert particles.energy(Model(beta=tiny), x) == pytest.approx(half, rel=1e-14)


def test_energy_of_multi_head_model_sums_heads(random_matrices) -> None:
    h1, h2 = random_matrices(3, seed=1), random_matrices(3, seed=2)
    x = particles.sample_sphere(9, 3, 2)
    both = particles.energy(Model(beta=1.2, heads=[h1, h2]), x)
    one = particles.energy(Model(beta=1.2, Q=h1[0], K=h1[1], V=h1[2]), x)
    two = particles.energy(Model(beta=1.2, Q=h2[0], K=h2[1], V=h2[2]), x)
    assert both == pytest.approx(one + two, rel=1e-13)


@pytest.mark.parametrize("beta", [0.0, 1.5])
def test_energy_gradient_by_finite_differences(beta: float, random_matrices) -> None:
    # central differences, step 1e-6: truncation O(h^2 E''') ~ 1e-12, round-off
    # O(eps E / h) ~ 1e-10; tolerance 1e-7 absolute on O(0.1) gradients
    Q, K, _ = random_matrices(3, seed=3)
    model = Model(beta=beta, Q=Q, K=K)
    x = particles.sample_sphere(6, 3, 3)
    g = particles.energy_gradient(model, x)
    h = 1e-6
    fd = np.zeros_like(x)
    for i in range(6):
        for k in range(3):
            e = np.zeros_like(x)
            e[i, k] = h
            fd[i, k] = (particles.energy(model, x + e) - particles.energy(model, x - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-7)


@pytest.mark.parametrize("value", [1, -1])
@pytest.mark.parametrize("beta", [0.0, 0.7, 6.0])
def test_dissipation_identities(value: int, beta: float) -> None:
    # docs/equations.md section 2: USA dE/dt = (1/n) sum |x_i'|^2, SA dE/dt = (1/n) sum |x_i'|^2 Z_i,
    # with the sign of V; dissipation() is the chain rule <grad E, x'>, so this is an
    # identity up to round-off (required: rel 1e-6; holds to ~1e-13)
    x = particles.sample_sphere(30, 3, 4, batch=2)
    n = 30
    usa = Model(beta=beta, attention="unnormalized", value=value)
    v = particles.velocity(usa, x)
    want = value * np.sum(v**2, axis=(1, 2)) / n
    np.testing.assert_allclose(particles.dissipation(usa, x), want, rtol=1e-12)
    sa = Model(beta=beta, attention="softmax", value=value)
    v = particles.velocity(sa, x)
    Z = particles.partition(sa, x)
    want = value * np.sum(np.sum(v**2, axis=-1) * Z, axis=-1) / n
    np.testing.assert_allclose(particles.dissipation(sa, x), want, rtol=1e-12)


def test_dissipation_identity_weighted_metric(random_matrices) -> None:
    # (3.12): SA with Q^T K = V symmetric is a gradient flow of E (kernel <Q x, K y>) for the
    # metric weighted by Z_i = (1/n) sum_k e^{beta <Q x_i, K x_k>}:
    # dE/dt = n sum_i |P^perp grad_i E|^2 / Z_i >= 0; identity up to round-off
    R = random_matrices(3, seed=5)[0]
    model = Model(beta=2.0, Q=R, K=R, V=R.T @ R)
    x = particles.sample_sphere(20, 3, 6)
    g = particles.energy_gradient(model, x)
    pg = g - np.sum(g * x, -1, keepdims=True) * x
    Z = np.mean(np.exp(2.0 * (x @ R.T) @ (x @ R.T).T), axis=1)
    want = 20 * np.sum(np.sum(pg**2, -1) / Z)
    assert particles.dissipation(model, x) == pytest.approx(want, rel=1e-12)
    assert want > 0


def test_gram_and_pairwise_products() -> None:
    x = particles.sample_sphere(6, 3, 7, batch=2)
    G = particles.gram(x)
    np.testing.assert_allclose(np.diagonal(G, axis1=1, axis2=2), 1.0, atol=1e-15)
    p = particles.pairwise_inner_products(x)
    assert p.shape == (2, 15)
    np.testing.assert_allclose(p[1, 0], x[1, 0] @ x[1, 1], rtol=1e-15)


def test_inner_product_histogram_is_a_density() -> None:
    dens, edges = particles.inner_product_histogram(particles.sample_sphere(50, 3, 8), bins=20)
    assert edges[0] == -1 and edges[-1] == 1
    assert np.sum(dens * np.diff(edges)) == pytest.approx(1.0, rel=1e-12)
    # on S^2, <x, y> of independent uniform points is uniform on [-1, 1] (Archimedes):
    # 1225 pairs (dependent, but each count ~ 61 +- 8), so every bin within 50% of 1/2
    assert np.all(np.abs(dens - 0.5) < 0.25)
    with pytest.raises(ValueError, match="n >= 2"):
        particles.inner_product_histogram(particles.sample_sphere(1, 3, 0))


def test_count_clusters(unit) -> None:
    g = np.random.default_rng(9)
    centres = unit(g.standard_normal((3, 5)))
    x = np.repeat(centres, 4, axis=0) + 1e-4 * g.standard_normal((12, 5))
    x = unit(x)
    assert particles.count_clusters(x, 1e-3) == 3
    assert particles.count_clusters(np.stack([x, x[:1].repeat(12, 0)]), 1e-3).tolist() == [3, 1]
    # below the spread of a cluster, every token is alone
    assert particles.count_clusters(x, 1e-12) == 12
    with pytest.raises(ValueError, match="threshold"):
        particles.count_clusters(x, 0.0)


def test_kuramoto_order() -> None:
    th = np.array([0.0, np.pi / 2, np.pi, 3 * np.pi / 2])
    assert particles.kuramoto_order(particles.from_angles(th)) == pytest.approx(0, abs=1e-15)
    assert particles.kuramoto_order(particles.from_angles(np.full(5, 0.3))) == pytest.approx(1)
    r = particles.kuramoto_order(particles.from_angles(np.array([[0.0, 0.0], [0.0, np.pi / 2]])))
    np.testing.assert_allclose(r, [1.0, np.sqrt(0.5)], rtol=1e-15)


def test_mean_covariance() -> None:
    x = np.random.default_rng(10).standard_normal((3, 50, 4))
    m, c = particles.mean_covariance(x)
    np.testing.assert_allclose(m, x.mean(axis=1), rtol=1e-14)
    for b in range(3):
        np.testing.assert_allclose(c[b], np.cov(x[b].T), rtol=1e-12)
    with pytest.raises(ValueError, match="n > ddof"):
        particles.mean_covariance(x[:, :1])
