"""Tests of validation.phase_diagram: the gamma ODE, random starts, the phase
diagram against the curve (6.12), determinism across workers, and input validation."""

from __future__ import annotations

import importlib
import json
import math

import numpy as np
import pytest
from scipy import stats
from testkit import assert_same_result

from particles.ensemble import ensemble_states
from validation.phase_diagram import (
    CHUNK,
    CHUNK_STATE_BYTES,
    chunk_size,
    first_crossing,
    gamma,
    phase_diagram,
    sample_matrices,
    sample_tokens,
    transition_time,
    wilson_interval,
)

run = ensemble_states


# -- the curve (6.12) -------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_gamma_at_beta_zero_is_closed_form(attention):
    n, t = 7, np.linspace(0, 4, 9)
    exact = (np.exp(2 * t) - 1) / (np.exp(2 * t) + n - 1)  # docs/equations.md section 4
    np.testing.assert_allclose(gamma(0.0, n, t, attention), exact, rtol=1e-9, atol=1e-12)
    delta = 1e-3  # gamma = 1 - delta  <=>  e^{2t} = ((1 - delta)(n - 1) + 1) / delta
    t_star = 0.5 * math.log(((1 - delta) * (n - 1) + 1) / delta)
    assert transition_time(0.0, n, delta, attention) == pytest.approx(t_star, rel=1e-9)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_gamma_matches_orthogonal_particles(attention):
    """Theorem 6.8: orthogonal starts keep equal inner products, equal to gamma (6.9)/(6.10)."""
    n, beta, t = 5, 2.0, np.linspace(0, 3, 13)
    x0 = np.eye(n)[None]  # n orthonormal tokens in R^n
    x = run(x0, beta, t, attention=attention, dt=0.02)
    g = np.einsum("tid,tjd->tij", x[:, 0], x[:, 0])
    off = g[:, ~np.eye(n, dtype=bool)]
    # RK4 at dt = 0.02 on a field with O(beta) Lipschitz constant: error ~ dt^4 e^{Lt} << 1e-6
    np.testing.assert_allclose(off, np.broadcast_to(gamma(beta, n, t, attention)[:, None], off.shape),
                               atol=1e-6)


# -- random starts ----------------------------------------------------------------------


def test_bartlett_start_has_the_uniform_law():
    """For uniform points of S^{d-1}, (1 + <x_i, x_j>)/2 ~ Beta((d-1)/2, (d-1)/2)."""
    rng = np.random.default_rng(4)
    n, d = 8, 50
    x = sample_tokens(rng, 4000, n, d)
    assert x.shape == (4000, n, n)
    law = stats.beta((d - 1) / 2, (d - 1) / 2)
    # pairs (0, 1) and (n-2, n-1) involve the first and the last Bartlett rows; each is
    # i.i.d. over realisations. A correct sampler fails with probability 2e-3 (fixed seed).
    for i, j in [(0, 1), (n - 2, n - 1)]:
        g = np.einsum("rd,rd->r", x[:, i], x[:, j])
        assert stats.kstest((1 + g) / 2, law.cdf).pvalue > 1e-3
    # the two pairs are independent: their correlation is O(1/sqrt(4000)) = 0.016
    a = np.einsum("rd,rd->r", x[:, 0], x[:, 1])
    b = np.einsum("rd,rd->r", x[:, 2], x[:, 3])
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(4000)


def test_ensembles():
    rng = np.random.default_rng(6)
    d = 60
    b, v = sample_matrices(rng, 50, d, "goe", "qk")
    assert v is b and np.array_equal(b, b.swapaxes(-1, -2))
    off = b[:, ~np.eye(d, dtype=bool)]
    diag = b[:, np.arange(d), np.arange(d)]
    # 177000 and 3000 samples: relative standard errors of the variances 0.3% and 2.6%
    assert np.var(off) * d == pytest.approx(1.0, rel=0.02)
    assert np.var(diag) * d == pytest.approx(2.0, rel=0.12)
    b, v = sample_matrices(rng, 50, d, "ginibre", "ginibre")
    assert np.var(v) * d == pytest.approx(1.0, rel=0.02)
    assert sample_matrices(rng, 2, d) == (None, None)


