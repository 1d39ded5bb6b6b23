"""Fast summation for general weights (meanfield.kernels.fastsum_general) against the direct sum, the
reference: any ``Q, K, V``, several heads, l2 with any ``Q, K``, the causal mask (labels and
index), Sinkhorn; S^1 and S^2; random, clustered, near-Dirac and mixed point sets."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from meanfield import Model
from meanfield.kernels import fastsum, fastsum_general
from meanfield.lagrangian.field import weighted_field
from particles import velocity

TOL = fastsum.FIELD_TOL


def _triple(d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.eye(d) + 0.3 * rng.normal(size=(d, d)), np.eye(d) + 0.3 * rng.normal(size=(d, d)),
            rng.normal(size=(d, d)))


def _model(config: str, attention: str, d: int, rng: np.random.Generator, **kw: Any) -> Model:
    """``general``: one head, ``Q, K`` near the identity, ``V`` Gaussian; ``heads``: two such;
    ``rotation``: ``Q`` a rotation (``A`` an isometry: one Chebyshev term), ``V`` Gaussian."""
    if config == "heads":
        return Model(beta=4.0, attention=attention, heads=(_triple(d, rng), _triple(d, rng)), **kw)
    Q, K, V = _triple(d, rng)
    if config == "rotation":
        Q, K = np.linalg.qr(rng.normal(size=(d, d)))[0], np.eye(d)
    return Model(beta=4.0, attention=attention, Q=Q, K=K, V=V, **kw)


def _scales(model: Model, x: np.ndarray, y: np.ndarray, w: np.ndarray,
            labels: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per point, the scales that bound the direct sum's rounding error (the module's
    docstring): velocity ``sum_h |V_h|`` (normalised kinds: a convex combination of the ``V_h
    y_j``), ``sum_h |V_h| sum_{j seen} w_j e^{beta <x, A_h y_j>} / mass`` (unnormalized); the
    divergence each head's times ``4 beta |A_h| + d - 1``."""
    d = x.shape[1]
    seen = np.ones((len(x), len(y)), bool) if labels is None else labels[1][None] <= labels[0][:, None]
    sv = np.zeros(len(x))
    sd = np.zeros(len(x))
    for Q, K, V in model.matrices(d):
        A = Q.T @ K
        nV, nA = np.linalg.norm(V, 2), np.linalg.norm(A, 2)
        if model.attention == "unnormalized":
            E = np.where(seen, np.exp(model.beta * (x @ A @ y.T)), 0.0)
            h = nV * (E @ w) / (seen @ w)
        else:
            h = np.full(len(x), nV)
        sv += h
        sd += h * (4 * model.beta * nA + d - 1)
    return sv, sd


def _assert_close(fast: tuple[np.ndarray, np.ndarray | None], ref: tuple[np.ndarray, np.ndarray | None],
                  scales: tuple[np.ndarray, np.ndarray], tol: float) -> None:
    err_v = np.linalg.norm(fast[0] - ref[0], axis=-1) / scales[0]
    assert np.max(err_v) <= tol, np.max(err_v)
    if fast[1] is not None:
        err_d = np.abs(fast[1] - ref[1]) / scales[1]
        assert np.max(err_d) <= tol, np.max(err_d)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized", "l2"])
@pytest.mark.parametrize("config", ["general", "heads", "rotation"])
@pytest.mark.parametrize("points", ["uniform", "clusters", "two-dirac", "mixed"])
def test_general_weights_match_direct(point_set, d: int, attention: str, config: str, points: str) -> None:
    """The weighted field (velocity and divergence) fast against direct: ``|error| <= TOL *
    scale`` per point (:func:`_scales`). The estimate bounds the fast sums' error by the
    transforms' measured constant (:data:`meanfield.kernels.fastsum_general.GENERAL_NUFFT_ERROR`,
    twice the largest ratio measured or more) and the tails; every point over ``TOL`` is
    recomputed directly, so the bound holds at every point (not tuned to the result)."""
    rng = np.random.default_rng(zlib.crc32(repr((d, attention, config, points)).encode()))
    x = point_set(points, 200, d, rng)
    w = rng.random(len(x))
    w /= w.sum()
    model = _model(config, attention, d, rng)
    fast = weighted_field(model, x, w, method="fast")
    ref = weighted_field(model, x, w, method="direct")
    assert fast.fast is not None and fast.fast.chebyshev >= 1
    if config == "rotation":
        assert fast.fast.chebyshev == 1  # |A y| = 1 for every node: no expansion in the radius
    _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence),
                  _scales(model, x, x, w), TOL)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized", "l2"])
