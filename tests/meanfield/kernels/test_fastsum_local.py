"""The re-centred expansions (meanfield.kernels.fastsum_local) for the points the global fast
sums cannot vouch for: the expansion's tail formula, the equivalent sources' exactness, and
the per-point estimate against the direct sum on the sets where the global expansion fails
(isolated tokens, a background between tight clusters), S^1 and S^2, beta 4 to 300."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy.special import eval_legendre, iv, spherical_in

from meanfield import Model
from meanfield.kernels import fastsum, fastsum_local
from meanfield.lagrangian import field_at


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _far_from_mass(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in three tight clusters (width 1e-3) and targets spread over the sphere: most
    targets see only the clusters' far tails."""
    centres = _unit(rng.normal(size=(3, d)))
    nodes = _unit(centres[rng.integers(0, 3, n)] + 1e-3 * rng.normal(size=(n, d)))
    return nodes, _unit(rng.normal(size=(400, d)))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("z", [0.5, 3.0, 10.0])
def test_tail_is_the_plane_wave_expansions_remainder(d: int, z: float) -> None:
    """``tau_P(z)`` is the remainder of ``e^{<u, y>}``'s expansion at its largest
    (``<u, y> = |u|``, where every ``P_l`` and ``cos`` is 1) and bounds it elsewhere: the
    remainder computed term by term in float64 agrees to round-off (``1e-15 e^z``, the
    partial sum's scale)."""
    P = 8 if z < 5 else 20
    tau = fastsum_local._tails(d, z)[P]
    cos = np.linspace(-1, 1, 101)
    ell = np.arange(P + 1)
    if d == 3:
        partial = ((2 * ell + 1) * spherical_in(ell, z))[None] @ eval_legendre(ell[:, None], cos[None])
    else:
        partial = (iv(0, z) + 2 * (iv(ell[1:], z)[None] @ np.cos(ell[1:, None] * np.arccos(cos)[None])))
    remainder = np.abs(np.exp(z * cos) - partial.ravel())
    assert np.all(remainder <= tau + 1e-15 * math.exp(z))
    assert remainder[-1] == pytest.approx(tau, rel=1e-6, abs=1e-15 * math.exp(z))


@pytest.mark.parametrize("d", [2, 3])
def test_equivalent_sources_integrate_every_low_degree_function(d: int) -> None:
    """``sum_k W_k f(g_k) = sum_j w_j f(y_j)`` for ``f`` of degree ``<= P`` (the product
    ``proj_P mu . f`` has degree ``<= 2P``, which the grid integrates exactly): up to the
    transform's accuracy ``eps = 3e-13`` relative to ``sum |w| max |f|``, times the
    projection's Lebesgue constant ``<= P + 1`` (module docstring): under ``1e-10``."""
    rng = np.random.default_rng(7)
    y = _unit(rng.normal(size=(3000, d)))
    w = rng.random(3000)
    P = 12
    W = fastsum_local._tilted_coefficients(fastsum.node_angles(y), w, d, P, 3e-13, 1)
    g = fastsum_local._grid(d, P).points
    for a in _unit(rng.normal(size=(5, d))):  # (<a, y>)^k, k <= P: degree k
        for k in (0, 1, 5, P):
            exact = np.sum(w * (y @ a) ** k)
            assert np.sum(W * (g @ a) ** k) == pytest.approx(exact, abs=1e-10 * np.sum(w))