# -- statistics -------------------------------------------------------------------------


def test_wilson_interval():
    lo, hi = wilson_interval(np.array([0, 5, 10]), 10, 0.95)
    z2 = stats.norm.ppf(0.975) ** 2
    # closed form at k = 0
    assert lo[0] == pytest.approx(0, abs=1e-15) and hi[0] == pytest.approx(z2 / (10 + z2))
    assert lo[1] == pytest.approx(1 - hi[1]) and lo[1] < 0.5 < hi[1]  # symmetric at 1/2
    assert hi[2] == pytest.approx(1) and lo[2] == pytest.approx(1 - z2 / (10 + z2))


def test_first_crossing():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    v = np.array([[0.0, 0.4, 0.6, 0.2], [0.0, 0.0, 0.1, 0.2]])
    np.testing.assert_array_equal(first_crossing(v, t), [2.0, np.nan])


# -- the phase diagram ------------------------------------------------------------------


def test_large_d_follows_the_curve():
    """At large d the first t with P >= 1/2 is within the time-grid step plus
    sampling error of the curve (6.12), for beta <= 5.

    d = 1024 as in Figure 3: by rotation invariance it costs what d = 32 costs. Sampling
    error: the first times at which the Wilson bounds reach 1/2, at level 1 - 0.01/4
    (Bonferroni over the 4 betas). The finite-d bias O(sqrt(log d / d)) moves the median
    crossing by less than the grid step 0.1 (measured 0.08 at most).
    """
    betas = [0.5, 2.0, 3.5, 5.0]
    ds = phase_diagram(n=32, d=1024, betas=betas, t_max=10.0, times=101, realizations=256,
                       seed=0, confidence=1 - 0.01 / len(betas), progress=False)
    step = 0.1
    star = ds["transition_time"].values
    assert np.all(ds["t_half_lower"].values - step <= star)
    assert np.all(star <= ds["t_half_upper"].values + step)


def test_phase_diagram_dataset():
    ds = phase_diagram(n=6, d=[2, 3], betas=[0.5, 4.0], t_max=6.0, times=13,
                       realizations=200, seed=1, progress=False)
    assert ds["probability"].dims == ("d", "beta", "time")
    for name in ("probability", "pair_probability"):
        p = ds[name].values
        assert np.all((0 <= p) & (p <= 1))
    # at t = 0: P(<x_1, x_2> >= 1 - delta) is arccos(1 - delta)/pi on the circle and
    # delta/2 on S^2 (Archimedes); it must lie in the Wilson interval at level 1 - 1e-3/4
    p0 = np.array([math.acos(1 - 1e-3) / math.pi, 1e-3 / 2])
    lo0, hi0 = wilson_interval(ds["probability"].isel(time=0).values * 200, 200, 1 - 1e-3 / 4)
    assert np.all((lo0 <= p0[:, None]) & (p0[:, None] <= hi0))
    lo, hi = ds["probability_lower"], ds["probability_upper"]
    assert np.all((lo <= ds["probability"]) & (ds["probability"] <= hi))
    # exchangeability: the all-pairs average estimates the same probability with less
    # variance; it must lie in the pair-(1, 2) Wilson interval at level 1 - 1e-3/52
    # (Bonferroni over 4 cells x 13 times)
    lo, hi = wilson_interval(ds["probability"].values * 200, 200, 1 - 1e-3 / 52)
    pair = ds["pair_probability"].values
    assert np.all((lo - 1e-12 <= pair) & (pair <= hi + 1e-12))
    one = phase_diagram(n=6, d=3, betas=[0.5, 4.0], t_max=6.0, times=13, realizations=200,
                        seed=1, progress=False)
    # cells are numbered over (d, beta): d = 3 is cells 2 and 3 here, 0 and 1 alone, so the
    # numbers differ; the shapes and the curve agree
    assert one["probability"].dims == ("beta", "time")
    np.testing.assert_allclose(one["gamma"], ds["gamma"].sel(d=3))


