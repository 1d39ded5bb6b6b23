"""The :class:`~meanfield.domains.base.Domain` contract, checked for every domain.

Every test here is parametrized over the examples (:meth:`Domain.examples`) of every domain in
``Domain.registry``, collected by :func:`collect_examples`: a new domain is its module and its
import in ``meanfield/domains/__init__.py`` (docs/extending.md), and a registered domain
without examples fails :func:`test_every_registered_domain_gives_examples`.
Domain-specific features (named modes, rotations, sampling laws) stay in the domain's own
test module.

Tolerances are round-off bounds: ``EPS`` times a count of operations and the size of the
numbers involved, written next to each check.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
from meanfield.domains import Circle, Domain, NodeRule, command_line_domains

EPS = np.finfo(float).eps


def collect_examples(registry: dict[str, type[Domain]]) -> tuple[list[Domain], list[str]]:
    """The examples of every domain class in ``registry``, and a problem (in words) for each
    class that gives none, gives instances of another class, or refuses."""
    found: list[Domain] = []
    problems: list[str] = []
    for name, cls in registry.items():
        try:
            examples = tuple(cls.examples())
        except (ValueError, TypeError, NotImplementedError) as exc:
            problems.append(f"{name} ({cls.__qualname__}): {exc}")
            continue
        if not examples:
            problems.append(f"{name} ({cls.__qualname__}): no examples")
        elif any(type(ex) is not cls for ex in examples):
            problems.append(f"{name} ({cls.__qualname__}): examples of another class")
        else:
            found.extend(examples)
    return found, problems


DOMAINS, PROBLEMS = collect_examples(dict(Domain.registry))
domains = pytest.mark.parametrize("domain", DOMAINS, ids=repr)


def ncoef(domain: Domain) -> int:
    return int(domain.degrees.size)


def lmax(domain: Domain) -> float:
    return float(domain.degrees.max())


def random_coefficients(domain: Domain, rng: np.random.Generator) -> np.ndarray:
    """Valid coefficients (``forward`` of a band-limited function) with decay ``1/(1+l)``:
    random numbers are passed through ``backward`` then ``forward``, so that the constraints
    of each basis (real ``m = 0`` column, zero Nyquist mode, real zonal series) hold."""
    shape = domain.degrees.shape
    c = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / (1.0 + domain.degrees)
    return domain.forward(domain.backward(c))


def density(domain: Domain) -> np.ndarray:
    """A smooth positive density of mass 1 on the grid (zonal where the domain is):
    a von Mises–Fisher bump about ``e_d`` plus a tilt towards ``e_1``."""
    x = domain.points
    rho = np.exp(2.0 * (x[..., -1] - 1.0)) + 0.5 * np.exp(1.5 * (x[..., 0] - 1.0))
    return rho / domain.integrate(rho)


def unit_coefficient(domain: Domain) -> float:
    """``|c_0|`` of the constant function 1: the size of the coefficients of a function of
    size one (1 on the circle and sphere, ``|S^{d-1}|`` for the zonal basis)."""
    return abs(complex(domain.forward(np.ones(domain.grid_shape)).flat[0]))


def other_domain(domain: Domain) -> Domain:
    return next(d for d in DOMAINS if type(d) is not type(domain))


# -- description --------------------------------------------------------------------------


def test_every_registered_domain_gives_examples():
    assert PROBLEMS == []
    assert {type(d).name for d in DOMAINS} == set(Domain.registry)
    assert {"circle", "sphere", "zonal"} <= set(Domain.registry)


def test_a_registered_domain_without_examples_is_reported():
    """A domain class registers itself by defining ``name``; one that defines nothing else is
    reported by the collector (the default ``examples`` refuses by name), then unregistered."""

    class Bare(Domain):  # abstract: no instance can exist, only the class is registered
        name = "bare-test-domain"
        dims = ("u",)

    try:
        assert Domain.registry["bare-test-domain"] is Bare
        found, problems = collect_examples(dict(Domain.registry))
        assert problems == ["bare-test-domain (test_a_registered_domain_without_examples_is_reported"
                            ".<locals>.Bare): domain 'bare-test-domain' gives no examples "
                            "(Domain.examples)"]
        assert len(found) == len(DOMAINS)
        assert "bare-test-domain" not in command_line_domains()  # no from_options: not offered
    finally:
        del Domain.registry["bare-test-domain"]
    assert collect_examples(dict(Domain.registry))[1] == []


@domains
def test_registered_and_state_round_trip(domain):
    assert Domain.registry[domain.name] is type(domain)
    assert Domain.from_state(domain.state_json()) == domain
    assert Domain.from_state(domain.state()) == domain
    assert hash(Domain.from_state(domain.state_json())) == hash(domain)
    assert domain.state()["name"] == domain.name
    with pytest.raises(ValueError, match="unknown domain"):
        Domain.from_state({**domain.state(), "name": "torus"})


@domains
def test_with_resolution(domain):
    r = domain.resolution
    finer = domain.with_resolution(2 * r)
    assert type(finer) is type(domain) and finer.resolution == 2 * r and finer.d == domain.d
    assert finer.with_resolution(r) == domain


@domains
def test_grid_coords_points_and_weights(domain):
    shape = domain.grid_shape
    assert domain.weights.shape == shape and np.all(domain.weights > 0)
    assert tuple(domain.coords) == domain.dims and len(domain.dims) == len(shape)
    assert tuple(v.size for v in domain.coords.values()) == shape
    assert domain.points.shape == shape + (domain.d,)
    # unit vectors: |x|^2 from d products of O(1) numbers, each rounded (d + 2) eps
    np.testing.assert_allclose(np.linalg.norm(domain.points, axis=-1), 1.0, rtol=0,
                               atol=(domain.d + 2) * EPS)
    assert 0 < domain.min_spacing <= math.pi
    assert domain.geometry.d == domain.d and domain.area == domain.geometry.area


@domains
def test_integrate_one_is_the_area(domain):
    # Sums of n positive weights, each accurate to ~64 eps (the zonal weights are exp of a
    # logarithm of size <= 100, which costs ~100 eps): relative error <= (n + 128) eps.
    for w in (domain.weights, domain.padded_weights):
        tol = (w.size + 128) * EPS
        assert float(np.sum(w)) == pytest.approx(domain.area, rel=tol)
    assert float(domain.integrate(np.ones(domain.grid_shape))) == pytest.approx(
        domain.area, rel=(domain.weights.size + 128) * EPS)
    assert float(domain.integrate(domain.uniform())) == pytest.approx(
        1.0, rel=(domain.weights.size + 128) * EPS)
    c = domain.forward(domain.uniform())
    assert domain.mass(c) == pytest.approx(1.0, rel=(domain.weights.size + 128) * EPS)


# -- transforms ---------------------------------------------------------------------------


def transform_tol(domain: Domain) -> float:
    """Relative round-off of a synthesis–analysis pair: each coefficient is a sum of ``n``
    products (``n`` coefficients or nodes) in a transform that is orthogonal in the
    quadrature's norm, ``~ n eps`` per pass in the worst case; 16 n eps for both passes and
    the weights."""
    return 16 * max(ncoef(domain), domain.weights.size) * EPS


@domains
def test_round_trip_and_new_arrays(domain, rng):
    c = random_coefficients(domain, rng)
    assert c.shape == domain.degrees.shape
    f = domain.backward(c)
    assert f.shape == domain.grid_shape and np.isrealobj(f)
    np.testing.assert_allclose(domain.forward(f), c, rtol=0,
                               atol=transform_tol(domain) * np.max(np.abs(c)))
    # results are new arrays, not views of a work buffer
    f2 = domain.backward(c)
    f2[...] = np.nan
    c2 = domain.forward(f)
    c2[...] = np.nan
    np.testing.assert_array_equal(domain.backward(c), f)
    assert np.all(np.isfinite(domain.forward(f)))


@domains
def test_wrong_shapes_raise(domain, rng):
    c = random_coefficients(domain, rng)
    with pytest.raises(ValueError, match="expected"):
        domain.forward(np.ones(domain.weights.size + 1))
    with pytest.raises(ValueError, match="expected"):
        domain.backward(c[:-1])


@domains
def test_parseval_weights_are_the_quadrature(domain, rng):
    """``inner(a, b) = int f g dA``, on the grid and on the dealiased grid (both exact for
    products of two band-limited functions). Round-off relative to ``|f| |g|``."""
    a, b = random_coefficients(domain, rng), random_coefficients(domain, rng)
    scale = math.sqrt(domain.inner(a, a) * domain.inner(b, b))
    tol = transform_tol(domain) * scale
    # (area f) g: f g alone would reach 1e35 at d = 64 (densities ~ 1/|S^{d-1}|)
    grid = float(domain.integrate(domain.area * domain.backward(a) * domain.backward(b)))
    assert domain.inner(a, b) == pytest.approx(grid / domain.area, abs=tol)
    fa, fb = domain.synthesize_padded(a), domain.synthesize_padded(b)
    padded = float(np.sum(domain.padded_weights * (domain.area * fa) * fb))
    assert domain.inner(a, b) == pytest.approx(padded / domain.area, abs=tol)
    assert np.all(domain.parseval_weights > 0)
    # mass(a) = inner(a, coefficients of 1): round-off against |f| |1| = |f| |S|^(1/2)
    mass_tol = transform_tol(domain) * math.sqrt(domain.inner(a, a) * domain.area)
    assert domain.mass(a) == pytest.approx(float(domain.integrate(domain.backward(a))), abs=mass_tol)


@domains
def test_laplacian_spectrum(domain):
    l = domain.degrees
    assert np.all(l >= 0) and np.all(l == np.round(l))
    np.testing.assert_array_equal(domain.laplacian_eigenvalues, -l * (l + domain.d - 2.0))
    np.testing.assert_array_equal(domain.laplacian_eigenvalues,
                                  domain.geometry.laplacian_eigenvalues(l))


@domains
def test_divergence_of_gradient_is_the_laplacian(domain, rng):
    """The weak divergence on the dealiased grid inverts the gradient exactly: ``div grad =
    Laplacian``. Round-off: gradient and divergence each multiply by up to ``L``, on top of a
    transform pair's relative error, so ``L^2 transform_tol`` of ``max |c|``."""
    c = random_coefficients(domain, rng)
    g = domain.gradient_padded(c)
    assert g.shape[1:] == domain.padded_weights.shape
    lap = domain.laplacian_eigenvalues * c
    tol = transform_tol(domain) * (1 + lmax(domain)) ** 2 * np.max(np.abs(c))
    np.testing.assert_allclose(domain.divergence_padded(g), lap, rtol=0, atol=tol)
    # |grad f|^2 integrates to -int f Laplacian f (fixes the gradient's own scale, and dot);
    # a sum of positive terms, relative error of a transform pair times L^2.
    energy = float(np.sum(domain.padded_weights * domain.dot(g, g)))
    assert energy == pytest.approx(-domain.inner(c, lap),
                                   rel=transform_tol(domain) * (1 + lmax(domain)) ** 2)


