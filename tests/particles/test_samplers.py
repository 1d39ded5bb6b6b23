"""Samplers: uniform on the sphere, orthogonal frames, domain densities, Gaussians."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Circle, Sphere


def test_sample_sphere_shapes_norms_and_seeds() -> None:
    x = particles.sample_sphere(100, 5, 0)
    assert x.shape == (100, 5)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-15)
    assert particles.sample_sphere(3, 2, 0, batch=7).shape == (7, 3, 2)
    np.testing.assert_array_equal(particles.sample_sphere(4, 3, 42), particles.sample_sphere(
        4, 3, np.random.default_rng(42)))
    assert not np.array_equal(particles.sample_sphere(4, 3, 1), particles.sample_sphere(4, 3, 2))


def test_sample_sphere_is_uniform() -> None:
    # E[x] = 0, E[x x^T] = I/d; 20 000 points: std of a mean component 1/sqrt(d N) ~ 3e-3
    # and of a second moment ~ sqrt(2/(d(d+2) N)) ~ 1.6e-3 (d = 3); 5 sigma
    x = particles.sample_sphere(20000, 3, 1)
    assert np.max(np.abs(x.mean(axis=0))) < 5 * 1 / np.sqrt(3 * 20000)
    np.testing.assert_allclose(x.T @ x / 20000, np.eye(3) / 3, atol=5 * 1.6e-3)


def test_orthogonal() -> None:
    x = particles.orthogonal(6, 9, 3)
    np.testing.assert_allclose(x @ x.T, np.eye(6), atol=1e-14)
    xb = particles.orthogonal(4, 4, 3, batch=2)
    assert xb.shape == (2, 4, 4)
    with pytest.raises(ValueError, match="d >= n"):
        particles.orthogonal(5, 4, 0)


def test_sample_density_on_the_circle() -> None:
    # rho = (1 + a cos(theta)) / (2 pi): E[cos theta] = a / 2; N = 20 000 points, std of the
    # empirical mean of cos ~ sqrt(1/2 / N) = 5e-3; 5 sigma
    dom = Circle(64)
    a = 0.6
    rho = (1 + a * np.cos(dom.grid)) / (2 * np.pi)
    x = particles.sample_density(dom, rho, 20000, 4)
    assert x.shape == (20000, 2)
    assert abs(x[:, 0].mean() - a / 2) < 5 * np.sqrt(0.5 / 20000)
    with pytest.raises(ValueError, match="grid shape"):
        particles.sample_density(dom, rho[:10], 5, 0)


def test_sample_density_on_the_sphere() -> None:
    # rho = (1 + a z) / (4 pi) on S^2: E[z] = a / 3; Var z <= E[z^2] = 1/3, N = 20 000: std of
    # the mean <= sqrt(1/3 / N) ~ 4e-3; 5 sigma
    dom = Sphere(16)
    a = 0.6
    rho = (1 + a * dom.points[..., 2]) / (4 * np.pi)
    x = particles.sample_density(dom, rho, 20000, 5)
    assert x.shape == (20000, 3)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-12)
    assert abs(x[:, 2].mean() - a / 3) < 5 * np.sqrt(1 / 3 / 20000)


def test_sample_gaussian() -> None:
    # 40 000 draws: mean entries have std sqrt(C_kk / N) <= 5e-3, covariance entries
    # sqrt((C_kk C_ll + C_kl^2)/N) <= 8e-3; 5 sigma
    m = np.array([1.0, -2.0])
    C = np.array([[1.0, 0.5], [0.5, 2.0]])
    x = particles.sample_gaussian(m, C, 40000, 5)
    mm, cc = particles.mean_covariance(x)
    np.testing.assert_allclose(mm, m, atol=5 * np.sqrt(2.0 / 40000))
    np.testing.assert_allclose(cc, C, atol=5 * np.sqrt(5.0 / 40000))
    assert particles.sample_gaussian(m, C, 3, 0, batch=4).shape == (4, 3, 2)


@pytest.mark.parametrize(
    ("mean", "cov", "match"),
    [
        (np.zeros(2), np.eye(3), r"cov must have shape \(2, 2\)"),
        (np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
        (np.zeros(2), -np.eye(2), "positive semi-definite"),
        (np.zeros((2, 2)), np.eye(2), "mean must be a vector"),
    ],
)
def test_sample_gaussian_bad_input(mean: np.ndarray, cov: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        particles.sample_gaussian(mean, cov, 3, 0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: particles.sample_sphere(0, 3, 0), "n must be >= 1"),
        (lambda: particles.sample_sphere(3, 2.5, 0), "d must be an integer"),
        (lambda: particles.sample_sphere(3, 3, "seed"), "rng must be an int seed"),
        (lambda: particles.sample_sphere(3, 3, -1), "rng seed must be >= 0"),
    ],
)
def test_sampler_bad_input(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call()