def test_usa_and_random_matrices_run():
    ds = phase_diagram(n=6, d=4, betas=[1.0], t_max=2.0, times=5, realizations=16,
                       attention="unnormalized", qk="ginibre", v="qk", dt=0.05, seed=0,
                       progress=False)
    assert np.all(np.isfinite(ds["mean_inner_product"]))
    settings = json.loads(ds.attrs["settings"])
    assert settings["qk"] == "ginibre" and settings["attention"] == "unnormalized"


def test_one_and_two_workers_identical():
    kw = dict(n=6, d=3, betas=[0.5, 2.0, 6.0], t_max=4.0, times=9, realizations=32,
              seed=7, progress=False)
    one = phase_diagram(workers=1, **kw)
    # a threaded LocalCluster starts in about a second (see the process variant below)
    two = phase_diagram(workers=2, processes=False, **kw)
    assert_same_result(one, two)


@pytest.mark.parametrize(("n", "d", "itemsize", "expected"), [
    (32, 32, 8, 64), (32, 128, 8, 16), (32, 128, 4, 32), (32, 2, 8, CHUNK), (4096, 128, 8, 1),
    (10**6, 3, 8, 1)])
def test_chunk_size_keeps_the_state_within_its_budget(n, d, itemsize, expected):
    dtype = {8: "float64", 4: "float32"}[itemsize]
    chunk = chunk_size((10_000, n, d), None, dtype)
    assert chunk == expected == max(1, min(CHUNK, CHUNK_STATE_BYTES // (n * d * itemsize)))
    assert chunk_size((10_000, n, d), "cuda", dtype) == 10_000  # a GPU takes them all at once


def test_chunks_do_not_change_the_numbers(monkeypatch):
    """Realisations are independent and the products batched, so integrating them 5 at a time
    instead of all 32 at once gives the same states (freezing included: identity Q, K, V)."""
    kw = dict(n=6, d=3, betas=[0.5, 4.0], t_max=4.0, times=9, realizations=32, seed=3,
              progress=False)
    whole = phase_diagram(**kw)
    pd_module = importlib.import_module("validation.phase_diagram")
    monkeypatch.setattr(pd_module, "CHUNK_STATE_BYTES", 5 * 6 * 3 * 8)  # 5 realisations
    assert chunk_size((32, 6, 3), None) == 5
    parts = phase_diagram(**kw)
    for name in ("probability", "pair_probability"):  # per-start counts: the same bits
        np.testing.assert_array_equal(parts[name].values, whole[name].values)
    # a sum over the 32 starts, grouped by chunk: round-off of 32 terms of size <= 1
    np.testing.assert_allclose(parts["mean_inner_product"].values,
                               whole["mean_inner_product"].values, rtol=0, atol=32 * 2.2e-16)


@pytest.mark.benchmark
def test_one_and_two_worker_processes_identical():
    """As above with worker processes (about 10 s of cluster start-up on 2 cores)."""
    kw = dict(n=6, d=3, betas=[0.5, 2.0, 6.0], t_max=4.0, times=9, realizations=32,
              seed=7, progress=False)
    assert_same_result(phase_diagram(workers=1, **kw), phase_diagram(workers=2, **kw))


@pytest.mark.parametrize("kw, match", [
    ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"), ({"delta": -0.5}, "delta"),
    ({"betas": []}, "betas"), ({"betas": 0}, "betas"), ({"times": []}, "times"),
    ({"times": 0}, "times"), ({"n": 1}, "n must"), ({"d": 1}, "d must"), ({"d": []}, "d must"),
    ({"realizations": 0}, "realizations"), ({"attention": "l2"}, "attention"),
    ({"qk": "wishart"}, "qk"), ({"v": "x"}, "v must"), ({"beta_min": 5, "beta_max": 1},
                                                        "betas"),
    ({"t_max": -1.0}, "t_max"), ({"dt": 0.0}, "dt"),
])
def test_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        phase_diagram(**{"realizations": 4, "betas": 2, "times": 3, "progress": False, **kw})