@pytest.mark.parametrize("points", ["uniform", "clusters", "dirac-pole"])
def test_loose_tolerance_is_fast_and_met(point_set, d: int, attention: str, points: str) -> None:
    """At ``tol = 1e-8`` (transforms at ``tol / 1024``) the estimate vouches for the points,
    so the transforms themselves are checked: error ``<= tol * scale`` at every point, at most
    a tenth of the points recomputed directly (measured: none on all 18 sets)."""
    rng = np.random.default_rng(zlib.crc32(repr(("loose", d, attention, points)).encode()))
    x = point_set(points, 300, d, rng)
    w = rng.random(len(x))
    w /= w.sum()
    model = _model("heads", attention, d, rng)
    xb, wb = x[None], w[None]

    def direct(b: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = weighted_field(model, x, w, method="direct")
        return r.velocity[idx][None], r.divergence[idx][None]  # type: ignore[index]

    tol = 1e-8
    vel, div, settings, _ = fastsum_general.general_field(
        model, xb, xb, wb, divergence=True, tol=tol, direct=direct)
    ref = weighted_field(model, x, w, method="direct")
    assert settings.corrected <= len(x) / 10, settings
    assert settings.error_estimate <= tol
    _assert_close((vel[0], div[0]), (ref.velocity, ref.divergence), _scales(model, x, x, w), tol)  # type: ignore[index]


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized", "l2"])
def test_causal_labels(point_set, d: int, attention: str) -> None:
    """The causal mask through label blocks (more nodes than
    :data:`meanfield.kernels.fastsum_general.BLOCK_NODES`, tied labels across a block boundary): the
    weighted field fast against direct at ``TOL``, and at ``tol = 1e-8`` the block sums
    themselves (at most a tenth of the points recomputed; measured 0 to 10 of 700)."""
    rng = np.random.default_rng(zlib.crc32(repr(("causal", d, attention)).encode()))
    n = 700
    x = point_set("clusters", n, d, rng)
    w = rng.random(n)
    w /= w.sum()
    lab = np.round(rng.random(n), 2)  # ties
    lab[240:280] = lab[240]
    model = _model("general", attention, d, rng, causal=True)
    fast = weighted_field(model, x, w, labels=lab, method="fast")
    ref = weighted_field(model, x, w, labels=lab, method="direct")
    scales = _scales(model, x, x, w, (lab, lab))
    _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence), scales, TOL)
    labels = (lab[None], lab[None])

    def direct(b: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return ref.velocity[idx][None], ref.divergence[idx][None]  # type: ignore[index]

    vel, div, settings, _ = fastsum_general.general_field(
        model, x[None], x[None], w[None], divergence=True, labels=labels, tol=1e-8,
        direct=direct)
    assert settings.corrected <= n / 10, settings
    _assert_close((vel[0], div[0]), (ref.velocity, ref.divergence), scales, 1e-8)  # type: ignore[index]


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_particles_causal_and_heads(point_set, d: int, attention: str) -> None:
    """``particles.velocity(method="fast")``: causal by index (token ``i`` sees ``j <= i``;
    unnormalized divides by ``i + 1``) and two heads, against the direct particle kernels."""
    rng = np.random.default_rng(zlib.crc32(repr(("particles", d, attention)).encode()))
    n = 600
    x = point_set("clusters", n, d, rng)
    w = np.full(n, 1.0 / n)
    for model in (_model("general", attention, d, rng, causal=True),
                  _model("heads", attention, d, rng)):
        fast = velocity(model, x, method="fast")
        ref = velocity(model, x, method="direct")
        idx = np.arange(n, dtype=float)
        scales = _scales(model, x, x, w, (idx, idx) if model.causal else None)
        _assert_close((fast, None), (ref, None), scales, TOL)


@pytest.mark.parametrize("d", [2, 3])
def test_sinkhorn(point_set, d: int) -> None:
    """Sinkhorn: the same iterations with fast log-sum-exps. Both runs stop with the row sums
    within ``sinkhorn_tol`` (columns exact), so each field is within about ``sinkhorn_tol``
    of that of the exact scaling and the gap is at most ``2 sinkhorn_tol`` (plus ``TOL``) times
    the scale (measured: 0.15 to 0.4 ``sinkhorn_tol`` at 1e-10 and 1e-12, velocity and
    divergence, weighted and particles)."""
    rng = np.random.default_rng(30 + d)
    n = 120
    x = point_set("uniform", n, d, rng)
    w = rng.random(n)
    w /= w.sum()
    stol = 1e-12
    model = _model("general", "sinkhorn", d, rng, sinkhorn_tol=stol, sinkhorn_iterations=2000)
    fast = weighted_field(model, x, w, method="fast")
    ref = weighted_field(model, x, w, method="direct")
    assert fast.state.potentials is not None and fast.state.potentials[0].shape == (1, n)
    sv, sd = _scales(model, x, x, w)
    _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence),
                  (sv, sd), 2 * stol + TOL)
    # a warm start from the fast potentials gives the same field
    again = weighted_field(model, x, w, method="fast", state=fast.state)
    _assert_close((again.velocity, again.divergence), (ref.velocity, ref.divergence),
                  (sv, sd), 2 * stol + TOL)
    vf, vr = velocity(model, x, method="fast"), velocity(model, x, method="direct")
    _assert_close((vf, None), (vr, None), (sv, sd), 2 * stol + TOL)


