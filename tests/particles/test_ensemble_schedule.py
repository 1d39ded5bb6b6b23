"""particles.ensemble under a schedule of models (layers with their own weights, issue 25):
the composition of single-piece runs, particles.simulate with the same schedule, freezing
across switches, and the pieces the ensembles refuse."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model, Schedule
from particles.ensemble import ensemble_states
from validation.phase_diagram import sample_tokens

R, N, M = 4, 8, 3
DT = 0.05


def _layers() -> Schedule:
    """Three pieces: SA, USA, SA with V = -I/2 (a model's own matrix, shared by all
    realisations); switches at 0.5 and 1.25, neither of them an output time below."""
    return Schedule([(0.0, Model(beta=1.0)), (0.5, Model(beta=2.0, attention="usa")),
                     (1.25, Model(beta=2.0, V=-0.5 * np.eye(M)))])


def _x0(seed: int = 0, realizations: int = R) -> np.ndarray:
    return sample_tokens(np.random.default_rng(seed), realizations, N, M)


def test_schedule_equals_the_composition_of_single_piece_runs():
    x0 = _x0()
    t = [0.0, 0.25, 1.0, 2.0]
    run = ensemble_states(x0, _layers(), t, dt=DT)
    first = ensemble_states(x0, 1.0, [0.0, 0.25, 0.5], dt=DT)
    second = ensemble_states(first[-1], 2.0, [0.5, 1.0, 1.25], dt=DT, attention="unnormalized")
    third = ensemble_states(second[-1], 2.0, [1.25, 2.0], dt=DT,
                            value=np.broadcast_to(-0.5 * np.eye(M), (R, M, M)))
    composed = np.array([first[0], first[1], second[1], third[1]])
    assert run.shape == (len(t), R, N, M)
    # the same pieces over the same spans from the same states: the same floating-point
    # operations, so bit for bit (the switch state handed over is the one output there)
    np.testing.assert_array_equal(run, composed)
    # and the schedule matters: the first model alone to t = 2 ends elsewhere
    assert np.abs(ensemble_states(x0, 1.0, t, dt=DT)[-1] - run[-1]).max() > 1e-2


def test_schedule_matches_particles_simulate_with_the_same_schedule():
    x0 = _x0(1)
    t = [0.0, 0.25, 1.0, 2.0]
    run = ensemble_states(x0, _layers(), t, dt=DT)
    for r in range(R):
        ref = particles.simulate(_layers(), x0[r], t, method="rk4", dt=DT,
                                 observables=False)["x"].values
        # the same RK4 steps (every output time and switch is a multiple of dt, so the
        # ensemble's equal steps over a piece and particles' over an output interval are
        # the same steps, and the Hermite output at a step's end is that step's state): only
        # the order of the floating-point operations of the field differs (a few ulps per
        # evaluation, ~1e-16), over 40 steps with a growth of perturbations of at most
        # e^{L t} ~ e^{2 * 2}: <= 1e-12 (measured 3e-16)
        np.testing.assert_allclose(run[:, r], ref, rtol=0, atol=1e-12)


def test_freezing_stays_exact_across_switches():
    """A large beta then a small one: the freezing test compares the weights of the current
    piece with ``exp(beta thr + shift)``, which must take the current piece's beta (the first
    piece's beta = 4 would read the weights at beta = 0.25 as clustered from
    ``1 - 16 delta`` on, and freeze realisations before they cluster: this test fails then)."""
    x0 = sample_tokens(np.random.default_rng(5), 64, N, 2)
    layers = Schedule([(0.0, Model(beta=4.0)), (1.0, Model(beta=0.25))])
    t = np.linspace(0.0, 12.0, 49)
    thr = 1 - 1e-3
    frozen = ensemble_states(x0, layers, t, dt=0.1, freeze_above=thr)
    plain = ensemble_states(x0, layers, t, dt=0.1)
    ga, gb = frozen @ frozen.swapaxes(-1, -2), plain @ plain.swapaxes(-1, -2)
    clustered = gb.min(axis=(2, 3)) >= thr
    # measured: none clustered in the first piece, all 64 by t = 11 in the second
    assert not clustered[t <= 1.0].any() and clustered[-1].all()
    np.testing.assert_array_equal(ga >= thr, gb >= thr)


@pytest.mark.parametrize(("piece", "words"), [
    (Model(beta=1.0, noise=0.1), "piece 1: .* model.noise = 0.1"),
    (Model(beta=1.0, causal=True), "piece 1: .* model.causal = True"),
    (Model(beta=1.0, heads=[(np.eye(M), np.eye(M), np.eye(M))]), "piece 1: .* model.heads"),
    (Model(beta=1.0, attention="l2"), "piece 1: attention='l2' is not supported by 'ensemble'"),
    (Model(beta=1.0, Q=np.eye(2)), "piece 1: model.Q is 2 x 2, the tokens live in R\\^3"),
])
def test_unsupported_pieces_are_refused_by_name(piece, words):
    layers = Schedule([(0.0, Model(beta=1.0)), (0.5, piece)])
    with pytest.raises(ValueError, match=words):
        ensemble_states(_x0(), layers, [0.0, 1.0], dt=DT)


def test_inconsistent_arguments_are_refused_by_name():
    layers = _layers()
    with pytest.raises(ValueError, match="piece 1 has attention='unnormalized'.*'softmax'"):
        ensemble_states(_x0(), layers, [0.0, 1.0], dt=DT, attention="softmax")
    with pytest.raises(ValueError, match="dt: a list gives one entry per piece .*3 pieces.* 2"):
        ensemble_states(_x0(), layers, [0.0, 1.0], dt=[0.1, 0.1])
    with pytest.raises(ValueError, match="dt of piece 2 must be finite and > 0, got -0.1"):
        ensemble_states(_x0(), layers, [0.0, 2.0], dt=[0.1, 0.1, -0.1])
    v = np.broadcast_to(np.eye(M), (R, M, M))
    with pytest.raises(ValueError, match="piece 2: value is given both by the model's"):
        ensemble_states(_x0(), layers, [0.0, 2.0], dt=DT, value=[None, None, v])
    with pytest.raises(ValueError, match="freeze_above needs the identity model"):
        ensemble_states(_x0(), layers, [0.0, 2.0], dt=DT, freeze_above=0.9)
    with pytest.raises(ValueError, match="before the schedule's first start time"):
        ensemble_states(_x0(), Schedule([(1.0, Model(beta=1.0))]), [0.0, 2.0], dt=DT)


def test_per_piece_steps_and_matrices():
    """A list gives each piece its own step (USA's dt e^{-beta}) and per-realisation matrices;
    the run equals the composition with those arguments."""
    x0 = _x0(2)
    rng = np.random.default_rng(3)
    b1 = rng.standard_normal((R, M, M)) / np.sqrt(M)
    layers = Schedule([(0.0, Model(beta=1.0)), (0.5, Model(beta=3.0, attention="usa"))])
    dts = [DT, DT * np.exp(-3.0)]
    run = ensemble_states(x0, layers, [0.0, 1.0], dt=dts, bilinear=[b1, None])
    first = ensemble_states(x0, 1.0, [0.0, 0.5], dt=dts[0], bilinear=b1)
    second = ensemble_states(first[-1], 3.0, [0.5, 1.0], dt=dts[1], attention="usa")
    np.testing.assert_array_equal(run[-1], second[-1])  # bitwise, as above


def test_schedule_on_the_torch_backend():
    """The same schedule on torch (CPU here; a GPU changes where, not what): the round-off
    argument of tests/particles/test_ensemble_backends.py (<= 1e-12 for beta t <= 4 and
    <= 40 RK4 steps; the model's V = -I/2 moved to the backend once a piece)."""
    pytest.importorskip("torch")
    x0 = _x0(4)
    t = [0.0, 0.25, 1.0, 2.0]
    ref = ensemble_states(x0, _layers(), t, dt=DT)
    got = ensemble_states(x0, _layers(), t, dt=DT, backend="torch")
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
