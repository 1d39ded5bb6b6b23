"""particles.ensemble: the batched SA/USA ensembles behind the phase diagram and
metastability (velocity against particles.velocity, runs against particles.simulate, exact
reductions, freezing)."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model
from particles.ensemble import ensemble_states, ensemble_velocity
from validation.phase_diagram import sample_tokens

run = ensemble_states


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_velocity_matches_particles(attention):
    rng = np.random.default_rng(0)
    x = sample_tokens(rng, 3, 6, 4)
    model = Model(beta=2.5, attention=attention)
    v, _ = ensemble_velocity(x, 2.5, attention == "softmax", None, None)
    # same formula, different order of floating-point operations
    np.testing.assert_allclose(v, particles.velocity(model, x), atol=1e-13)
    q, k, val = rng.standard_normal((3, 4, 4)) / 2
    model = Model(beta=2.5, attention=attention, Q=q, K=k, V=val)
    v, _ = ensemble_velocity(x, 2.5, attention == "softmax", np.broadcast_to(q.T @ k, (3, 4, 4)),
                     np.broadcast_to(val, (3, 4, 4)))
    np.testing.assert_allclose(v, particles.velocity(model, x), atol=1e-13)


def test_trajectory_matches_particles_simulate():
    rng = np.random.default_rng(1)
    x0 = sample_tokens(rng, 2, 6, 3)
    t = np.linspace(0, 5, 11)
    ref = particles.simulate(Model(beta=3.0), x0, t, method="dop853", rtol=1e-11,
                             atol=1e-12, observables=False)["x"].values
    # RK4 at dt = 0.05 (error ~ dt^4) with cubic Hermite output (error ~ dt^4 |x''''|)
    np.testing.assert_allclose(run(x0, 3.0, t, dt=0.05), ref, atol=1e-6)


def test_identity_matrices_through_the_general_path():
    rng = np.random.default_rng(2)
    x0 = sample_tokens(rng, 4, 5, 3)
    eye = np.broadcast_to(np.eye(3), (4, 3, 3))
    t = np.linspace(0, 2, 5)
    # the general path subtracts the row maximum instead of 1: rounding differences only
    np.testing.assert_allclose(run(x0, 4.0, t, bilinear=eye, value=eye), run(x0, 4.0, t),
                               atol=1e-12)


def test_reduction_to_n_dimensions_is_exact():
    """Rotation invariance: tokens of R^40 and their coordinates in their own span (the
    Bartlett/LQ factor) give the same Gram matrices at all times."""
    rng = np.random.default_rng(3)
    n, d = 6, 40
    x0 = sample_tokens(rng, 2, n, d, reduce=False)
    low = np.linalg.qr(x0.swapaxes(-1, -2))[1].swapaxes(-1, -2)  # x0 = low @ Qᵀ
    t = np.linspace(0, 4, 9)
    full, red = run(x0, 2.0, t), run(low, 2.0, t)
    gram = lambda x: x @ x.swapaxes(-1, -2)  # noqa: E731
    # same arithmetic up to the rotation: rounding only
    np.testing.assert_allclose(gram(full), gram(red), atol=1e-12)


def test_freezing_keeps_the_indicators():
    rng = np.random.default_rng(5)
    x0 = sample_tokens(rng, 64, 8, 2)
    t = np.linspace(0, 15, 31)
    thr = 1 - 1e-3
    a = run(x0, 1.0, t, freeze_above=thr)
    b = run(x0, 1.0, t)
    ga, gb = a @ a.swapaxes(-1, -2), b @ b.swapaxes(-1, -2)
    assert (gb[-1].min(axis=(1, 2)) >= thr).mean() > 0.5  # most realisations froze
    np.testing.assert_array_equal(ga >= thr, gb >= thr)
