"""Tests of :class:`meanfield.domains.sphere.Sphere` and of the PDE solved on it.

Transforms, calculus, Funk–Hecke multipliers, particles; then, through ``meanfield.solve``,
the linear growth rates of docs/equations.md section 3, rotation equivariance, conservation laws and
the resolution monitor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from meanfield.domains.base import Domain
from meanfield.domains.sphere import Sphere
from meanfield.spectral.initial import von_mises

# Round-off floor of one GL transform pair at the sizes used here (lmax <= 48): the
# Legendre recurrences of ducc0 lose a few ulps per degree, so 1e-13 relative is safe while
# any wrong weight, sign or normalisation would be O(1).
ROUNDOFF = 1e-13


def random_coefficients(S: Sphere, rng: np.random.Generator, lmax: int | None = None) -> np.ndarray:
    """A random real band-limited field (``m = 0`` coefficients real)."""
    c = rng.standard_normal(S.nalm) + 1j * rng.standard_normal(S.nalm)
    c[S.orders == 0] = c[S.orders == 0].real
    if lmax is not None:
        c[S.degrees > lmax] = 0.0
    return c


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [2, -1, 3.0, True, "8", None])
def test_bad_lmax_is_rejected(bad):
    with pytest.raises(ValueError, match="lmax"):
        Sphere(bad)


def test_bad_nthreads_is_rejected():
    with pytest.raises(ValueError, match="nthreads"):
        Sphere(8, nthreads=0)


def test_state_round_trip_and_resolution():
    S = Sphere(12)
    assert Domain.from_state(S.state_json()) == S
    assert S.name == "sphere" and S.dims == ("colatitude", "longitude")
    T = S.with_resolution(24)
    assert T.lmax == 24 and T.resolution == 24
    theta, phi = S.grid
    assert theta.shape == (13,) and np.all(np.diff(theta) > 0) and 0 < theta[0] < theta[-1] < np.pi
    assert S.weights.shape == (theta.size, phi.size) == S.grid_shape
    assert S.points.shape == S.grid_shape + (3,)
    # The 3/2 rule: GL exact to degree 2n - 1 >= 3 lmax, trapezoid exact for |m| < nphi.
    assert 2 * S.ntheta_padded - 1 >= 3 * S.lmax and S.nphi_padded >= 3 * S.lmax + 1


# -- transforms ----------------------------------------------------------------------------


def test_round_trip_of_band_limited_fields(rng):
    S = Sphere(24)
    c = random_coefficients(S, rng)
    assert np.max(np.abs(S.forward(S.backward(c)) - c)) < ROUNDOFF * np.max(np.abs(c)) * 10


def test_weights_integrate_exactly():
    S = Sphere(10)
    x = S.points
    # int 1 = 4 pi; int z^2 = 4 pi / 3; int x^4 = 4 pi / 5 (GL x trapezoid, exact).
    assert S.integrate(np.ones(S.grid_shape)) == pytest.approx(4 * np.pi, rel=ROUNDOFF)
    assert S.integrate(x[..., 2] ** 2) == pytest.approx(4 * np.pi / 3, rel=ROUNDOFF)
    assert S.integrate(x[..., 0] ** 4) == pytest.approx(4 * np.pi / 5, rel=ROUNDOFF)
    assert S.padded_weights.sum() == pytest.approx(4 * np.pi, rel=ROUNDOFF)


def test_parseval_and_mass(rng):
    S = Sphere(16)
    a, b = random_coefficients(S, rng), random_coefficients(S, rng)
    f, g = S.backward(a), S.backward(b)
    assert S.inner(a, b) == pytest.approx(S.integrate(f * g), rel=ROUNDOFF * 10)
    assert S.mass(a) == pytest.approx(S.integrate(f), rel=ROUNDOFF * 10)
    # The mean coefficient: B_00 = 1, so the uniform density has c_00 = 1 / (4 pi).
    c = S.forward(S.uniform())
    assert abs(c[0] - 1 / (4 * np.pi)) < ROUNDOFF and np.max(np.abs(c[1:])) < ROUNDOFF


def test_forward_rejects_wrong_shapes():
    S = Sphere(8)
    with pytest.raises(ValueError, match="grid"):
        S.forward(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="coefficients"):
        S.backward(np.zeros(5))
    with pytest.raises(ValueError, match="tangent field"):
        S.divergence_padded(np.zeros((1,) + S.padded_weights.shape))


def test_real_modes_are_the_real_harmonics():
    S = Sphere(8)
    theta, phi = np.meshgrid(*S.grid, indexing="ij")
    # Mean square 1, Condon–Shortley phase: B_1^{+1} ~ -sqrt(3) sin(theta) cos(phi).
    expected = {
        (0, 0): np.ones_like(theta),
        (1, 0): math.sqrt(3) * np.cos(theta),
        (1, 1): -math.sqrt(3) * np.sin(theta) * np.cos(phi),
        (1, -1): -math.sqrt(3) * np.sin(theta) * np.sin(phi),
        (2, 0): math.sqrt(5) * (1.5 * np.cos(theta) ** 2 - 0.5),
    }
    for key, f in expected.items():
        assert np.max(np.abs(S.real_mode(key) - f)) < ROUNDOFF * 10, key
    keys = [(l, m) for l in range(4) for m in range(-l, l + 1)]
    modes = np.stack([S.real_mode(k) for k in keys])
    gram = np.einsum("aij,bij,ij->ab", modes, modes, S.weights) / (4 * np.pi)
    assert np.max(np.abs(gram - np.eye(len(keys)))) < ROUNDOFF * 10
    for bad in [(9, 0), (2, 3), 5]:
        with pytest.raises(ValueError):
            S.real_mode(bad)


def test_prolong_pads_and_truncates(rng):
    coarse, fine = Sphere(8), Sphere(20)
    c = random_coefficients(coarse, rng)
    up = fine.prolong(c, coarse)
    # Same function: the coarse coefficients evaluated (NUFFT, 1e-12) at the fine grid's nodes.
    values = coarse.evaluate(c, fine.points.reshape(-1, 3))
    assert np.max(np.abs(values - fine.backward(up).ravel())) < 1e-10
    assert np.array_equal(coarse.prolong(up, fine), c)


# -- calculus ------------------------------------------------------------------------------


def test_gradient_of_coordinate_functions():
    S = Sphere(12)
    theta, phi = np.meshgrid(*S.padded_grid, indexing="ij")
    ct, st, cp, sp = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    x = S.points
    # grad z = -sin(theta) e_theta; grad x = cos(theta) cos(phi) e_theta - sin(phi) e_phi;
    # grad(xz) = (cos 2theta cos phi) e_theta - cos(theta) sin(phi) e_phi.
    cases = [
        (x[..., 2], (-st, 0 * st)),
        (x[..., 0], (ct * cp, -sp)),
        (x[..., 0] * x[..., 2], (np.cos(2 * theta) * cp, -ct * sp)),
    ]
    for f, (gt, gp) in cases:
        g = S.gradient_padded(S.forward(f))
        assert g.shape == (2,) + S.padded_weights.shape
        assert np.max(np.abs(g[0] - gt)) < ROUNDOFF * 10
        assert np.max(np.abs(g[1] - gp)) < ROUNDOFF * 10


def test_scalar_calculus_matches_ducc0_spin1_transforms(rng):
    """Gradient and divergence use scalar transforms and a sparse recurrence; ducc0's spin-1
    transforms (mode DERIV1) compute the same quantities independently."""
    import ducc0

    S = Sphere(40)
    c = random_coefficients(S, rng) / (1 + S.degrees) ** 2
    w = S.padded_ring_weights / math.sqrt(4 * math.pi)
    spin1 = ducc0.sht.synthesis_2d(
        alm=c.reshape(1, -1) * math.sqrt(4 * math.pi), spin=1, lmax=S.lmax, geometry="GL",
        ntheta=S.ntheta_padded, nphi=S.nphi_padded, mode="DERIV1",
    )
    grad = S.gradient_padded(c)
    # Dividing by sin(theta) near the poles (sin ~ 1/lmax) amplifies round-off ~lmax-fold.
    assert np.max(np.abs(grad - spin1)) < ROUNDOFF * S.lmax * np.max(np.abs(spin1))
    flux = rng.standard_normal((2,) + S.padded_weights.shape)
    adj = -ducc0.sht.adjoint_synthesis_2d(
        map=flux, spin=1, lmax=S.lmax, geometry="GL", mode="DERIV1", ringfactor=w
    )[0]
    assert np.max(np.abs(S.divergence_padded(flux) - adj)) < ROUNDOFF * np.max(np.abs(adj))


def test_work_buffers_and_shared_synthesis(rng):
    S = Sphere(16)
    c = random_coefficients(S, rng)
    f_buf = np.empty(S.padded_weights.shape)
    g_buf = np.empty((2,) + f_buf.shape)
    f = S.synthesize_padded(c, out=f_buf)
    g = S.gradient_padded(c, out=g_buf)
    assert np.shares_memory(f, f_buf) and np.shares_memory(g, g_buf)
    f2, g2 = S.synthesize_with_gradient_padded(c)
    assert np.array_equal(f2, f) and np.array_equal(g2, g)
    with pytest.raises(ValueError, match="C-contiguous float64"):
        S.gradient_padded(c, out=np.empty(g_buf.shape, dtype=np.float32))


def test_divergence_of_gradient_is_the_laplacian(rng):
    S = Sphere(20)
    c = random_coefficients(S, rng)
    lap = S.divergence_padded(S.gradient_padded(c))
    scale = np.max(np.abs(S.laplacian_eigenvalues * c))
    assert np.max(np.abs(lap - S.laplacian_eigenvalues * c)) < ROUNDOFF * scale * 10


def test_divergence_of_a_rotation_field_vanishes():
    S = Sphere(10)
    theta, _ = np.meshgrid(*S.padded_grid, indexing="ij")
    # The rotation about e_z, e_z x x = sin(theta) e_phi: divergence-free.
    flux = np.stack([0 * theta, np.sin(theta)])
    assert np.max(np.abs(S.divergence_padded(flux))) < ROUNDOFF


def test_products_are_dealiased(rng):
    """``div(rho grad phi)`` of band-limited fields equals its exact projection, which a
    grid three times finer (also exact) supplies."""
    S, F = Sphere(12), Sphere(36)
    a, b = random_coefficients(S, rng), random_coefficients(S, rng)
    coarse = S.divergence_padded(S.synthesize_padded(a) * S.gradient_padded(b))
    A, B = F.prolong(a, S), F.prolong(b, S)
    exact = S.prolong(F.divergence_padded(F.synthesize_padded(A) * F.gradient_padded(B)), F)
    assert np.max(np.abs(coarse - exact)) < ROUNDOFF * np.max(np.abs(exact)) * 10
    # Without the 3/2 rule (the working grid) the same product aliases at O(1).
    rho, grad = S.backward(a), S.gradient(b)
    w = S.ring_weights / math.sqrt(4 * math.pi)
    import ducc0

    aliased = -ducc0.sht.adjoint_synthesis_2d(
        map=np.ascontiguousarray(rho * grad), spin=1, lmax=S.lmax, geometry="GL", mode="DERIV1", ringfactor=w
    )[0]
    assert np.max(np.abs(aliased - exact)) > 1e-3 * np.max(np.abs(exact))


# -- Funk–Hecke ----------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.3, 4.0, 30.0])
def test_kernel_multipliers_match_spherical_bessel(beta):
    S = Sphere(16)
    l = np.arange(17)
    ref = 4 * np.pi * special.spherical_in(l, beta)  # docs/equations.md section 3, d = 3
    got = S.scaled_kernel_multipliers(beta)[: 17] * math.exp(beta)  # m = 0 column: l = 0..16
    # ive vs spherical_in: both accurate to a few ulps for these orders; 1e-12 relative.
    assert np.allclose(got, ref, rtol=1e-12, atol=0)
    bessel = (2 * np.pi) ** 1.5 * beta**-0.5 * special.iv(l + 0.5, beta)
    assert np.allclose(got, bessel, rtol=1e-12, atol=0)


def test_kernel_multipliers_at_beta_500_are_finite_and_right():
    S = Sphere(16)
    beta = 500.0
    lam = S.scaled_kernel_multipliers(beta)[:17]  # lambda_l e^{-beta}: no overflow
    # (2 pi)^{3/2} beta^{-1/2} ive(l + 1/2, beta): scaled Bessel, evaluated independently.
    ref = (2 * np.pi) ** 1.5 * beta**-0.5 * special.ive(np.arange(17) + 0.5, beta)
    assert np.all(np.isfinite(lam)) and np.allclose(lam, ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("beta", [1.0, 9.0])
def test_zonal_multipliers_by_quadrature(beta):
    S = Sphere(12)
    lam = S.zonal_multipliers(lambda t: np.exp(beta * (t - 1)))  # e^{-beta} K_beta
    ref = S.scaled_kernel_multipliers(beta)
    # Quadrature of an oscillating integrand: absolute error ~ eps * lambda_0, not relative
    # to the (fast-decaying) lambda_l.
    assert np.max(np.abs(lam - ref)) < 1e-14 * ref[0] * 10


# -- rotations and particles ---------------------------------------------------------------


def rotation_matrix(psi: float, theta: float, phi: float) -> np.ndarray:
    """``R_z(phi) R_y(theta) R_z(psi)`` (active), ducc0.sht.rotate_alm's convention."""

    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    def ry(a):
        return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])

    return rz(phi) @ ry(theta) @ rz(psi)


