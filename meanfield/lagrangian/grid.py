r"""The density carried by moving Lagrangian nodes, interpolated onto a regular grid (for looking at it).

.. autosummary::
   to_grid
   NodeSet

The Lagrangian solver knows the density only at the moving nodes ``x_j(t)``
(``rho_t(x_j(t)) = rho_0(y_j) / J_j(t)``, docs/lagrangian.md). :func:`to_grid` interpolates
those values onto a regular grid, linearly on a triangulation of the nodes, so that the
result is exact where the density is linear (affine in the coordinates of the triangulation)
and otherwise ``O(h^2)`` in the local node spacing ``h`` where the nodes are spread:

* circle (``S^1``, nodes ``(n, 2)`` on the unit circle): by angle, periodic linear
  (``method="cubic"``: the periodic cubic spline, ``O(h^4)``) on the grid
  ``theta_k = 2 pi k / ntheta``;
* ``S^2`` (nodes ``(n, 3)`` on the unit sphere): the convex hull of the nodes is a spherical
  triangulation (when the nodes are not all in one hemisphere); the value at a grid point
  ``p`` is the barycentric interpolation on the hull facet that the ray ``{t p, t > 0}``
  crosses, weights normalised to sum 1 (the radial projection of the facet). Grid:
  colatitudes ``(i + 1/2) pi / nlat``, longitudes ``2 pi k / nlon``. Points outside every
  outward facet (nodes gathered in one hemisphere) are NaN;
* ``R^1``: linear in the sorted nodes; ``R^2``: linear on the Delaunay triangulation
  (``scipy.interpolate.LinearNDInterpolator``); NaN outside the nodes' convex hull.

The result is labelled as interpolated: ``attrs["interpolated"]`` and ``attrs["method"]``.
Where the nodes have gathered into clusters the gridded field is meaningless between them:
the node values themselves (and :mod:`meanfield.lagrangian.clusters`) are the data there.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol, runtime_checkable

import numpy as np
import xarray as xr

from meanfield.arguments import count, finite

GRID_DEFAULTS = {"circle": (256,), "sphere2": (90, 180), "euclidean1": (256,), "euclidean2": (128, 128)}
"""Default grid shapes per kind of space."""


@runtime_checkable
class NodeSet(Protocol):
    """What :func:`to_grid` reads of a set of nodes: positions ``x`` (n, d), the density at
    them and the ``geometry`` (``"sphere"`` or ``"euclidean"``). The nodes of
    :mod:`meanfield.lagrangian.nodes` (``Nodes``, ``RingNodes``, ``SubspaceNodes``) are
    node sets."""

    x: Any
    density: Any
    geometry: str


_SPHERE_TOL = 1e-8  # | |x| - 1 | below which nodes are taken to lie on the sphere (geometry inferred)
_BARY_TOL = 1e-10  # barycentric coordinates down to -this count as inside a facet (round-off)
_TIE_TOL = 1e-9  # facets whose exit scores agree to this (relative) are candidates (coplanar facets)


def _kind(x: np.ndarray, geometry: str) -> str:
    if geometry not in ("sphere", "euclidean"):
        msg = f"geometry must be 'sphere' or 'euclidean', got {geometry!r}"
        raise ValueError(msg)
    d = x.shape[-1]
    kinds = {("sphere", 2): "circle", ("sphere", 3): "sphere2", ("euclidean", 1): "euclidean1",
             ("euclidean", 2): "euclidean2"}
    if (geometry, d) not in kinds:
        msg = (f"x: to_grid draws the circle, S^2, R^1 and R^2; got nodes in {d} dimensions "
               f"with geometry {geometry!r}")
        raise ValueError(msg)
    return kinds[(geometry, d)]


def _infer_geometry(x: np.ndarray) -> str:
    r = np.linalg.norm(x, axis=-1)
    return "sphere" if x.shape[-1] >= 2 and np.all(np.abs(r - 1.0) < _SPHERE_TOL) else "euclidean"


# -- the interpolants, one time each ---------------------------------------------------------------


def _circle(x: np.ndarray, rho: np.ndarray, theta: np.ndarray, method: str) -> np.ndarray:
    ang = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    order = np.argsort(ang, kind="stable")
    a, v = ang[order], rho[order]
    if method == "linear":
        return np.interp(theta, a, v, period=2 * np.pi)
    from scipy.interpolate import CubicSpline

    if np.any(np.diff(a) <= 0) or a[-1] - a[0] >= 2 * np.pi:
        msg = "x: method='cubic' needs distinct node angles; use method='linear'"
        raise ValueError(msg)
    spline = CubicSpline(np.append(a, a[0] + 2 * np.pi), np.append(v, v[0]), bc_type="periodic")
    t = np.where(theta < a[0], theta + 2 * np.pi, theta)
    return spline(t)


def _best_facets(p: np.ndarray, g: np.ndarray, f: np.ndarray, Minv: np.ndarray,
                 vals: np.ndarray, out: np.ndarray) -> None:
    """Among candidate pairs (grid point ``g``, facet ``f``), the facet whose normalised
    barycentric coordinates of ``p[g]`` are least negative; where they are all ``>=
    -_BARY_TOL`` (the ray crosses the facet), write the interpolated value into ``out[g]``."""
    if g.size == 0:
        return
    lam = np.einsum("gij,gj->gi", Minv[f], p[g])
    s = lam.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = lam / s[:, None]
    worst = np.where(s > 0, lam.min(axis=1), -np.inf)
    order = np.lexsort((-worst, g))  # per grid point, the best candidate first
    g, f, lam, worst = g[order], f[order], lam[order], worst[order]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    g, f, lam, worst = g[first], f[first], lam[first], worst[first]
    inside = worst >= -_BARY_TOL
    out[g[inside]] = np.sum(lam[inside] * vals[f[inside]], axis=1)


def _sphere2(x: np.ndarray, rho: np.ndarray, points: np.ndarray, neighbours: int = 6) -> np.ndarray:
    """Barycentric interpolation on the convex-hull triangulation (radial projection).

    The facet a grid direction ``p`` falls in is searched first among the facets of its
    ``neighbours`` nearest nodes (a KD-tree query); the few directions not found there are
    found by the exit rule: the ray ``t p`` leaves the hull through the outward facet that
    maximises ``<n_f, p> / h_f`` (facet plane ``<n_f, y> = h_f``).
    """
    from scipy.spatial import ConvexHull, QhullError, cKDTree

    out = np.full(points.shape[0], np.nan)
    try:
        hull = ConvexHull(x)
    except (QhullError, ValueError):  # fewer than 4 nodes, or all on one plane
        return out
    normals, offsets = hull.equations[:, :3], -hull.equations[:, 3]  # n . y = h on facet
    # outward facets: the origin strictly inside their half-space; a ray from the origin
    # crosses exactly one of them where it meets the hull (the others would be the flat
    # bottom of nodes gathered in one hemisphere)
    outward = offsets > 1e-12
    if not np.any(outward):
        return out
    simplices = hull.simplices[outward]
    nf = simplices.shape[0]
    # inverse of [a b c] per facet: barycentric lambda = M^{-1} p (up to the ray's scale)
    M = np.transpose(x[simplices], (0, 2, 1))  # (F, 3 coords, 3 vertices)
    det = np.linalg.det(M)  # 2 area h: zero for the degenerate facets of coincident nodes
    good = np.abs(det) > 1e-13 * np.max(np.abs(det))
    Minv = np.full_like(M, np.nan)  # NaN coordinates: never chosen
    Minv[good] = np.linalg.inv(M[good])
    vals = rho[simplices]
    # 1. candidates: the facets of the nearest nodes
    node = simplices.reshape(-1)
    facet = np.repeat(np.arange(nf), 3)
    by_node = np.argsort(node, kind="stable")
    node, facet = node[by_node], facet[by_node]
    deg = np.bincount(node, minlength=x.shape[0])
    start = np.concatenate([[0], np.cumsum(deg)])
    inc = np.full((x.shape[0], max(int(deg.max()), 1)), -1, dtype=np.int64)
    inc[node, np.arange(node.size) - start[node]] = facet
    k = min(int(neighbours), x.shape[0])
    _, nn = cKDTree(x).query(points, k=k)
    cand = inc[nn.reshape(points.shape[0], k)].reshape(points.shape[0], -1)
    g, j = np.nonzero(cand >= 0)
    _best_facets(points, g, cand[g, j], Minv, vals, out)
    # 2. the rest: the exit rule over all outward facets (with ties between coplanar facets,
    # e.g. the polygon of a polar ring, settled by the barycentric coordinates)
    rest = np.flatnonzero(np.isnan(out))
    score_rows = normals[outward] / offsets[outward, None]
    chunk = max(1, 4_000_000 // nf)
    for first in range(0, rest.size, chunk):
        idx = rest[first : first + chunk]
        score = points[idx] @ score_rows.T
        best = score.max(axis=1)
        gi, f = np.nonzero((score >= best[:, None] * (1 - _TIE_TOL)) & (best[:, None] > 0))
        _best_facets(points, idx[gi], f, Minv, vals, out)
    return out


def _euclidean2(x: np.ndarray, rho: np.ndarray, points: np.ndarray) -> np.ndarray:
    from scipy.interpolate import LinearNDInterpolator
    from scipy.spatial import QhullError

    try:
        return LinearNDInterpolator(x, rho, fill_value=np.nan)(points)
    except (QhullError, ValueError):  # degenerate (collinear) nodes
        return np.full(points.shape[0], np.nan)


def _euclidean1(x: np.ndarray, rho: np.ndarray, grid: np.ndarray) -> np.ndarray:
    order = np.argsort(x[:, 0], kind="stable")
    return np.interp(grid, x[order, 0], rho[order], left=np.nan, right=np.nan)


# -- the public function -----------------------------------------------------------------------------


def _source_arrays(source: Any, density: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str | None]:
    """``(x, rho, time, geometry)`` with ``x`` (T, n, d) and ``rho`` (T, n); ``time`` None for
    a single state."""
    if isinstance(source, xr.Dataset):
        for name in ("x", "density"):
            if name not in source.data_vars:
                msg = (f"ds: a Lagrangian Dataset needs a {name!r} variable (x (time, node, dim), "
                       "density (time, node))")
                raise ValueError(msg)
        xa = source["x"]
        if "time" in xa.dims:
            xa = xa.transpose("time", "node", "dim")
            ra = source["density"].transpose("time", "node")
            times = np.asarray(source["time"].values, dtype=float)
        else:
            xa, ra, times = (xa.transpose("node", "dim").expand_dims("time"),
                             source["density"].expand_dims("time"), None)
        geometry = None
        try:
            geometry = json.loads(source.attrs.get("settings", "{}")).get("geometry")
        except (TypeError, ValueError):
            geometry = None
        return np.asarray(xa.values, float), np.asarray(ra.values, float), times, geometry
    if isinstance(source, NodeSet):
        rho = source.density if density is None else density
        return np.asarray(source.x, float)[None], np.asarray(rho, float)[None], None, source.geometry
    x = np.asarray(source, dtype=float)
    if density is None:
        msg = "density: give the density values at the nodes (or a Dataset / Nodes)"
        raise ValueError(msg)
    rho = np.asarray(density, dtype=float)
    if x.ndim == 2:
        return x[None], rho[None], None, None
    return x, rho, None, None


def to_grid(source: Any, density: Any = None, *, geometry: str | None = None,
            shape: tuple[int, ...] | int | None = None,
            bounds: tuple[tuple[float, float], ...] | None = None,
            method: str = "linear") -> xr.DataArray:
    """The density at moving nodes, interpolated onto a regular grid.

    Args:
        source: a Lagrangian Dataset (``x (time, node, dim)``, ``density (time, node)``; every
            time is interpolated), a :class:`~meanfield.lagrangian.nodes.Nodes` (any
            :class:`NodeSet`), or positions ``x``
            (n, d) or (time, n, d) with ``density`` (n,) or (time, n).
        density: the node densities when ``source`` is an array (or to override a ``Nodes``).
        geometry: ``"sphere"`` or ``"euclidean"`` (default: the Dataset's settings, the
            ``Nodes``' geometry, or ``sphere`` when every node has ``|x| = 1`` to 1e-8).
        shape: grid size: ``ntheta`` (circle), ``(nlat, nlon)`` (S^2), ``n`` (R^1),
            ``(nx, ny)`` (R^2); defaults :data:`GRID_DEFAULTS`.
        bounds: ``R^d`` only: ``((lo, hi), ...)`` per coordinate (default: the nodes'
            bounding box over all times).
        method: ``"linear"``; on the circle also ``"cubic"`` (periodic spline).

    Returns:
        ``xarray.DataArray`` ``density`` with dims ``(time,) +`` (``theta`` | ``colatitude,
        longitude`` | ``x1`` | ``x1, x2``), ``time`` only when the source has times; attrs
        ``interpolated``, ``method``, ``geometry``. NaN where the grid point lies outside the
        region the nodes cover.
    """
    x, rho, times, geo = _source_arrays(source, density)
    if x.ndim != 3 or x.shape[1] < 1:
        msg = f"x must have shape (n, d) or (time, n, d), got {x.shape}"
        raise ValueError(msg)
    if rho.shape != x.shape[:2]:
        msg = f"density must have shape {x.shape[:2]} (one value per node), got {rho.shape}"
        raise ValueError(msg)
    finite(x, "x")
    finite(rho, "density")
    geometry = geometry or geo or _infer_geometry(x)
    kind = _kind(x, geometry)
    if method not in ("linear", "cubic") or (method == "cubic" and kind != "circle"):
        msg = f"method must be 'linear' (or 'cubic' on the circle), got {method!r} for {kind}"
        raise ValueError(msg)
    if shape is None:
        shape = GRID_DEFAULTS[kind]
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    want = 2 if kind in ("sphere2", "euclidean2") else 1
    if len(shape) != want:
        msg = f"shape must have {want} entries for {kind}, got {shape!r}"
        raise ValueError(msg)
    shape = tuple(count(s, "shape", 2) for s in shape)

    coords: dict[str, Any] = {}
    if kind == "circle":
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        theta = 2 * np.pi * np.arange(shape[0]) / shape[0]
        dims: tuple[str, ...] = ("theta",)
        coords["theta"] = ("theta", theta, {"long_name": "angle", "units": "rad"})
        data = [_circle(xt, rt, theta, method) for xt, rt in zip(x, rho)]
        how = "periodic linear in the angle" if method == "linear" else "periodic cubic spline in the angle"
        units = "1/length"
    elif kind == "sphere2":
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        nlat, nlon = shape
        colat = (np.arange(nlat) + 0.5) * np.pi / nlat
        lon = 2 * np.pi * np.arange(nlon) / nlon
        st = np.sin(colat)[:, None]
        pts = np.stack(np.broadcast_arrays(st * np.cos(lon), st * np.sin(lon), np.cos(colat)[:, None]),
                       axis=-1).reshape(-1, 3)
        dims = ("colatitude", "longitude")
        coords["colatitude"] = ("colatitude", colat, {"long_name": "colatitude", "units": "rad"})
        coords["longitude"] = ("longitude", lon, {"long_name": "longitude", "units": "rad"})
        data = [_sphere2(xt, rt, pts).reshape(shape) for xt, rt in zip(x, rho)]
        how = ("barycentric on the convex hull of the nodes (a spherical triangulation), "
               "radially projected")
        units = "1/area"
    else:
        d = x.shape[-1]
        if bounds is None:
            lo, hi = x.reshape(-1, d).min(axis=0), x.reshape(-1, d).max(axis=0)
        else:
            b = np.asarray(bounds, dtype=float)
            if b.shape != (d, 2) or not np.all(np.isfinite(b)) or np.any(b[:, 1] <= b[:, 0]):
                msg = f"bounds must be {d} finite pairs (lo, hi) with lo < hi, got {bounds!r}"
                raise ValueError(msg)
            lo, hi = b[:, 0], b[:, 1]
        axes = [np.linspace(lo[i], hi[i], shape[i]) for i in range(d)]
        dims = tuple(f"x{i + 1}" for i in range(d))
        for i, name in enumerate(dims):
            coords[name] = (name, axes[i], {"long_name": f"coordinate {i + 1}", "units": "1"})
        if d == 1:
            data = [_euclidean1(xt, rt, axes[0]) for xt, rt in zip(x, rho)]
            how = "linear between the sorted nodes"
        else:
            g = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
            data = [_euclidean2(xt, rt, g).reshape(shape) for xt, rt in zip(x, rho)]
            how = "linear on the Delaunay triangulation (scipy LinearNDInterpolator)"
        units = f"1/length^{d}" if d > 1 else "1/length"

    values = np.stack(data)
    if times is not None:
        dims = ("time",) + dims
        coords["time"] = ("time", times, {"long_name": "time", "units": "1"})
    else:
        values = values[0]
    attrs = {
        "long_name": "density interpolated from moving nodes",
        "units": units,
        "interpolated": f"{method}, from moving Lagrangian nodes",
        "method": how,
        "geometry": geometry,
        "num_nodes": int(x.shape[1]),
        "nan_fraction": float(np.mean(np.isnan(values))) if values.size else math.nan,
    }
    return xr.DataArray(values, dims=dims, coords=coords, name="density", attrs=attrs)


__all__ = ["GRID_DEFAULTS", "NodeSet", "to_grid"]
