"""The "must show" list of issue 12 for the Lagrangian solver, at small sizes: agreement with
the spectral solver (circle, S^2) and the Gaussian ODE (R^2, R^3), the n^{-1/2} rate of the
particle system towards it for every attention variant, energy monotonicity, a run continued
past the spectral limit, and bad input. The computations are those of
``validation.checks.lagrangian_references`` (the checks of ``validation.checks.lagrangian`` run
them at full size)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from meanfield import Circle, Model, ResolutionError, nodes, solve, solve_lagrangian
from meanfield.metrics import weighted_kernel_distance
from validation.checks import lagrangian as lc
from validation.checks import lagrangian_references as lr


def _decay(sizes: list[int], errors: list[float]) -> tuple[float, float]:
    """Slope of log10(error) against the node count, and the orders of magnitude fallen."""
    e = np.log10(np.maximum(errors, 1e-300))
    return float(np.polyfit(sizes, e, 1)[0]), float(e[0] - e.min())


# -- 1. circle: spectral agreement and geometric decay --------------------------------------


@pytest.mark.parametrize(("attention", "beta", "t"), [("softmax", 4.0, 1.0), ("unnormalized", 2.0, 1.0)])
def test_circle_density_at_nodes_matches_the_spectral_solver(attention: str, beta: float, t: float) -> None:
    # measured: SA 5e-5, 2e-8, 5e-14; USA 3e-4, 4e-8, 1e-13 at N = 16, 32, 64. The spectral
    # reference is good to ~1e-10 (tail_tol), the time error ~1e-11: 1e-8 (issue 12) at N = 64,
    # and at least 4 orders of magnitude gained from N = 16 (trapezoid rule: e^{-aN})
    res = lr.circle_vs_spectral(Model(beta=beta, attention=attention), t, (16, 32, 64))
    slope, orders = _decay(res["N"], res["error"])
    assert res["error"][-1] <= 1e-8
    assert slope < 0 and orders >= 4


# -- 2. S^2 -------------------------------------------------------------------------------------


def test_sphere_density_at_nodes_matches_the_spectral_solver() -> None:
    # measured: 8e-5 at lmax = 4, 5e-9 at lmax = 8 (SA beta = 2, t = 1); 1e-6 asked at the
    # finer set; at least 3 orders gained (geometric convergence of Gauss-Legendre x trapezoid)
    with warnings.catch_warnings(record=True) as caught:  # the quadrature monitor's word only:
        warnings.simplefilter("always")  # 50 nodes (lmax = 4) warn at the start, P = 3.6e-3
        res = lr.sphere_vs_spectral(Model(beta=2.0), 1.0, (4, 8))  # (docs/lagrangian.md 10)
    assert all("no longer resolve the measure" in str(w.message) for w in caught)
    slope, orders = _decay(res["lmax"], res["error"])
    assert res["error"][-1] <= 1e-6
    assert slope < 0 and orders >= 3


def test_sphere_start_is_not_axisymmetric() -> None:
    # the must-show asks for a non-axisymmetric start: no axis leaves SPHERE_RHO0 invariant;
    # a rotation by 90 degrees about each coordinate axis changes it by O(0.1 / 4 pi)
    th = np.linspace(0.2, 2.9, 7)[:, None]
    ph = np.linspace(0.0, 6.0, 9)[None, :]
    base = lr.SPHERE_RHO0(th, ph)
    assert np.ptp(base - lr.SPHERE_RHO0(th, ph + np.pi / 2)) > 1e-3  # about z
    x, y, z = np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th) * np.ones_like(ph)
    for xr_, yr, zr in ((x, -z, y), (z, y, -x)):  # 90 degrees about x and about y
        colat, lon = np.arccos(np.clip(zr, -1, 1)), np.arctan2(yr, xr_)
        assert np.ptp(base - lr.SPHERE_RHO0(colat, lon)) > 1e-3


# -- 3. R^d: Gaussian invariance at density level ---------------------------------------------


@pytest.mark.parametrize("name", ["softmax", "multihead", "l2", "sinkhorn"])
def test_gaussian_nodes_follow_the_gaussian_ode_in_2d(name: str) -> None:
    # measured with 12 x 12 Gauss-Hermite nodes: mean/cov <= 1e-12, density (sup / peak)
    # <= 2e-12; the rule is exact to degree 23 and the field's integrands are entire
    res = lr.gaussian_vs_ode(lr.gaussian_models(2)[name], 2, 12)
    assert res["mean"] <= 1e-8 and res["cov"] <= 1e-8 and res["sup_density"] <= 1e-8


def test_gaussian_nodes_follow_the_gaussian_ode_in_3d() -> None:
    # measured with 8^3 nodes: 3e-9 (mean), 3.4e-9 (cov), 5e-9 (density, sup / peak): below
    # the 1e-8 of issue 12 (the full check uses 10^3 nodes: 3e-11)
    res = lr.gaussian_vs_ode(lr.gaussian_models(3)["softmax"], 3, 8)
    assert res["mean"] <= 1e-8 and res["cov"] <= 1e-8 and res["sup_density"] <= 1e-8


# -- 4. particles at rate n^{-1/2}, every variant; energy --------------------------------------

SMALL = {"sizes": (16, 32, 64, 128), "replicas": (16, 8, 4, 2)}


@pytest.mark.parametrize("name", list(lc.PARTICLE_CHECKS))
def test_particles_approach_the_lagrangian_solution_at_rate_one_half(name: str) -> None:
    # a 99.9% Student-t interval of the fitted slope over 30 samples must contain -1/2 (the
    # residuals are the log of sqrt(n) x a sampling error, n-independent in law); seeds fixed
    sizes = dict(SMALL, sizes=(16, 32, 64), replicas=(16, 8, 4)) if name == "sinkhorn" else SMALL
    res = lr.particle_rate(name, lr.particle_variants()[name], seed=1, level=0.999, **sizes)
    assert res["fit"]["lo"] <= -0.5 <= res["fit"]["hi"]


def test_the_rate_test_has_power_against_a_wrong_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    # particles against the solution from a wrong start (a von Mises bump instead of
    # CIRCLE_RHO0): the distance stalls at the O(1) gap between the two, the slope interval
    # lies above -1/2
    def wrong(name: str, model: Model) -> object:
        start = nodes.circle(lambda th: np.exp(3.0 * np.cos(th)), 64)
        return solve_lagrangian(model, start, [0.0, lr.PARTICLE_T], rtol=1e-9, atol=1e-11)

    monkeypatch.setattr(lr, "_reference", wrong)
    res = lr.particle_rate("softmax_qkv", lr.particle_variants()["softmax_qkv"], seed=1, level=0.999, **SMALL)
    assert res["fit"]["lo"] > -0.5


def test_causal_start_depends_on_the_label_and_sees_the_mask() -> None:
    # the causal check's start must make the mask matter: its solution differs from the
    # unmasked flow of the same nodes by far more than the label quadrature's error (4e-4)
    model = lr.particle_variants()["causal"]
    nd = lr.causal_nodes(16, 16)
    t = [0.0, 1.0]
    masked = solve_lagrangian(model, nd, t, scheme="rk4", dt=0.1)
    unlabelled = nodes.Nodes(nd.x, nd.weights, nd.density, "sphere")
    plain = solve_lagrangian(model.replace(causal=False), unlabelled, t, scheme="rk4", dt=0.1)
    gap = weighted_kernel_distance(masked["x"].values[-1], masked["weight"].values,
                                   plain["x"].values[-1], plain["weight"].values)
    assert gap > 1e-2


@pytest.mark.parametrize(("attention", "beta"), [("softmax", 4.0), ("unnormalized", 1.0)])
@pytest.mark.parametrize("value", [1, -1])
def test_energy_is_monotone_and_equals_the_spectral_energy(attention: str, beta: float, value: int) -> None:
    # E never decreases for V = +I, never increases for V = -I (docs/equations.md section 3):
    # steps in that direction >= -1e-12 |E| (round-off); the energy at t = 1 against the
    # spectral solver's to 1e-9 relative (both spectrally accurate; measured <= 3e-10)
    model = Model(beta=beta, attention=attention, value=value)
    times = np.linspace(0.0, 1.0, 11)
    lag = solve_lagrangian(model, nodes.circle(lr.CIRCLE_RHO0, 48), times, rtol=1e-10, atol=1e-12)
    e = lag["energy"].values
    assert np.min(value * np.diff(e)) >= -1e-12 * np.max(np.abs(e))
    ref = solve(model, Circle(64), lr.CIRCLE_RHO0, [0.0, 1.0], rtol=1e-12, atol=1e-16)
    assert e[-1] == pytest.approx(float(ref["energy"].values[-1]), rel=1e-9)


# -- 5. past the spectral limit -----------------------------------------------------------------


def test_continued_run_conserves_mass_and_matches_particle_cluster_masses() -> None:
    # the two-line recipe (nodes.from_dataset at 128 nodes, then solve_lagrangian); 64 nodes
    # would under-resolve the hand-over density (its Fourier series turns negative)
    res = lr.cluster_masses_vs_particles(resolution=128, n=300, replicas=1, seed=0, t_final=6.0)
    assert res["spectral_t_stop"] < 6.0  # solve raised ResolutionError
    assert res["t_reached"] == pytest.approx(6.0, rel=1e-12)
    assert res["mass_error"] <= 1e-12  # weights never change; the sum rounds at n eps
    p = np.array(res["lagrangian_masses"])
    assert p.size == 3 and p.sum() > 0.97  # the three bumps; stray nodes hold the rest
    # binomial: which cluster a token joins is decided by the basin of its start; 4.5 sd
    # keeps the three comparisons' false-alarm rate below 1e-4
    sd = np.sqrt(p * (1 - p) / 300)
    assert np.all(np.abs(np.array(res["particle_masses"][0]) - p) <= 4.5 * sd)


def test_the_continuation_start_defeats_the_spectral_solver() -> None:
    with pytest.raises(ResolutionError):
        solve(Model(beta=9.0), Circle(64), lr.lumpy_circle, [0.0, 6.0])


# -- 6. bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "field", "call"), lc.bad_inputs(), ids=[b[0] for b in lc.bad_inputs()])
def test_bad_input_is_refused_naming_the_field(what: str, field: str, call: object) -> None:
    with pytest.raises(ValueError, match=field):
        call()  # type: ignore[operator]