@domains
def test_out_buffers_and_synthesis_with_gradient(domain, rng):
    """``out=`` gives the same numbers, in the buffer (the same arithmetic, written elsewhere:
    the results agree to the last bit but for BLAS kernels that may block by alignment, so a
    few eps of the largest value)."""
    c = random_coefficients(domain, rng)
    f, g = domain.synthesize_padded(c), domain.gradient_padded(c)
    assert f.shape == domain.padded_weights.shape
    f_buf, g_buf = np.full_like(f, np.nan), np.full_like(g, np.nan)
    f2 = domain.synthesize_padded(c, out=f_buf)
    g2 = domain.gradient_padded(c, out=g_buf)
    assert np.shares_memory(f2, f_buf) and np.shares_memory(g2, g_buf)
    np.testing.assert_allclose(f_buf, f, rtol=0, atol=4 * EPS * np.max(np.abs(f)))
    np.testing.assert_allclose(g_buf, g, rtol=0, atol=4 * EPS * np.max(np.abs(g)))
    # the fused pair: the same quantities to round-off (shared stages sum in another order)
    bufs = (np.full_like(f, np.nan), np.full_like(g, np.nan))
    for out in (None, bufs):
        f3, g3 = domain.synthesize_with_gradient_padded(c, out=out)
        np.testing.assert_allclose(f3, f, rtol=0, atol=transform_tol(domain) * np.max(np.abs(f)))
        np.testing.assert_allclose(g3, g, rtol=0, atol=transform_tol(domain) * np.max(np.abs(g)))
    assert np.shares_memory(f3, bufs[0]) and np.shares_memory(g3, bufs[1])


