"""Subspace nodes, the k = 2, 3 reductions of the Lagrangian solver on S^{d-1} (issue 22,
docs/lagrangian.md section 11): the node rule's exactness, the sphere-averaged field against
the full field of the same measure on product nodes (d = 4, 5, 6), a zonal measure as k = 2
against the k = 1 rings, the beta = 0 Möbius family off-axis in the plane, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield import Model, nodes, solve_lagrangian
from meanfield.lagrangian import field_at
from meanfield.lagrangian.nodes import sphere_rule
from meanfield.lagrangian.nodes_reduced import jacobi_rule_log
from meanfield.lagrangian.rings import ring_field
from meanfield.lagrangian.subspace import ball_coordinates, state_velocity, subspace_field, to_state
from meanfield.theory import mobius_log_density_at, mobius_w_path


def _full(sn: nodes.SubspaceNodes, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """The same measure on points of S^{d-1}: each node's sphere S^{d-k-1} (radius r_j) by
    ``sphere_rule(d - k, degree)``."""
    d, k = sn.d, sn.k
    u, wu = sphere_rule(d - k, degree)
    r = np.sqrt(1 - np.sum(sn.p ** 2, axis=1))
    x = np.concatenate([np.broadcast_to(sn.p[:, None, :], (sn.n, len(u), k)),
                        r[:, None, None] * u[None]], axis=2).reshape(-1, d)
    return x, (sn.weights[:, None] * wu[None] / wu.sum()).reshape(-1)


# -- the node rule -----------------------------------------------------------------------------


def test_jacobi_rule_matches_scipy_and_works_in_high_dimension() -> None:
    from scipy.special import roots_jacobi

    for a, b in ((0.0, 0.0), (0.5, 0.5), (1.5, 0.0), (30.0, 0.5)):
        t, log_w = jacobi_rule_log(7, a, b)
        x, w = roots_jacobi(7, a, b)
        # two eigen-solvers of the same 7 x 7 Jacobi matrix: round-off (measured 3e-14)
        assert np.max(np.abs(t - (1 + x) / 2)) < 1e-13
        assert np.max(np.abs(np.exp(log_w) - w / w.sum())) < 1e-13
    t, log_w = jacobi_rule_log(40, 0.5 * (2048 - 4), 0.0)  # d = 2048, k = 2: 2^{1023} in scipy
    assert np.all(np.isfinite(t)) and np.isclose(np.exp(log_w).sum(), 1.0, rtol=0, atol=1e-14)


@pytest.mark.parametrize(("d", "k"), [(6, 2), (7, 3), (40, 2), (1024, 3)])
def test_subspace_rule_integrates_polynomials_exactly(d: int, k: int) -> None:
    # the uniform measure on S^{d-1}: E x_1^4 = 3/(d(d+2)), E x_1^2 x_2^2 = 1/(d(d+2)),
    # E x_1^4 x_k^2 = 3/(d(d+2)(d+4)) (Gaussian moments over E|g|^{2m}); 3 radial nodes and the
    # angular degree 11 are exact to degree 11 > 6: round-off
    sn = nodes.subspace(lambda p: np.zeros(len(p)), 3, d, k, log=True)
    assert sn.n == 3 * (12 if k == 2 else 72)
    assert sn.integrate(lambda p: p[:, 0] ** 4) == pytest.approx(3 / (d * (d + 2)), rel=1e-13)
    assert sn.integrate(lambda p: p[:, 0] ** 2 * p[:, 1] ** 2) == pytest.approx(1 / (d * (d + 2)), rel=1e-13)
    assert sn.integrate(lambda p: p[:, 0] ** 4 * p[:, -1] ** 2) == pytest.approx(
        3 / (d * (d + 2) * (d + 4)), rel=1e-13)
    # the uniform density per unit area is 1/|S^{d-1}| (log, any d)
    from meanfield.special import log_sphere_area

    assert np.allclose(sn.log_density, -log_sphere_area(d), rtol=1e-14, atol=0)


def test_state_coordinates_keep_the_distance_to_the_unit_sphere() -> None:
    q = np.array([[0.0, 0.0], [1e-9, 2e-9], [0.3, -0.4], [30.0, 40.0]])
    p, r2 = ball_coordinates(q)
    assert np.allclose(to_state(p[:3]), q[:3], rtol=1e-14, atol=1e-24)
    # |q| = 50: 1 - |p|^2 = 1/cosh^2 50 ~ 1.5e-43, to relative precision (1 - |p|^2 from p is 0)
    assert r2[3] == pytest.approx(1 / math.cosh(50.0) ** 2, rel=1e-14)
    # dq/dt maps back to dp/dt = (I - p p^T) g: the chain rule of p = tanh|q| q/|q|
    g = np.array([[0.3, -0.2], [0.1, 0.7], [-0.5, 0.25], [0.2, 0.1]])
    dq = state_velocity(q[:3], g[:3])
    eps = 1e-6
    dp = (ball_coordinates(q[:3] + eps * dq)[0] - ball_coordinates(q[:3] - eps * dq)[0]) / (2 * eps)
    want = g[:3] - p[:3] * np.sum(p[:3] * g[:3], axis=1)[:, None]
    # central difference: O(eps^2 |p'''|) ~ 1e-12, plus round-off 1e-16/eps ~ 1e-10
    assert np.max(np.abs(dp - want)) < 1e-9


# -- the reduced field against the full field on the sphere ------------------------------------


@pytest.mark.parametrize(("d", "k"), [(4, 2), (5, 3), (5, 2), (6, 3)])
@pytest.mark.parametrize(("attention", "beta", "value"), [
    ("softmax", 0.0, 1), ("softmax", 1.0, 1), ("softmax", 4.0, -1),
    ("unnormalized", 1.0, 1), ("unnormalized", 3.0, -1), ("l2", 2.0, 1)])
def test_subspace_field_equals_the_full_field_on_product_nodes(d: int, k: int, attention: str,
                                                              beta: float, value: int) -> None:
    # One measure twice: subspace nodes (the sphere average in closed form), and each node's
    # S^{d-k-1} by a product rule exact to degree 30 (nu = 0 for d = k + 2: the circle).
    # Its error is the tail of the series of e^{beta r r' <u, u'>}, |beta r r'| <= 4:
    # 4^31/31! ~ 5e-16, round-off. The field of the ambient solver at one point of each
    # node's sphere: its first k components are dp/dt, its divergence the same div_S.
    model = Model(beta, attention=attention, value=value)
    sn = nodes.subspace(lambda p: np.exp(1.5 * p[:, 0] - p[:, 1] + p[:, 0] * p[:, -1]), 3, d, k,
                        angular=7)
    x, w = _full(sn, 30)
    res = field_at(model, sn.x, x, w)
    p, r2 = ball_coordinates(to_state(sn.p))
    v, div, _ = subspace_field(model, p, r2, sn.weights, d)
    scale = max(1.0, float(np.max(np.abs(div))))
    # measured <= 3e-14 relative (sums of 1e3-5e4 exponentials); 1e-12: 30 x that
    assert np.max(np.abs(v - res.velocity[:, :k])) < 1e-12 * scale
    assert np.max(np.abs(div - res.divergence)) < 1e-12 * scale
    # the rest of x moves radially in its sphere: the velocity's other part is -<p, v>/r^2 ... * r u
    rest = res.velocity[:, k:]
    assert np.max(np.abs(rest[:, :-1])) < 1e-12 * scale  # no motion along u's sphere


@pytest.mark.parametrize(("attention", "beta", "value"), [("softmax", 2.0, 1), ("unnormalized", 1.0, -1)])
def test_a_zonal_measure_as_k2_is_the_k1_rings(attention: str, beta: float, value: int) -> None:
    # f(p) = exp(2 p_1) depends on p_1 = <x, e_1> only: the k = 2 field at (s, 0) is the ring
    # field at s (axis e_1 instead of e_d, the same by symmetry). Two quadratures of the same
    # smooth measure, each exact to degree 2n - 1 (rings) or 4n - 1 (subspace), e^{2 beta s}
    # converged to round-off at these degrees (Taylor tail (2 beta)^{40}/40! ~ 1e-24)
    d = 6
    model = Model(beta, attention=attention, value=value)
    r = nodes.rings(lambda s: np.exp(2 * s), 24, d)
    sn = nodes.subspace(lambda p: np.exp(2 * p[:, 0]), 12, d, 2)
    dphi, div_ring = ring_field(model, np.log(np.tan(r.theta / 2)), r.weights, d)
    sdot = -np.sin(r.theta) ** 2 * dphi
    pt = np.stack([r.s, np.zeros(r.n)], axis=1)
    p, r2 = ball_coordinates(to_state(sn.p))
    v, div, _ = subspace_field(model, p, r2, sn.weights, d, targets=(pt, np.sin(r.theta) ** 2))
    scale = max(1.0, float(np.max(np.abs(div_ring))))
    # measured 2e-15; 1e-12 leaves round-off of the 576-term sums with margin
    assert np.max(np.abs(v[:, 0] - sdot)) < 1e-12 * scale
    assert np.max(np.abs(v[:, 1])) < 1e-12 * scale
    assert np.max(np.abs(div - div_ring)) < 1e-12 * scale


def test_a_zonal_measure_as_k2_runs_as_the_k1_rings() -> None:
    # the same run, k = 2 against rings: E[s](t) and the log densities at matching points.
    # Both are the flow of the same measure (docs/lagrangian.md section 11), quadratures
    # converged as above; the controllers' rtol 1e-10 bounds the difference by ~1e-9
    d, beta = 6, 2.0
    t = [0.0, 0.5, 1.0]
    sn = nodes.subspace(lambda p: np.exp(2 * p[:, 0]), 6, d, 2, angular=23)
    ring = nodes.rings(lambda s: np.exp(2 * s), 12, d)
    a = solve_lagrangian(Model(beta), sn, t, rtol=1e-10, atol=1e-12)
    b = solve_lagrangian(Model(beta), ring, t, rtol=1e-10, atol=1e-12)
    assert a.attrs["successful"] == 1
    mean_a = (a["weight"] * a["p"].isel(coord=0)).sum("node").values
    mean_b = (b["weight"] * b["s"]).sum("node").values
    assert np.max(np.abs(mean_a - mean_b)) < 1e-9
    assert np.all(np.abs(mean_a[1:] - mean_a[0]) > 1e-3)  # it moved
    # mass exact along characteristics
    assert np.allclose(a["mass"].values, 1.0, rtol=0, atol=1e-14)
    # E[s^2], a second moment of the same law, agrees as the mean does
    m2a = (a["weight"] * a["p"].isel(coord=0) ** 2).sum("node").values
    m2b = (b["weight"] * b["s"] ** 2).sum("node").values
    assert np.max(np.abs(m2a - m2b)) < 1e-9


# -- beta = 0: the Möbius family, off-axis in the plane ----------------------------------------


# the tolerance: the node rule's error on the rational density |x - w|^{-2(d-1)} (measured at
# t = 0: 1.4e-10 for k = 2, 100 nodes; 2.4e-6 for k = 3, 216 nodes), carried into the field
# through the quadrature of the mean m(t) that drives the beta = 0 flow (measured at t = 1:
# 1.7e-9 and 2.0e-5); the controller's rtol 1e-12 on log J ~ 10 is far below. A wrong term of
# the field or divergence gives errors of the size of log J itself (~ 1 to 10).
@pytest.mark.parametrize(("d", "k", "n", "angular", "tol"), [(8, 2, 5, 19, 1e-8), (6, 3, 3, 11, 1e-4)])
def test_beta0_subspace_nodes_follow_the_exact_mobius_solution(d: int, k: int, n: int, angular: int,
                                                               tol: float) -> None:
    # rho_w = ((1 - |w|^2)/|x - w|^2)^{d-1}/|S^{d-1}| with w in span(e_1 .. e_k), off every axis:
    # a function of p = Px. At beta = 0 the family is invariant, w(t) from theory.mobius_w_path
    # (docs/equations.md section 4): the density carried along each node must be the exact
    # density at the node's position at every time.
    w0 = np.zeros(d)
    w0[:2] = 0.2 * np.array([math.cos(1.0), math.sin(1.0)])
    if k == 3:
        w0[2] = 0.1

    def lift(p: np.ndarray, r2: np.ndarray) -> np.ndarray:
        x = np.zeros((len(p), d))
        x[:, :k] = p
        x[:, -1] = np.sqrt(r2)
        return x

    sn = nodes.subspace(lambda p: mobius_log_density_at(lift(p, 1 - np.sum(p * p, axis=1)), w0),
                        n, d, k, angular=angular, log=True)
    times = [0.0, 0.5, 1.0]
    ds = solve_lagrangian(Model(0.0), sn, times, rtol=1e-12, atol=1e-12)
    assert ds.attrs["successful"] == 1
    w = mobius_w_path(w0, times)
    err = []
    for i in range(len(times)):
        x = lift(ds["p"].values[i], np.exp(ds["log_one_minus_p2"].values[i]))
        err.append(np.max(np.abs(ds["log_density"].values[i] - mobius_log_density_at(x, w[i]))))
    assert max(err) < tol, err
    assert float(np.linalg.norm(w[-1])) > 0.4  # it moved: |w| from 0.2 (0.22 for k = 3) to 0.42 or more
    assert np.allclose(ds["mass"].values, 1.0, rtol=0, atol=1e-14)


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "words"), [
    (Model(1.0, attention="sigmoid"), "sigmoid"),
    (Model(1.0, attention="sinkhorn"), "sinkhorn"),
    (Model(1.0, noise=0.1), "noise"),
    (Model(1.0, Q=2 * np.eye(8)), "Q, K, V"),
])
def test_subspace_nodes_refuse_what_the_symmetry_does_not_cover(model: Model, words: str) -> None:
    sn = nodes.subspace(lambda p: np.exp(p[:, 0]), 2, 8, 2)
    with pytest.raises(ValueError, match=words):
        solve_lagrangian(model, sn, [0.0, 0.1])


def test_subspace_nodes_refuse_bad_input() -> None:
    f = lambda p: np.exp(p[:, 0])  # noqa: E731
    with pytest.raises(ValueError, match="k must be 2 or 3"):
        nodes.subspace(f, 4, 8, 4)
    with pytest.raises(ValueError, match="d must be"):
        nodes.subspace(f, 4, 3, 2)
    with pytest.raises(ValueError, match="f must be finite and >= 0"):
        nodes.subspace(lambda p: p[:, 0], 4, 8, 2)
    with pytest.raises(ValueError, match=r"2\.097e\+06 nodes, more than 100000"):  # refused before building
        nodes.subspace(f, 64, 64, 3)
    with pytest.raises(ValueError, match="backend"):
        solve_lagrangian(Model(1.0), nodes.subspace(f, 2, 8, 2), [0.0, 0.1], dtype="float32", rtol=1e-5)
    with pytest.raises(ValueError, match="adaptive"):
        solve_lagrangian(Model(1.0), nodes.subspace(f, 2, 8, 2), [0.0, 0.1], scheme="rk4", dt=0.01)
    with pytest.raises(ValueError, match="open unit ball"):
        nodes.SubspaceNodes(np.array([[1.0, 0.0]]), np.ones(1), np.zeros(1), 8)


def test_kolmogorov_distance_of_a_sample_against_a_discrete_law() -> None:
    from validation.checks.subspace import kolmogorov_weighted, window_mass

    # the most mass in a window [c - delta, c + delta]
    atoms, weights = np.array([0.0, 0.1, 0.15, 1.0]), np.array([0.1, 0.2, 0.3, 0.4])
    assert window_mass(atoms, weights, 0.0) == pytest.approx(0.4)
    assert window_mass(atoms, weights, 0.03) == pytest.approx(0.5)
    assert window_mass(atoms, weights, 0.08) == pytest.approx(0.6)

    # the sample equals the law: 0; one atom moved past the others: its weight
    a, w = np.array([0.1, 0.5, 0.9]), np.array([0.25, 0.25, 0.5])
    sample = np.array([0.1, 0.5, 0.9, 0.9])
    assert kolmogorov_weighted(sample, a, w) == pytest.approx(0.0, abs=1e-15)
    assert kolmogorov_weighted(np.array([0.1, 0.6, 0.9, 0.9]), a, w) == pytest.approx(0.25, abs=1e-15)
    # against the exact sup over a fine grid for random data
    rng = np.random.default_rng(3)
    s, atoms, ww = rng.random(50), rng.random(20), rng.random(20)
    grid = np.sort(np.concatenate([s, atoms, s - 1e-12, atoms - 1e-12]))
    fs = np.searchsorted(np.sort(s), grid, side="right") / s.size
    o = np.argsort(atoms)
    fa = np.concatenate([[0.0], np.cumsum(ww[o]) / ww.sum()])[np.searchsorted(atoms[o], grid, side="right")]
    assert kolmogorov_weighted(s, atoms, ww) == pytest.approx(float(np.max(np.abs(fs - fa))), abs=1e-12)


def test_subspace_against_particles_at_a_small_size() -> None:
    # the runs of validation check lagrangian.subspace_particles (d = 128, 20 000 particles, full
    # suite only) at d = 16 with 400 particles: the same level, K/sqrt(n/4) plus the node mass within
    # the particles' shift from their nodes (its argument in the check's docstring), which
    # every comparison must meet
    from validation.checks.subspace import compare_with_particles

    size = dict(beta=4.0, particles=400, dt=0.1, times=[0.0, 0.5, 1.0],
                cases=[dict(d=16, kappa=8.0, radial=3, angular=15, configs=("two", "three"))])
    comps, details, _, _ = compare_with_particles(size, 5)
    assert len(comps) == 2 * 3 * 2
    assert all(c.passed for c in comps), [(c.what, c.measured, c.expected) for c in comps if not c.passed]
    for name in ("two clusters, d = 16", "three clusters, d = 16"):
        assert details[name]["successful"] == 1
        angle = details[name]["mean_abs_angle"]
        assert angle[-1] < angle[0]  # the clusters move together
        # the tokens start on their nodes' spheres (p to the round-off of the state's artanh)
        assert max(details[name]["shift"][0]) < 1e-12


@pytest.mark.parametrize(("k", "n", "tol"), [(2, 8, 1e-11), (3, 6, 1e-7)])
def test_subspace_nodes_in_high_dimension_keep_log_densities(k: int, n: int, tol: float) -> None:
    # vMF kappa = 64 about e_1 on S^1023: per unit area e^{~2600}, only its log is finite.
    # E[x_1] = I_{d/2}(kappa)/I_{d/2-1}(kappa); the rule is exact to degree 4n - 1 (31, 23), and
    # e^{kappa p_1} over the weight's width ~ 1/sqrt(d) converges spectrally: measured 4.7e-13
    # (k = 2, 256 nodes) and 1.1e-8 (k = 3, 1728 nodes), 1.1e-4 with n = 4
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    d, kappa = 1024, 64.0
    sn = nodes.subspace(lambda p: kappa * p[:, 0], n, d, k, log=True)
    assert np.all(np.isfinite(sn.log_density)) and np.all(np.isinf(sn.density))
    ref = float(mp.besseli(d / 2, kappa) / mp.besseli(d / 2 - 1, kappa))
    assert sn.integrate(lambda p: p[:, 0]) == pytest.approx(ref, rel=tol)


def test_a_zonal_run_at_d1024_as_k2_matches_the_rings() -> None:
    # vMF kappa = 64 about e_1 on S^1023, SA beta = 4 to t = 3 (E[s] from 0.06 to 0.78): the
    # k = 2 run (144 nodes) against 32 rings. Both are the flow of the same measure; the
    # difference is the k = 2 rule's quadrature error (degree 23: 1.5e-8 relative at t = 0,
    # as in the test above) carried by the flow: measured 5.3e-9 (2.9e-13 with 256 nodes)
    d, kappa, beta = 1024, 64.0, 4.0
    t = [0.0, 1.0, 3.0]
    ring = solve_lagrangian(Model(beta), nodes.rings(lambda s: kappa * s, 32, d, log=True), t,
                            rtol=1e-10, atol=1e-12)
    sn = nodes.subspace(lambda p: kappa * p[:, 0], 6, d, 2, log=True)
    ds = solve_lagrangian(Model(beta), sn, t, rtol=1e-10, atol=1e-12)
    mean_ring = (ring["weight"] * ring["s"]).sum("node").values
    mean = (ds["weight"] * ds["p"].isel(coord=0)).sum("node").values
    assert mean[-1] > 0.7  # it concentrated
    assert np.max(np.abs(mean - mean_ring)) < 1e-7


def test_subspace_nodes_estimate_the_error_of_their_start_and_warn_when_it_is_missed() -> None:
    """``nodes.subspace`` compares its rule with the rule of twice the radial nodes and degree
    (mass, mean and second moments of ``p``), as ``nodes.rings`` does. Two vMF clusters
    (``kappa = 64``) on ``S^{127}``: 8 radial nodes leave ``1.4e-3`` (measured), above
    ``START_TOL``, a warning; 12 radial nodes ``2.4e-8``, silent. The estimate is the coarse
    rule's error (here the mass, ``int f dA``, which sets the density's normalisation; the
    normalised moments are ``3e-4`` off): against a rule of 24 radial nodes and degree 191 (its
    own error far below, the estimate at 16 nodes is ``1e-12``) it is within a factor 2 of the
    measured difference (the finer rule of the pair carries part of it, nothing else)."""
    import warnings as _w

    from meanfield.lagrangian.nodes_reduced import START_TOL, subspace_rule, subspace_start_error

    m = np.array([[math.cos(0.6), math.sin(0.6)], [math.cos(0.6), -math.sin(0.6)]])

    def log_f(p: np.ndarray) -> np.ndarray:
        return np.logaddexp(64.0 * p @ m[0], 64.0 * p @ m[1])

    with pytest.warns(UserWarning, match="start is not resolved by 512 nodes"):
        coarse = nodes.subspace(log_f, 8, 128, 2, angular=63, log=True)
    assert "start error estimate" in coarse.describe
    with _w.catch_warnings():
        _w.simplefilter("error")
        nodes.subspace(log_f, 12, 128, 2, angular=47, log=True)
    estimate = subspace_start_error(log_f, 8, 128, 2, 63, log=True)
    assert estimate > START_TOL
    from scipy.special import logsumexp

    p, log_w = subspace_rule(24, 128, 2, 191)
    lw = log_f(p) + log_w
    w = np.exp(lw - lw.max())
    w /= w.sum()
    pc, lwc = subspace_rule(8, 128, 2, 63)
    wc = np.asarray(coarse.weights)
    assert np.allclose(pc, coarse.p, rtol=0, atol=0)
    true = max(abs(math.expm1(float(logsumexp(log_f(pc) + lwc) - logsumexp(lw)))),
               float(np.max(np.abs(wc @ pc - w @ p))),
               float(np.max(np.abs(pc.T @ (wc[:, None] * pc) - p.T @ (w[:, None] * p)))))
    assert 0.5 * true < estimate < 2.0 * true