@pytest.mark.parametrize("d", [2, 3])
def test_field_tol(point_set, d: int) -> None:
    """``field_tol`` reaches the fast field: at ``1e-10`` the estimate vouches for (nearly) every
    point of a uniform set (measured on ``S^2``, ``n = 65 536``, ``A = I + 0.3 G``: estimate
    1.2e-12 and 1.4e-12, none recomputed), the settings record it, and the error is within
    it."""
    rng = np.random.default_rng(50 + d)
    x = point_set("uniform", 400, d, rng)
    w = np.full(len(x), 1.0 / len(x))
    model = _model("general", "softmax", d, rng)
    fast = weighted_field(model, x, w, method="fast", field_tol=1e-10)
    ref = weighted_field(model, x, w, method="direct")
    assert fast.fast is not None and fast.fast.tol == 1e-10
    assert fast.fast.corrected <= len(x) / 2, fast.fast
    _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence),
                  _scales(model, x, x, w), 1e-10)
    v = velocity(model, x, method="fast", field_tol=1e-10)
    _assert_close((v, None), (velocity(model, x, method="direct"), None),
                  _scales(model, x, x, w), 1e-10)


def test_kernel_table() -> None:
    """The expansion in the concentration reproduces ``e^{kappa (t - 1)}`` at random ``(kappa,
    t)`` to its tail plus round-off: 64 ulp (the floor below which :func:`kernel_table` counts
    a coefficient as the DCT's round-off) times ``sum_{c,l} N_l |a_{cl}|``, the sum of the
    magnitudes of the terms (measured: 3.3e-15, the bound 1.2e-14)."""
    from scipy.special import eval_legendre

    for d, (kmin, kmax) in ((3, (2.0, 9.0)), (2, (0.0, 5.0))):
        table = fastsum_general.kernel_table(kmin, kmax, d, TOL)
        rng = np.random.default_rng(d)
        kap = rng.uniform(kmin, kmax, 50)
        t = rng.uniform(-1, 1, 50)
        T = table.chebyshev(kap)
        f = np.einsum("cl,cn->nl", table.coef, T)
        ls = np.arange(table.L + 1)
        if d == 3:
            P = (2 * ls[None] + 1) * eval_legendre(ls[None], t[:, None])
        else:
            P = np.where(ls[None] > 0, 2.0, 1.0) * np.cos(ls[None] * np.arccos(t[:, None]))
        approx = np.sum(f * P, axis=1)
        exact = np.exp(kap * (t - 1))
        N = np.where(ls > 0, 2.0, 1.0) if d == 2 else 2 * ls + 1.0
        roundoff = 64 * np.finfo(float).eps * float(np.sum(np.abs(table.coef) @ N))
        assert np.max(np.abs(approx - exact)) <= table.tail + roundoff
    with pytest.raises(ValueError, match="Chebyshev"):
        fastsum_general.kernel_table(0.0, 5000.0, 3, TOL)