NUFFT_EPS = 1e-12
"""ducc0's requested accuracy for evaluation at arbitrary points (Circle 1e-13, Sphere 1e-12):
the l2-relative error of the output vector, so each value is within ``NUFFT_EPS`` times the
vector's norm (ZonalSphere evaluates its own recurrence: round-off only)."""


@domains
def test_values_at_points_match_the_grid(domain, rng):
    """``values_at`` at the grid nodes equals ``backward``."""
    c = random_coefficients(domain, rng)
    x = domain.points.reshape(-1, domain.d)
    got = domain.values_at(c, x)
    f = domain.backward(c).ravel()
    assert got.shape == (x.shape[0],)
    np.testing.assert_allclose(got, f, rtol=0, atol=NUFFT_EPS * np.linalg.norm(f))


# -- geometry: multipliers ----------------------------------------------------------------


def test_sphere_geometry():
    """Areas ``2 pi``, ``4 pi``, ``2 pi^2`` (exp of a log-Gamma: a few eps); bad ``d`` refused."""
    from meanfield.domains import SphereGeometry

    for d, area in ((2, 2 * math.pi), (3, 4 * math.pi), (4, 2 * math.pi**2)):
        assert SphereGeometry(d).area == pytest.approx(area, rel=8 * EPS)
    l = np.arange(5.0)
    np.testing.assert_array_equal(SphereGeometry(5).laplacian_eigenvalues(l), -l * (l + 3))
    for bad in (1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="d must be an integer"):
            SphereGeometry(bad)



