"""The source tree of the re-centred sums (meanfield.kernels.fastsum_tree): the analytic bound
on the polyellipse, the proxies' interpolation bound, the selection's reported bounds against
the full direct sum, and a cost per target that does not grow with the number of nodes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield import Model
from meanfield.kernels import fastsum, fastsum_frames, fastsum_local, fastsum_tree
from meanfield.lagrangian.field import weighted_field


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _tree(nodes: np.ndarray, w: np.ndarray, beta: float) -> fastsum_tree.SourceTree:
    return fastsum_tree.SourceTree(nodes, w, beta, fastsum_frames._rotation(nodes.shape[1]))


def _clusters(n: int, d: int, k: int, width: float, rng: np.random.Generator) -> np.ndarray:
    centres = _unit(rng.normal(size=(k, d)))
    return _unit(centres[rng.integers(0, k, n)] + width * rng.normal(size=(n, d)))


def _exact_z(x: np.ndarray, y: np.ndarray, w: np.ndarray, beta: float) -> np.ndarray:
    """``sum_j w_j e^{beta <x, y_j>}`` in extended precision."""
    X, Y, W = (a.astype(np.longdouble) for a in (x, y, w))
    return (np.exp(beta * (X @ Y.T)) @ W).astype(float)


@pytest.mark.parametrize("p", [1, 2])
def test_excursion_bounds_the_exponent_on_the_polyellipse(p: int) -> None:
    """``D_R`` bounds ``|<x, y(a, b) - s'>|`` at complex points of the polyellipse (sampled on
    its boundary torus and inside), for real unit ``x``: the bound is analytic (triangle
    inequalities), so no sampled value may exceed it; and it is not loose by more than a
    factor 3 at the torus's worst sample (the second part, ``sqrt(1 - w)``'s change, is
    small beside the first for small boxes)."""
    rng = np.random.default_rng(1)
    d = p + 1
    for _ in range(20):
        centre = rng.uniform(-0.4, 0.4, size=p)
        half = 10 ** rng.uniform(-4, -1, size=p)
        R = np.array([1.5, 4.0, 16.0])
        D, S = fastsum_tree._excursion(centre[None], half[None], R)
        s0 = np.concatenate([centre, [math.sqrt(1 - centre @ centre)]])
        for ri, r in enumerate(R):
            th = rng.uniform(0, 2 * np.pi, size=(4000, p))
            rho = np.where(rng.random((4000, 1)) < 0.5, r, 1 + (r - 1) * rng.random((4000, p)))
            ell = (rho * np.exp(1j * th) + np.exp(-1j * th) / rho) / 2  # E_rho inside E_r
            ab = centre + half * ell  # complex tangent coordinates
            y = np.concatenate([ab, np.sqrt(1 - np.sum(ab * ab, axis=1))[:, None]], axis=1)
            x = _unit(rng.normal(size=(4000, d)))
            val = np.abs(np.sum(x * (y - s0), axis=1))
            assert np.all(val <= D[0, ri] * (1 + 1e-12))
            assert np.max(val) >= D[0, ri] / 3


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [4.0, 60.0])
def test_proxies_integrate_exponentials_within_their_bound(d: int, beta: float) -> None:
    """Every compressible cell's proxies at every order reproduce ``sum_y w_y e^{beta <x,
    y>}`` at targets over the whole sphere within the Chebyshev bound of the module
    docstring (``W_B e^{beta <x, s'>}`` times the logged bound over ``Y^2``), plus the float64
    round-off of the two sums (``1e-13`` of ``W_B e^{beta <x, s'> + beta rho}``); at some
    order the bound is below ``1e-12`` relative (it is useful) and the error follows it down."""
    rng = np.random.default_rng(2)
    nodes = _clusters(4000, d, 4, 0.5 / beta, rng)
    w = rng.random(4000)
    tree = _tree(nodes, w, beta)
    x = _unit(rng.normal(size=(60, d)))
    checked = useful = 0
    for k, lev in enumerate(tree.levels):
        for cell in np.nonzero(np.isfinite(lev.log_bound[:, -1]))[0][:6]:
            a, b = lev.start[cell], lev.stop[cell]
            exact = _exact_z(x, tree.nodes[a:b], tree.w[a:b], beta)
            scale = lev.mass[cell] * np.exp(beta * (x @ lev.centre[cell]))
            for qi in range(len(fastsum_tree.PROXY_ORDERS)):
                if not np.isfinite(lev.log_bound[cell, qi]):
                    continue
                g, W = tree._proxy(k, int(cell), qi, False)
                approx = np.exp(beta * (x @ g.T)) @ W
                bound = scale * np.exp(lev.log_bound[cell, qi]) / lev.grow[cell, qi] ** 2
                round_off = 1e-13 * scale * math.exp(beta * lev.radius[cell])
                assert np.all(np.abs(approx - exact) <= bound + round_off)
                checked += 1
                useful += bool(np.all(bound <= 1e-12 * exact))
    assert checked >= 10 and useful >= 1


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [10.0, 100.0])
def test_selection_bounds_what_it_leaves_out(d: int, beta: float) -> None:
    """At caps far from the mass (tight clusters, a sparse background of tiny weight), the sum
    over the selection differs from the full sum by at most its reported bound plus the
    float64 round-off (``1e-13`` relative, the exponents' ``~beta 1e-16``); the selection
    prunes or compresses some cells and is much smaller than the node set."""
    rng = np.random.default_rng(3)
    n = 20000
    nodes = np.concatenate([_clusters(n - 2000, d, 5, 1e-3, rng), _unit(rng.normal(size=(2000, d)))])
    w = np.concatenate([np.full(n - 2000, 1.0), np.full(2000, 1e-9)])
    tree = _tree(nodes, w, beta)
    used = 0
    for c in _unit(rng.normal(size=(8, d))):
        r = 3.0 / beta
        sel = tree.select(c, r, 1e-17)
        x = _unit(c + r / 2 * rng.normal(size=(20, d)))
        x = x[np.linalg.norm(x - c, axis=1) <= r]
        full = _exact_z(x, nodes, w, beta)
        part = np.exp(beta * (x @ sel.points.T)) @ sel.weights
        x_r = x @ fastsum_frames._rotation(d).T
        turned = np.exp(beta * (x_r @ sel.turned_points.T)) @ sel.turned_weights
        bound = math.exp(sel.log_bound_z)
        assert np.all(np.abs(part - full) <= bound + 1e-13 * full)
        assert np.all(np.abs(turned - full) <= bound + 1e-13 * full)
        assert bound <= 1e-15 * np.min(full)
        used += (sel.proxies + sel.pruned > 0) and len(sel.points) < n / 4
    assert used >= 4


def test_cost_per_lone_target_does_not_grow_with_n() -> None:
    """A lone token far from 10 tight clusters (width ``1e-4``): the points its cap sums over
    (raw nodes near it, proxies of the clusters) are the same in number at ``n = 10^4`` and
    ``1.6 10^5`` to within 20 percent (the clusters' proxy orders depend on their widths, not
    on ``n``), far below ``n``."""
    sizes = []
    for n in (10_000, 40_000, 160_000):
        rng = np.random.default_rng(4)
        nodes = _clusters(n, 3, 10, 1e-4, rng)
        tree = _tree(nodes, np.full(n, 1.0 / n), 30.0)
        c = _unit(np.array([0.3, -0.2, 1.0]))
        sizes.append(len(tree.select(c, 0.0, 1e-17).points))
    assert max(sizes) <= 1.2 * min(sizes)
    assert max(sizes) <= 2000


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("path", ["recentred", "direct"])
def test_isolated_tokens_meet_the_tolerance_on_either_path(d: int, path: str,
                                                            monkeypatch) -> None:
    """The field of nodes in tight clusters with 400 isolated ones of weight ``1e-13`` (a
    Lagrangian run's nodes where ``rho ~ 0``; equal weights would let each token's own term
    vouch for it): the isolated nodes the global sums cannot vouch for go all to the re-centred
    sums over their caps' cells (``recentred``) or all to the direct sum (``corrected``), as
    the cost model says (forced here both ways: its costs 0 or huge); their velocity
    and divergence meet the default tolerance against the direct sum (divergence relative to
    ``4 beta + d - 1``, its scale); so does the reported estimate."""
    recentred = path == "recentred"
    monkeypatch.setattr(fastsum_local, "TREE_PAIRS_PER_NODE", 0.0 if recentred else 1e30)
    monkeypatch.setattr(fastsum_local, "LONE_CAP_PAIRS", 0.0)
    monkeypatch.setattr(fastsum_local, "CAP_PAIRS_PER_POINT", 0.0)
    rng = np.random.default_rng(5)
    x = np.concatenate([_clusters(6000, d, 4, 1e-3, rng), _unit(rng.normal(size=(400, d)))])
    w = np.concatenate([np.full(6000, 1.0 / 6000), np.full(400, 1e-13)])
    model = Model(beta=40.0)
    fast = weighted_field(model, x, w, method="fast")
    ref = weighted_field(model, x, w, method="direct")
    st = fast.fast
    glob = fastsum.fast_sums(model, x[None], x[None], w[None], divergence=True)
    unvouched = int(np.count_nonzero(glob.estimate[0] > fastsum.FIELD_TOL))
    assert unvouched >= 100  # the isolated nodes far from every cluster
    assert st is not None
    assert (st.recentred, st.corrected) == ((unvouched, 0) if path == "recentred" else (0, unvouched))
    assert np.max(np.linalg.norm(fast.velocity - ref.velocity, axis=-1)) <= fastsum.FIELD_TOL
    div_err = np.abs(fast.divergence - ref.divergence) / (4 * model.beta + d - 1)
    assert np.max(div_err) <= fastsum.FIELD_TOL
    assert st.error_estimate <= fastsum.FIELD_TOL


def test_cost_model_sends_each_cap_where_it_costs_less(monkeypatch) -> None:
    """The choice of :data:`meanfield.kernels.fastsum_local.CAP_PAIRS_PER_POINT`: at most 70
    points over the tolerance go to the direct sum at once (``direct_is_cheaper``); else a lone
    cap over ``m`` nodes is left to the direct sum (``NaN``, estimate ``inf``) where ``k m <=
    2 10^5`` and re-centred above, whatever else holds."""
    assert fastsum_local.direct_is_cheaper(70) and not fastsum_local.direct_is_cheaper(71)
    rng = np.random.default_rng(12)
    lone = _unit(rng.normal(size=(40, 3)))  # 40 lone caps at beta = 30
    nodes = _clusters(4000, 3, 4, 1e-3, rng)
    w = np.full(4000, 1 / 4000)
    model = Model(beta=30.0)
    plan = fastsum.fast_sums(model, lone[None], nodes[None], w[None], divergence=False).plan
    for terms, expect_done in ((4000, False), (10**6, True)):
        loc = fastsum_local.local_sums(plan, lone, nodes, w, laplacian=False,
                                       tol=fastsum.FIELD_TOL, direct_terms=terms)
        caps = fastsum_local._caps(lone, fastsum_local.LOCAL_RADIUS / model.beta)
        assert max(len(c) for c in caps) < fastsum_local.LOCAL_MIN_TARGETS
        assert loc.caps == (len(caps) if expect_done else 0)
        assert np.all(np.isfinite(loc.estimate)) == expect_done