def test_rotate_matches_rotated_points(rng):
    S = Sphere(10)
    c = random_coefficients(S, rng)
    angles = (0.3, 1.1, -0.7)
    R = rotation_matrix(*angles)
    x = rng.standard_normal((50, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    # (f o R^{-1})(R x) = f(x)
    assert np.allclose(S.evaluate(S.rotate(c, *angles), x @ R.T), S.evaluate(c, x), atol=1e-10)


def test_project_gives_empirical_inner_products(rng):
    S = Sphere(16)
    c = random_coefficients(S, rng)
    x = rng.standard_normal((200, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    p = S.project(x)
    # <mu_n, f> = (1/n) sum f(x_i) = sum w Re(p conj c); NUFFT accuracy 1e-12 relative.
    assert S.inner(p, c) == pytest.approx(np.mean(S.evaluate(c, x)), abs=1e-10)
    assert S.mass(p) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="shape"):
        S.project(x[:, :2])


def test_projected_samples_have_the_exact_kernel_noise(rng):
    """``E ||mu_n - mu||_beta^2 = (1/n) (sum_l lambda_l (2l+1)/(4 pi) - ||mu||_beta^2)`` for
    i.i.d. samples (addition theorem ``sum_m |B_lm|^2 = 2l + 1``; docs/equations.md section 6)."""
    S = Sphere(20)
    beta, n, reps = 10.0, 1000, 40
    rho = S.uniform() * (1 + 0.5 * S.real_mode((1, 0)) / math.sqrt(3))
    c = S.forward(rho)
    lam = S.scaled_kernel_multipliers(beta) * math.exp(beta)
    m0 = S.orders == 0
    expected = (np.sum(lam[m0] * (2 * S.degrees[m0] + 1)) / (4 * np.pi) - S.inner(lam * c, c)) / n
    got = np.mean([S.kernel_distance(S.project(S.sample(rho, n, rng)), c, beta) ** 2 for _ in range(reps)])
    # beta = 10 spreads the distance over many modes; the mean of 40 draws has a relative
    # standard deviation of ~5% (measured over repeated means); 20% is ~4 sigma, while a
    # wrong normalisation (a factor 2 or 4 pi) is far outside.
    assert got == pytest.approx(expected, rel=0.2)


def test_sample_has_the_right_law(rng):
    S = Sphere(12)
    a = 0.8
    rho = (1 + a * S.points[..., 2] + 0.5 * S.points[..., 0] * S.points[..., 1]) / (4 * np.pi)
    n = 40_000
    x = S.sample(rho, n, rng)
    assert x.shape == (n, 3) and np.allclose(np.linalg.norm(x, axis=1), 1.0)
    # E z = a/3, E[xy] = 0.5 * E[x^2 y^2] = 0.5/15, E x = 0; standard errors <= 0.6/sqrt(n):
    # 5 sigma bounds (a wrong law would miss by >= 0.05).
    se = 0.6 / math.sqrt(n)
    assert abs(x[:, 2].mean() - a / 3) < 5 * se
    assert abs((x[:, 0] * x[:, 1]).mean() - 0.5 / 15) < 5 * se
    assert abs(x[:, 0].mean()) < 5 * se
    with pytest.raises(ValueError, match="mass"):
        S.sample(-np.ones(S.grid_shape), 10, rng)


# -- the PDE on S^2 (meanfield.solve) ------------------------------------------------------

from meanfield.integrate import PIController, TrackerBase  # noqa: E402
from meanfield.io import domain_of  # noqa: E402
from meanfield.model import Model  # noqa: E402
from meanfield.spectral.solve import ResolutionError, solve  # noqa: E402


class ModeRecorder(TrackerBase):
    """A tracker keeping ``(t, c[index])`` after every accepted step: the coefficients
    themselves, free of the round-off of a grid round trip (which is ``eps * c_00``)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.t: list[float] = []
        self.a: list[complex] = []

    def initialize(self, t0, t_end):
        pass

    def handle(self, t, c, domain):
        self.t.append(t)
        self.a.append(complex(c[self.index]))

    def finalize(self, info):
        pass


def gamma_sphere(l: int, beta: float, attention: str) -> float:
    """docs/equations.md section 3, S^2: ``l(l+1) i_l(beta)/beta`` (USA), ``/ i_0(beta)`` more (SA)."""
    g = l * (l + 1) * special.spherical_in(l, beta) / beta
    return g / special.spherical_in(0, beta) if attention == "softmax" else g


@pytest.mark.parametrize("attention", ["unnormalized", "softmax"])
@pytest.mark.parametrize("beta", [0.5, 4.0, 9.0])
def test_growth_rates_on_the_sphere(attention, beta):
    """``rho = 1/(4 pi) (1 + 1e-8 B_lm)`` grows like ``e^{gamma_l t}`` (l = 1..6, mixed m)."""
    S = Sphere(12)  # l <= 6 stays out of the tail monitor's top third (l > 8)
    gammas = [gamma_sphere(l, beta, attention) for l in range(1, 7)]
    T = 1.0 / max(gammas)  # all modes grow by at most e: round-off noise stays negligible
    for l in range(1, 7):
        m = (-1) ** l * (l // 2)
        rho = S.uniform() * (1 + 1e-8 * S.real_mode((l, m)))
        rec = ModeRecorder(S.index(l, abs(m)))
        control = PIController(rtol=1e-12, atol=1e-24, dtmax=T / 8)
        solve(Model(beta, attention=attention), S, rho, [0.0, T], controller=control, trackers=[rec])
        measured = math.log(abs(rec.a[-1]) / abs(rec.a[0])) / (rec.t[-1] - rec.t[0])
        # Nonlinear terms change the rate by O(eps) = 1e-8 relative; dopri5 at rtol 1e-12 by
        # ~1e-10; the prescribed bound is 1e-6.
        assert measured == pytest.approx(gammas[l - 1], rel=1e-6), (l, m)


@pytest.mark.parametrize(("attention", "value"), [("softmax", -1), ("unnormalized", 1)])
def test_growth_rates_with_noise_and_repulsion(attention, value):
    """``value * gamma_l - sigma l (l + 1)`` (docs/equations.md section 3): the diffusion is integrated
    exactly (integrating factor), the sign flips with ``V = -I``."""
    S = Sphere(12)
    beta, sigma = 4.0, 0.3
    rates = [value * gamma_sphere(l, beta, attention) - sigma * l * (l + 1) for l in range(1, 7)]
    T = 1.0 / max(abs(r) for r in rates)
    for l in range(1, 7):
        rho = S.uniform() * (1 + 1e-8 * S.real_mode((l, l - 1)))
        rec = ModeRecorder(S.index(l, l - 1))
        control = PIController(rtol=1e-12, atol=1e-24, dtmax=T / 8)
        model = Model(beta, attention=attention, value=value, noise=sigma)
        solve(model, S, rho, [0.0, T], controller=control, trackers=[rec])
        measured = math.log(abs(rec.a[-1]) / abs(rec.a[0])) / (rec.t[-1] - rec.t[0])
        assert measured == pytest.approx(rates[l - 1], rel=1e-6), l


def vmf(S: Sphere, center, kappa: float) -> np.ndarray:
    x = S.points @ (np.asarray(center, dtype=float) / np.linalg.norm(center))
    return np.exp(kappa * (x - 1.0))


def test_rotation_equivariance():
    """Solving from ``rho0 o R^{-1}`` gives ``rho(t) o R^{-1}`` (to 1e-8 of max rho)."""
    S = Sphere(32)
    rho0 = vmf(S, [1, 0.5, 0.2], 2.0) + 0.5 * vmf(S, [-0.3, 1, -0.5], 1.5)
    angles = (0.4, 1.3, -2.1)
    rho0_rot = S.backward(S.rotate(S.forward(rho0), *angles))
    model = Model(4.0, attention="softmax")
    control = PIController(rtol=1e-11, atol=1e-14)
    a = solve(model, S, rho0, [0.0, 1.5], controller=control)
    b = solve(model, S, rho0_rot, [0.0, 1.5], controller=control)
    assert domain_of(a) == domain_of(b)  # both refined alike (or not at all)
    F = domain_of(a)
    ra = F.backward(F.rotate(F.forward(a.density[-1].values), *angles))
    rb = b.density[-1].values
    # The two runs take different steps: their difference is the time error (~rtol) plus
    # the truncation of a resolved field (tail < 1e-10): both well below 1e-8.
    assert np.max(np.abs(ra - rb)) < 1e-8 * np.max(rb)
    assert np.max(np.abs(a.density[-1].values - a.density[0].values)) > 1e-3 * np.max(rb)  # it moved


@pytest.mark.parametrize(
    ("attention", "value", "beta"), [("softmax", 1, 2.0), ("unnormalized", 1, 1.0), ("softmax", -1, 2.0)]
)
def test_mass_energy_and_dissipation(attention, value, beta):
    S = Sphere(24)
    rho0 = vmf(S, [0.2, 0.1, 1.0], 1.0) + 0.3 * vmf(S, [1.0, 0.0, -0.2], 2.0)
    h = 1e-3
    times = np.concatenate([[0.0], np.arange(-1, 2) * h + 0.15, np.arange(-1, 2) * h + 0.4])
    ds = solve(Model(beta, attention=attention, value=value), S, rho0, times,
               controller=PIController(rtol=1e-11, atol=1e-14))
    # Mass: the l = 0 coefficient is untouched by a divergence (exactly, in coefficients).
    assert np.max(np.abs(ds.mass.values - 1.0)) < 1e-12
    E, D = ds.energy.values, ds.dissipation.values
    # Energy monotone: up for attraction, down for repulsion (docs/equations.md section 3).
    assert np.all(value * np.diff(E) > 0)
    # dE/dt by central differences at t = 0.15, 0.4: error h^2 E'''/6 (measured <= 2e-7
    # relative) plus the solve's error ~ 1e-11 / h = 1e-8; the identity must hold to 1e-5.
    for k in (2, 5):
        dEdt = (E[k + 1] - E[k - 1]) / (2 * h)
        assert dEdt == pytest.approx(D[k], rel=1e-5)


def test_bad_input_is_rejected():
    S = Sphere(8)
    model = Model(1.0)
    bad = {
        "shape": np.ones((3, 4)),
        "non-finite": np.where(S.points[..., 2] > 0.9, np.nan, 1.0),
        "negative": S.points[..., 2],
        "integrates": np.zeros(S.grid_shape),
    }
    for word, rho in bad.items():
        with pytest.raises(ValueError, match=word):
            solve(model, S, rho, [0.0, 1.0])
    with pytest.raises(ValueError, match="Q = K = I"):
        solve(Model(1.0, Q=np.eye(3)), S, S.uniform(), [0.0, 1.0])
    with pytest.raises(ValueError, match="not resolved"):
        solve(model, S, vmf(S, [0, 0, 1], 40.0), [0.0, 1.0])


def test_resolution_limit_stops_with_partial_results():
    """Strong attraction concentrates the density; after one refinement (lmax 12 -> 24) the
    grid no longer resolves it and the solve stops, keeping what it computed."""
    S = Sphere(12)
    rho0 = 1.0 + 0.5 * S.points[..., 2]
    model = Model(9.0, attention="unnormalized")
    with pytest.raises(ResolutionError, match="max_resolution=24") as info:
        solve(model, S, rho0, [0.0, 1e-3, 40.0], max_resolution=24, rtol=1e-8, atol=1e-12)
    err = info.value
    assert 1e-3 < err.t < 40.0 and err.dataset is not None
    ds = err.dataset
    assert ds.attrs["successful"] == 0 and ds.time.values[-1] == pytest.approx(err.t)
    assert ds.time.size == 3 and ds.resolution.values[0] == 12 and ds.resolution.values[-1] == 24
    assert ds.density.dims == ("time", "colatitude", "longitude")
    assert np.all(np.isfinite(ds.density.values)) and np.max(np.abs(ds.mass.values - 1)) < 1e-12
    quiet = solve(model, S, rho0, [0.0, 1e-3, 40.0], max_resolution=24, rtol=1e-8, atol=1e-12, throw=False)
    assert quiet.attrs["successful"] == 0 and quiet.time.values[-1] == pytest.approx(err.t)


def test_plots(tmp_path):
    from meanfield.plots.sphere import pick_times, plot_result

    S = Sphere(12)
    ds = solve(Model(2.0), S, vmf(S, [0, 1, 1], 2.0), [0.0, 0.2, 0.4], rtol=1e-6, atol=1e-10, tail_tol=1e-6)
    fig = plot_result(ds, tmp_path / "sphere.png", times=[0.0, 0.4])
    assert (tmp_path / "sphere.png").stat().st_size > 10_000  # a real figure, not an empty canvas
    maps = [ax for ax in fig.axes if ax.name == "mollweide"]
    assert len(maps) == 2  # one colour range for every map
    assert len({ax.collections[0].get_clim() for ax in maps}) == 1
    assert pick_times(ds) == [0, 1, 2] and pick_times(ds, [0.39]) == [2]
    with pytest.raises(ValueError, match="outside"):
        plot_result(ds, tmp_path / "x.png", times=[5.0])


def test_polar_angle_density_of_von_mises_fisher():
    """A vMF density about the north pole has colatitude density
    ``kappa e^{kappa cos theta} sin theta / (2 sinh kappa)``. The series is truncated at
    ``lmax = 40``, where the coefficients of ``e^{2 cos theta}`` are ~``i_40(2)`` ~ 1e-50: only
    round-off (~1e-15 of the peak) remains."""
    kappa = 2.0
    S = Sphere(40)
    c = S.forward(von_mises(S, [[0, 0, 1]], [kappa]))
    theta = np.linspace(0.0, np.pi, 37)
    exact = kappa * np.exp(kappa * np.cos(theta)) * np.sin(theta) / (2 * np.sinh(kappa))
    np.testing.assert_allclose(S.polar_angle_density(c, theta), exact, rtol=0, atol=1e-13)
