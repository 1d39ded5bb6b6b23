"""Issue 21, item 3: values beyond float64 stored in a form that fits, and said so.

``log_energy`` where ``E_beta`` overflows (particles, weighted measures, spectral flows), the
notes and their check (:mod:`meanfield.finite`), Bessel multipliers at ``beta`` beyond scipy's
range, the blow-up monitor of tokens in ``R^d`` (:mod:`meanfield.integrate.blowup`) and the overflow
stop of the integration loop.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import xarray as xr
from scipy import special

import particles
from meanfield import Model
from meanfield.domains import Circle, Sphere, ZonalSphere
from meanfield.finite import NOTE, energy_variables, unexplained_nonfinite
from meanfield.integrate import ConstantStep, PIController, RungeKutta, Stop, StopReason, integrate
from meanfield.integrate.blowup import BlowupMonitor, growth_rate, overflow_radius
from meanfield.kernels.interaction import energy_terms
from meanfield.special import _log_ive, _log_ive_large
from meanfield.spectral.flow import make_flow

# log E = beta s_max + O(1): the round-off of s (a few ulps of |x|^2 = 1) moves beta s by
# ~ beta * 4e-16, i.e. a relative error of a few ulps of log E; 1e-13 leaves room for the
# handful of operations after it.
LOG_RTOL = 1e-13


@pytest.mark.parametrize("beta", [1.0, 50.0, 700.0, 1e3, 1e5, 1e300])
def test_log_energy_of_one_cluster_is_exact(beta: float) -> None:
    """All tokens at one point: E_beta = (e^beta - 1) / (2 beta) (docs/equations.md (3.5))."""
    x = np.tile([[0.6, 0.0, 0.8]], (5, 1))
    exact = beta - math.log(2 * beta) + math.log1p(-math.exp(-beta))
    e, log_e = particles.observables.energies(Model(beta), x)
    np.testing.assert_allclose(log_e, exact, rtol=LOG_RTOL)
    assert particles.log_energy(Model(beta), x) == log_e
    if beta > 710:  # e^beta / (2 beta) beyond float64
        assert e == math.inf
    else:
        np.testing.assert_allclose(math.log(e), exact, rtol=LOG_RTOL)


@pytest.mark.parametrize("beta", [1e3, 1e300])
def test_log_energy_of_two_weighted_antipodal_clusters(beta: float) -> None:
    """Masses w1, w2 at +-p: 2 beta E = (w1^2 + w2^2)(e^beta - 1) + 2 w1 w2 (e^-beta - 1)."""
    w1, w2 = 0.3, 0.7
    x = np.array([[[1.0, 0.0]] * 2 + [[-1.0, 0.0]] * 3])
    w = np.array([[w1 / 2] * 2 + [w2 / 3] * 3])
    terms = energy_terms(Model(beta), x, w)
    exact = beta + math.log(w1 * w1 + w2 * w2) - math.log(2 * beta)  # the rest is e^-beta small
    np.testing.assert_allclose(terms.log_energy, [exact], rtol=LOG_RTOL)
    assert terms.energy[0] == math.inf


def test_spectral_log_energy_of_the_uniform_density() -> None:
    """On the circle, E[1/2pi] = (I_0(beta) - 1) / (2 beta): log E = beta + log(ive(0, beta)
    - e^-beta) - log(2 beta); equal to log(energy) where both are finite."""
    d = Circle(16)
    c = d.forward(d.uniform())
    for beta in (700.0, 1e3, 1e5):
        exact = beta + math.log(special.ive(0, beta) - math.exp(-beta)) - math.log(2 * beta)
        flow = make_flow(Model(beta), d)
        # the multipliers are exp(log ive) to ~1e-15 relative: log E to ~1e-15 absolute
        assert flow.log_energy(c) == pytest.approx(exact, rel=1e-13)
        e = flow.energy(c)
        assert (math.log(e) == pytest.approx(exact, rel=1e-13)) if beta < 709 else e == math.inf
    assert make_flow(Model(1e300), d).log_energy(c) == 1e300  # log 2 beta is below its ulp


@pytest.mark.parametrize("domain", [Circle(16), Sphere(6), ZonalSphere(4, 8)],
                         ids=["circle", "sphere", "zonal"])
def test_spectral_log_energy_agrees_where_the_energy_is_finite(domain: Any) -> None:
    """The log-sum-exp form (every degree) against log E at beta = 700 (E ~ 1e300 fits):
    round-off of the Parseval sums, ~1e-15 relative in E, ~1e-15 absolute in log E."""
    rng = np.random.default_rng(2)
    c = domain.forward(domain.uniform())
    pos = np.flatnonzero(domain.degrees.ravel() > 0)[:6]
    c.flat[pos] += 0.01 * rng.standard_normal(pos.size) * np.abs(c.flat[0])
    flow = make_flow(Model(700.0), domain)
    assert flow._energy._log_exponential(c) == pytest.approx(math.log(flow.energy(c)), rel=1e-13)


def test_hankel_expansion_continues_scipys_ive() -> None:
    """scipy's ive is NaN beyond beta ~ 1.5e9; the expansion agrees with it below (truncation
    at 1e-17 of the sum, ive itself to a few ulps) and gives (2 pi beta)^-1/2 at 1e300."""
    nu = np.array([0.0, 0.5, 1.0, 10.0, 300.0])
    for beta in (1e8, 1e9):
        np.testing.assert_allclose(_log_ive_large(nu, beta), np.log(special.ive(nu, beta)),
                                   rtol=1e-13)
    assert np.all(np.isnan(special.ive(nu, 1e10)))  # the reason for the expansion
    np.testing.assert_allclose(_log_ive(nu, 1e300), -0.5 * math.log(2 * math.pi * 1e300),
                               rtol=1e-15)
    assert np.isnan(_log_ive_large(np.array([1e6]), 1e9))  # 4 nu^2 ~ 8 beta: refused, not wrong


def test_energy_variables_add_the_log_only_on_overflow() -> None:
    attrs = {"long_name": "E"}
    quiet = energy_variables("time", np.array([1.0, 2.0]), np.log([1.0, 2.0]), attrs)
    assert set(quiet) == {"energy"} and NOTE not in quiet["energy"][2]
    loud = energy_variables("time", np.array([1.0, np.inf]), np.array([0.0, 1e3]), attrs)
    assert set(loud) == {"energy", "log_energy"} and loud["energy"][2][NOTE]
    assert NOTE not in loud["log_energy"][2]  # finite: nothing to explain


def test_unexplained_nonfinite_is_the_rule() -> None:
    ds = xr.Dataset({"a": ("t", [1.0, np.nan]), "b": ("t", [1.0, 2.0]),
                     "c": ("t", [np.inf, 0.0], {NOTE: "why"}), "s": ("t", ["x", "y"])})
    ds.attrs["successful"] = 1
    assert unexplained_nonfinite(ds) == ["a"]
    ds.attrs["successful"] = 0  # the run says it cannot be trusted
    assert unexplained_nonfinite(ds) == []


def test_blowup_monitor_bounds() -> None:
    """SA in R^d: M(t) <= M(0) e^{||V|| t} (rows sum to 1), stop beyond twice it; USA: the
    radius sqrt(709.78 / (beta ||Q|| ||K||)) past which its weights leave float64."""
    x0 = np.array([[2.0, 0.0], [0.0, 1.0]])
    sa = Model(1.0, V=2.0 * np.eye(2))
    assert growth_rate(sa, 2) == pytest.approx(2.0) and overflow_radius(sa, 2) == math.inf
    mon = BlowupMonitor(sa, x0, 0.0)
    assert mon.check(1.0, x0 * math.exp(2.0) * 1.9, None, None) is None  # within 2 M0 e^{Lt}
    with pytest.raises(Stop) as info:
        mon.check(1.0, x0 * math.exp(2.0) * 2.1, None, None)
    assert info.value.reason is StopReason.BLOWUP and "numerical blow-up" in str(info.value)
    usa = Model(4.0, attention="unnormalized")
    assert growth_rate(usa, 2) is None
    radius = overflow_radius(usa, 2)
    assert radius == pytest.approx(math.sqrt(math.log(np.finfo(float).max) / 4.0))
    assert overflow_radius(usa, 2, "float32") == pytest.approx(
        math.sqrt(math.log(float(np.finfo(np.float32).max)) / 4.0))  # 88.72 / beta
    mon = BlowupMonitor(usa, x0, 0.0)
    assert mon.check(5.0, x0 / 2.0 * 0.99 * radius, None, None) is None
    with pytest.raises(Stop, match="radius"):
        mon.check(5.0, x0 / 2.0 * 1.01 * radius, None, None)
    with pytest.raises(Stop, match="non-finite tokens") as info:
        mon.explain_non_finite(1.0, x0, 0.1)
    assert info.value.reason is StopReason.BLOWUP
    lag = BlowupMonitor(sa, np.c_[x0, [1e9, 1e9]], 0.0, positions=2)  # [x | log J] states
    assert lag.r0 == 2.0


@pytest.mark.parametrize(("method", "how"), [("dopri5", "step collapsed"), ("rk4", "radius")])
def test_tokens_in_rd_blow_up_by_name_with_finite_results(method: str, how: str) -> None:
    """USA at beta = 1 in R^d, speed ~ e^{beta |x|^2}: a finite-time blow-up (near t = 0.2
    from these tokens). The adaptive run's step collapses at it, the fixed-step run jumps past
    the overflow radius; both stop as a blow-up, their states finite."""
    x0 = particles.sample_gaussian(np.zeros(2), np.eye(2), 6, np.random.default_rng(1))
    ds = particles.simulate(Model(1.0, attention="unnormalized"), x0, np.linspace(0, 10, 6),
                            geometry="euclidean", method=method, throw=False)
    reason = ds.attrs["stop_reason"]
    assert ds.attrs["successful"] == 0 and "blew up" in reason and how in reason, reason
    assert np.isfinite(ds.x.values).all() and ds.attrs["t_reached"] < 0.25
    assert unexplained_nonfinite(ds) == []


def test_sa_on_the_sphere_never_blows_up_by_the_step_rule() -> None:
    """A step collapse is a blow-up only for unnormalised attention (the monitor's rule)."""
    mon = BlowupMonitor(Model(1.0), np.ones((3, 2)), 0.0)
    assert mon.explain_small_step(1.0, 10 * np.ones((3, 2)), 1e-14) is None


def _walls(y: np.ndarray) -> np.ndarray:
    """y' = 1 below y = 1.5, a field beyond float64 above it."""
    return np.where(y < 1.5, 1.0, np.inf)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # handled, so silent
def test_overflow_is_named_not_the_step_size() -> None:
    out: list[float] = []
    sol = integrate(RungeKutta(_walls, "dopri5"), np.zeros(1), np.array([0.0, 3.0]),
                    controller=PIController(rtol=1e-8, atol=1e-10),
                    output=lambda k, t, y, c: out.append(t))
    assert sol.reason is StopReason.OVERFLOW and "non-finite" in sol.detail
    assert 1.49 < sol.t_reached < 1.5 and np.isfinite(sol.y).all()
    start = integrate(RungeKutta(_walls, "rk4"), np.full(1, 2.0), np.array([0.0, 1.0]),
                      controller=ConstantStep(0.1), output=lambda k, t, y, c: None)
    assert start.reason is StopReason.OVERFLOW and start.t_reached == 0.0
    assert "at the start" in start.detail
