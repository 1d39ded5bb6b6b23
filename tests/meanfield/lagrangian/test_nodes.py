"""Node sets (meanfield.lagrangian.nodes): exact quadrature, geometric convergence, hand-over from a
spectral Dataset, labels, and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from meanfield import Circle, Model, Sphere, ZonalSphere, solve
from meanfield import nodes as mn
from meanfield.io import domain_of

# Round-off of a quadrature sum of O(1) terms with weights summing to 1: a few ulps times the
# number of terms' condition (here the sums are of positive weights times O(1) values).
EXACT = 1e-13


def sphere_moment(exps: tuple[int, ...]) -> float:
    """``int prod x_i^{a_i} dA`` over ``S^{d-1}``: ``2 prod Gamma((a_i+1)/2) / Gamma(sum (a_i+1)/2)``
    when every ``a_i`` is even, else 0."""
    if any(a % 2 for a in exps):
        return 0.0
    b = [(a + 1) / 2 for a in exps]
    return 2 * math.exp(sum(gammaln(v) for v in b) - gammaln(sum(b)))


def random_poly(rng: np.random.Generator, d: int, degree: int) -> dict[tuple[int, ...], float]:
    """A polynomial in ``d`` variables: every monomial of degree ``<= degree`` with a random
    coefficient."""
    out = {}
    for exps in itertools.product(range(degree + 1), repeat=d):
        if sum(exps) <= degree:
            out[exps] = rng.standard_normal()
    return out


def poly_eval(p: dict, x: np.ndarray) -> np.ndarray:
    return sum(c * np.prod(x ** np.array(e), axis=-1) for e, c in p.items())


def poly_mul(p: dict, q: dict) -> dict:
    out: dict = {}
    for (e1, c1), (e2, c2) in itertools.product(p.items(), q.items()):
        e = tuple(a + b for a, b in zip(e1, e2))
        out[e] = out.get(e, 0.0) + c1 * c2
    return out


def sphere_integral(p: dict) -> float:
    return sum(c * sphere_moment(e) for e, c in p.items())


# -- exact quadrature --------------------------------------------------------------------


@pytest.mark.parametrize("N", [8, 16, 30])
def test_circle_exact_for_trigonometric_polynomials(rng, N):
    # rho of degree 3, f of degree N - 4: f rho has degree N - 1 < N, integrated exactly.
    r = np.array([1.0, 0.3, -0.2, 0.1])
    s = np.array([0.0, 0.2, 0.1, -0.15])
    K = N - 4
    a, b = rng.standard_normal(K + 1), rng.standard_normal(K + 1)

    def rho(th):
        k = np.arange(4)
        return np.cos(np.outer(th, k)) @ r + np.sin(np.outer(th, k)) @ s

    nodes = mn.circle(rho, N)
    th = np.arctan2(nodes.x[:, 1], nodes.x[:, 0])
    k = np.arange(K + 1)
    f = np.cos(np.outer(th, k)) @ a + np.sin(np.outer(th, k)) @ b
    m = min(3, K)
    exact = ((2 * np.pi * a[0] * r[0] + np.pi * (a[1:m + 1] @ r[1:m + 1] + b[1:m + 1] @ s[1:m + 1]))
             / (2 * np.pi * r[0]))
    assert abs(nodes.integrate(f) - exact) <= EXACT * (1 + np.abs(a).sum() + np.abs(b).sum())
    assert nodes.weights.sum() == pytest.approx(1.0, abs=1e-15)
    # density: rho normalised w.r.t. arc length
    np.testing.assert_allclose(nodes.density, rho(th) / (2 * np.pi * r[0]), rtol=1e-14)


@pytest.mark.parametrize("lmax", [3, 6, 10])
def test_sphere_exact_for_polynomials(rng, lmax):
    # rho = 1 + 0.4 z + 0.3 x y (degree 2, positive); f of degree 2 lmax - 1: product degree 2 lmax + 1.
    rho_p = {(0, 0, 0): 1.0, (0, 0, 1): 0.4, (1, 1, 0): 0.3}

    def rho(th, ph):
        x, y, z = np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)
        return 1.0 + 0.4 * z + 0.3 * x * y

    f = random_poly(rng, 3, 2 * lmax - 1)
    nodes = mn.sphere(rho, lmax)
    exact = sphere_integral(poly_mul(f, rho_p)) / sphere_integral(rho_p)
    scale = sum(abs(c) for c in f.values())
    assert abs(nodes.integrate(poly_eval(f, nodes.x)) - exact) <= EXACT * scale
    assert np.allclose(np.linalg.norm(nodes.x, axis=1), 1.0, atol=1e-15)
    theta, phi = np.arccos(nodes.x[:, 2]), np.arctan2(nodes.x[:, 1], nodes.x[:, 0])
    np.testing.assert_allclose(nodes.density, rho(theta, phi) / sphere_integral(rho_p), rtol=1e-13)


@pytest.mark.parametrize(("d", "degree"), [(3, 4), (4, 4), (5, 3)])
def test_zonal_exact_for_polynomials(rng, d, degree):
    # rho = 1 + 0.5 s (degree 1), f of degree 2 degree: within angular = 2 degree + 1 and
    # deg f + deg rho = 2 degree + 1.
    e = tuple([0] * (d - 1) + [1])
    rho_p = {tuple([0] * d): 1.0, e: 0.5}
    f = random_poly(rng, d, 2 * degree)
    nodes = mn.zonal(lambda s: 1.0 + 0.5 * s, d, degree)
    exact = sphere_integral(poly_mul(f, rho_p)) / sphere_integral(rho_p)
    scale = sum(abs(c) for c in f.values())
    assert abs(nodes.integrate(poly_eval(f, nodes.x)) - exact) <= EXACT * scale
    np.testing.assert_allclose(np.linalg.norm(nodes.x, axis=1), 1.0, atol=1e-15)


@pytest.mark.parametrize(("k", "degree"), [(2, 5), (3, 6), (4, 5), (5, 4)])
def test_sphere_rule_exact(rng, k, degree):
    pts, w = mn.sphere_rule(k, degree)
    f = random_poly(rng, k, degree)
    area = math.exp(math.log(2) + k / 2 * math.log(math.pi) - gammaln(k / 2))
    assert w.sum() == pytest.approx(area, rel=1e-14)
    assert abs(w @ poly_eval(f, pts) - sphere_integral(f)) <= EXACT * sum(abs(c) for c in f.values())


def test_zonal_d3_matches_sphere_rule():
    # at d = 3 both are Gauss-Legendre x trapezoid: the same integrals to round-off
    def g(x):
        return np.exp(x[:, 0] + 0.5 * x[:, 1] - 0.7 * x[:, 2])

    z = mn.zonal(lambda s: np.exp(s), 3, 14)
    s = mn.sphere(lambda th, ph: np.exp(np.cos(th)) + 0 * ph, 14)
    assert z.integrate(g) == pytest.approx(s.integrate(g), rel=1e-13)


def test_gaussian_moments_exact():
    # Isserlis: exact for degree <= 2 per_dim - 1 = 5 in each variable of z; test up to 4.
    mean = np.array([0.3, -1.0, 2.0])
    A = np.array([[1.0, 0.2, 0.0], [0.3, 0.8, 0.1], [0.0, -0.4, 1.2]])
    cov = A @ A.T
    nodes = mn.gaussian(mean, cov, 3)
    assert nodes.n == 27 and nodes.geometry == "euclidean"
    xc = nodes.x - mean
    np.testing.assert_allclose(nodes.weights @ nodes.x, mean, atol=1e-14)
    np.testing.assert_allclose((nodes.weights[:, None] * xc).T @ xc, cov, atol=1e-14)
    for i, j in [(0, 0), (0, 1), (1, 2)]:
        m4 = nodes.weights @ (xc[:, i] ** 2 * xc[:, j] ** 2)
        assert m4 == pytest.approx(cov[i, i] * cov[j, j] + 2 * cov[i, j] ** 2, rel=1e-13)
    # density: the Gaussian density at the node
    from scipy.stats import multivariate_normal

    np.testing.assert_allclose(nodes.density, multivariate_normal(mean, cov).pdf(nodes.x), rtol=1e-12)


# -- geometric convergence -----------------------------------------------------------------


def circle_errors(Ns):
    """rho = 1/(a - cos), f = 1/(b - cos): int f rho = 2 pi/(b - a) (1/sqrt(a^2-1) - 1/sqrt(b^2-1)),
    normalised by int rho = 2 pi / sqrt(a^2 - 1)."""
    a, b = 1.5, 2.0
    exact = (1 / math.sqrt(a * a - 1) - 1 / math.sqrt(b * b - 1)) / (b - a) * math.sqrt(a * a - 1)
    out = []
    for N in Ns:
        nodes = mn.circle(lambda th: 1.0 / (a - np.cos(th)), N)
        out.append(abs(nodes.integrate(lambda x: 1.0 / (b - x[:, 0])) - exact))
    return np.array(out), a


def test_circle_converges_geometrically():
    # The trapezoid error for a function analytic in the strip |Im theta| < acosh(a) decays
    # like rho^-N, rho = a + sqrt(a^2 - 1) (the pole of 1/(a - cos) nearest the real axis;
    # f's poles at acosh(b) are further out). Fitted slope of log(err) vs N within 5% of it.
    Ns = np.array([8, 12, 16, 20, 24])
    err, a = circle_errors(Ns)
    slope = np.polyfit(Ns, np.log(err), 1)[0]
    assert slope == pytest.approx(-math.log(a + math.sqrt(a * a - 1)), rel=0.05)
    assert np.all(np.diff(np.log(err)) < 0)


def sphere_errors(lmaxs):
    """rho ~ e^{kappa <a, x>}, f = e^{lambda <b, x>}: int e^{<v, x>} dA = 4 pi sinh|v| / |v|."""
    a = np.array([0.6, -0.48, 0.64])
    b = np.array([0.0, 0.8, 0.6])
    kap, lam = 2.0, 1.5

    def m(v):
        r = np.linalg.norm(v)
        return 4 * np.pi * np.sinh(r) / r

    exact = m(kap * a + lam * b) / m(kap * a)
    out = []
    for L in lmaxs:
        def rho(th, ph):
            x = np.stack(np.broadcast_arrays(np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)),
                         -1)
            return np.exp(kap * x @ a)

        nodes = mn.sphere(rho, L)
        out.append(abs(nodes.integrate(lambda x: np.exp(lam * x @ b)) - exact) / exact)
    return np.array(out)


def test_sphere_converges_fast_for_non_axisymmetric_data():
    # f rho = e^{<v, x>} is entire: the error falls faster than any geometric rate, down to
    # round-off (1e-14 relative) by lmax = 12.
    err = sphere_errors([3, 5, 7, 9, 12])
    assert np.all(np.diff(np.log(err[:4])) < -2.0)
    assert err[-1] < 1e-13


# -- hand-over from a spectral run -----------------------------------------------------------


def test_from_dataset_circle_and_sphere():
    model = Model(1.0)
    ds = solve(model, Circle(16), lambda th: 1 + 0.5 * np.cos(th), [0.0, 0.1])
    nodes = mn.from_dataset(ds, 0.1)
    np.testing.assert_allclose(nodes.density, ds.density.isel(time=-1).values, rtol=1e-10)
    assert "time 0.1" in nodes.describe
    # a spectral state integrates its own Fourier coefficients: mass and first moment
    rho = ds.density.isel(time=-1).values
    dom = domain_of(ds)  # the final (possibly refined) domain
    c = dom.forward(rho)
    # int cos(theta) rho d theta = pi (c_1 + c_-1) = 2 pi Re c_1
    assert nodes.n == dom.N
    assert nodes.integrate(lambda x: x[:, 0]) == pytest.approx(2 * np.pi * np.real(c[1]), rel=1e-12)
    # finer nodes, spectral interpolation: the same first moment
    fine = mn.from_dataset(ds, 0.1, resolution=64)
    assert fine.n == 64
    assert fine.integrate(lambda x: x[:, 0]) == pytest.approx(nodes.integrate(lambda x: x[:, 0]), rel=1e-12)
    with pytest.raises(ValueError, match="time"):
        mn.from_dataset(ds, 0.05)

    ds2 = solve(model, Sphere(6), lambda th, ph: 1 + 0.3 * np.sin(th) * np.cos(ph), [0.0, 0.05])
    s = mn.from_dataset(ds2)
    assert s.n == ds2.density.isel(time=-1).size
    np.testing.assert_allclose(s.density, ds2.density.isel(time=-1).values.reshape(-1), rtol=1e-10,
                               atol=1e-14)


def test_from_dataset_zonal():
    ds = solve(Model(1.0), ZonalSphere(4, 6), lambda s: 1 + 0.5 * s, [0.0, 0.05])
    nodes = mn.from_dataset(ds)
    assert nodes.d == 4
    rho = ds.density.isel(time=-1).values
    dom = domain_of(ds)
    # mean of s under the state = its degree-1 Gegenbauer coefficient, by the domain's own rule
    assert nodes.integrate(lambda x: x[:, -1]) == pytest.approx(dom.integrate(rho * dom.grid), rel=1e-12)


def test_array_on_another_grid_is_interpolated_spectrally():
    th16 = Circle(16).grid
    a = mn.circle(1 + 0.5 * np.cos(th16) + 0.1 * np.sin(2 * th16), 32)
    b = mn.circle(lambda th: 1 + 0.5 * np.cos(th) + 0.1 * np.sin(2 * th), 32)
    np.testing.assert_allclose(a.density, b.density, rtol=1e-13)
    S = Sphere(5)
    th, ph = np.meshgrid(*S.grid, indexing="ij")
    a = mn.sphere(1 + 0.3 * np.cos(th) + 0.2 * np.sin(th) * np.sin(ph), 9)
    b = mn.sphere(lambda th, ph: 1 + 0.3 * np.cos(th) + 0.2 * np.sin(th) * np.sin(ph), 9)
    np.testing.assert_allclose(a.density, b.density, rtol=1e-12)


# -- samples and labels -------------------------------------------------------------------


def test_from_samples(rng):
    x = rng.standard_normal((50, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    nodes = mn.from_samples(x)
    assert np.all(nodes.weights == 1 / 50) and np.all(np.isnan(nodes.density))
    e = mn.from_samples(rng.standard_normal((7, 2)), geometry="euclidean", density=np.ones(7))
    assert e.geometry == "euclidean" and np.all(e.density == 1)


@pytest.mark.parametrize("rule", ["gauss", "midpoint"])
def test_with_labels_product_quadrature(rule):
    base = mn.circle(lambda th: 1 + 0.5 * np.cos(th), 16)
    m = 4
    lab = mn.with_labels(base, m, rule=rule)
    assert lab.n == 16 * m and lab.weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all((lab.labels > 0) & (lab.labels < 1))
    # node k n + j is (x_j, t_k)
    np.testing.assert_array_equal(lab.x[16 * 2 + 3], base.x[3])
    # product rule: sum w f(x) g(t) = (sum w f)(int_0^1 g) for g exact under the label rule
    deg = 2 * m - 1 if rule == "gauss" else 1
    f = base.x[:, 0] ** 2
    g = lab.labels**deg
    assert lab.weights @ (np.tile(f, m) * g) == pytest.approx(base.integrate(f) / (deg + 1), rel=1e-14)
    given = mn.with_labels(base, np.linspace(0, 1, 16))
    assert given.labels[-1] == 1.0


# -- bad input ----------------------------------------------------------------------------


def good():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    return x, np.full(3, 1 / 3), np.ones(3)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda x, w, r: (x * 1.01, w, r), "x"),
        (lambda x, w, r: (x[:, :1], w, r), "x"),
        (lambda x, w, r: (np.where(x == 1, np.nan, x), w, r), "x"),
        (lambda x, w, r: (x, w - np.array([1, 0, 0]), r), "weights"),
        (lambda x, w, r: (x, np.array([np.inf, 1, 1]), r), "weights"),
        (lambda x, w, r: (x, np.zeros(3), r), "weights"),
        (lambda x, w, r: (x, w[:2], r), "weights"),
        (lambda x, w, r: (x, w, -r), "density"),
        (lambda x, w, r: (x, w, np.array([np.inf, 1, 1])), "density"),
        (lambda x, w, r: (x, w, np.array([np.nan, 1, 1])), "density"),
        (lambda x, w, r: (x, w, r[:2]), "density"),
        (lambda x, w, r: (x, np.array([0.5, 0.25, 0.25]), np.full(3, np.nan)), "density"),
    ],
)
def test_bad_nodes_name_the_field(change, field):
    x, w, r = change(*good())
    with pytest.raises(ValueError, match=field):
        mn.Nodes(x, w, r)


def test_bad_labels_geometry_and_constructors():
    x, w, r = good()
    with pytest.raises(ValueError, match="labels"):
        mn.Nodes(x, w, r, labels=[0.0, 0.5, 1.5])
    with pytest.raises(ValueError, match="labels"):
        mn.Nodes(x, w, r, labels=[0.0, 0.5])
    with pytest.raises(ValueError, match="geometry"):
        mn.Nodes(x, w, r, geometry="torus")
    with pytest.raises(ValueError, match="rho0"):
        mn.circle(lambda th: np.cos(th), 16)  # negative
    with pytest.raises(ValueError, match="rho0"):
        mn.circle(np.ones(7), 16)  # not a Circle grid
    with pytest.raises(ValueError, match="rho0"):
        mn.sphere(np.ones((5, 5)), 8)
    with pytest.raises(ValueError, match="N"):
        mn.circle(lambda th: 1 + 0 * th, 15)
    with pytest.raises(ValueError, match="cov"):
        mn.gaussian([0, 0], [[1, 2], [2, 1]], 4)
    with pytest.raises(ValueError, match="cov"):
        mn.gaussian([0, 0], np.eye(3), 4)
    with pytest.raises(ValueError, match="mean"):
        mn.gaussian([0, np.nan], np.eye(2), 4)
    with pytest.raises(ValueError, match="per_dim"):
        mn.gaussian([0, 0], np.eye(2), 0)
    with pytest.raises(ValueError, match="rule"):
        mn.with_labels(mn.from_samples(x), 3, rule="simpson")


def test_nodes_are_frozen():
    x, w, r = good()
    nodes = mn.Nodes(x, 2 * w, r)
    assert nodes.mass == pytest.approx(2.0) and nodes.weights.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        nodes.x[0, 0] = 3.0  # read-only array
    with pytest.raises(AttributeError):
        nodes.geometry = "euclidean"  # type: ignore[misc]


def test_from_lagrangian_dataset():
    import json

    import xarray as xr

    base = mn.with_labels(mn.circle(lambda th: 1 + 0.5 * np.cos(th), 16), 2)
    x1 = base.x[:, ::-1].copy()  # a reflection: still on the circle
    ds = xr.Dataset({"x": (("time", "node", "dim"), np.stack([base.x, x1])),
                     "weight": ("node", base.weights),
                     "density": (("time", "node"), np.stack([base.density, 2 * base.density])),
                     "label": ("node", base.labels)},
                    coords={"time": [0.0, 1.0]}, attrs={"settings": json.dumps({"geometry": "sphere"})})
    later = mn.from_dataset(ds, 1.0)
    np.testing.assert_array_equal(later.x, x1)
    np.testing.assert_array_equal(later.density, 2 * base.density)
    np.testing.assert_array_equal(later.labels, base.labels)
    assert later.geometry == "sphere" and "time 1" in later.describe