def _reference(model: Model, x: np.ndarray, y: np.ndarray,
               w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The field, its divergence and the velocity's scale (fastsum's module docstring: 1 for
    softmax, ``sum_j w_j e^{beta <x, y_j>}`` for unnormalized) by the direct sum in extended
    precision: the float64 direct sum's exponents are off by ``~beta 1e-16`` relative
    (``1e-14`` at ``beta = 100``), as large as the errors measured here."""
    X, Y, W = (a.astype(np.longdouble) for a in (x, y, w))
    beta, d = model.beta, x.shape[1]
    t = X @ Y.T
    top = np.max(t, axis=1, keepdims=True)
    K = np.exp(beta * (t - top)) * W
    Z = K.sum(axis=1)
    grad = K @ Y
    grad -= np.sum(grad * X, axis=1)[:, None] * X
    lap = (K * (beta * (1 - t * t) - (d - 1) * t)).sum(axis=1)
    if model.attention == "softmax":
        v = grad / Z[:, None]
        div = lap / Z - beta * np.sum(v * v, axis=1)
        return v.astype(float), div.astype(float), np.ones(len(x))
    big = np.exp(beta * top[:, 0])
    return ((grad * big[:, None]).astype(float), (lap * big).astype(float),
            (Z * big).astype(float))


def _cases() -> list[tuple[int, str, float]]:
    return [(d, attention, beta) for d in (2, 3) for attention in ("softmax", "unnormalized")
            for beta in (4.0, 30.0, 100.0, 300.0)
            if not (attention == "unnormalized" and beta > 100)]  # USA: e^{beta} overflows


@pytest.mark.parametrize(("d", "attention", "beta"), _cases())
def test_local_estimate_bounds_the_error_and_is_sharp(d: int, attention: str,
                                                      beta: float) -> None:
    """At targets spread over the sphere, nodes in tight clusters (from ``beta = 30`` on, the
    global expansion cannot vouch for most of them): the local estimate bounds the actual
    error (direct sum) at every target it vouches for, is within a factor 100 of it somewhere
    (``max actual / estimate >= 1e-2``), and vouches for most of them at the default
    tolerance."""
    rng = np.random.default_rng(zlib.crc32(repr((d, attention, beta)).encode()))
    nodes, pts = _far_from_mass(3000, d, rng)
    w = rng.random(3000) ** 2
    w /= w.sum()
    model = Model(beta=beta, attention=attention)
    glob = fastsum.fast_sums(model, pts[None], nodes[None], w[None], divergence=True)
    if beta >= 30:  # sets the global expansion cannot vouch for
        assert np.count_nonzero(glob.estimate[0] > fastsum.FIELD_TOL) >= 100
    bad = np.arange(len(pts))
    loc = fastsum_local.local_sums(glob.plan, pts[bad], nodes, w, laplacian=True,
                                   tol=fastsum.FIELD_TOL)
    vouched = loc.estimate <= fastsum.FIELD_TOL
    assert np.count_nonzero(vouched) >= 0.9 * bad.size
    idx = np.nonzero(vouched)[0]
    vel, div = fastsum._field_from_sums(glob.plan, glob.sign, loc.sums.take(idx))
    ref_v, ref_d, scale = _reference(model, pts[bad][idx], nodes, w)
    err_v = np.linalg.norm(vel - ref_v, axis=-1) / scale
    err_d = np.abs(div - ref_d) / scale / (4 * beta + d - 1)
    ratio = np.maximum(err_v, err_d) / loc.estimate[idx]
    assert np.max(ratio) <= 1.0
    assert np.max(ratio) >= 1e-2


def test_fast_field_recentres_instead_of_summing_directly(point_set, monkeypatch) -> None:
    """``fast_field`` with a direct fallback, the re-centred sums taken whatever they cost
    (the cost model would send most of 1300 points over 4000 nodes to the direct sum): the
    targets far from three tight clusters go to the re-centred expansions (``recentred``),
    caps of fewer than four targets included (the direct sum over their cells,
    :mod:`meanfield.kernels.fastsum_tree`), none to the direct fallback (``corrected``, never
    called); the result meets the tolerance at every target."""
    monkeypatch.setattr(fastsum, "direct_is_cheaper", lambda *args: False)
    monkeypatch.setattr(fastsum_local, "LONE_CAP_PAIRS", 0.0)
    monkeypatch.setattr(fastsum_local, "CAP_PAIRS_PER_POINT", 0.0)
    rng = np.random.default_rng(5)
    nodes, _ = _far_from_mass(4000, 3, rng)
    pts = _unit(rng.normal(size=(4000, 3)))  # ~8 targets per cap of radius 3 / beta
    model = Model(beta=15.0)
    calls = []

    def direct(p: np.ndarray, b: int) -> tuple[np.ndarray, None]:
        calls.append(p.shape[1])
        return field_at(model, p[0], nodes, np.full(4000, 1 / 4000),
                        method="direct").velocity[None], None

    vel, _, settings = fastsum.fast_field(model, pts[None], nodes[None], None,
                                          divergence=False, direct=direct)
    assert settings.recentred >= 1000  # of 4000 targets, ~1300 far from the clusters
    assert settings.corrected == sum(calls) == 0
    ref = field_at(model, pts, nodes, np.full(4000, 1 / 4000), method="direct")
    assert np.max(np.linalg.norm(vel[0] - ref.velocity, axis=-1)) <= fastsum.FIELD_TOL
    assert settings.error_estimate <= fastsum.FIELD_TOL


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_lone_targets_estimate_bounds_the_error(attention: str) -> None:
    """1200 targets spread over ``S^2``, nodes in three tight clusters, ``beta = 100``: nearly
    every target is alone in its cap (the direct sum over its cells, module docstring of
    :mod:`meanfield.kernels.fastsum_tree`), and its estimate bounds the error at every one.
    (Measured on this set: largest error / estimate 0.24 softmax, 0.39 unnormalized; with the
    probes collapsed on the target, 0.71 and 0.76, and 1.28 at one of the 400 targets of
    ``test_local_estimate_bounds_the_error_and_is_sharp``: the next test keeps them apart.)"""
    rng = np.random.default_rng(zlib.crc32(attention.encode()))
    centres = _unit(rng.normal(size=(3, 3)))
    nodes = _unit(centres[rng.integers(0, 3, 3000)] + 1e-3 * rng.normal(size=(3000, 3)))
    pts = _unit(rng.normal(size=(1200, 3)))
    w = rng.random(3000) ** 2
    w /= w.sum()
    model = Model(beta=100.0, attention=attention)
    glob = fastsum.fast_sums(model, pts[None], nodes[None], w[None], divergence=True)
    loc = fastsum_local.local_sums(glob.plan, pts, nodes, w, laplacian=True,
                                   tol=fastsum.FIELD_TOL)
    assert loc.caps >= 1000  # lone caps, nearly all
    idx = np.nonzero(np.isfinite(loc.estimate))[0]
    assert idx.size == len(pts)
    vel, div = fastsum._field_from_sums(glob.plan, glob.sign, loc.sums.take(idx))
    ref_v, ref_d, scale = _reference(model, pts[idx], nodes, w)
    err_v = np.linalg.norm(vel - ref_v, axis=-1) / scale
    err_d = np.abs(div - ref_d) / scale / (4 * model.beta + 2)
    assert np.all(np.maximum(err_v, err_d) <= loc.estimate[idx])


def test_lone_targets_cap_is_probed_away_from_it(monkeypatch) -> None:
    """A cap of one target is probed on rings of radius ``>= LOCAL_PROBE_RADIUS / beta``
    (its own radius is 0: probes there repeat the target's arithmetic, and the rotated pair
    samples one draw of the round-off instead of 17)."""
    radii = []
    probes = fastsum_local._cap_probes

    def record(c: np.ndarray, rad: float) -> np.ndarray:
        radii.append(rad)
        return probes(c, rad)

    monkeypatch.setattr(fastsum_local, "_cap_probes", record)
    rng = np.random.default_rng(11)
    nodes = _unit(np.array([0.0, 0.0, 1.0]) + 1e-3 * rng.normal(size=(2000, 3)))
    model = Model(beta=50.0)
    target = _unit(np.array([[1.0, 0.2, -0.3]]))
    glob = fastsum.fast_sums(model, target[None], nodes[None], np.full((1, 2000), 5e-4),
                             divergence=True)
    loc = fastsum_local.local_sums(glob.plan, target, nodes, np.full(2000, 5e-4),
                                   laplacian=True, tol=fastsum.FIELD_TOL)
    assert loc.caps == 1 and len(radii) == 1
    assert radii[0] >= fastsum_local.LOCAL_PROBE_RADIUS / model.beta
    pts = probes(target[0], radii[0])
    assert np.min(np.linalg.norm(pts - target[0], axis=1)) >= 0.4 * radii[0]