@domains
@pytest.mark.parametrize("beta", [0.5, 4.0])
def test_kernel_multipliers_equal_quadrature(domain, beta):
    """``scaled_kernel_multipliers`` (Bessel functions, :mod:`meanfield.special`) against the
    domain's own Funk–Hecke quadrature of ``e^{beta (t - 1)}``: absolute error ~ eps lambda_0
    times the ~1000-term sums behind the quadrature weights, 1e-12 lambda_0 with margin."""
    lam = domain.scaled_kernel_multipliers(beta)
    assert lam.shape == domain.degrees.shape
    quad = domain.zonal_multipliers(lambda t: np.exp(beta * (t - 1.0)))
    np.testing.assert_allclose(quad, lam, rtol=0, atol=1e-12 * lam.flat[0])
    over = domain.kernel_multipliers_over_beta(beta)
    pos = domain.degrees > 0
    np.testing.assert_allclose(over[pos], lam[pos] / beta, rtol=4 * EPS, atol=0)
    assert np.all(over[~pos] == 0)


@domains
def test_zonal_multipliers_of_polynomials(domain):
    """Funk–Hecke in closed form: ``W = 1`` has ``lambda_0 = |S^{d-1}|`` and ``W(t) = t`` has
    ``lambda_1 = |S^{d-1}|/d``, all others zero (exact quadrature; round-off of a 1000-node
    sum, 1e-13 of the area)."""
    l, area = domain.degrees, domain.area
    one = domain.zonal_multipliers(lambda t: np.ones_like(t))
    np.testing.assert_allclose(one, np.where(l == 0, area, 0.0), rtol=0, atol=1e-13 * area)
    lin = domain.zonal_multipliers(lambda t: t)
    np.testing.assert_allclose(lin, np.where(l == 1, area / domain.d, 0.0), rtol=0, atol=1e-13 * area)


