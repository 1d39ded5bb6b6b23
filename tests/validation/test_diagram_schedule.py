"""Schedules in the ensembles' diagrams (issue 25, layers with their own weights):
phase_diagram, cluster_counts and trajectories under a schedule whose betas are factors of
the beta axis; the curve (6.12) under a schedule; the schedules they refuse."""

from __future__ import annotations

import json

import numpy as np
import pytest

from meanfield import Model, Schedule, theory
from validation.metastability import cluster_counts, trajectories
from validation.phase_diagram import gamma, phase_diagram, schedule_at, transition_time

# tiny runs: n = 8 tokens, 16 realisations, dt = 0.25 dividing every switch and output time
PHASE = dict(n=8, d=3, betas=[1.0, 4.0], t_max=4.0, times=9, realizations=16, dt=0.25,
             progress=False)
COUNTS = dict(betas=[1.0, 4.0], n=8, seeds=16, t_max=6.0, times=13, dt=0.25, progress=False)


def _constant(switch: float) -> Schedule:
    """Two equal pieces: the plain dynamics, stopped at ``switch``."""
    return Schedule([(0.0, Model(beta=1.0)), (switch, Model(beta=1.0))])


def test_a_constant_schedule_reproduces_the_plain_phase_diagram():
    plain = phase_diagram(**PHASE)
    const = phase_diagram(**PHASE, schedule=_constant(2.0))
    # the switch at t = 2 is a multiple of dt and an output time: the same RK4 steps; the
    # state handed over is the one output there (projected once more, a few ulps at most),
    # so the inner products agree to round-off and every count against 1 - delta is equal
    # (a count could differ only for an inner product within ~1e-16 of the threshold)
    for name in ("probability", "probability_lower", "probability_upper", "pair_probability",
                 "t_half", "gamma", "transition_time"):
        np.testing.assert_array_equal(const[name].values, plain[name].values, err_msg=name)
    # a mean of 16 inner products of unit vectors: round-off ~1e-16 each
    np.testing.assert_allclose(const["mean_inner_product"].values,
                               plain["mean_inner_product"].values, rtol=0, atol=1e-14)
    assert plain["probability"].values.max() > 0  # something to compare


def test_a_schedule_changes_the_phase_diagram_and_is_recorded():
    layers = Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=0.25))])
    plain = phase_diagram(**PHASE)
    ds = phase_diagram(**PHASE, schedule=layers)
    assert not np.array_equal(ds["probability"].values, plain["probability"].values)
    assert not np.allclose(ds["transition_time"].values, plain["transition_time"].values)
    model = json.loads(ds.attrs["model"])
    assert Schedule.from_state(model) == layers
    assert model["schedule_beta"] == "piece k runs at beta * its model's beta"
    assert "schedule" not in json.loads(ds.attrs["settings"])  # only in model, as JSON
    assert bool(ds.attrs["successful"])


def test_the_curve_under_a_schedule_joins_the_pieces():
    """(6.9) piece by piece: one piece of each beta equals the plain curve on its span; from
    the switch on it is the plain curve at the second beta started from gamma at the switch,
    i.e. the plain curve at that beta shifted in time (the ODE is autonomous)."""
    n, t = 8, np.linspace(0.0, 6.0, 25)
    layers = Schedule([(0.0, Model(beta=1.0)), (2.0, Model(beta=5.0))])
    g = gamma(layers, n, t)
    np.testing.assert_array_equal(gamma(Schedule([(0.0, Model(beta=3.0))]), n, t),
                                  theory.gamma(3.0, n, t))
    early = t <= 2.0
    # two DOP853 solves at rtol 1e-11 over the same span: agreement to ~1e-11
    np.testing.assert_allclose(g[early], theory.gamma(1.0, n, t[early]), rtol=0, atol=1e-10)
    g_switch = theory.gamma(1.0, n, [2.0])[0]
    dense = np.linspace(0.0, 40.0, 400001)
    g5 = theory.gamma(5.0, n, dense)
    shift = dense[np.searchsorted(g5, g_switch)]  # the time at which beta = 5 reaches g(2)
    late = t > 2.0
    # the shifted curve read on a grid of 1e-4 with slope |g'| <= 2: <= 2e-4 (the shift is
    # read to 1e-4: another 2e-4)
    np.testing.assert_allclose(g[late], np.interp(t[late] - 2.0 + shift, dense, g5), atol=4e-4)
    # the switch matters: measured 6e-3 from the beta = 1 curve, 15x the tolerance above
    assert np.abs(g[late] - theory.gamma(1.0, n, t[late])).max() > 2e-3
    tc = transition_time(layers, n, 1e-3)
    # beta = 5 clusters the orthogonal start more slowly than beta = 1 (measured 13.6 and 4.7)
    assert transition_time(1.0, n, 1e-3) < tc < transition_time(5.0, n, 1e-3)
    np.testing.assert_allclose(gamma(layers, n, [tc]), 1 - 1e-3, atol=1e-8)