def test_refusals(point_set) -> None:
    """What stays direct, by name: sigmoid with general ``Q, K``, the feed-forward term."""
    Q = np.diag([1.0, 2.0, 3.0])
    assert "sigmoid" in str(fastsum.fast_reason(Model(beta=1.0, attention="sigmoid", Q=Q), 3))
    ff = Model(beta=1.0, feedforward=(np.eye(3), np.eye(3), np.zeros(3)))
    assert "feedforward" in str(fastsum.fast_reason(ff, 3))
    assert fastsum.fast_reason(Model(beta=1.0, Q=Q, causal=True), 3) is None
    assert fastsum.fast_reason(Model(beta=1.0, attention="sinkhorn"), 2) is None
    # auto: the general path only past its crossover (none on S^1), never for Sinkhorn or the
    # mask
    n = fastsum.CROSSOVER_GENERAL[3]
    assert fastsum.use_fast("auto", Model(beta=1.0, Q=Q), 3, "sphere", n, n)
    assert not fastsum.use_fast("auto", Model(beta=1.0, Q=Q), 3, "sphere", n - 1, n - 1)
    Q2 = np.diag([1.0, 2.0])
    assert not fastsum.use_fast("auto", Model(beta=1.0, Q=Q2), 2, "sphere", 10**6, 10**6)
    assert fastsum.use_fast("fast", Model(beta=1.0, Q=Q2), 2, "sphere", 10, 10)
    assert not fastsum.use_fast("auto", Model(beta=1.0, attention="sinkhorn"), 3, "sphere",
                                10**6, 10**6)
    assert not fastsum.use_fast("auto", Model(beta=1.0, causal=True), 3, "sphere", 10**6, 10**6)
    x = point_set("uniform", 50, 3, np.random.default_rng(0))
    for bad in (0.0, 1.0, float("nan"), "x"):
        with pytest.raises(ValueError, match="field_tol must be"):
            velocity(Model(beta=1.0), x, field_tol=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="field_tol must be"):
            weighted_field(Model(beta=1.0), x, np.full(50, 0.02), field_tol=bad)  # type: ignore[arg-type]
        with pytest.warns(FutureWarning, match="old spelling of field_tol"), \
                pytest.raises(ValueError, match="fast_tol must be"):
            velocity(Model(beta=1.0), x, fast_tol=bad)  # type: ignore[arg-type]
    np.testing.assert_array_equal(  # auto below the crossover: the direct result, bit for bit
        velocity(Model(beta=1.0, Q=Q), x, method="auto"),
        velocity(Model(beta=1.0, Q=Q), x, method="direct"))


@pytest.mark.parametrize("d", [2, 3])
def test_solvers_take_the_general_fast_field(point_set, d: int) -> None:
    """``solve_lagrangian(field_method="fast")`` with general weights (``S^1``: two heads;
    ``S^2``: a causal mask on labels) and ``particles.simulate`` (two heads): the runs end where
    the direct ones do. Off the sphere (a Runge-Kutta stage) the fast field is that of ``x /
    |x|`` and the direct one that of ``x`` (the zonal path's convention,
    tests/meanfield/kernels/test_fastsum.py): two extensions of one field on the sphere, so the runs
    approximate the same flow and differ by the integrators' errors, not by ``TOL``. Fixed-step
    RK4, ``O(dt^4)``: halving ``dt`` shrinks the gap by about 16 (asserted: by more than 8).
    (Adaptive dopri5 at rtol 1e-9 gave gaps of 1e-9 to 2e-8: its controller bounds local, not
    global, errors, so no tight bound to assert.)"""
    import json

    import particles
    from meanfield import nodes
    from meanfield.lagrangian import solve_lagrangian

    rng = np.random.default_rng(40 + d)
    x = point_set("clusters", 60, d, rng)
    lab = np.round(rng.random(len(x)), 1) if d == 3 else None
    t = [0.0, 0.2]
    heads = _model("heads", "softmax", d, rng)
    model = heads if d == 2 else _model("general", "softmax", d, rng, causal=True)
    gaps: dict[str, list[float]] = {"x": [], "log_jacobian": [], "particles": []}
    for dt in (0.1, 0.05):
        runs = {m: solve_lagrangian(model, nodes.from_samples(x, labels=lab), t, scheme="rk4",
                                    dt=dt, field_method=m) for m in ("fast", "direct")}
        settings = json.loads(runs["fast"].attrs["settings"])
        assert settings["field_method"] == "fast" and settings["fast_field"]["chebyshev"] > 1
        for name in ("x", "log_jacobian"):
            gaps[name].append(np.max(np.abs(runs["fast"][name].values[-1]
                                            - runs["direct"][name].values[-1])))
        sims = {m: particles.simulate(heads, x, t, dt=dt, field_method=m)
                for m in ("fast", "direct")}
        gaps["particles"].append(np.max(np.abs(sims["fast"]["x"].values[-1]
                                               - sims["direct"]["x"].values[-1])))
    for name, g in gaps.items():
        # on S^1 at the default tol every point may be recomputed directly (docs: "What it
        # costs"): then the runs agree to round-off (the weighted direct kernel against the
        # particle one: 1e-16 measured), and there is no O(dt^4) gap to shrink
        assert g[1] <= g[0] / 8 or max(g) <= 1e-14, (name, g)