@domains
def test_convolution_by_quadrature(domain, rng):
    """``(W * f)(x_i) = sum_j w_j W(<x_i, x_j>) f(x_j)`` equals ``backward(lambda c)`` for a
    cubic kernel: the grid quadrature is exact for ``f W(<x_i, .>)`` (degree ``L + 3``).
    Only for domains whose grid covers the sphere (a symmetry-reduced grid does not)."""
    if domain.symmetry_reduced:
        pytest.skip("the grid holds one node per orbit of the symmetry")
    c = random_coefficients(domain, rng)

    def W(t: np.ndarray) -> np.ndarray:
        return 0.5 + t - 0.3 * t**2 + 0.25 * t**3

    x = domain.points.reshape(-1, domain.d)
    f = domain.backward(c).ravel()
    direct = W(x @ x.T) @ (domain.weights.ravel() * f)
    spectral = domain.backward(domain.zonal_multipliers(W) * c).ravel()
    np.testing.assert_allclose(spectral, direct, rtol=0,
                               atol=transform_tol(domain) * np.sum(domain.weights) * np.max(np.abs(f)))


# -- the flow: fused drift, mass, dissipation ---------------------------------------------


FLOWS = [("softmax", 1, "continuity"), ("unnormalized", -1, "continuity"),
         ("softmax", -1, "gradient"), ("unnormalized", 1, "gradient")]


@domains
@pytest.mark.parametrize(("attention", "value", "form"), FLOWS)
def test_drift_equals_its_composition(domain, attention, value, form):
    """``flow.drift`` (the domain's fused drift where it declares one) equals ``-div(rho X)``
    composed from ``velocity_padded`` and ``divergence_padded``. Round-off: the flux ``rho X``
    is carried with a transform pair's relative error and differentiated (factor ``L``)."""
    c = domain.forward(density(domain))
    flow = mf.make_flow(mf.Model(2.0, attention=attention, value=value), domain, form)
    got = flow.drift(c)
    speed = flow.max_speed
    rho, X, _ = flow.velocity_padded(c)
    flux = rho * X
    ref = -domain.divergence_padded(flux)
    tol = transform_tol(domain) * (1 + lmax(domain)) * float(np.max(np.abs(flux))) * unit_coefficient(domain)
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    assert speed == pytest.approx(float(np.max(np.abs(X))), rel=transform_tol(domain))


@domains
@pytest.mark.parametrize(("attention", "value", "form"), FLOWS)
def test_drift_conserves_mass_and_dissipation_identity(domain, attention, value, form):
    """``mass(drift) = 0`` (``div`` has no constant mode: round-off of ``int div F`` against
    ``|F| L |S|``); ``dE/dt = inner(dE/drho, drift)``
    equals ``flow.dissipation`` (docs/equations.md (3.6)): the weak divergence makes the two
    the same quadrature, so they agree to the round-off of that sum of positive terms."""
    c = domain.forward(density(domain))
    flow = mf.make_flow(mf.Model(2.0, attention=attention, value=value), domain, form)
    drift = flow.drift(c)
    dissipation = flow.dissipation(c)
    rho, X, _ = flow.velocity_padded(c)
    flux_size = float(np.max(np.abs(rho * X))) * (1 + lmax(domain)) * domain.area
    assert abs(domain.mass(drift)) <= transform_tol(domain) * flux_size
    rate = domain.inner(flow.potential(c), drift)
    assert rate == pytest.approx(dissipation, rel=transform_tol(domain) * (1 + lmax(domain)))
    assert value * dissipation > 0  # attraction ascends the energy, repulsion descends it
    uniform = domain.forward(domain.uniform())
    assert np.max(np.abs(flow.drift(uniform))) <= transform_tol(domain) * np.max(np.abs(drift))


@domains
def test_fused_drift_is_declared_consistently(domain):
    """``fused_drift`` returns ``None`` or an object with ``evaluate`` and ``max_speed``."""
    beta = 2.0
    fused = domain.fused_drift(domain.kernel_multipliers_over_beta(beta), math.exp(beta),
                               domain.scaled_kernel_multipliers(beta), 1.0)
    if fused is not None:
        c = domain.forward(density(domain))
        assert fused.evaluate(c).shape == c.shape
        assert fused.max_speed() > 0


# -- refinement and particles -------------------------------------------------------------