def test_a_constant_schedule_reproduces_the_plain_cluster_counts():
    plain = cluster_counts(**COUNTS)
    const = cluster_counts(**COUNTS, schedule=_constant(3.0))
    for name in ("clusters", "dwell", "first_time", "final_clusters"):  # counts, as above
        np.testing.assert_array_equal(const[name].values, plain[name].values, err_msg=name)
    layers = Schedule([(0.0, Model(beta=1.0)), (1.5, Model(beta=0.25))])
    other = cluster_counts(**COUNTS, schedule=layers)
    assert not np.array_equal(other["clusters"].values, plain["clusters"].values)
    assert Schedule.from_state(json.loads(other.attrs["model"])) == layers


def test_trajectories_under_a_schedule():
    layers = Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=2.0))])
    kw = dict(betas=[2.0], n=8, t_max=2.0, times=5, dt=0.25)
    ds = trajectories(**kw, schedule=layers)
    first = trajectories(**dict(kw, t_max=1.0, times=3))  # beta = 2 * 1 up to the switch
    np.testing.assert_array_equal(ds["theta"].values[:, :3], first["theta"].values)
    later = trajectories(**dict(kw, betas=[4.0]))  # beta = 2 * 2 from the start
    assert np.abs(ds["theta"].values[:, -1] - later["theta"].values[:, -1]).max() > 1e-3
    assert Schedule.from_state(json.loads(ds.attrs["model"])) == layers


@pytest.mark.parametrize(("schedule", "words"), [
    (Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=1.0, attention="usa"))]),
     "schedule piece 1: attention='unnormalized', the run's is 'softmax'"),
    (Schedule([(0.0, Model(beta=1.0, V=np.eye(3)))]), "schedule piece 0: model.V is set"),
    (Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=1.0, value=-1))]),
     "schedule piece 1: model.value = -1"),
    (Schedule([(0.0, Model(beta=1.0, noise=0.5))]), "schedule piece 0: model.noise = 0.5"),
    (Schedule([(1.0, Model(beta=1.0))]), "the first piece must start at t <= 0, got 1.0"),
    ([(0.0, 1.0)], "schedule must be a meanfield.Schedule, got list"),
])
def test_bad_schedules_are_refused_by_name(schedule, words):
    with pytest.raises(ValueError, match=words):
        phase_diagram(**PHASE, schedule=schedule)
    with pytest.raises(ValueError, match=words):
        cluster_counts(**COUNTS, schedule=schedule)


def test_laws_per_piece():
    """A list of laws draws each piece's own matrices (layers with their own weights)."""
    layers = Schedule([(0.0, Model(beta=1.0)), (2.0, Model(beta=1.0))])
    kw = dict(PHASE, betas=[2.0])
    shared = phase_diagram(**kw, qk="ginibre", schedule=layers)
    plain = phase_diagram(**kw, qk="ginibre")
    np.testing.assert_array_equal(shared["probability"].values, plain["probability"].values)
    own = phase_diagram(**kw, qk=["ginibre", "ginibre"], schedule=layers)
    assert not np.array_equal(own["mean_inner_product"].values,
                              plain["mean_inner_product"].values)
    assert json.loads(own.attrs["model"])["qk"] == ["ginibre", "ginibre"]
    with pytest.raises(ValueError, match="qk: a list gives one law per piece .*2 pieces.*got 3"):
        phase_diagram(**kw, qk=["ginibre"] * 3, schedule=layers)
    with pytest.raises(ValueError, match="a list of laws needs a schedule"):
        phase_diagram(**kw, qk=["ginibre", "goe"])


def test_schedule_at_scales_the_pieces():
    layers = Schedule([(0.0, Model(beta=1.0, attention="usa")), (1.0, Model(beta=0.5,
                                                                         attention="usa"))])
    assert schedule_at(layers, 4.0) == Schedule([(0.0, Model(beta=4.0, attention="usa")),
                                                 (1.0, Model(beta=2.0, attention="usa"))])


def test_the_schedule_is_part_of_a_stored_sweep(tmp_path):
    """Resuming a stored diagram takes the same schedule (its cells are reused) and refuses
    another (the sweep names the schedule as what differs)."""
    from validation.sweep import ResumeMismatch

    layers = Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=0.25))])
    kw = dict(PHASE, betas=[2.0], store=str(tmp_path / "store"))
    first = phase_diagram(**kw, schedule=layers)
    again = phase_diagram(**kw, schedule=layers, resume=True)
    np.testing.assert_array_equal(again["probability"].values, first["probability"].values)
    other = Schedule([(0.0, Model(beta=1.0)), (1.0, Model(beta=0.5))])
    with pytest.raises(ResumeMismatch, match="differs from this one in schedule"):
        phase_diagram(**kw, schedule=other, resume=True)
