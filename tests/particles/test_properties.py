"""Property-based checks (hypothesis) of the velocity field over random sizes, kinds and
temperatures, edge cases n = 1 and d = 1 included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import particles
from meanfield import Model

kinds = st.sampled_from(["softmax", "unnormalized", "l2", "sigmoid"])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 5),
    beta=st.floats(0.0, 20.0),
    kind=kinds,
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_attention_matches_dense_and_velocity_is_tangent(
    n: int, d: int, beta: float, kind: str, causal: bool, seed: int, naive_attention
) -> None:
    # beta <= 20 on unit tokens: e^{beta <x, y>} <= e^20, so the unshifted dense formula does
    # not overflow and both are accurate to round-off (~1e-15 relative per weight, sums of
    # <= 12 terms); rtol 1e-10 with an absolute floor 1e-11 of the largest output leaves room
    # for the cancellation in P^perp and in sums of mixed signs
    model = Model(beta=beta, attention=kind, causal=causal)
    x = particles.sample_sphere(n, d, seed)
    got = particles.attention(model, x)
    want = naive_attention(model, x)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-11 * scale)
    v = particles.velocity(model, x)
    assert np.max(np.abs(np.sum(v * x, axis=-1))) <= 1e-12 * scale


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(1, 10), d=st.integers(2, 4), beta=st.floats(0.0, 10.0),
       seed=st.integers(0, 2**16))
def test_sinkhorn_doubly_stochastic_everywhere(n: int, d: int, beta: float, seed: int) -> None:
    model = Model(beta=beta, attention="sinkhorn", sinkhorn_tol=1e-11)
    W = particles.attention_weights(model, particles.sample_sphere(n, d, seed))
    assert np.max(np.abs(W.sum(axis=0) - 1)) < 1e-11
    assert np.max(np.abs(W.sum(axis=1) - 1)) < 1e-11


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(1, 8), beta=st.floats(0.0, 8.0), kind=st.sampled_from(["softmax",
       "unnormalized"]), seed=st.integers(0, 2**16))
def test_energy_ascends_to_first_order(n: int, beta: float, kind: str, seed: int) -> None:
    # dissipation >= 0 for V = I and E(x + h x') - E(x - h x') = 2 h dE/dt + O(h^3)
    model = Model(beta=beta, attention=kind)
    x = particles.sample_sphere(n, 3, seed)
    D = particles.dissipation(model, x)
    # round-off: |grad_i E| <= e^beta / n and x' carries round-off ~ 10 eps e^beta, so at a
    # critical point (n = 1: x' = P^perp x = 0 exactly) |D| <= ~1e-14 e^{2 beta}
    assert D >= -1e-13 * np.exp(2 * beta)
    v = particles.velocity(model, x)
    # displacement h |x'| = 1e-6: central-difference truncation ~ (h |x'|)^2 beta^3 ~ 1e-10
    # relative; round-off ~ eps E / h
    h = 1e-6 / max(1.0, float(np.abs(v).max()))
    fd = (particles.energy(model, x + h * v) - particles.energy(model, x - h * v)) / (2 * h)
    E = particles.energy(model, x)
    assert abs(fd - D) <= 1e-6 * abs(D) + 1e-15 * abs(E) / h + 1e-13 * np.exp(2 * beta)
