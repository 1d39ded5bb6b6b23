"""The ring checks (validation.checks.rings) and their particle reference in reflection-symmetric
pairs (validation.pairs): the pair field against the full field of the 2 n/2 points, the
sampler against the exact distribution function, rings against pairs in Kolmogorov distance
along the fixed axis (docs/lagrangian.md section 8), the figures readable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield import Model, nodes, solve_lagrangian
from meanfield.lagrangian import field_at
from meanfield.lagrangian.rings import cdf_s
from meanfield.testing import assert_figure_readable
from validation.checks import rings as checks
from validation.pairs import kolmogorov, kolmogorov_levels, pair_field, simulate_pairs, symmetric_pairs
from validation.suites import CHECK_MODULES, REGISTRY


def _mirror(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, np.concatenate([-x[:, :-1], x[:, -1:]], axis=1)])


@pytest.mark.parametrize(("attention", "beta", "value"),
                         [("softmax", 1.0, 1), ("softmax", 6.0, -1), ("unnormalized", 2.0, 1),
                          ("unnormalized", 1.0, -1)])
def test_pair_field_is_the_field_of_the_whole_symmetric_configuration(attention: str, beta: float,
                                                                     value: int) -> None:
    model = Model(beta, attention=attention, value=value)
    xh = symmetric_pairs(8.0, 16, 300, np.random.default_rng(3))
    full = _mirror(xh)
    ref = field_at(model, full, full, np.full(full.shape[0], 1.0 / full.shape[0])).velocity
    got = pair_field(model, xh, memory_limit=8 * 4 * 150 * 37)  # tiles of 37 rows
    # measured 8e-16; 1e-13: sums of 300 terms of size <= e^{beta}/Z, round-off with margin
    assert np.max(np.abs(got - ref[:150])) < 1e-13 * max(1.0, float(np.max(np.abs(ref))))
    # and the partners' field is the reflection of it (what keeps the pairs paired)
    assert np.max(np.abs(ref[150:] - _mirror(got)[150:])) < 1e-13 * max(1.0, float(np.max(np.abs(ref))))


def test_pairs_refuse_what_they_do_not_cover() -> None:
    with pytest.raises(ValueError, match="even"):
        symmetric_pairs(1.0, 4, 7, np.random.default_rng(0))
    with pytest.raises(ValueError, match="attention"):
        pair_field(Model(1.0, attention="sigmoid"), np.eye(3)[None, 2])


def test_wood_sampler_matches_the_ring_distribution_function() -> None:
    # 20 000 draws of s for vMF kappa = 8, d = 16 against the exact P(s <= s_j) of the rings
    # (cubic Hermite between, 2.6e-5): below the 99.9 % Kolmogorov quantile 1.95/sqrt(m)
    d, kappa, m = 16, 8.0, 20000
    s = np.sort(symmetric_pairs(kappa, d, 2 * m, np.random.default_rng(11))[:, -1])
    ds = solve_lagrangian(Model(1.0), nodes.rings(lambda u: kappa * u, 64, d, log=True), [0.0])
    assert kolmogorov(s, cdf_s(ds, 0, s)) < 1.95 / math.sqrt(m)


def test_rings_match_particle_pairs_along_the_fixed_axis() -> None:
    # d = 16, vMF kappa = 8, SA beta = 1 through collapse (t = 3), n = 2000 particles in pairs:
    # s = <x, e> along the fixed axis e (the pairs keep the mean on it exactly; i.i.d.
    # particles gave sqrt(n) KS = 9.7 at t = 3 along e). Levels (validation.pairs.
    # kolmogorov_levels): against the run fitted to the particles' mean, the 99 % Kolmogorov
    # quantile of n/2 = 1000 draws (the values come in equal pairs); against the exact start,
    # that plus the largest shift of the distribution function over starts whose mean is
    # within 2.576 standard errors (the coherent fluctuation: the sample mean moves the
    # collapse time of every particle). RK4 step 0.25 moves the distribution function by
    # <= 3.4e-4 (step halving, docs), the rings' cdf by 2.6e-5: far below the level 0.052.
    d, kappa, n = 16, 8.0, 2000
    times = np.linspace(0.0, 3.0, 7)
    px = simulate_pairs(Model(1.0), symmetric_pairs(kappa, d, n, np.random.default_rng(5)), times, 0.25)
    assert np.max(np.abs(np.linalg.norm(px, axis=2) - 1)) < 1e-14
    levels, fitted, _ = kolmogorov_levels(Model(1.0), kappa, d, n, float(px[0, :, -1].mean()), times)
    ds = solve_lagrangian(Model(1.0), nodes.rings(lambda s: kappa * s, 64, d, log=True), times,
                          rtol=1e-10, atol=1e-12)
    assert levels[0] > 1.63 / math.sqrt(n / 2) and np.all(levels < 3 * 1.63 / math.sqrt(n / 2))
    for k in range(times.size):
        s = np.sort(px[k, :, -1])
        assert kolmogorov(s, cdf_s(ds, k, s)) < levels[k], k
        assert kolmogorov(s, cdf_s(fitted, k, s)) < 1.63 / math.sqrt(n / 2), k
    assert float(np.mean(px[-1, :, -1])) > 0.99  # through collapse: the check is not vacuous


def test_ring_checks_are_registered_in_the_full_suite() -> None:
    assert "validation.checks.rings" in CHECK_MODULES
    names = [e.name for e in REGISTRY.suite("full")]
    for name in ("rings.collapse", "rings.high_dimension", "rings.particles"):
        assert name in names


def test_logistic_solves_the_n_to_infinity_limit_of_6_9() -> None:
    t = np.linspace(0.0, 3.0, 301)
    g = checks.logistic(0.05, t)
    dg = np.gradient(g, t, edge_order=2)
    assert np.max(np.abs(dg - 2 * g * (1 - g))) < 1e-3  # second-order differences, dt = 0.01


def test_ring_check_figures_are_readable(tmp_path) -> None:
    times = np.linspace(0.0, 1.0, 3)
    runs = {f"d = {d}, kappa = 8, beta = 1": solve_lagrangian(
        Model(1.0), nodes.rings(lambda s: 8.0 * s, 8, d, log=True), times) for d in (16, 64)}
    assert_figure_readable(checks.plot_collapse(runs, tmp_path / "c.png"))
    m2 = np.linspace(0.05, 0.5, 3)
    fig = checks.plot_high_dimension(times, {"beta = 1, d = 64": (m2, m2 * 1.01)}, tmp_path / "h.png")
    assert_figure_readable(fig)


def test_vmf_kappa_inverts_the_mean_of_s() -> None:
    from scipy.special import ive

    from validation.pairs import vmf_kappa

    for d, kappa in ((3, 0.01), (16, 8.0), (256, 32.0), (1024, 400.0)):
        m = ive(d / 2, kappa) / ive(d / 2 - 1, kappa)  # scipy's Bessel functions, independent
        # of log_hyp0f1 (1e-13, test_lagrangian_rings); dA/dkappa >= 1e-4 here, brentq's xtol 1e-13
        assert vmf_kappa(m, d) == pytest.approx(kappa, rel=1e-8)
    with pytest.raises(ValueError, match="mean"):
        vmf_kappa(1.0, 16)
