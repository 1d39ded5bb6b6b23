"""The velocity field: docs/equations.md section 2 (SA, USA, multi-head, repulsive, beta = 0, causal),
symmetry, batching, geometry, the angle form (7.1)."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model

KINDS = ["softmax", "unnormalized", "l2", "sigmoid", "sinkhorn"]


def _model(kind: str, **kw) -> Model:
    return Model(attention=kind, sinkhorn_tol=1e-13, sinkhorn_iterations=5000, **kw)


def test_velocity_is_projected_attention(random_matrices, naive_attention) -> None:
    # x_i' = P_{x_i}^perp(sum_j A_ij V x_j): tangent to the sphere (<x_i, x_i'> = 0 to
    # round-off) and equal to the dense formula projected
    Q, K, V = random_matrices(4, seed=11)
    model = Model(beta=2.0, Q=Q, K=K, V=V)
    x = particles.sample_sphere(25, 4, 0)
    v = particles.velocity(model, x)
    a = naive_attention(model, x)
    np.testing.assert_allclose(v, a - np.sum(a * x, -1, keepdims=True) * x, atol=1e-13)
    assert np.max(np.abs(np.sum(v * x, axis=-1))) < 1e-14


def test_euclidean_geometry_does_not_project(naive_attention) -> None:
    model = Model(beta=1.0)
    x = 2.0 * particles.sample_sphere(10, 3, 1)  # off the sphere: fine in R^d
    np.testing.assert_allclose(
        particles.velocity(model, x, "euclidean"), naive_attention(model, x), atol=1e-12
    )


@pytest.mark.parametrize("kind", ["softmax", "unnormalized"])
def test_beta_zero_is_projected_mean(kind: str) -> None:
    # (4.1): at beta = 0 both SA and USA give x_i' = P^perp(mean of x_j)
    x = particles.sample_sphere(13, 3, 2)
    v = particles.velocity(Model(beta=0.0, attention=kind), x)
    m = x.mean(axis=0)
    np.testing.assert_allclose(v, m - (x @ m)[:, None] * x, atol=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_repulsive_is_minus_attractive(kind: str) -> None:
    # value = -1 is V = -I: every term of the sum changes sign, the weights do not
    x = particles.sample_sphere(12, 3, 3)
    a = particles.velocity(_model(kind, beta=2.0), x)
    r = particles.velocity(_model(kind, beta=2.0, value=-1), x)
    np.testing.assert_allclose(r, -a, atol=1e-14)


def test_multi_head_is_sum_of_heads(random_matrices) -> None:
    # (2.7): the heads' terms add up (inside one projection)
    h1, h2 = random_matrices(3, seed=4), random_matrices(3, seed=5)
    x = particles.sample_sphere(15, 3, 4)
    both = particles.velocity(Model(beta=1.5, heads=[h1, h2]), x)
    one = particles.velocity(Model(beta=1.5, Q=h1[0], K=h1[1], V=h1[2]), x)
    two = particles.velocity(Model(beta=1.5, Q=h2[0], K=h2[1], V=h2[2]), x)
    np.testing.assert_allclose(both, one + two, atol=1e-13)


@pytest.mark.parametrize("kind", KINDS)
def test_permutation_equivariance(kind: str, random_matrices) -> None:
    # relabelling tokens relabels velocities (no mask): v(P x) = P v(x)
    Q, K, V = random_matrices(3, seed=6)
    model = _model(kind, beta=2.5, Q=Q, K=K, V=V)
    x = particles.sample_sphere(18, 3, 5)
    perm = np.random.default_rng(6).permutation(18)
    np.testing.assert_allclose(
        particles.velocity(model, x[perm]), particles.velocity(model, x)[perm], atol=1e-12
    )


@pytest.mark.parametrize("kind", ["softmax", "unnormalized", "l2", "sigmoid"])
def test_causal_mask_breaks_equivariance_as_it_should(kind: str) -> None:
    # token i sees only j <= i: changing the last token leaves all others' velocities
    # unchanged (exactly), the first token of SA sees only itself (P^perp x_1 = 0), and a
    # permutation does not commute with the field
    model = Model(beta=2.0, attention=kind, causal=True)
    x = particles.sample_sphere(10, 3, 7)
    v = particles.velocity(model, x)
    y = x.copy()
    y[-1] = particles.sample_sphere(1, 3, 8)[0]
    w = particles.velocity(model, y)
    np.testing.assert_array_equal(w[:-1], v[:-1])
    assert np.max(np.abs(w[-1] - v[-1])) > 1e-3
    assert np.max(np.abs(v[0])) < 1e-15  # x_1' = P^perp(c x_1) = 0
    perm = np.arange(10)[::-1]
    assert np.max(np.abs(particles.velocity(model, x[perm]) - v[perm])) > 1e-2


def test_batch_equals_stack_of_systems() -> None:
    model = Model(beta=3.0, attention="softmax")
    x = particles.sample_sphere(16, 3, 9, batch=4)
    batched = particles.velocity(model, x)
    single = np.stack([particles.velocity(model, xb) for xb in x])
    np.testing.assert_allclose(batched, single, atol=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_tiling_does_not_change_the_result(kind: str) -> None:
    # tiles of 3 rows (or a few batch systems) against one tile: only the order of the
    # floating-point sums changes
    model = _model(kind, beta=1.5)
    x = particles.sample_sphere(40, 3, 10, batch=2)
    full = particles.velocity(model, x)
    tiled = particles.velocity(model, x, memory_limit=8 * 40 * 3 * 3)
    np.testing.assert_allclose(tiled, full, atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "unnormalized"])
@pytest.mark.parametrize("causal", [False, True])
def test_angle_form_matches_cartesian(kind: str, causal: bool) -> None:
    # (7.1): theta_i' = <x_i', (-sin theta_i, cos theta_i)>, computed from angle differences
    model = Model(beta=4.0, attention=kind, causal=causal, value=-1 if causal else 1)
    th = np.random.default_rng(11).uniform(0, 2 * np.pi, (2, 21))
    x = particles.from_angles(th)
    v = particles.velocity(model, x)
    tangent = np.stack([-np.sin(th), np.cos(th)], axis=-1)
    np.testing.assert_allclose(
        particles.angle_velocity(model, th), np.sum(v * tangent, -1), atol=1e-12
    )


def test_angle_form_rejects_general_models() -> None:
    th = np.zeros(4)
    with pytest.raises(ValueError, match="Q = K = V = I"):
        particles.angle_velocity(Model(beta=1.0, Q=np.eye(2)), th)
    with pytest.raises(ValueError, match="softmax"):
        particles.angle_velocity(Model(beta=1.0, attention="l2"), th)


def test_large_n_tiled_under_memory_limit() -> None:
    # n = 4000 with a 4 MB limit: the 128 MB weight matrix never exists; compare a few rows
    # against the dense formula on those rows
    n = 4000
    x = particles.sample_sphere(n, 8, 12)
    model = Model(beta=2.0)
    v = particles.velocity(model, x, memory_limit=4 * 2**20)
    rows = [0, 1234, n - 1]
    W = np.exp(2.0 * x[rows] @ x.T)
    a = (W @ x) / W.sum(axis=1, keepdims=True)
    want = a - np.sum(a * x[rows], -1, keepdims=True) * x[rows]
    np.testing.assert_allclose(v[rows], want, atol=1e-13)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((0, 3)), "n=0 tokens"),
        (np.zeros(3), r"shape \(n, d\)"),
        (np.array([[np.nan, 0.0, 1.0]]), "non-finite"),
    ],
)
def test_bad_tokens(x: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        particles.velocity(Model(beta=1.0), x)


def test_dimension_mismatch_with_matrices() -> None:
    with pytest.raises(ValueError, match=r"3 x 3 but tokens live in R\^4"):
        particles.velocity(Model(beta=1.0, Q=np.eye(3)), particles.sample_sphere(5, 4, 0))


def test_bad_geometry() -> None:
    with pytest.raises(ValueError, match="geometry must be one of"):
        particles.velocity(Model(beta=1.0), particles.sample_sphere(5, 3, 0), "torus")


@pytest.mark.parametrize("kind", ["softmax", "unnormalized", "sigmoid", "sinkhorn"])
@pytest.mark.parametrize("d", [3, 8])
def test_memory_stays_under_the_limit(kind: str, d: int) -> None:
    # numpy reports its allocations to tracemalloc: the peak of one velocity evaluation must
    # stay under memory_limit plus O(n d) arrays (tokens, q, k, v, output, potentials: allow
    # 40 n d doubles, <= 2.6 MB); the full n x n matrix alone would be 8 MB, the limit is
    # 512 kB
    import tracemalloc

    n, limit = 1000, 2**19
    x = particles.sample_sphere(n, d, 13)
    model = Model(beta=1.0, attention=kind)
    tracemalloc.start()
    try:
        particles.velocity(model, x, memory_limit=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit + 40 * n * d * 8


def test_feedforward_term_inside_the_projection():
    """(2.8): x_i' = P_x^perp(attention_i + w sigma(a x_i + b)). For one token with V = I the
    attention term is x itself, which the projection removes: only the feed-forward part is
    left, computed here by hand (round-off only)."""
    import meanfield
    import particles

    rng = np.random.default_rng(3)
    d, width = 3, 5
    w, a, b = rng.normal(size=(d, width)), rng.normal(size=(width, d)), rng.normal(size=width)
    x = rng.normal(size=(1, d))
    x /= np.linalg.norm(x)
    for act, sigma in (("relu", lambda z: np.maximum(z, 0)), ("tanh", np.tanh)):
        model = meanfield.Model(2.0, feedforward=(w, a, b), activation=act)
        y = w @ sigma(a @ x[0] + b)
        expect = y - (x[0] @ y) * x[0]
        np.testing.assert_allclose(particles.velocity(model, x)[0], expect, atol=1e-14)
        # euclidean: no projection, the attention term (x itself) stays
        np.testing.assert_allclose(particles.velocity(model, x, "euclidean")[0], x[0] + y, atol=1e-14)
    assert not meanfield.Model(1.0, feedforward=(w, a, b)).is_identity
    with pytest.raises(ValueError, match="feedforward"):
        meanfield.Model(1.0, feedforward=(w, a.T, b))
    with pytest.raises(ValueError, match="activation"):
        meanfield.Model(1.0, feedforward=(w, a, b), activation="swish")
    m = meanfield.Model(1.0, feedforward=(w, a, b), activation="tanh")
    assert meanfield.Model.from_state(m.to_json()) == m
