"""Fast summation of the attention field (meanfield.kernels.fastsum) against the direct sum, the
reference: every supported kind, S^1 and S^2, random, clustered, near-Dirac (also at a pole)
and mixed point sets; the choice point ``method=``; refusals by name."""

from __future__ import annotations

import json
import math
import zlib

import numpy as np
import pytest

import particles
from meanfield import Model, nodes
from meanfield.kernels import fastsum
from meanfield.lagrangian import solve_lagrangian
from meanfield.lagrangian.field import weighted_field
from particles import velocity

TOL = fastsum.FIELD_TOL


def _reference_scale(model: Model, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per point, the sum of the magnitudes of the velocity's terms, which bounds the direct
    sum's own rounding error: 1 for softmax and l2 (``|F| <= 1``, a convex combination of unit
    vectors), ``sum_j w_j e^{beta <x_i, x_j>}`` for unnormalized, ``sum_j w_j sigma(beta <x_i,
    x_j> + b)`` for sigmoid; times ``|value|``."""
    if model.attention == "sigmoid":  # sigma(beta t + b) > 0: the sum of the weights
        return 1.0 / (1.0 + np.exp(-(model.beta * (x @ x.T) + model.sigmoid_bias))) @ w
    if model.attention != "unnormalized":
        return np.ones(len(x))
    return np.exp(model.beta * (x @ x.T)) @ w


def _check(model: Model, x: np.ndarray, w: np.ndarray) -> fastsum.FastSettings:
    """Fast against direct, per point, velocity and divergence: ``|error| <= TOL * scale``
    (divergence: ``(4 beta + d - 1) scale``, the bound of |div| from docs/lagrangian.md
    section 2's closed forms). Measured on these sets: the largest error is 0.15 TOL (velocity)
    and 0.05 TOL (divergence), the median 0.005 TOL; the points the estimate cannot vouch for
    are recomputed directly, so no tolerance here is tuned to the result."""
    fast = weighted_field(model, x, w, method="fast")
    ref = weighted_field(model, x, w, method="direct")
    assert fast.fast is not None and ref.fast is None
    scale = _reference_scale(model, x, w)
    err_v = np.linalg.norm(fast.velocity - ref.velocity, axis=-1) / scale
    err_d = np.abs(fast.divergence - ref.divergence) / scale / (4 * model.beta + x.shape[1] - 1)
    assert np.max(err_v) <= TOL, (np.max(err_v), fast.fast)
    assert np.max(err_d) <= TOL, (np.max(err_d), fast.fast)
    return fast.fast


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized", "l2", "sigmoid"])
@pytest.mark.parametrize("value", [1.0, -1.0])
@pytest.mark.parametrize("points", ["uniform", "clusters", "dirac-pole", "two-dirac", "mixed"])
def test_fast_matches_direct(point_set, d: int, attention: str, value: float, points: str) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((d, attention, value, points)).encode()))
    x = point_set(points, 600, d, rng)
    w = rng.random(len(x)) ** 3  # uneven weights
    w /= w.sum()
    for beta in (1.0, 9.0):
        settings = _check(Model(beta=beta, attention=attention, value=value), x, w)
        assert settings.error_estimate <= TOL
        assert settings.tail <= fastsum.TAIL_FRACTION * TOL


def test_large_and_zero_beta(point_set) -> None:
    rng = np.random.default_rng(5)
    for d in (2, 3):
        x = point_set("clusters", 400, d, rng)
        w = np.full(len(x), 1.0 / len(x))
        _check(Model(beta=0.0, attention="sigmoid", sigmoid_bias=0.5), x, w)
        _check(Model(beta=4.0, attention="sigmoid", sigmoid_bias=-3.0), x, w)
        _check(Model(beta=0.0), x, w)
        _check(Model(beta=0.0, attention="unnormalized"), x, w)
        _check(Model(beta=300.0), x, w)  # SA: e^beta carried separately, no overflow


def test_scalar_matrices(point_set) -> None:
    """``Q^T K = c I`` and ``V = v I`` are zonal too: beta c and the factor v."""
    rng = np.random.default_rng(6)
    x = point_set("clusters", 500, 3, rng)
    w = np.full(len(x), 1.0 / len(x))
    eye = np.eye(3)
    _check(Model(beta=2.0, Q=2 * eye, K=eye, V=-0.5 * eye), x, w)


def test_isolated_points_are_corrected_and_uniform_is_not(point_set) -> None:
    """The five isolated points of the mixed set, given a weight of ``1e-14`` each, see
    almost no mass (``Z ~ 1e-14`` of the cluster's at ``beta = 60``): the estimate cannot
    vouch for them at ``TOL`` and they alone are summed again, by the direct sum (five points:
    cheaper than building the tree of the re-centred sums,
    :func:`meanfield.kernels.fastsum_local.direct_is_cheaper`); the cluster's points stay
    fast."""
    rng = np.random.default_rng(7)
    x = point_set("mixed", 600, 3, rng)
    w = np.full(len(x), 1.0 / len(x))
    w[-5:] = 1e-14
    w /= w.sum()
    settings = _check(Model(beta=60.0), x, w)
    assert settings.recentred == 0
    assert 1 <= settings.corrected <= 5, settings.corrected
    x = point_set("uniform", 2000, 3, rng)
    assert _check(Model(beta=4.0), x, np.full(len(x), 1.0 / len(x))).corrected == 0


@pytest.mark.parametrize("d", [2, 3])
def test_particle_velocity(point_set, d: int) -> None:
    """``particles.velocity`` (equal weights, batch, float32 kept)."""
    rng = np.random.default_rng(8)
    x = np.stack([point_set("uniform", 800, d, rng), point_set("clusters", 800, d, rng)])
    for model in (Model(beta=4.0), Model(beta=4.0, attention="unnormalized", value=-1.0)):
        fast = velocity(model, x, method="fast")
        ref = velocity(model, x, method="direct")
        scale = np.stack([_reference_scale(model, xb, np.full(800, 1 / 800)) for xb in x])
        assert np.max(np.linalg.norm(fast - ref, axis=-1) / scale) <= TOL
    v32 = velocity(Model(beta=4.0), x[0].astype(np.float32), method="fast")
    assert v32.dtype == np.float32 and v32.shape == (800, d)


def test_band_limit() -> None:
    L1, tail1 = fastsum.band_limit(4.0, 3, 1e-12)
    L2, _ = fastsum.band_limit(9.0, 3, 1e-12)
    L3, _ = fastsum.band_limit(4.0, 3, 1e-6)
    assert L3 < L1 < L2 and 0 <= tail1 <= 1e-16
    with pytest.raises(ValueError, match="tol"):
        fastsum.band_limit(4.0, 3, 0.0)


@pytest.mark.parametrize(
    ("model", "d", "geometry", "match"),
    [
        (Model(beta=200.0, attention="sigmoid"), 3, "sphere", "attention='sigmoid'"),
        (Model(beta=1.0, attention="sigmoid", Q=np.diag([1.0, 2.0, 3.0])), 3, "sphere",
         "attention='sigmoid'"),
        (Model(beta=1.0, attention="sigmoid", causal=True), 3, "sphere", "causal"),
        (Model(beta=1.0), 4, "sphere", "d=4"),
        (Model(beta=1.0, attention="sinkhorn"), 4, "sphere", "d=4"),
        (Model(beta=1.0), 3, "euclidean", "geometry='euclidean'"),
        (Model(beta=800.0, attention="unnormalized"), 3, "sphere", "beta = 800"),
        (Model(beta=400.0, attention="unnormalized", Q=np.diag([1.0, 2.0, 3.0])), 3, "sphere",
         "beta |Q\\^T K|"),
    ],
)
def test_refusals_name_the_field(model: Model, d: int, geometry: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fastsum.use_fast("fast", model, d, geometry, 10**4, 10**4)
    assert not fastsum.use_fast("auto", model, d, geometry, 10**6, 10**6)


def test_method_choice(point_set) -> None:
    model = Model(beta=4.0)
    with pytest.raises(ValueError, match="method must be one of"):
        fastsum.use_fast("quick", model, 3, "sphere", 10, 10)
    assert not fastsum.use_fast("direct", model, 3, "sphere", 10**6, 10**6)
    n = fastsum.CROSSOVER[3]
    assert fastsum.use_fast("auto", model, 3, "sphere", n, n)
    assert not fastsum.use_fast("auto", model, 3, "sphere", n - 1, n - 1)
    sig = Model(beta=4.0, attention="sigmoid")
    assert fastsum.use_fast("fast", sig, 3, "sphere", 10, 10)
    assert not fastsum.use_fast("auto", sig, 3, "sphere", 10**6, 10**6)
    # auto where fast does not apply: the direct result, bit for bit
    rng = np.random.default_rng(9)
    x = point_set("uniform", 50, 4, rng)
    sk = Model(beta=1.0, attention="sinkhorn")
    np.testing.assert_array_equal(velocity(sk, x, method="auto"), velocity(sk, x, method="direct"))


@pytest.mark.parametrize("d", [2, 3])
def test_solvers_take_the_fast_field(point_set, d: int) -> None:
    """``solve_lagrangian(field_method=...)`` and ``particles.simulate(field_method=...)`` say
    how the field was summed and end where the direct runs do.

    Off the sphere (a Runge-Kutta stage) the fast field is that of ``x / |x|``, the direct one
    that of ``x``: two smooth extensions of one field on the sphere, so the runs approximate
    the same flow and differ by the integrators' errors, not by ``TOL``. Fixed-step RK4:
    ``O(dt^4)``, so halving ``dt`` must shrink the gap by about 16 (asserted: by more than 8;
    measured 15.9 and 16.2, gaps 2.4e-8 -> 1.5e-9). Adaptive dopri5 (the Lagrangian solver,
    rtol 1e-9, atol 1e-11): each run is within the controller's tolerance of the flow, so the
    gap is at most ``RTOL`` (measured 1.3e-12 to 2.4e-11)."""
    rng = np.random.default_rng(10 + d)
    x = point_set("clusters", 300, d, rng)
    model = Model(beta=4.0)
    t = [0.0, 0.5]
    runs = {m: solve_lagrangian(model, nodes.from_samples(x), t, field_method=m)
            for m in ("fast", "direct")}
    settings = {m: json.loads(ds.attrs["settings"]) for m, ds in runs.items()}
    assert settings["fast"]["field_method"] == "fast"
    assert settings["fast"]["fast_field"]["band_limit"] == fastsum.band_limit(
        4.0, d, min(TOL, fastsum.FIELD_BAND_TOL))[0]
    assert settings["direct"]["field_method"] == "direct" and settings["direct"]["fast_field"] is None
    for name in ("x", "log_jacobian"):
        gap = np.max(np.abs(runs["fast"][name].values[-1] - runs["direct"][name].values[-1]))
        assert gap <= 1e-9, (name, gap)  # the solver's default rtol (docstring)
    gaps = []
    for dt in (0.1, 0.05):
        sims = {m: particles.simulate(model, x, t, dt=dt, field_method=m)
                for m in ("fast", "direct")}
        assert json.loads(sims["fast"].attrs["settings"])["field_method"] == "fast"
        gaps.append(np.max(np.abs(sims["fast"]["x"].values[-1] - sims["direct"]["x"].values[-1])))
    assert gaps[1] < gaps[0] / 8, gaps
    with pytest.raises(ValueError, match="field_method must be one of"):
        particles.simulate(model, x, t, dt=0.05, field_method="quick")


@pytest.mark.parametrize("d", [2, 3])
def test_field_at_otherpoint_set(point_set, d: int) -> None:
    """``field_at``: nodes in clusters, points everywhere (some far from all mass, which the
    estimate sends to the direct sum)."""
    from meanfield.lagrangian import field_at

    rng = np.random.default_rng(20 + d)
    x = point_set("two-dirac", 500, d, rng)
    w = np.full(len(x), 1.0 / len(x))
    pts = point_set("uniform", 700, d, rng)
    for model in (Model(beta=9.0), Model(beta=4.0, attention="unnormalized")):
        fast = field_at(model, pts, x, w, method="fast")
        ref = field_at(model, pts, x, w, method="direct")
        scale = (np.ones(len(pts)) if model.attention == "softmax"
                 else np.exp(model.beta * (pts @ x.T)) @ w)
        assert np.max(np.linalg.norm(fast.velocity - ref.velocity, axis=-1) / scale) <= TOL
        err_d = np.abs(fast.divergence - ref.divergence) / scale / (4 * model.beta + d - 1)
        assert np.max(err_d) <= TOL
    assert fast.fast is not None


@pytest.mark.parametrize("d", [2, 3])
def test_sigmoid_coefficients(d: int) -> None:
    """The sigmoid kernel's expansion reproduces ``sigma(beta t + b)``, its antiderivative (up
    to a constant) and its Laplacian kernel, to the tail plus the coefficients' round-off
    (``sum_l N_l`` times ``1e-16``, about ``L^2 1e-16`` on ``S^2``)."""
    from scipy.special import eval_legendre

    beta, b = 4.0, -1.0
    L, tail, k, g, q = fastsum._sigmoid_plan(beta, b, d, TOL)
    t = np.linspace(-1.0, 1.0, 41)
    if d == 3:
        P = np.array([(2 * l + 1) * eval_legendre(l, t) for l in range(L + 1)])
    else:
        th = np.arccos(t)
        P = np.array([np.where(l > 0, 2.0, 1.0) * np.cos(l * th) for l in range(L + 1)])
    bound = tail + float(np.sum(P.max(axis=1))) * 1e-16 * 4
    sig = 1.0 / (1.0 + np.exp(-(beta * t + b)))
    assert np.max(np.abs(k @ P - sig)) <= bound
    H = np.logaddexp(0.0, beta * t + b) / beta
    assert np.ptp(g @ P - H) <= 2 * bound  # g_0 = 0: equal up to a constant
    lap = (1 - t * t) * beta * sig * (1 - sig) - (d - 1) * t * sig
    assert np.max(np.abs(q @ P - lap)) <= bound
    assert fastsum._sigmoid_plan(0.0, b, d, TOL)[0] == 1


@pytest.mark.parametrize("d", [2, 3])
def test_energy_from_coefficients(point_set, d: int) -> None:
    """``fastsum.energy`` against the direct ``weighted_energy``: within ``TOL e^beta`` (its
    error bound: the coefficients' error ``eps <= TOL / 3`` enters twice, times ``sum_l N_l
    g_l <= 1``), ``beta = 0`` included; batches; refusals."""
    from meanfield.kernels.interaction import weighted_energy

    rng = np.random.default_rng(30 + d)
    x = np.stack([point_set(kind, 500, d, rng) for kind in ("uniform", "clusters", "mixed")])
    w = rng.random((3, 500))
    w /= w.sum(axis=1, keepdims=True)
    for beta in (0.0, 0.3, 4.0, 9.0):
        for attention in ("softmax", "unnormalized"):
            model = Model(beta=beta, attention=attention)
            fast = fastsum.energy(model, x, w)
            ref = weighted_energy(model, x, w)[0]
            assert np.max(np.abs(fast - ref)) <= TOL * math.exp(beta), (beta, fast - ref)
    single = fastsum.energy(Model(beta=4.0), x[0])
    assert single.shape == () and abs(single - weighted_energy(
        Model(beta=4.0), x[:1], np.full((1, 500), 1 / 500))[0][0]) <= TOL * math.exp(4.0)
    with pytest.raises(ValueError, match="attention='sigmoid'"):
        fastsum.energy(Model(beta=1.0, attention="sigmoid"), x)
