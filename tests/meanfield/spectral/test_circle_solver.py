"""The mean-field PDE on the circle against the exact results of docs/equations.md."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

import meanfield as mf
from meanfield import Circle, Model, solve
from meanfield.integrate import ConstantStep, settings_of
from meanfield.io import domain_of, read_netcdf
from meanfield.spectral.initial import uniform_plus_modes, von_mises, wrapped_cauchy


def growth_rate(attention: str, beta: float, k: int, value: int = 1, noise: float = 0.0) -> float:
    """docs/equations.md section 3: gamma_k = k^2 I_k/beta (USA), k^2 I_k/(beta I_0) (SA);
    beta -> 0: k=1 -> 1/2."""
    if beta == 0:
        g = 0.5 if k == 1 else 0.0
    elif attention == "softmax":
        g = k * k * special.ive(k, beta) / (beta * special.ive(0, beta))
    else:
        g = k * k * special.iv(k, beta) / beta
    return value * g - noise * k * k


def measured_rate(model: Model, k: int, T: float, N: int = 32) -> float:
    """log(a_k(T)/a_k(0))/T for a start 1/(2pi) + 1e-8 cos(k theta).

    The perturbation eps = 1e-8 makes the nonlinear correction to the rate O(eps) relative;
    rtol = 1e-12 bounds the time-integration error of log a_k by ~1e-11 per unit rate."""
    d = Circle(N)
    ds = solve(model, d, lambda th: 1 / (2 * np.pi) + 1e-8 * np.cos(k * th), [0.0, T],
               rtol=1e-12, atol=1e-22)
    d = domain_of(ds)
    a0, a1 = (abs(d.forward(ds.density[i].values)[k]) for i in (0, -1))
    return float(np.log(a1 / a0) / T)


# (k, beta) pairs including beta = 0.1 and beta = 50; T is chosen so that
# gamma_k T = O(1) while the fastest mode, seeded only by round-off (1e-17), stays below
# 1e-10 of the perturbation's size: T <= 5 covers every case here.
CASES = [(1, 0.1), (3, 0.1), (2, 1.0), (3, 4.0), (5, 4.0), (4, 50.0), (7, 50.0)]


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize(("k", "beta"), CASES)
@pytest.mark.parametrize("value", [1, -1])
def test_linear_growth_rates(attention, k, beta, value):
    model = Model(beta, attention=attention, value=value)
    gamma = growth_rate(attention, beta, k, value)
    T = min(1.0 / abs(gamma), 5.0)
    # rate error <= (integration error ~1e-11 + nonlinear O(eps)=1e-8 relative) / (gamma T):
    # 1e-6 is the bound and holds with margin for gamma T >= 0.02.
    assert measured_rate(model, k, T) == pytest.approx(gamma, rel=1e-6)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize(("k", "beta", "noise"), [(2, 1.0, 0.05), (3, 4.0, 0.02), (1, 0.1, 0.3)])
def test_growth_rates_with_noise(attention, k, beta, noise):
    model = Model(beta, attention=attention, noise=noise)
    gamma = growth_rate(attention, beta, k, noise=noise)
    T = min(1.0 / abs(gamma), 5.0)
    assert measured_rate(model, k, T) == pytest.approx(gamma, rel=1e-6)


def test_growth_rate_softmax_beta_500_no_overflow():
    """SA at beta = 500: I_k(500) overflows nowhere (ive); k = 3 well inside the band."""
    model = Model(500.0)
    gamma = growth_rate("softmax", 500.0, 3)
    assert np.isfinite(gamma)
    assert measured_rate(model, 3, 1.0 / gamma) == pytest.approx(gamma, rel=1e-6)


def test_beta_zero_is_the_limit():
    """beta = 0 (Kuramoto with unit coupling): mode 1 grows at 1/2, mode 2 is neutral."""
    model = Model(0.0)
    assert measured_rate(model, 1, 2.0) == pytest.approx(0.5, rel=1e-6)
    assert abs(measured_rate(model, 2, 2.0)) < 1e-6


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_wrapped_cauchy_exact_solution_at_beta_zero(attention):
    """Ott-Antonsen: the Poisson kernel family is invariant, phi fixed,
    r(t)^2 = r0^2 e^t / (1 - r0^2 + r0^2 e^t) (docs/equations.md section 4)."""
    r0, phi = 0.3, 1.1
    d = Circle(64)
    times = np.array([0.0, 1.0, 2.5])
    ds = solve(Model(0.0, attention=attention), d, wrapped_cauchy(d, r0, phi), times,
               rtol=1e-12, atol=1e-16)
    fine = domain_of(ds)
    for i, t in enumerate(times):
        r = np.sqrt(r0**2 * np.exp(t) / (1 - r0**2 + r0**2 * np.exp(t)))
        exact = wrapped_cauchy(fine, r, phi)
        # spectral truncation at tail_tol 1e-10 plus integration at rtol 1e-12: 1e-8 of the max
        np.testing.assert_allclose(ds.density[i].values, exact, atol=1e-8 * exact.max(), rtol=0)


@pytest.fixture(scope="module")
def nonlinear_runs():
    runs = {}
    d = Circle(64)
    rho0 = von_mises(d, [0.3, 2.5, 4.4], [1.5, 2.0, 1.0], [0.5, 0.3, 0.2])
    for name, model in {
        "SA": Model(1.0),
        "USA": Model(1.0, attention="unnormalized"),
        "SA-repulsive": Model(1.0, value=-1),
        "USA-repulsive": Model(1.0, attention="unnormalized", value=-1),
    }.items():
        runs[name] = solve(model, d, rho0, np.linspace(0, 2.0, 21), rtol=1e-11, atol=1e-15)
    return runs


@pytest.mark.parametrize("name", ["SA", "USA", "SA-repulsive", "USA-repulsive"])
def test_mass_energy_dissipation(nonlinear_runs, name):
    ds = nonlinear_runs[name]
    assert ds.attrs["successful"] == 1
    # mass is the k = 0 coefficient, untouched by -div(.): conserved to round-off
    np.testing.assert_allclose(ds.mass.values, 1.0, atol=1e-12, rtol=0)
    dE = np.diff(ds.energy.values)
    sign = -1 if "repulsive" in name else 1
    # monotone up to round-off of E (~1e-15 E): the increments are ~1e-3
    assert np.all(sign * dE > -1e-13)
    assert np.all(sign * ds.dissipation.values >= 0)
    assert sign * (ds.energy[-1] - ds.energy[0]) > 1e-3  # the flow really moved


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("value", [1, -1])
@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_dissipation_identity(attention, value, noise):
    """dE/dt = dissipation: E from 5 outputs spaced h = 1e-3, 4th-order central difference.
    Its error h^4 E^(5)/30 ~ 1e-14 and the integration error (rtol 1e-12) / h ~ 1e-9
    relative: rel 1e-5 (the issue's bound) holds with room."""
    d = Circle(64)
    rho0 = von_mises(d, [0.3, 2.5], [2.0, 1.0], [0.6, 0.4])
    h = 1e-3
    t = 0.7 + h * np.arange(-2, 3)
    beta = 3.0 if attention == "softmax" else 1.0  # USA moves e^beta faster: keep it resolved
    ds = solve(Model(beta, attention=attention, value=value, noise=noise), d, rho0,
               np.concatenate([[0.0], t]), rtol=1e-12, atol=1e-16)
    E = ds.energy.values[1:]
    dEdt = (E[0] - 8 * E[1] + 8 * E[3] - E[4]) / (12 * h)
    assert dEdt == pytest.approx(float(ds.dissipation[3]), rel=1e-5)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_gradient_form_equals_continuity_form(attention):
    d = Circle(64)
    rho0 = von_mises(d, [0.3, 2.5], [2.0, 1.0])
    model = Model(2.0, attention=attention, noise=0.01)
    kw = dict(rtol=1e-11, atol=1e-15)
    a = solve(model, d, rho0, [0, 1.0], form="continuity", **kw)
    b = solve(model, d, rho0, [0, 1.0], form="gradient", **kw)
    # identical maths, different code paths: agreement to the integration tolerance
    np.testing.assert_allclose(a.density.values, b.density.values, atol=1e-9, rtol=0)
    c = mf.make_flow(model, d, "continuity").drift(d.forward(rho0))
    g = mf.make_flow(model, d, "gradient").drift(d.forward(rho0))
    np.testing.assert_allclose(c, g, atol=1e-15)


def test_spectral_convergence():
    """Error at t = 1 against N = 256 falls at least 10x per doubling until round-off."""
    model = Model(3.0)
    T = [0.0, 1.0]
    rho = lambda th: np.exp(1.5 * np.cos(th - 0.4)) + 0.5 * np.exp(2.0 * np.cos(th - 2.9))  # noqa: E731
    ref = solve(model, Circle(256), rho, T, rtol=1e-13, atol=1e-16, max_resolution=256)
    ref_c = Circle(256).forward(ref.density[-1].values)
    errors = []
    for N in (8, 16, 32, 64):
        ds = solve(model, Circle(N), rho, T, rtol=1e-13, atol=1e-16, max_resolution=N, tail_tol=1.0)
        c = Circle(256).prolong(Circle(N).forward(ds.density[-1].values), Circle(N))
        errors.append(np.max(np.abs(c - ref_c)) / abs(ref_c[0]))
    errors = np.array(errors)
    for e_coarse, e_fine in zip(errors[:-1], errors[1:]):
        assert e_fine < max(0.1 * e_coarse, 1e-12)  # geometric, then round-off
    assert errors[-1] < 1e-11


def test_noise_threshold():
    """Uniform state stable iff sigma > I_1(beta)/beta (USA, docs/equations.md section 4): mode 1
    decays for sigma = 1.1 sigma_c and grows for sigma = 0.9 sigma_c (rates +-0.1 I_1/beta)."""
    beta = 2.0
    sigma_c = special.iv(1, beta) / beta
    d = Circle(32)
    rho0 = uniform_plus_modes(d, {1: 1e-4})
    amp = {}
    for f in (0.9, 1.1):
        ds = solve(Model(beta, attention="unnormalized", noise=f * sigma_c), d, rho0, [0, 20.0])
        amp[f] = abs(d.forward(ds.density[-1].values)[1]) / abs(d.forward(rho0)[1])
    # growth/decay factor e^{+-0.1 sigma_c 20} ~ e^{+-1.4}
    assert amp[0.9] > 2.0
    assert amp[1.1] < 0.5


def test_bad_inputs():
    d = Circle(16)
    m = Model(1.0)
    with pytest.raises(ValueError, match="beta"):
        Model(-1.0)
    with pytest.raises(ValueError, match="non-finite"):
        solve(m, d, np.full(16, np.nan), [0, 1])
    with pytest.raises(ValueError, match="integrates to"):
        solve(m, d, np.zeros(16), [0, 1])
    with pytest.raises(ValueError, match="negative"):
        solve(m, d, -np.ones(16), [0, 1])
    with pytest.raises(ValueError, match="shape"):
        solve(m, d, np.ones(17), [0, 1])
    with pytest.raises(ValueError, match="N must be"):
        Circle(6)
    with pytest.raises(ValueError, match="increasing"):
        solve(m, d, np.ones(16), [1, 0])
    with pytest.raises(ValueError, match="attention"):
        solve(Model(1.0, attention="l2"), d, np.ones(16), [0, 1])
    with pytest.raises(ValueError, match="Q = K = I"):
        solve(Model(1.0, Q=2 * np.eye(2)), d, np.ones(16), [0, 1])
    with pytest.raises(ValueError, match="rtol"):
        solve(m, d, np.ones(16), [0, 1], rtol=-1.0)


def test_unnormalised_input_is_normalised():
    d = Circle(16)
    ds = solve(Model(1.0), d, 5 * np.ones(16), [0, 0.1])
    assert float(ds.mass[0]) == pytest.approx(1.0, rel=1e-14)


def test_resolution_limit_stops_with_partial_results(tmp_path):
    """Strong clustering (beta = 9) outruns N = 32..64: the solve stops, names the time and
    the failing quantity, returns the partial Dataset and writes it to ``out``."""
    d = Circle(32)
    rho0 = uniform_plus_modes(d, {1: 0.02, 3: 0.02})
    out = tmp_path / "partial.nc"
    with pytest.raises(mf.ResolutionError, match=r"at t = [0-9.]+ the spectral tail") as info:
        solve(Model(9.0), d, rho0, np.linspace(0, 30, 31), max_resolution=64, out=out)
    err = info.value
    assert 0 < err.t < 30
    ds = err.dataset
    assert ds.attrs["successful"] == 0 and "spectral tail" in ds.attrs["stop_reason"]
    assert float(ds.time[-1]) == pytest.approx(err.t)
    assert int(ds.resolution.max()) == 64
    saved = read_netcdf(out)
    np.testing.assert_array_equal(saved.density.values, ds.density.values)
    # throw=False returns the same partial result instead of raising
    ds2 = solve(Model(9.0), d, rho0, np.linspace(0, 30, 31), max_resolution=64, throw=False)
    assert ds2.attrs["successful"] == 0 and ds2.sizes["time"] == ds.sizes["time"]


def test_refinement_keeps_solution_exact():
    """Refinement is exact zero-padding: a run that refines 32 -> 64+ agrees with one
    started at 128 (integration tolerance 1e-11)."""
    d = Circle(32)
    rho = lambda th: np.exp(2.0 * np.cos(th)) + np.exp(2.0 * np.cos(th - 3.0))  # noqa: E731
    a = solve(Model(5.0), d, rho, [0, 1.5], rtol=1e-11, atol=1e-15)
    b = solve(Model(5.0), Circle(128), rho, [0, 1.5], rtol=1e-11, atol=1e-15)
    assert settings_of(a)["num_refinements"] >= 1
    fa = domain_of(a)
    fine = Circle(128)
    ca = fine.prolong(fa.forward(a.density[-1].values), fa)
    cb = fine.forward(b.density[-1].values)
    assert np.max(np.abs(ca - cb)) < 1e-9


def test_attrs_record_how_it_was_made(tmp_path):
    d = Circle(16)
    model = Model(1.5, attention="unnormalized", value=-1, noise=0.01)
    solve(model, d, np.ones(16), [0, 0.5, 1.0], out=tmp_path / "r.nc")
    back = read_netcdf(tmp_path / "r.nc")
    assert mf.io.model_of(back) == model
    assert domain_of(back) == d
    for key in ("scheme", "rtol", "atol", "num_accepted", "num_rejected", "stop_reason",
                "successful", "meanfield_version", "wall_time_s"):
        assert key in back.attrs
    assert back.density.dims == ("time", "theta")
    assert not list(tmp_path.glob(".*tmp*"))  # atomic write left no temporary file


def test_progress_bar_and_fixed_step(capsys):
    d = Circle(16)
    rho0 = uniform_plus_modes(d, {1: 0.01})
    ds = solve(Model(1.0), d, rho0, [0, 0.5], progress=True)
    assert "solve circle" in capsys.readouterr().err
    fixed = solve(Model(1.0), d, rho0, [0, 0.5], scheme="rk4", controller=ConstantStep(0.01))
    # RK4 with dt = 0.01 against DOPRI5 at rtol 1e-8: error ~ (0.01)^4 * gamma^5 << 1e-8
    np.testing.assert_allclose(fixed.density[-1], ds.density[-1], atol=1e-9)
