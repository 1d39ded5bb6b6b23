"""Attention kernels: registry, agreement with the dense formulas, tiling, stability,
Sinkhorn (docs/equations.md section 2)."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import ATTENTION_KINDS, Model, attention
from meanfield.kernels import Kernel, Softmax, Tiling


def test_registry_covers_every_attention_kind() -> None:
    # one kernel per kind of meanfield.attention that declares "particles", and no other
    assert set(particles.registered_kernels()) == set(attention.names("particles"))
    for name in attention.names("particles"):
        assert particles.get_kernel(name).name == name


def test_unknown_kernel_lists_known_names() -> None:
    with pytest.raises(ValueError, match="attention must be one of .* got 'cosine'") as info:
        particles.get_kernel("cosine")
    for name in ATTENTION_KINDS:
        assert name in str(info.value)


def test_subclass_registers_itself() -> None:
    attention.register(attention.AttentionKind(
        name="test_doubled_softmax", formula="as softmax", reference="docs/equations.md section 2",
        solvers=frozenset({"particles"})))

    try:
        class Doubled(Softmax):
            name = "test_doubled_softmax"

        assert particles.get_kernel("test_doubled_softmax") is Doubled
        assert "test_doubled_softmax" in particles.registered_kernels()
    finally:
        Kernel.registry.pop("test_doubled_softmax", None)
        attention.unregister("test_doubled_softmax")


@pytest.mark.parametrize("kind", ["softmax", "unnormalized", "l2", "sigmoid"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("memory_limit", [10**9, 8 * 3 * 37])
def test_row_kernels_match_dense_formula(kind: str, causal: bool, memory_limit: int, unit,
                                         random_matrices, naive_attention) -> None:
    # general Q, K, V, a bias, a batch, and (second limit) tiles of a few rows: the tiled,
    # shifted computation must agree with the dense textbook formula to round-off
    # (values O(1)-O(10): 1e-12 relative allows ~ 1e4 ulps of accumulated sums of 40 terms)
    d, n = 3, 40
    Q, K, V = random_matrices(d, seed=1)
    model = Model(beta=1.7, attention=kind, Q=Q, K=K, V=V, causal=causal, sigmoid_bias=0.3)
    x = unit(np.random.default_rng(2).standard_normal((3, n, d)))
    got = particles.attention(model, x, memory_limit=memory_limit)
    want = np.stack([naive_attention(model, xb) for xb in x])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())


def test_tiles_cover_every_row_once() -> None:
    seen = np.zeros((5, 23), dtype=int)
    for limit in (8, 8 * 23 * 3, 8 * 23 * 23 * 2):
        seen[:] = 0
        for bs, rs in Tiling(limit).tiles(5, 23, 23):
            seen[bs, rs] += 1
        assert np.all(seen == 1)


def test_memory_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="memory_limit"):
        Tiling(0)


def test_softmax_is_max_shifted_at_huge_beta(unit) -> None:
    # beta = 1e4: e^{beta <x_i, x_j>} overflows double precision, the shifted softmax does
    # not; the weights tend to the arg-max of <x_i, x_j>, i.e. token i itself (a unit vector
    # is its own nearest neighbour), so the attention output is x_i up to e^{-beta * gap}
    x = unit(np.random.default_rng(3).standard_normal((30, 3)))
    out = particles.attention(Model(beta=1e4), x)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, x, atol=1e-12)  # gap >~ 1e-2: e^{-100} is nothing


def test_sinkhorn_doubly_stochastic_at_beta_50() -> None:
    # the requirement: rows and columns sum to 1 within the requested tolerance at beta = 50
    # (log-domain iterations, then a Newton polish; columns exact, rows within tol)
    for tol in (1e-8, 1e-12):
        model = Model(beta=50.0, attention="sinkhorn", sinkhorn_tol=tol)
        x = particles.sample_sphere(60, 3, 4)
        W = particles.attention_weights(model, x)
        assert np.all(np.isfinite(W)) and np.all(W >= 0)
        assert np.max(np.abs(W.sum(axis=1) - 1)) < tol
        assert np.max(np.abs(W.sum(axis=0) - 1)) < tol


def test_sinkhorn_tiled_matches_untiled() -> None:
    # streaming column log-sum-exp over row tiles against the single-tile path, at a beta
    # where plain iterations converge (beta = 2): both stop at tol = 1e-12, so they agree
    # to ~ tol
    model = Model(beta=2.0, attention="sinkhorn", sinkhorn_tol=1e-12, sinkhorn_iterations=2000)
    x = particles.sample_sphere(30, 3, 5, batch=2)
    full = particles.attention(model, x)
    tiled = particles.attention(model, x, memory_limit=8 * 30 * 5 * 3)
    np.testing.assert_allclose(tiled, full, atol=1e-10)


def test_sinkhorn_symmetric_kernel_gives_symmetric_matrix() -> None:
    # E symmetric (Q = K = I): the doubly stochastic scaling is unique, hence symmetric
    model = Model(beta=5.0, attention="sinkhorn", sinkhorn_tol=1e-12)
    W = particles.attention_weights(model, particles.sample_sphere(25, 3, 6))
    np.testing.assert_allclose(W, W.T, atol=1e-10)


def test_sinkhorn_does_not_overflow_at_large_beta() -> None:
    # beta = 2000: e^{beta} overflows; in the log domain the weights stay finite and
    # doubly stochastic (close to the identity: each token is its own best match)
    model = Model(beta=2000.0, attention="sinkhorn", sinkhorn_tol=1e-10)
    x = particles.sample_sphere(20, 3, 7)
    W = particles.attention_weights(model, x)
    assert np.all(np.isfinite(W))
    assert np.max(np.abs(W.sum(axis=0) - 1)) < 1e-10
    assert np.max(np.abs(W.sum(axis=1) - 1)) < 1e-10


def test_sinkhorn_beta_zero_is_uniform() -> None:
    W = particles.attention_weights(Model(beta=0.0, attention="sinkhorn"),
                                    particles.sample_sphere(7, 2, 8))
    np.testing.assert_allclose(W, np.full((7, 7), 1 / 7), atol=1e-15)


def test_sinkhorn_warns_when_not_converged() -> None:
    model = Model(beta=50.0, attention="sinkhorn", sinkhorn_iterations=1, sinkhorn_tol=1e-14)
    x = particles.sample_sphere(1500, 3, 9)  # beyond the Newton polish (n > 1024)
    with pytest.warns(RuntimeWarning, match="sinkhorn_iterations"):
        particles.attention(model, x, memory_limit=8 * 1500 * 1500 * 4)


def test_causal_sinkhorn_is_rejected() -> None:
    with pytest.raises(ValueError, match="causal"):
        particles.velocity(Model(beta=1.0, attention="sinkhorn", causal=True),
                           particles.sample_sphere(5, 3, 0))


@pytest.mark.parametrize("kind", ["softmax", "l2", "sinkhorn"])
def test_normalised_kernels_have_unit_row_sums(kind: str) -> None:
    model = Model(beta=3.0, attention=kind, sinkhorn_tol=1e-12)
    W = particles.attention_weights(model, particles.sample_sphere(20, 4, 10))
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "l2"])
def test_shift_fallback_to_row_maximum(kind: str, unit, random_matrices) -> None:
    # with general Q, K at beta = 300 the Cauchy-Schwarz row bound exceeds the diagonal
    # logit by more than the 600 slack, so the row maximum is used; compare with scipy's
    # softmax of the dense logits (round-off of logits ~ beta * 1e-16 * |S| ~ 1e-12)
    from scipy.special import softmax

    from meanfield.kernels import Kernel

    Q, K, V = random_matrices(3, seed=12, scale=2.0)
    beta = 300.0
    model = Model(beta=beta, attention=kind, Q=Q, K=K, V=V)
    x = unit(np.random.default_rng(13).standard_normal((25, 3)))
    q, k, v = x @ Q.T, x @ K.T, x @ V.T
    kern = Kernel.from_model(model)
    assert kern._shift(beta * q[None], k[None], kern.column_bias(k[None])) is None
    if kind == "softmax":
        S = beta * q @ k.T
    else:
        S = -beta * ((q[:, None] - k[None]) ** 2).sum(-1) / 2
    # some row maximum beyond +-745: e^S overflows (or all of a row underflows) unshifted
    assert np.max(np.abs(S.max(axis=1))) > 745
    want = softmax(S, axis=1) @ v
    np.testing.assert_allclose(particles.attention(model, x), want, rtol=1e-9, atol=1e-12)