@pytest.mark.parametrize("d", [2, 3])
def test_field_at_otherpoint_set(point_set, d: int) -> None:
    """``field_at`` with general weights: nodes in two near-Diracs, points everywhere (some
    far from all mass, which the estimate sends to the direct sum), and a causal mask with
    point labels of their own."""
    from meanfield.lagrangian import field_at

    rng = np.random.default_rng(60 + d)
    x = point_set("two-dirac", 300, d, rng)
    w = np.full(len(x), 1.0 / len(x))
    pts = point_set("uniform", 400, d, rng)
    for attention in ("softmax", "unnormalized"):
        model = _model("heads", attention, d, rng)
        fast = field_at(model, pts, x, w, method="fast")
        ref = field_at(model, pts, x, w, method="direct")
        assert fast.fast is not None
        _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence),
                      _scales(model, pts, x, w), TOL)
    model = _model("general", "softmax", d, rng, causal=True)
    lab, plab = rng.random(len(x)), 0.2 + 0.8 * rng.random(len(pts))  # every point sees some
    lab[0] = 0.0
    fast = field_at(model, pts, x, w, labels=lab, point_labels=plab, method="fast")
    ref = field_at(model, pts, x, w, labels=lab, point_labels=plab, method="direct")
    _assert_close((fast.velocity, fast.divergence), (ref.velocity, ref.divergence),
                  _scales(model, pts, x, w, (plab, lab)), TOL)


def test_sinkhorn_newton_polish(point_set) -> None:
    """Few Sinkhorn iterations on a small particle system: the direct code polishes the
    potentials by Newton's method (n <= 1024, equal weights), and so does the fast path;
    both then meet ``sinkhorn_tol`` and the fields agree as in :func:`test_sinkhorn`."""
    rng = np.random.default_rng(70)
    x = point_set("clusters", 100, 3, rng)
    stol = 1e-12
    model = _model("general", "sinkhorn", 3, rng, sinkhorn_tol=stol, sinkhorn_iterations=3)
    vf, vr = velocity(model, x, method="fast"), velocity(model, x, method="direct")
    w = np.full(len(x), 1.0 / len(x))
    _assert_close((vf, None), (vr, None), _scales(model, x, x, w), 2 * stol + TOL)


def test_fast_tol_is_the_old_spelling_of_field_tol(point_set) -> None:
    """``fast_tol=`` still works on ``weighted_field``, ``field_at`` and ``particles.velocity``
    (the same result as ``field_tol=``, to the round-off of ducc0's threaded sums), with a
    ``FutureWarning`` naming the new spelling."""
    from meanfield.lagrangian import field_at

    x = point_set("uniform", 200, 3, np.random.default_rng(3))
    w = np.full(200, 1 / 200)
    model = Model(beta=2.0)
    new = weighted_field(model, x, w, method="fast", field_tol=1e-9)
    with pytest.warns(FutureWarning, match="weighted_field: fast_tol is the old spelling"):
        old = weighted_field(model, x, w, method="fast", fast_tol=1e-9)
    # two evaluations differ only by ducc0's threaded summation order: round-off of the
    # scaled sums (~1e-15 of Z), far below 1e-13 in the SA velocity (|v| <= 1)
    np.testing.assert_allclose(new.velocity, old.velocity, rtol=0, atol=1e-13)
    assert old.fast is not None and old.fast.tol == 1e-9
    with pytest.warns(FutureWarning, match="field_at: fast_tol"):
        field_at(model, x, x, w, method="fast", fast_tol=1e-9)
    with pytest.warns(FutureWarning, match="particles.velocity: fast_tol"):
        v = velocity(model, x, method="fast", fast_tol=1e-9)
    np.testing.assert_allclose(v, velocity(model, x, method="fast", field_tol=1e-9), rtol=0, atol=1e-13)