@domains
def test_prolong(domain, rng):
    c = random_coefficients(domain, rng)
    finer = domain.with_resolution(2 * domain.resolution)
    p = finer.prolong(c, domain)
    assert p.shape == finer.degrees.shape
    np.testing.assert_array_equal(domain.prolong(p, finer), c)  # pad, then truncate
    np.testing.assert_array_equal(domain.prolong(c, domain), c)
    assert finer.inner(p, p) == pytest.approx(domain.inner(c, c), rel=ncoef(domain) * EPS)
    # the same function: values at the coarse nodes (NUFFT accuracy, as in values_at)
    x = domain.points.reshape(-1, domain.d)
    f = domain.backward(c).ravel()
    np.testing.assert_allclose(finer.values_at(p, x), f, rtol=0, atol=NUFFT_EPS * np.linalg.norm(f))
    with pytest.raises(ValueError, match="prolong"):
        domain.prolong(c, other_domain(domain))


def polynomial_density(domain: Domain) -> np.ndarray:
    """``(1 + x_d)^k``, normalised: positive and band-limited (``k < L``) so the sampled law is
    exactly the series, and peaked (``k ~ 3 sqrt(d)``) so that it is far from uniform in
    every dimension."""
    k = min(int(lmax(domain)) - 1, math.ceil(3 * math.sqrt(domain.d)))
    rho = (1.0 + domain.points[..., -1]) ** k
    return rho / domain.integrate(rho)


@domains
def test_project_and_sample(domain, rng):
    """Samples of ``rho`` projected on the basis are close to ``rho`` in the kernel distance
    (docs/equations.md section 6): ``E ||mu_n - mu||_beta^2 = (K(x, x) - ||mu||_beta^2) / n``
    with ``K(x, x) = e^beta``, and truncating or symmetrising only lowers it (``||mu||^2``
    from the truncated series is a lower bound, so the bound stays valid). By Markov's
    inequality ``25 E`` fails with probability under 4% (far less for this chi-square-like
    statistic), and the seed is fixed; the uniform law fails it more than threefold."""
    n, beta = 4000, 0.5
    rho = polynomial_density(domain)
    x = domain.sample(rho, n, rng)
    assert x.shape == (n, domain.d)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=0, atol=(domain.d + 4) * EPS)
    cp = domain.project(x)
    assert cp.shape == domain.degrees.shape
    assert domain.mass(cp) == pytest.approx(1.0, rel=1e-12)  # NUFFT: 1e-13 of sum |weights|
    c = domain.forward(rho)
    norm2 = domain.kernel_distance(c, np.zeros_like(c), beta) ** 2
    bound = math.sqrt(25 * (math.exp(beta) - norm2) / n)
    assert domain.kernel_distance(cp, c, beta) < bound
    uniform = domain.forward(domain.uniform())
    assert domain.kernel_distance(uniform, c, beta) > 3 * bound
    assert domain.project(x[:1]).shape == domain.degrees.shape


# -- the solver's users: memory estimate, node rule, command line ---------------------------


@domains
def test_point_count_is_the_grid(domain):
    """``point_count`` (read before the grid is built, by meanfield.memory) is the grid's size."""
    assert domain.point_count == math.prod(domain.grid_shape)
    assert domain.transform_bytes >= 0.0


@domains
def test_from_options(domain):
    """The command line builds the example back from ``--resolution`` and ``--d``; a domain
    that does not define ``from_options`` refuses by name and is not offered."""
    cls = type(domain)
    if cls.name in command_line_domains():
        assert cls.from_options(domain.resolution, domain.d) == domain
    else:
        with pytest.raises(ValueError, match=f"domain '{cls.name}' is not built"):
            cls.from_options(domain.resolution, domain.d)


@domains
def test_low_modes_are_real_modes(domain):
    """``low_modes`` (``meanfield solve --init modes``) name real, non-constant modes of mean
    zero (at four times the example's resolution, which resolves them: the smallest examples
    need not): ``int mode dA`` vanishes to the round-off of the grid's sum (``(n + 128) eps``
    of ``int |mode| dA``)."""
    fine = domain.with_resolution(4 * domain.resolution)
    for key in type(domain).low_modes:
        mode = fine.real_mode(key)
        assert mode.shape == fine.grid_shape and np.isrealobj(mode)
        assert np.ptp(mode) > 0
        size = float(fine.integrate(np.abs(mode)))
        assert abs(float(fine.integrate(mode))) <= (fine.weights.size + 128) * EPS * size


