"""Distances of docs/equations.md section 6: exact W_1 on the circle, kernel distance on any domain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.special import iv

from meanfield import Circle, initial
from meanfield.metrics import (
    kernel_distance,
    kernel_distance_particle_sets,
    kernel_distance_particles,
    w1_densities,
    w1_density_particles,
    w1_particles,
    weighted_kernel_distance,
)


def _circle_cost(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.abs(a[:, None] - b[None, :])
    return np.minimum(d, 2 * np.pi - d)


@pytest.mark.parametrize("theta", [0.0, 0.5, 1.0, 2.0, 6.0])
def test_w1_uniform_to_a_point_is_pi_over_2(theta: float) -> None:
    d = Circle(32)
    assert w1_density_particles(d, d.uniform(), np.array([theta])) == pytest.approx(np.pi / 2, abs=1e-13)


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_w1_particles_equals_optimal_assignment(rng: np.random.Generator, n: int) -> None:
    for _ in range(5):
        a, b = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n)
        cost = _circle_cost(a, b)
        r, c = linear_sum_assignment(cost)
        assert w1_particles(a, b) == pytest.approx(cost[r, c].mean(), abs=1e-12)


def test_w1_points_and_angles_and_batches_agree(rng: np.random.Generator) -> None:
    d = Circle(16)
    rho = initial.von_mises(d, 1.0, 2.0)
    th = rng.uniform(0, 2 * np.pi, (3, 40))
    pts = np.stack([np.cos(th), np.sin(th)], axis=-1)
    batch = w1_density_particles(d, rho, pts)
    single = [w1_density_particles(d, d.forward(rho), t) for t in th]
    np.testing.assert_allclose(batch, single, rtol=1e-12)
    assert batch.shape == (3,)


def test_w1_density_matches_fine_quantiles(rng: np.random.Generator) -> None:
    d = Circle(32)
    rho = initial.von_mises(d, 0.5, 2.0)
    x = d.sample(rho, 500, rng)
    fine = d.quantiles(rho, 200_000)  # W_1(fine, rho) ~ 1e-5
    assert w1_density_particles(d, rho, x) == pytest.approx(w1_particles(x, fine), abs=3e-5)
    assert w1_densities(d, rho, d.uniform()) == pytest.approx(
        w1_density_particles(d, d.uniform(), fine), abs=3e-5)
    assert w1_densities(d, rho, rho) == pytest.approx(0.0, abs=1e-14)


def test_w1_is_rotation_invariant(rng: np.random.Generator) -> None:
    d = Circle(32)
    rho = initial.von_mises(d, 0.3, 1.5)
    th = d.sample(rho, 50, rng)
    shift = 5  # grid steps
    rho_rot = np.roll(rho, shift)
    ang = np.arctan2(th[:, 1], th[:, 0]) + shift * 2 * np.pi / 32
    assert w1_density_particles(d, rho_rot, ang) == pytest.approx(w1_density_particles(d, rho, th), abs=1e-12)


def test_quantile_start_w1_is_order_one_over_n() -> None:
    d = Circle(32)
    rho = initial.von_mises(d, 0.5, 2.0)
    w = [n * w1_density_particles(d, rho, d.quantiles(rho, n)) for n in (200, 400, 800)]
    assert w[1] == pytest.approx(w[0], rel=1e-3) and w[2] == pytest.approx(w[1], rel=1e-3)


@pytest.mark.parametrize("beta", [0.5, 1.0, 4.0])
def test_kernel_distance_project_equals_exact_on_circle(rng: np.random.Generator, beta: float) -> None:
    d = Circle(64)
    rho = initial.von_mises(d, 1.0, 1.0)
    x = d.sample(rho, 300, rng)
    a = kernel_distance_particles(d, rho, x, beta, method="project")
    b = kernel_distance_particles(d, rho, x, beta, method="exact")
    assert a == pytest.approx(b, rel=1e-9)


def test_kernel_distance_between_particle_sets(rng: np.random.Generator) -> None:
    d = Circle(64)
    x = d.sample(d.uniform(), 100, rng)
    y = d.sample(d.uniform(), 70, rng)
    via_coefficients = d.kernel_distance(d.project(x), d.project(y), 1.0)
    assert kernel_distance_particle_sets(x, y, 1.0) == pytest.approx(via_coefficients, rel=1e-9)
    assert kernel_distance_particle_sets(x, x, 1.0) == pytest.approx(0.0, abs=1e-6)


def test_kernel_distance_of_iid_sample_has_the_exact_mean_square(rng: np.random.Generator) -> None:
    """E ||mu_n - unif||^2 = (e^beta - I_0(beta))/n exactly (docs/equations.md section 6)."""
    d, beta, n, reps = Circle(64), 1.0, 50, 400
    sq = np.array([kernel_distance_particles(d, d.uniform(), d.sample(d.uniform(), n, rng), beta) ** 2
                   for _ in range(reps)])
    expected = (math.exp(beta) - iv(0, beta)) / n
    z = (sq.mean() - expected) / (sq.std(ddof=1) / math.sqrt(reps))
    assert abs(z) < 4


def test_kernel_distance_densities() -> None:
    d = Circle(32)
    a, b = initial.von_mises(d, 0.0, 1.0), d.uniform()
    assert kernel_distance(d, a, a, 2.0) == pytest.approx(0.0, abs=1e-12)
    assert kernel_distance(d, a, b, 2.0) == pytest.approx(kernel_distance(d, d.forward(a), b, 2.0), rel=1e-12)


def test_zonal_needs_exact_method_and_explicit_kind(rng: np.random.Generator) -> None:
    zonal = pytest.importorskip("meanfield.domains.zonal_sphere")
    d = zonal.ZonalSphere(6, 16)
    rho = np.exp(d.grid - 1.0)
    rho = rho / d.integrate(rho)
    x = d.sample(rho, 200, rng)
    if d.grid_shape == np.shape(d.forward(rho)):
        with pytest.raises(ValueError, match="kind"):
            kernel_distance_particles(d, rho, x, 1.0)
    exact = kernel_distance_particles(d, rho, x, 1.0, kind="values")
    averaged = kernel_distance_particles(d, rho, x, 1.0, kind="values", method="project")
    assert averaged < exact  # the zonal projection only sees the rotation average


def test_bad_input_names_the_field() -> None:
    d = Circle(16)
    with pytest.raises(ValueError, match="rho"):
        w1_density_particles(d, np.ones(7), np.array([0.0]))
    with pytest.raises(ValueError, match="x"):
        w1_particles(np.zeros((2, 3, 4)), np.array([0.0]))
    with pytest.raises(ValueError, match="beta"):
        kernel_distance_particles(d, d.uniform(), np.array([0.0]), -1.0)
    with pytest.raises(ValueError, match="method"):
        kernel_distance_particles(d, d.uniform(), np.array([0.0]), 1.0, method="fast")
    with pytest.raises(ValueError, match="kind"):
        kernel_distance(d, d.uniform(), d.uniform(), 1.0, kind="grid")


def test_weighted_kernel_distance_with_equal_weights_is_the_particle_sets_distance() -> None:
    # exact formula: kernel_distance_particle_sets carries the factor e^{beta/2}
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.standard_normal((25, 3))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    ours = weighted_kernel_distance(x, np.full(40, 1 / 40), y, beta=2.0)
    assert ours * math.exp(1.0) == pytest.approx(kernel_distance_particle_sets(x, y, 2.0), rel=1e-10)


def test_weighted_kernel_distance_weights_and_euclidean_kernel() -> None:
    # a point of weight 1 equals two copies of weight 1/2 (distance 0, to round-off 1e-8 of
    # the square root of a 1e-16 cancellation); two Dirac masses in R^d: sqrt(2 - 2 e^{-|x-y|^2/2})
    x = np.array([[0.6, 0.8]])
    assert weighted_kernel_distance(x, [1.0], np.vstack([x, x]), [0.5, 0.5]) <= 1e-7
    a, b = np.array([[0.0, 0.0]]), np.array([[1.0, 2.0]])
    got = weighted_kernel_distance(a, [1.0], b, geometry="euclidean")
    assert got == pytest.approx(math.sqrt(2 - 2 * math.exp(-2.5)), rel=1e-12)
    with pytest.raises(ValueError, match="w and v"):
        weighted_kernel_distance(a, [1.0, 2.0], b)
