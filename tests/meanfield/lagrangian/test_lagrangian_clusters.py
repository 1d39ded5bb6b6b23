"""Clusters of weighted node sets (meanfield.lagrangian.clusters)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import cdist

from meanfield.lagrangian.clusters import cluster_counts, cluster_table, clusters, components


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def synthetic_sphere(rng, masses, spread=1e-4, n_per=(50, 400, 3000)):
    """Clusters around well separated centres on S^2 (pairwise angle > 0.5), node counts
    differing per cluster, weights giving each cluster the stated mass."""
    centres = unit([[0, 0, 1], [1, 0, 0], [0, 1, 0], [-1, -1, -1]])[: len(masses)]
    xs, ws, truth = [], [], []
    for k, (c, m) in enumerate(zip(centres, masses)):
        n = n_per[k % len(n_per)]
        x = unit(c + spread * rng.standard_normal((n, 3)))
        w = rng.uniform(0.5, 1.5, n)
        xs.append(x)
        ws.append(m * w / w.sum())
        truth.append(np.full(n, k))
    return np.concatenate(xs), np.concatenate(ws), np.concatenate(truth), centres


def test_well_separated_clusters_are_recovered(rng):
    masses = [0.1, 0.45, 0.3, 0.15]
    x, w, truth, centres = synthetic_sphere(rng, masses)
    perm = rng.permutation(x.shape[0])
    x, w, truth = x[perm], w[perm], truth[perm]
    c = clusters(x, w, 1e-3)
    order = np.argsort(masses)[::-1]
    # masses exact up to the round-off of summing ~3000 weights
    np.testing.assert_allclose(c.masses, np.array(masses)[order], rtol=1e-12)
    assert c.masses.sum() == pytest.approx(1.0, abs=1e-13)
    # each node labelled with its own cluster
    for rank, k in enumerate(order):
        assert np.all(c.labels[truth == k] == rank)
    # positions: the normalised weighted mean, within the spread (1e-4) of the centre
    np.testing.assert_allclose(c.positions, centres[order], atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(c.positions, axis=1), 1.0, atol=1e-15)


def test_equal_masses_sort_by_first_node():
    x = unit([[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    c = clusters(x, np.full(3, 1 / 3), 1e-3)
    np.testing.assert_array_equal(c.labels, [0, 1, 2])


def test_criterion_is_stated_inner_product():
    # two nodes at angle a are linked iff cos a >= 1 - tol
    tol = 1e-3
    a_in, a_out = np.arccos(1 - tol) * (1 - 1e-6), np.arccos(1 - tol) * (1 + 1e-6)
    for a, expect in [(a_in, 1), (a_out, 2)]:
        x = np.array([[1.0, 0.0, 0.0], [np.cos(a), np.sin(a), 0.0]])
        assert clusters(x, None, tol).masses.size == expect
    # in R^d: |x_i - x_j| <= tol
    x = np.array([[0.0, 0.0], [0.3, 0.4]])
    assert clusters(x, None, 0.5 + 1e-12, geometry="euclidean").masses.size == 1
    assert clusters(x, None, 0.5 - 1e-9, geometry="euclidean").masses.size == 2


@pytest.mark.parametrize("dense", [2, 32, 10**9])
def test_components_match_all_pairs(rng, dense):
    # the cell contraction gives the components of the all-pairs graph (random clumps of
    # every size, in 1, 2 and 3 dimensions)
    for _ in range(10):
        d = int(rng.integers(1, 4))
        centres = rng.uniform(-1, 1, (int(rng.integers(1, 6)), d))
        x = np.concatenate([c + rng.normal(0, rng.choice([1e-4, 1e-2, 0.1]), (int(rng.integers(1, 150)), d))
                            for c in centres])
        r = float(rng.choice([0.01, 0.05, 0.2]))
        truth = connected_components((cdist(x, x) <= r).astype(int), directed=False)[1]
        got = components(x, r, dense)
        # the same partition: the pairs (got, truth) are a bijection
        assert len(set(zip(got, truth))) == len(set(got)) == len(set(truth))


def test_one_clump_of_many_nodes(rng):
    # 20000 nodes within 1e-7 of one point: 2e8 pairs, contracted to one vertex
    x = unit(np.array([0.0, 0.0, 1.0]) + 1e-7 * rng.standard_normal((20000, 3)))
    c = clusters(x, None, 1e-3)
    assert c.masses.tolist() == [pytest.approx(1.0, abs=1e-12)]


def lagrangian_dataset(rng):
    """Three clumps that merge into two and then one (every node moving to a target)."""
    x0, w, truth, centres = synthetic_sphere(rng, [0.5, 0.3, 0.2], spread=1e-5, n_per=(40, 30, 20))
    times = np.array([0.0, 1.0, 2.0])
    x1 = x0.copy()
    x1[truth == 2] = unit(x0[truth == 2] - centres[2] + centres[1])  # clump 2 onto clump 1
    x2 = unit(np.broadcast_to(centres[0], x0.shape) + 1e-6 * rng.standard_normal(x0.shape))
    ds = xr.Dataset({"x": (("time", "node", "dim"), np.stack([x0, x1, x2])), "weight": ("node", w)},
                    coords={"time": times}, attrs={"settings": json.dumps({"geometry": "sphere"})})
    return ds


def test_cluster_counts_over_time(rng):
    ds = lagrangian_dataset(rng)
    counts = cluster_counts(ds, 1e-3)
    assert counts.dims == ("time",)
    np.testing.assert_array_equal(counts.values, [3, 2, 1])
    assert "1 - tol" in counts.attrs["criterion"]
    assert cluster_counts(ds, 1e-3, min_mass=0.35).values.tolist() == [1, 2, 1]
    table = cluster_table(ds, 1e-3, max_clusters=4)
    np.testing.assert_allclose(table["mass"].values[0, :3], [0.5, 0.3, 0.2], rtol=1e-12)
    assert np.isnan(table["mass"].values[0, 3])
    np.testing.assert_allclose(table["mass"].sum("cluster").values, 1.0, rtol=1e-12)
    np.testing.assert_allclose(table["mass"].values[1, :2], [0.5, 0.5], rtol=1e-12)


def test_bad_input():
    x = unit(np.eye(3))
    with pytest.raises(ValueError, match="tol"):
        clusters(x, None, 0.0)
    with pytest.raises(ValueError, match="tol"):
        clusters(x, None, 3.0)
    with pytest.raises(ValueError, match="weights"):
        clusters(x, [1, -1, 1], 1e-3)
    with pytest.raises(ValueError, match="weights"):
        clusters(x, [1, 1], 1e-3)
    with pytest.raises(ValueError, match="x"):
        clusters(np.array([[np.nan, 0, 1]]), None, 1e-3)
    with pytest.raises(ValueError, match="geometry"):
        clusters(x, None, 1e-3, geometry="torus")
    with pytest.raises(ValueError, match="weight"):
        cluster_counts(xr.Dataset({"x": (("time", "node", "dim"), x[None])}), 1e-3)