@domains
def test_node_rule(domain):
    """The node rule of the Lagrangian continuation: unit vectors, positive weights of total
    ``|S^{d-1}|``, each node carrying a grid node's density (``sum rho(cell) omega = int rho``)
    and exact for the degree-2 polynomial ``x_1^2`` (``int x_1^2 dA = |S^{d-1}|/d``), which
    every example resolves. Round-off: sums of ``n`` positive terms, ``(n + 128) eps`` relative
    (as for ``integrate(1)``). A rule too large for the memory is refused by name, as
    ``meanfield.memory`` says, before it is built (the zonal rule grows like ``L^{d-1}``)."""
    try:
        rule = domain.node_rule()
    except ValueError as exc:
        if "no node rule" in str(exc):  # the default refuses by name
            assert type(domain).node_rule is Domain.node_rule and repr(domain) in str(exc)
            return
        assert "GiB of memory" in str(exc)
        return
    assert isinstance(rule, NodeRule) and rule.describe
    n = rule.omega.shape[0]
    assert rule.x.shape == (n, domain.d) and np.all(rule.omega > 0)
    np.testing.assert_allclose(np.linalg.norm(rule.x, axis=1), 1.0, rtol=0, atol=(domain.d + 4) * EPS)
    tol = (n + 128) * EPS
    assert float(np.sum(rule.omega)) == pytest.approx(domain.area, rel=tol)
    assert float(np.sum(rule.omega * rule.x[:, 0] ** 2)) == pytest.approx(domain.area / domain.d, rel=tol)
    rho = density(domain).reshape(-1)
    if rule.cell is None:
        assert n == domain.point_count
        carried = rho
    else:
        assert rule.cell.shape == (n,) and set(np.unique(rule.cell)) == set(range(domain.point_count))
        carried = rho[rule.cell]
    assert float(np.sum(carried * rule.omega)) == pytest.approx(1.0, rel=tol)


def density_dataset(domain: Domain, time: float = 0.5) -> xr.Dataset:
    """One saved slice of :func:`density` as a spectral result records it (``density (time,
    *dims)``, the domain in ``attrs["settings"]``): what the continuation reads."""
    coords = {"time": ("time", [time]), **{k: (k, np.asarray(v)) for k, v in domain.coords.items()}}
    return xr.Dataset({"density": (("time", *domain.dims), density(domain)[None])}, coords=coords,
                      attrs={"settings": json.dumps({"domain": domain.state()})})


@domains
def test_conditioning(domain):
    """``Domain.conditioning``: the coefficients of a smooth density are a density in float64
    (``None``); a state of negative mass is not, for a domain that checks it (a sentence); the
    default holds every state of the basis (``None``)."""
    c = domain.forward(density(domain))
    assert domain.conditioning(c) is None
    if type(domain).conditioning is Domain.conditioning:
        assert domain.conditioning(-c) is None
    else:
        why = domain.conditioning(-c)
        assert isinstance(why, str) and why


@domains
def test_lagrangian_reduction(domain):
    """The nodes that carry a spectral result on (``solve(..., continue_lagrangian=True)``):
    those of the domain's symmetry reduction, a key of ``REDUCTIONS`` on a
    symmetry-reduced basis, or (``None``) the full nodes of ``node_rule``. Either way they hold
    the density's mass 1 (``sum w = int rho dA``, the grid's quadrature on the grid's nodes):
    a sum of ``n`` positive terms, ``(n + 128) eps`` relative, as in :func:`test_node_rule`."""
    from meanfield.lagrangian.continuation import handover_nodes
    from meanfield.lagrangian.node_set import REDUCTIONS
    from meanfield.lagrangian.nodes import Nodes

    reduction = type(domain).lagrangian_reduction
    assert reduction is None or (reduction in REDUCTIONS and domain.symmetry_reduced)
    try:
        start = handover_nodes(density_dataset(domain), 0.5)
    except ValueError as exc:  # no node rule (the default) or one too large: refused by name
        assert reduction is None and ("no node rule" in str(exc) or "GiB of memory" in str(exc))
        return
    if reduction is None:
        assert isinstance(start, Nodes)
    else:
        assert start.reduction == reduction
    w = np.asarray(start.weights)
    assert np.all(w >= 0) and float(np.sum(w)) == pytest.approx(1.0, rel=(w.size + 128) * EPS)


