"""The density at moving nodes interpolated onto a grid (meanfield.lagrangian.grid.to_grid)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from meanfield import nodes as mn
from meanfield.lagrangian.grid import to_grid


def fibonacci(n: int) -> np.ndarray:
    """``n`` quasi-uniform points on S^2 (spacing ~ sqrt(4 pi / n))."""
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    ph = np.pi * (1 + 5**0.5) * i
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(ph), r * np.sin(ph), z], -1)


def grid_points(da: xr.DataArray) -> np.ndarray:
    th, ph = np.meshgrid(da.colatitude.values, da.longitude.values, indexing="ij")
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)


def smooth(x):
    return np.exp(x[..., 0] + 0.5 * x[..., -1])


# -- R^2 ----------------------------------------------------------------------------------


def test_plane_exact_for_linear_functions(rng):
    # linear interpolation on a triangulation reproduces affine functions (to round-off)
    x = rng.uniform(-1, 1, (400, 2))
    da = to_grid(x, 1 + 2 * x[:, 0] - 3 * x[:, 1], geometry="euclidean", shape=(30, 25),
                 bounds=((-0.8, 0.8), (-0.8, 0.8)))
    X, Y = np.meshgrid(da.x1, da.x2, indexing="ij")
    assert da.dims == ("x1", "x2") and da.shape == (30, 25)
    assert not np.any(np.isnan(da.values))  # [-0.8, 0.8]^2 lies inside the hull of 400 uniform points
    np.testing.assert_allclose(da.values, 1 + 2 * X - 3 * Y, atol=1e-13)
    assert da.attrs["interpolated"] == "linear, from moving Lagrangian nodes"
    assert "Delaunay" in da.attrs["method"]
    # outside the nodes' hull: NaN
    far = to_grid(x, np.ones(400), geometry="euclidean", bounds=((-3, 3), (-3, 3)), shape=(10, 10))
    assert np.isnan(far.values[0, 0]) and 0 < far.attrs["nan_fraction"] < 1


def test_plane_converges_second_order():
    # On a regular node lattice of spacing h the linear interpolant's error is <= h^2 max|D^2 f| / 2:
    # the fitted slope of log(err) against log(h) is 2 (within 0.2).
    errs, hs = [], []
    for m in [9, 17, 33, 65]:
        u = np.linspace(-1, 1, m)
        X = np.stack(np.meshgrid(u, u, indexing="ij"), -1).reshape(-1, 2)
        X = X + 0.1 * (u[1] - u[0]) * np.sin(7 * X[:, ::-1])  # not aligned with the grid
        da = to_grid(X, smooth(X), geometry="euclidean", shape=(41, 41), bounds=((-0.7, 0.7), (-0.7, 0.7)))
        G = np.stack(np.meshgrid(da.x1, da.x2, indexing="ij"), -1)
        errs.append(np.nanmax(np.abs(da.values - smooth(G))))
        hs.append(u[1] - u[0])
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert slope == pytest.approx(2.0, abs=0.2)


def test_line():
    x = np.sort(np.random.default_rng(3).uniform(-1, 1, 50))[:, None]
    da = to_grid(x, 2 * x[:, 0] + 1, geometry="euclidean", shape=20)
    np.testing.assert_allclose(da.values, 2 * da.x1.values + 1, atol=1e-14)


# -- circle ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "order"), [("linear", 2), ("cubic", 4)])
def test_circle_converges(method, order):
    # jittered equispaced nodes; periodic linear: error O(h^2), periodic cubic spline: O(h^4)
    errs, Ns = [], [32, 64, 128, 256]
    for N in Ns:
        th = 2 * np.pi * (np.arange(N) + 0.3 * np.sin(np.arange(N))) / N
        x = np.stack([np.cos(th), np.sin(th)], -1)
        da = to_grid(x, np.exp(np.sin(th)), shape=512, method=method)
        errs.append(np.max(np.abs(da.values - np.exp(np.sin(da.theta.values)))))
    slope = np.polyfit(np.log(Ns), np.log(errs), 1)[0]
    assert slope == pytest.approx(-order, abs=0.3)
    assert da.dims == ("theta",) and da.attrs["geometry"] == "sphere"


def test_circle_from_nodes_is_exact_at_the_nodes():
    nodes = mn.circle(lambda th: 1 + 0.5 * np.cos(th), 64)
    da = to_grid(nodes, shape=64)  # the grid is the node set itself
    np.testing.assert_allclose(da.values, nodes.density, rtol=1e-14)


# -- S^2 -------------------------------------------------------------------------------------


def test_sphere_exact_for_constants_and_second_order(rng):
    da = to_grid(fibonacci(300), np.full(300, 0.25), shape=(30, 60))
    assert da.dims == ("colatitude", "longitude")
    np.testing.assert_allclose(da.values, 0.25, rtol=1e-14)
    # error ~ h^2 ~ 1/n: fitted slope of log(err) against log(n) is -1 (within 0.15)
    ns = [200, 800, 3200]
    errs = []
    for n in ns:
        x = fibonacci(n)
        d2 = to_grid(x, smooth(x), shape=(45, 90))
        errs.append(np.max(np.abs(d2.values - smooth(grid_points(d2)))))
    slope = np.polyfit(np.log(ns), np.log(errs), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.15)
    assert "convex hull" in d2.attrs["method"]


def test_sphere_cap_is_nan_outside():
    x = fibonacci(2000)
    cap = x[x[:, 2] > 0.5]
    da = to_grid(cap, np.ones(len(cap)), shape=(36, 72))
    colat = da.colatitude.values
    south = colat > np.arccos(0.4)
    north = colat < np.arccos(0.6)
    assert np.all(np.isnan(da.values[south]))
    np.testing.assert_allclose(da.values[north], 1.0, rtol=1e-13)


def test_sphere_from_quadrature_nodes():
    nodes = mn.sphere(lambda th, ph: np.exp(np.sin(th) * np.cos(ph)), 24)
    da = to_grid(nodes, shape=(40, 80))
    exact = np.exp(grid_points(da)[..., 0]) * nodes.density[0] / np.exp(nodes.x[0, 0])
    # linear on a grid of spacing ~ pi/25: relative error ~ h^2 |D^2 rho| / 8 ~ 2e-3
    assert np.max(np.abs(da.values / exact - 1)) < 1e-2


# -- a Lagrangian Dataset -------------------------------------------------------------------


def test_dataset_every_time():
    # nodes rotating rigidly on the circle, density carried along: the gridded field rotates
    N, times = 128, np.array([0.0, 0.5, 1.0])
    th0 = 2 * np.pi * np.arange(N) / N
    x = np.stack([np.stack([np.cos(th0 + t), np.sin(th0 + t)], -1) for t in times])
    dens = np.tile(np.exp(np.cos(th0)), (3, 1))
    ds = xr.Dataset({"x": (("time", "node", "dim"), x), "density": (("time", "node"), dens),
                     "weight": ("node", np.full(N, 1 / N))},
                    coords={"time": times}, attrs={"settings": json.dumps({"geometry": "sphere"})})
    da = to_grid(ds, shape=256)
    assert da.dims == ("time", "theta") and da.sizes["time"] == 3
    for k, t in enumerate(times):
        np.testing.assert_allclose(da.values[k], np.exp(np.cos(da.theta.values - t)), atol=2e-3)
    np.testing.assert_array_equal(da.time.values, times)


# -- bad input ----------------------------------------------------------------------------


def test_bad_input():
    x = fibonacci(20)
    with pytest.raises(ValueError, match="density"):
        to_grid(x)
    with pytest.raises(ValueError, match="density"):
        to_grid(x, np.ones(19))
    with pytest.raises(ValueError, match="density"):
        to_grid(x, np.full(20, np.nan))
    with pytest.raises(ValueError, match="x"):
        to_grid(np.ones((5, 4)), np.ones(5), geometry="euclidean")  # R^4: no grid
    with pytest.raises(ValueError, match="method"):
        to_grid(x, np.ones(20), method="cubic")
    with pytest.raises(ValueError, match="shape"):
        to_grid(x, np.ones(20), shape=(10,))
    with pytest.raises(ValueError, match="bounds"):
        to_grid(np.ones((5, 2)) * np.arange(5)[:, None], np.ones(5), geometry="euclidean",
                bounds=((0, -1), (0, 1)))
    with pytest.raises(ValueError, match="geometry"):
        to_grid(x, np.ones(20), geometry="torus")
    with pytest.raises(ValueError, match="x"):
        to_grid(xr.Dataset({"density": ("node", np.ones(3))}))
