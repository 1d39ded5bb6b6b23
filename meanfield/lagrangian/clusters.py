r"""Clusters of a weighted node set: their masses, positions and number over time.

.. autosummary::
   Clusters
   clusters
   cluster_counts
   cluster_table

A cluster is a connected component of the graph that links nodes ``i`` and ``j`` when

* on the sphere ``S^{d-1}``: ``<x_i, x_j> >= 1 - tol`` (the criterion of the particle system,
  ``particles.observables.count_clusters``, docs/equations.md section 5, ``delta = tol``);
  for unit vectors this is the chord ``|x_i - x_j| <= sqrt(2 tol)``;
* in ``R^d``: ``|x_i - x_j| <= tol``.

Its mass is the sum of its node weights and its position the mass-weighted mean of its nodes
(on the sphere normalised back onto it). On a quadrature of a smooth density the nodes are
spaced ``h ~ 1/n^{1/(d-1)}``, so the whole support is one component until the flow has
gathered the mass into clumps further apart than ``sqrt(2 tol)``; ``min_mass`` discards the
light ones (stray nodes between clusters).

The components are found without listing all pairs of a clump (``n^2`` pairs when every node
has gathered into one point): space is cut into cells of side ``r / sqrt(d)`` (``r`` the
linking distance), so the nodes of one cell are all linked; a cell holding many nodes is
contracted to one vertex, and only its links to other cells are searched (a KD-tree query per
cell pair); the remaining nodes are linked by ``scipy.spatial.cKDTree.query_pairs``. The
components of that graph come from ``scipy.sparse.csgraph.connected_components``.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

import numpy as np
import xarray as xr
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from meanfield.arguments import finite, nonnegative_weights

DENSE_CELL = 32
"""Cells holding at least this many nodes are contracted to one vertex of the graph."""


class Clusters(NamedTuple):
    """Clusters sorted by decreasing mass."""

    masses: np.ndarray
    """``(k,)``: sum of the node weights of each cluster."""
    positions: np.ndarray
    """``(k, d)``: mass-weighted mean position (normalised onto the sphere there)."""
    labels: np.ndarray
    """``(n,)``: the cluster (index into ``masses``) of each node."""


def _radius(tol: float, geometry: str) -> float:
    tol = float(tol)
    if geometry == "sphere":
        if not 0.0 < tol <= 2.0:
            msg = f"tol must lie in (0, 2] on the sphere (<x_i, x_j> >= 1 - tol), got {tol!r}"
            raise ValueError(msg)
        return math.sqrt(2.0 * tol)
    if geometry == "euclidean":
        if not (tol > 0.0 and math.isfinite(tol)):
            msg = f"tol must be positive and finite (|x_i - x_j| <= tol), got {tol!r}"
            raise ValueError(msg)
        return tol
    msg = f"geometry must be 'sphere' or 'euclidean', got {geometry!r}"
    raise ValueError(msg)


def components(x: np.ndarray, r: float, dense: int = DENSE_CELL) -> np.ndarray:
    """Component index of each node of the graph ``|x_i - x_j| <= r`` (``x``: (n, d)),
    exact up to round-off in the cell assignment (see the module docstring)."""
    n, d = x.shape
    side = r / math.sqrt(d)
    keys = np.floor((x - x.min(axis=0)) / side).astype(np.int64)
    _, cell, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    cell = cell.reshape(-1)
    dense_cells = np.flatnonzero(counts >= dense)
    is_dense = np.zeros(counts.size, dtype=bool)
    is_dense[dense_cells] = True
    sparse_idx = np.flatnonzero(~is_dense[cell])
    ns, nd = sparse_idx.size, dense_cells.size
    # vertices: the sparse nodes (0..ns-1), then one per dense cell (ns..ns+nd-1)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    bound = r * (1 + 1e-12)
    xs = x[sparse_idx]
    if ns > 1:
        pairs = cKDTree(xs).query_pairs(r, output_type="ndarray")
        rows.append(pairs[:, 0])
        cols.append(pairs[:, 1])
    members = [np.flatnonzero(cell == c) for c in dense_cells]
    lo = np.array([x[m].min(axis=0) for m in members]).reshape(nd, d)
    hi = np.array([x[m].max(axis=0) for m in members]).reshape(nd, d)
    trees = [cKDTree(x[m]) for m in members]
    for k in range(nd):
        if ns:  # dense cell k -- sparse nodes near its bounding box
            near = np.flatnonzero(np.all((xs >= lo[k] - r) & (xs <= hi[k] + r), axis=1))
            if near.size:
                dist, _ = trees[k].query(xs[near], distance_upper_bound=bound)
                hit = near[dist <= r]
                rows.append(hit)
                cols.append(np.full(hit.size, ns + k))
        for j in range(k + 1, nd):  # dense cell k -- dense cell j, when their boxes are close
            gap = np.maximum(0.0, np.maximum(lo[j] - hi[k], lo[k] - hi[j]))
            if float(np.sqrt(np.sum(gap * gap))) > r:
                continue
            dist, _ = trees[k].query(x[members[j]], distance_upper_bound=bound)
            if np.any(dist <= r):
                rows.append(np.array([ns + k]))
                cols.append(np.array([ns + j]))
    nv = ns + nd
    if rows:
        r_ = np.concatenate(rows)
        c_ = np.concatenate(cols)
    else:
        r_ = c_ = np.zeros(0, dtype=np.int64)
    graph = coo_matrix((np.ones(r_.size, dtype=np.int8), (r_, c_)), shape=(nv, nv)).tocsr()
    _, comp = connected_components(graph, directed=False)
    out = np.empty(n, dtype=np.int64)
    out[sparse_idx] = comp[:ns]
    dense_of_cell = np.full(counts.size, -1, dtype=np.int64)
    dense_of_cell[dense_cells] = np.arange(nd)
    in_dense = is_dense[cell]
    out[in_dense] = comp[ns + dense_of_cell[cell[in_dense]]]
    return out


def clusters(x: Any, weights: Any = None, tol: float = 1e-3, *, geometry: str | None = None) -> Clusters:
    """Masses and positions of the clusters of ``mu = sum_j w_j delta_{x_j}``.

    Args:
        x: node positions ``(n, d)``.
        weights: ``(n,)``, ``>= 0`` (default ``1/n``); the masses sum to ``sum(weights)``.
        tol: on the sphere nodes are linked when ``<x_i, x_j> >= 1 - tol``; in ``R^d`` when
            ``|x_i - x_j| <= tol``.
        geometry: ``"sphere"`` or ``"euclidean"`` (default: ``sphere`` when every ``|x_j| = 1``
            to 1e-8).

    Returns:
        :class:`Clusters`, sorted by decreasing mass (ties: by first node).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1:
        msg = f"x must have shape (n, d) with n >= 1, got {x.shape}"
        raise ValueError(msg)
    finite(x, "x")
    n, d = x.shape
    w = np.full(n, 1.0 / n) if weights is None else nonnegative_weights(weights, ((n,),))
    if geometry is None:
        geometry = "sphere" if np.all(np.abs(np.linalg.norm(x, axis=1) - 1.0) < 1e-8) else "euclidean"
    comp = components(x, _radius(tol, geometry))
    k = int(comp.max()) + 1
    masses = np.bincount(comp, weights=w, minlength=k)
    sums = np.stack([np.bincount(comp, weights=w * x[:, i], minlength=k) for i in range(d)], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pos = sums / masses[:, None]
    if geometry == "sphere":
        norm = np.linalg.norm(sums, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            pos = np.where(norm > 0, sums / norm, pos)
    first = np.full(k, n, dtype=np.int64)
    np.minimum.at(first, comp, np.arange(n))
    order = np.lexsort((first, -masses))
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return Clusters(masses[order], pos[order], rank[comp])


def _lagrangian_arrays(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray, str | None]:
    for name in ("x", "weight"):
        if name not in ds.data_vars:
            msg = f"ds: a Lagrangian Dataset needs a {name!r} variable (x (time, node, dim), weight (node))"
            raise ValueError(msg)
    x = np.asarray(ds["x"].transpose("time", "node", "dim").values, dtype=float)
    w = np.asarray(ds["weight"].values, dtype=float)
    times = np.asarray(ds["time"].values, dtype=float)
    try:
        geometry = json.loads(ds.attrs.get("settings", "{}")).get("geometry")
    except (TypeError, ValueError):
        geometry = None
    return x, w, times, geometry


def cluster_table(ds: xr.Dataset, tol: float = 1e-3, *, max_clusters: int = 8, min_mass: float = 0.0,
                  geometry: str | None = None) -> xr.Dataset:
    """Clusters of a Lagrangian Dataset at every saved time.

    Returns an ``xarray.Dataset`` with ``count`` (time): the number of clusters of mass
    ``>= min_mass``; ``mass`` (time, cluster) and ``position`` (time, cluster, dim) of the
    ``max_clusters`` heaviest (NaN where there are fewer); attrs ``tol``, ``criterion``,
    ``min_mass``.
    """
    x, w, times, geo = _lagrangian_arrays(ds)
    geometry = geometry or geo
    T, _, d = x.shape
    kmax = int(max_clusters)
    if kmax < 1:
        msg = f"max_clusters must be >= 1, got {max_clusters!r}"
        raise ValueError(msg)
    counts = np.zeros(T, dtype=np.int64)
    mass = np.full((T, kmax), np.nan)
    pos = np.full((T, kmax, d), np.nan)
    for t in range(T):
        c = clusters(x[t], w, tol, geometry=geometry)
        counts[t] = int(np.count_nonzero(c.masses >= min_mass))
        k = min(kmax, c.masses.size)
        mass[t, :k] = c.masses[:k]
        pos[t, :k] = c.positions[:k]
    geo_name = geometry or ("sphere" if np.allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-8)
                            else "euclidean")
    criterion = "<x_i, x_j> >= 1 - tol" if geo_name == "sphere" else "|x_i - x_j| <= tol"
    return xr.Dataset(
        {"count": ("time", counts, {"long_name": f"number of clusters of mass >= {min_mass:g}"}),
         "mass": (("time", "cluster"), mass, {"long_name": "cluster mass (heaviest first)"}),
         "position": (("time", "cluster", "dim"), pos, {"long_name": "mass-weighted cluster position"})},
        coords={"time": ("time", times, {"long_name": "time", "units": "1"}), "cluster": np.arange(kmax)},
        attrs={"tol": float(tol), "criterion": f"connected components of {criterion}",
               "min_mass": float(min_mass), "geometry": geo_name},
    )


def cluster_counts(ds: xr.Dataset, tol: float = 1e-3, *, min_mass: float = 0.0,
                   geometry: str | None = None) -> xr.DataArray:
    """Number of clusters of mass ``>= min_mass`` at every saved time of a Lagrangian Dataset
    (``x (time, node, dim)``, ``weight (node)``): ``count`` of :func:`cluster_table`."""
    table = cluster_table(ds, tol, max_clusters=1, min_mass=min_mass, geometry=geometry)
    out = table["count"]
    out.attrs.update(table.attrs)
    return out


__all__ = ["DENSE_CELL", "Clusters", "cluster_counts", "cluster_table", "clusters", "components"]