def test_an_unknown_lagrangian_reduction_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(Circle, "lagrangian_reduction", "spirals")
    from meanfield.lagrangian.continuation import handover_nodes

    with pytest.raises(ValueError, match=r"Circle\(N=8.*lagrangian_reduction='spirals'.*"
                                         r"registered: \['rings', 'subspace'\]"):
        handover_nodes(density_dataset(Circle(8)), 0.5)


# -- a domain added by a user: registered, run through solve, unregistered -------------------


class ComposedCircle(Circle):
    """The circle without its fused drift (``fused_drift`` returns ``None``), so that the flow
    composes ``-div(rho X)`` from the contract's transforms: a new domain in the fewest lines
    (docs/extending.md shows it)."""

    name = "composed-circle"  # registers the class

    def with_resolution(self, resolution: int) -> ComposedCircle:
        return ComposedCircle(resolution, threads=self.threads)

    def fused_drift(self, grad_mult, scale, z_mult, sign):
        return None

    @classmethod
    def examples(cls) -> tuple[ComposedCircle, ...]:
        return (cls(8), cls(32))


@pytest.fixture
def composed_circle():
    """``ComposedCircle`` in the registry for one test (it registered when its class was
    defined: taken out at import below, put back here)."""
    Domain.registry[ComposedCircle.name] = ComposedCircle
    try:
        yield ComposedCircle
    finally:
        del Domain.registry[ComposedCircle.name]


del Domain.registry[ComposedCircle.name]  # the contract's examples above are the library's


def test_a_new_domain_runs_through_the_contract_and_solve(composed_circle, rng):
    """A domain the library does not know: the contract checks pass on its examples, and
    ``meanfield.solve`` runs it with no other edit, refining on the way (32 -> 128). Checks:
    its mass stays 1 to round-off (``div`` has no constant mode: ``N eps`` per step, 1e-12 for
    the tens of steps here), and it agrees with ``Circle`` (fused drift): the two drifts are
    equal to round-off, so both runs take the same steps (asserted), and the densities differ
    by the drifts' round-off accumulated over the steps, ``transform_tol`` (16 N eps, 5e-13
    at N = 128) per step for under 100 steps: 1e-10 of the density's maximum."""
    found, problems = collect_examples(dict(Domain.registry))
    assert problems == [] and {type(d) for d in found} >= {ComposedCircle}
    assert "composed-circle" in command_line_domains()
    for domain in composed_circle.examples():
        test_registered_and_state_round_trip(domain)
        test_with_resolution(domain)
        test_point_count_is_the_grid(domain)
        test_from_options(domain)
        test_low_modes_are_real_modes(domain)
        test_node_rule(domain)
        test_conditioning(domain)
        test_lagrangian_reduction(domain)
        test_round_trip_and_new_arrays(domain, rng)
        for flow in FLOWS:
            test_drift_equals_its_composition(domain, *flow)
    model = mf.Model(4.0, attention="softmax", value=1)
    rho0 = lambda th: np.exp(2.0 * np.cos(th)) + 0.5 * np.exp(3.0 * np.cos(th - 2.0))  # noqa: E731
    t = np.linspace(0.0, 1.0, 5)
    mine = mf.solve(model, composed_circle(32), rho0, t, rtol=1e-9, atol=1e-12)
    ref = mf.solve(model, mf.Circle(32), rho0, t, rtol=1e-9, atol=1e-12)
    from meanfield.io import domain_of

    assert domain_of(mine) == composed_circle(int(mine["resolution"][-1]))
    np.testing.assert_allclose(mine["mass"].values, 1.0, rtol=0, atol=1e-12)
    rho, rho_ref = mine["density"].values, ref["density"].values
    assert rho.shape == rho_ref.shape and mine.attrs["num_accepted"] == ref.attrs["num_accepted"] < 100
    np.testing.assert_array_equal(mine["resolution"].values, ref["resolution"].values)
    np.testing.assert_allclose(rho, rho_ref, rtol=0, atol=1e-10 * np.max(np.abs(rho_ref)))
    assert np.max(np.abs(rho[-1] - rho[0])) > 0.1 * np.max(rho[0])  # it moved: not a trivial pass
