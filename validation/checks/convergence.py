"""Mean-field convergence: particles against the PDE (docs/equations.md section 6), and the PDE's own
numerical convergence (docs/equations.md section 3).

.. autosummary::
   check_circle_iid
   check_circle_quantile
   check_circle_time
   check_sphere_iid
   check_zonal_iid
   check_pde_self_convergence
   check_pde_self_convergence_sphere

Every check follows the convention of :mod:`validation.checks`:
``check(*, seed, out_dir, suite) -> CheckResult``. Statistical laws are tested by fitted
slopes with confidence intervals, never by single numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy import special, stats

from meanfield import theory
from meanfield.integrate import setting_of
from meanfield.plots.figures import angle_axis, plain_log_ticks, subplots
from validation.checks.common import (
    CI_LEVEL,
    angle_histogram_panel,
    fit_power_law,
    geometric_sizes,
    iid_distances,
    loglog_panel,
    particles_at,
    save_figure,
    slope_ci,
)
from validation.records import CheckResult, Comparison
from validation.suites import check

# -- the model and initial density of the circle checks -----------------------------------

FIELD_METHOD = "fast"
"""How the circle checks' particles sum their field (``particles.simulate``'s
``field_method``): the fast field of :mod:`meanfield.kernels.fastsum` (issue 23), relative error per
point ``<= 1e-12``, far below every sampling error these checks measure. Its RK4 stage points
off the circle are evaluated at ``x/|x|`` (the direct sum at ``x``), a difference of RK4's
order: seed 0, quick, every slope and ``z`` is the same to the 6 digits printed as with the
direct sum. Measured (2 cores shared, load ~11, CPU s): circle.meanfield_time 8.1 -> 4.8,
circle.meanfield_iid 10.5 -> 7.6, circle.meanfield_quantile 2.8 -> 2.0 (their particle
systems, ``n`` up to 500-3000 and batches of 8-32, are where the fast field pays on S^1); with
small transforms on one thread (``meanfield.kernels.fastsum.CIRCLE_ONE_THREAD``) the wall times under
that load went 38 -> 13 s (iid), 21 -> 8.4 s (time), 10 -> 4.1 s (quantile). On
S^2 the fast field does not pay at these ``n`` (sphere.meanfield_iid 4.8 -> 4.3, within the
noise): the sphere checks keep ``auto``."""


def _circle_setup(suite: str) -> dict[str, Any]:
    from meanfield import Circle, Model

    quick = suite == "quick"
    return {
        "model": Model(beta=1.0, attention="softmax"),
        "domain": Circle(64),
        "t": 1.0,
        "n": geometric_sizes(10, 1000, 7) if quick else geometric_sizes(10, 3000, 9),
        "seeds": 8 if quick else 16,
        "dt": 0.05,
        "field_method": FIELD_METHOD,
    }


def _histogram_panel(ax: Any, domain: Any, snap: tuple, t_end: float) -> None:
    """PDE density against the particles' histogram at ``t = 0`` and ``t_end``."""
    rho0, x0, rho_t, grid_t, xt = snap
    for (grid, rho, x, t, col) in ((domain.grid, rho0, x0, 0.0, "C0"), (grid_t, rho_t, xt, t_end, "C3")):
        th = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi).ravel()
        ax.hist(th, bins=48, range=(0, 2 * np.pi), density=True, alpha=0.35, color=col,
                label=f"particles t = {t:g} (n = {x.shape[-2]}, all seeds)")
        ax.plot(grid, rho, "-", color=col, lw=2, label=f"PDE t = {t:g}")
    angle_axis(ax.xaxis, r"$\theta$")
    ax.set_ylabel("density")
    ax.legend(fontsize=7)


@check("circle.meanfield_iid")
def check_circle_iid(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Mean-field convergence on the circle from i.i.d. starts: distance ~ ``n^{-1/2}``.

    SA, ``beta = 1``, ``rho_0 ∝ e^{cos theta}(1 + 0.3 sin 2 theta)``, PDE and particles to
    ``t = 1`` (a resolved time: the solver's monitor refines the grid as needed). For each
    ``n`` (7 values from 10 to 1000, quick; 9 up to 3000, full) and seed, ``W_1`` and the kernel
    distance ``||mu_n(t) - mu(t)||_beta`` (docs/equations.md section 6).

    Law: i.i.d. starts give ``E ||mu_n(0) - mu||^2 = (e^beta - iint K dmu dmu)/n`` exactly,
    and the flow is Lipschitz on bounded times (Dobrushin), so both distances scale like
    ``n^{-1/2}`` at fixed ``t``.

    Tolerance: the 99% confidence interval of the fitted log–log slope must contain
    ``-1/2`` (sampling error only). The deterministic errors are far below the smallest
    distance (~0.01 at n = 1000): PDE tolerance 1e-10, RK4 with ``dt = 0.05`` (error
    ~1e-6), kernel truncation at ``|k| < N/2`` (``I_32(1) ~ 1e-44``).
    """
    setup = _circle_setup(suite)
    dist = iid_distances(setup, seed)
    n = setup["n"]
    nn = np.repeat(n[:, None], dist["w1"].shape[1], 1)
    fits = {k: fit_power_law(nn, dist[k]) for k in ("w1", "kernel")}
    fig, (ax, ax2) = subplots(1, 2, figsize=(12, 4.5))
    _histogram_panel(ax2, setup["domain"], dist["snapshots"], setup["t"])
    loglog_panel(ax, n, dist["w1"], fits["w1"], -0.5, "W_1", "C0")
    loglog_panel(ax, n, dist["kernel"], fits["kernel"], -0.5, "kernel distance", "C1")
    ax.set_xlabel("n (particles)")
    ax.set_ylabel(f"distance to the PDE at t = {setup['t']}")
    ax.set_title("circle, i.i.d. start: slope -1/2 expected (dashed)")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "circle_iid")
    data = xr.Dataset(
        {"w1": (("n", "seed"), dist["w1"]), "kernel_distance": (("n", "seed"), dist["kernel"])},
        coords={"n": n, "seed": np.arange(dist["w1"].shape[1])},
        attrs={"model": setup["model"].to_json(), "t": setup["t"], "ci_level": CI_LEVEL},
    )
    return CheckResult(
        name="circle.meanfield_iid",
        quantity="log-log slope of W_1 and kernel distance vs n (i.i.d. start, t = 1)",
        comparisons=(slope_ci("W_1", fits["w1"]), slope_ci("kernel distance", fits["kernel"])),
        description=f"-1/2 inside both {CI_LEVEL:.0%} CIs of the fitted slopes",
        details={"fit_w1": fits["w1"], "fit_kernel": fits["kernel"], "n": n.tolist(),
                 "seeds": int(setup["seeds"])},
        data=data,
        figure=figure,
    )


@check("circle.meanfield_quantile")
def check_circle_quantile(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Deterministic-quantile start on the circle: ``W_1 ~ n^{-1}``, steeper than i.i.d.

    Same model, density and time as :func:`check_circle_iid`; ``x_i(0) = F^{-1}((i+1/2)/n)``.
    The particle system transports the quantiles (it keeps the order on the circle) along
    the PDE's characteristics, so ``mu_n(t)`` stays a midpoint-rule discretisation of
    ``mu(t)``: ``W_1(mu_n(t), mu(t)) = C(t)/n + O(n^{-2})`` (each of the ``n`` cells carries
    an error ``~ 1/(4 n^2 rho)`` in ``int |F - F_n|``). The kernel distance, a smooth
    functional, converges faster still (midpoint rule on a smooth periodic integrand).

    Tolerance: no randomness, so the slope is tested against ``-1`` with the bound
    ``0.05`` on its deviation: the ``O(n^{-2})`` correction changes the local slope by
    ``~ c/n`` relative, at most ``0.05`` for ``n >= 10`` with ``|c| <= 0.5`` (it is the
    midpoint rule's ``1/24``-type constant times the density's variation). It must also be
    steeper than the i.i.d. upper confidence bound ``-1/2``.
    """
    setup = _circle_setup(suite)
    dist = iid_distances(setup, seed, quantile=True)
    n = setup["n"]
    w1 = dist["w1"][:, 0]
    slope, intercept = np.polyfit(np.log(n), np.log(w1), 1)
    local = np.diff(np.log(w1)) / np.diff(np.log(n))
    fig, ax = subplots(figsize=(6, 4.5))
    ax.loglog(n, w1, "o-", label=f"W_1, fitted slope {slope:.3f}")
    ax.loglog(n, dist["kernel"][:, 0], "s-", label="kernel distance")
    ax.loglog(n, w1[0] * (n / n[0]) ** -1.0, "--", color="gray", label="slope -1")
    ax.loglog(n, w1[0] * (n / n[0]) ** -0.5, ":", color="gray", label="slope -1/2 (i.i.d.)")
    ax.set_xlabel("n (particles)")
    ax.set_ylabel(f"distance to the PDE at t = {setup['t']}")
    ax.set_title("circle, quantile start")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "circle_quantile")
    data = xr.Dataset({"w1": ("n", w1), "kernel_distance": ("n", dist["kernel"][:, 0])},
                      coords={"n": n}, attrs={"model": setup["model"].to_json(), "t": setup["t"]})
    return CheckResult(
        name="circle.meanfield_quantile",
        quantity="log-log slope of W_1 vs n (quantile start, t = 1)",
        # |slope + 1| <= 0.05 implies slope < -1/2: the second comparison documents the law
        comparisons=(Comparison("W_1 log-log slope", slope, -1.0, 0.05, "abs"),
                     Comparison("W_1 log-log slope steeper than i.i.d.", slope, -0.5, 0.0, "max")),
        description="-1 (steeper than -1/2); |slope + 1| <= 0.05",
        details={"slope": float(slope), "local_slopes": local.tolist(), "n": n.tolist()},
        data=data,
        figure=figure,
    )


def _growth_rates(model: Any, kmax: int) -> np.ndarray:
    """``gamma_k`` on the circle (docs/equations.md section 3), ``k = 0..kmax``."""
    return np.asarray(theory.growth_rate(2, model.attention, model.beta, np.arange(kmax + 1),
                                         sign=model.sign, noise=model.noise))


@check("circle.meanfield_time")
def check_circle_time(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Convergence in time at fixed ``n``: the distance grows like the linearised flow.

    SA, ``beta = 4`` on the circle (``gamma_max = gamma_3 = 0.66439``), i.i.d. uniform start,
    ``n = 500`` (quick) or ``2000`` (full), 16 or 32 seeds. The PDE stays at the uniform
    steady state, while the particles' fluctuations ``c_k = (1/(2 pi n)) sum e^{-ik theta_i}``
    grow at the linear rates: ``E|c_k(0)|^2 = 1/(4 pi^2 n)`` and ``c_k(t) ~ c_k(0) e^{gamma_k t}``,
    hence (docs/equations.md sections 3 and 6)

        E ||mu_n(t) - mu(t)||_beta^2 = (2/n) sum_{k>=1} I_k(beta) e^{2 gamma_k t},

    which tends to ``e^{2 gamma_max t}`` times a constant. The figure runs to ``t*/2`` with
    ``t* = ln(n)/(2 gamma_max)``, the time at which the fluctuation amplitude
    ``a(t) = e^{gamma_max t}/sqrt(n)`` (relative to the uniform density) reaches 1.

    Tolerance: the linearisation neglects terms of relative size ``a(t)^2`` (second order in
    the amplitude; the third moments of the empirical measure are ``O(1/n^2)``), so the
    test uses the times ``t <= t*/4`` only, where ``a^2 <= n^{-3/4}`` (1% at n = 500). At
    each of those 3 times the mean of ``d^2`` over the seeds must be within ``z = 2.94``
    standard errors of the prediction (99% two-sided, Bonferroni over 3 times); the
    standard error is the seeds' sample standard deviation over ``sqrt(S)``, with
    ``a(t)^2`` times the prediction added in quadrature for the neglected term.

    RK4 step ``0.1`` (quick) or ``0.05`` (full): the step's error is far below the seeds'
    spread (seed 0, quick: every ``z`` moves by at most ``5e-6`` from ``dt = 0.05`` to
    ``0.1``), and the larger step saves a third of the check's cost (9.6 to 6.5 s of CPU).
    """
    import particles
    from meanfield import Circle, Model, solve
    from meanfield.metrics import kernel_distance_particles, w1_density_particles

    quick = suite == "quick"
    model = Model(beta=4.0, attention="softmax")
    domain = Circle(32)
    n, S = (500, 16) if quick else (2000, 32)
    gam = _growth_rates(model, domain.N // 2)
    gmax = float(gam.max())
    t_star = math.log(n) / (2 * gmax)
    times = np.linspace(0.0, 0.5 * t_star, 7)
    tested = (times > 0) & (times <= 0.25 * t_star * (1 + 1e-9))
    rng = np.random.default_rng(seed)
    x0 = particles.sample_sphere(n, 2, rng, batch=S)
    xs = particles.simulate(model, x0, times, method="rk4", dt=0.1 if quick else 0.05,
                            observables=False, field_method=FIELD_METHOD)["x"].values
    pde = solve(model, domain, domain.uniform(), times, rtol=1e-10, atol=1e-13)
    d2 = np.empty((times.size, S))
    w1 = np.empty((times.size, S))
    for i in range(times.size):
        rho = pde["density"].values[i]
        d2[i] = np.asarray(kernel_distance_particles(domain, rho, xs[i], model.beta)) ** 2
        w1[i] = w1_density_particles(domain, rho, xs[i])
    k = np.arange(1, domain.N // 2)
    pred = np.array([(2.0 / n) * np.sum(special.iv(k, model.beta) * np.exp(2 * gam[1:-1] * t))
                     for t in times])
    mean = d2.mean(axis=1)
    amp2 = np.exp(2 * gmax * times) / n
    se = np.sqrt((d2.std(axis=1, ddof=1) / math.sqrt(S)) ** 2 + (amp2 * pred) ** 2)
    z = (mean - pred) / se
    zcrit = float(stats.norm.ppf(1 - 0.01 / (2 * int(tested.sum()))))
    fig, ax = subplots(figsize=(6, 4.5))
    ax.semilogy(times, np.sqrt(mean), "o-", label="RMS kernel distance (particles vs PDE)")
    ax.fill_between(times, np.sqrt(np.maximum(mean - zcrit * se, 1e-300)), np.sqrt(mean + zcrit * se),
                    alpha=0.2)
    ax.semilogy(times, np.sqrt(pred), "k--", label="linear theory (2/n) sum I_k e^{2 gamma_k t}")
    ax.semilogy(times, math.sqrt(pred[0]) * np.exp(gmax * times), ":", color="gray",
                label=f"e^(gamma_max t), gamma_max = {gmax:.5f}")
    ax.semilogy(times, np.sqrt(np.mean(w1**2, axis=1)), "s-", alpha=0.7, label="RMS W_1")
    ax.set_xlabel("t")
    ax.set_ylabel("distance")
    ax.axvline(0.25 * t_star, color="gray", lw=0.8)
    ax.set_title(f"circle, SA beta = 4, uniform start, n = {n} (tested t <= t*/4 = {0.25 * t_star:.2f})")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "circle_time")
    data = xr.Dataset(
        {"kernel_distance_sq": (("time", "seed"), d2), "w1": (("time", "seed"), w1),
         "prediction_sq": ("time", pred), "z": ("time", z)},
        coords={"time": times, "seed": np.arange(S)},
        attrs={"model": model.to_json(), "n": n, "gamma_max": gmax, "t_star": t_star},
    )
    return CheckResult(
        name="circle.meanfield_time",
        quantity=f"mean squared kernel distance vs t at n = {n}, against linear theory",
        comparisons=tuple(Comparison(f"t = {t:.3f}: z of mean d^2 vs linear theory", zt, 0.0, zcrit, "abs")
                          for t, zt in zip(times[tested], z[tested])),
        description=(f"(2/n) sum_k I_k(beta) e^{{2 gamma_k t}} (~ e^{{2 gamma_max t}}); "
                     f"|z| <= {zcrit:.2f} at every t in (0, t*/4]"),
        details={"z": z.tolist(), "times": times.tolist(), "gamma_max": gmax, "t_star": t_star,
                 "ratio_measured_to_predicted": (mean / pred).tolist()},
        data=data,
        figure=figure,
    )


def _sphere_like_iid(name: str, domain: Any, model: Any, rho0: np.ndarray, t_end: float,
                     ns: np.ndarray, S: int, seed: int, out_dir: Path, method: str) -> CheckResult:
    """Shared body of the S^2 and zonal i.i.d. checks (kernel distance only)."""
    from meanfield import solve
    from meanfield.io import domain_of
    from meanfield.metrics import kernel_distance_particles

    ds = solve(model, domain, rho0, [0.0, t_end], rtol=1e-10, atol=1e-13)
    fdom = domain_of(ds)
    c_t = fdom.forward(ds["density"].values[-1])
    rng = np.random.default_rng(seed)
    kd = np.empty((ns.size, S))
    for i, n in enumerate(ns):
        x0 = np.stack([domain.sample(rho0, int(n), rng) for _ in range(S)])
        xt = particles_at(model, x0, t_end, 0.05)
        kd[i] = kernel_distance_particles(fdom, c_t, xt, model.beta, method=method, kind="coefficients")
    nn = np.repeat(ns[:, None], S, 1)
    fit = fit_power_law(nn, kd)
    fig, (ax, ax2) = subplots(1, 2, figsize=(12, 4.5))
    angle_histogram_panel(ax2, ((domain, domain.forward(rho0), x0, 0.0),
                                 (fdom, c_t, xt, t_end)))
    loglog_panel(ax, ns, kd, fit, -0.5, "kernel distance", "C1")
    ax.set_xlabel("n (particles)")
    ax.set_ylabel(f"kernel distance to the PDE at t = {t_end}")
    ax.set_title(f"{domain!r}, i.i.d. start: slope -1/2 expected (dashed)")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, name.replace(".", "_"))
    data = xr.Dataset({"kernel_distance": (("n", "seed"), kd)}, coords={"n": ns, "seed": np.arange(S)},
                      attrs={"model": model.to_json(), "domain": domain.state_json(), "t": t_end})
    return CheckResult(
        name=name,
        quantity=f"log-log slope of the kernel distance vs n on {domain!r} (i.i.d. start, t = {t_end})",
        comparisons=(slope_ci("kernel distance", fit),),
        description=f"-1/2 inside the {CI_LEVEL:.0%} CI of the fitted slope",
        details={"fit_kernel": fit, "n": ns.tolist(), "seeds": S},
        data=data,
        figure=figure,
    )


@check("sphere.meanfield_iid")
def check_sphere_iid(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Mean-field convergence on ``S^2``: kernel distance ~ ``n^{-1/2}`` (i.i.d. start).

    SA, ``beta = 1``, ``rho_0`` a von Mises–Fisher mixture (``kappa = 2`` and ``1``),
    ``Sphere(lmax = 32)`` with refinement allowed, ``t = 0.5``; ``n`` from 10 to 1000
    (6 values, quick) or 3000 (8, full). Same law and tolerance as
    :func:`check_circle_iid`: the 99% CI of the slope must contain ``-1/2``. Truncating the
    kernel distance at ``l <= lmax`` drops ``sum_{l>32} (2l+1) i_l(1)``, below 1e-40.
    """
    from meanfield import Model, initial
    from meanfield.domains.sphere import Sphere

    dom = Sphere(32)
    model = Model(beta=1.0, attention="softmax")
    rho0 = initial.von_mises(dom, [[0, 0, 1], [1, 0, 0]], [2.0, 1.0], [0.7, 0.3])
    quick = suite == "quick"
    ns = geometric_sizes(10, 1000, 6) if quick else geometric_sizes(10, 3000, 8)
    return _sphere_like_iid("sphere.meanfield_iid", dom, model, rho0, 0.5, ns, 6 if quick else 12,
                            seed, out_dir, "project")


@check("zonal.meanfield_iid", suites=("full",))
def check_zonal_iid(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Mean-field convergence on ``S^{d-1}``, ``d = 8`` (axisymmetric density, ZonalSphere).

    SA, ``beta = 1``, ``rho_0 ∝ exp(2 <x, e>)``, ``ZonalSphere(8, 32)``, ``t = 0.5``; tokens
    in ``R^8``. The kernel distance is computed exactly from the particles' Gram matrix
    (``method="exact"``): the zonal basis sees only the rotation-averaged empirical measure,
    while ``mu_n`` is not axisymmetric. Law and tolerance as :func:`check_circle_iid`.
    """
    from meanfield import Model
    from meanfield.domains.zonal_sphere import ZonalSphere

    dom = ZonalSphere(8, 32)
    model = Model(beta=1.0, attention="softmax")
    s = dom.grid
    rho0 = np.exp(2.0 * (s - 1.0))
    rho0 = rho0 / dom.integrate(rho0)
    quick = suite == "quick"
    ns = geometric_sizes(10, 1000, 6) if quick else geometric_sizes(10, 3000, 8)
    return _sphere_like_iid("zonal.meanfield_iid", dom, model, rho0, 0.5, ns, 6 if quick else 12,
                            seed, out_dir, "exact")


def _resolution_criteria(ds: xr.Dataset, model: Any, domain: Any, rho0: Any, times: np.ndarray
                         ) -> tuple[np.ndarray, list[float], bool, bool, list[Comparison]]:
    """``(errors, tails, lower_bound_ok, decreasing, comparisons)`` of a resolution study at
    the last time.

    The truncated Galerkin solution at a level has no modes beyond that level's band, so its
    distance to the finest solution is at least the norm of the finest solution's modes
    there (an exact lower bound, to ``1e-3`` relative); the differences must fall with each
    doubling until the round-off floor ``1e-12 ||rho||`` (pairs that start below the floor
    are not compared).
    """
    from meanfield import solve

    fine = domain.with_resolution(int(ds["resolution"].values[-1]))
    ref = solve(model, fine, rho0, times, rtol=float(ds.attrs["rtol"]), atol=float(ds.attrs["atol"]),
                max_resolution=fine.resolution, tail_tol=1e-2, throw=False)
    cf = fine.forward(ref["density"].values[-1])
    norm = math.sqrt(max(fine.inner(cf, cf), 0.0))
    tails = []
    for r in ds["resolution"].values[:-1]:
        band = float(np.max(domain.with_resolution(int(r)).degrees))
        high = np.where(fine.degrees > band, cf, 0.0)
        tails.append(math.sqrt(max(fine.inner(high, high), 0.0)))
    err = ds["error_resolution"].values[:-1, -1]
    diff = ds["difference_resolution"].values[:-1, -1]
    lower_ok = bool(np.all(np.isfinite(err)) and np.all(err >= (1 - 1e-3) * np.array(tails)))
    decreasing = all(not (a > 1e-12 * norm) or b < a for a, b in zip(diff[:-1], diff[1:]))
    res = ds["resolution"].values
    comparisons = [Comparison(f"resolution {int(r)}: error to finest >= spectral tail",
                              e if np.isfinite(e) else math.nan, t, 1e-3 * t, "min")  # inf fails too
                   for r, e, t in zip(res[:-1], err, tails)]
    comparisons += [Comparison(f"difference {int(r1)}->{int(r2)} below {int(r0)}->{int(r1)}", b, a, 0.0,
                               "max")
                    for r0, r1, r2, a, b in zip(res[:-2], res[1:-1], res[2:], diff[:-1], diff[1:])
                    if a > 1e-12 * norm]
    return err, tails, lower_ok, bool(decreasing), comparisons


@check("pde.self_convergence")
def check_pde_self_convergence(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Numerical convergence of the PDE (:func:`meanfield.spectral.convergence.self_convergence`).

    SA, ``beta = 4``, ``rho_0 ∝ e^{cos theta}(1 + 0.3 sin 3 theta)`` on the circle to
    ``t = 1.2``; resolutions ``N = 32 .. 256`` (``rtol = 1e-10``); tolerances ``1e-6 .. 1e-10``
    at ``N = 32`` (looser ones are step-limited by stability, not accuracy: the step count
    hardly changes from 1e-4 to 1e-5, so they are outside the asymptotic regime). Monitor
    threshold ``tail_tol = 1e-2`` so that coarse runs continue and show their error.

    Expected and tolerances:

    * resolution: the truncated Galerkin solution has no modes ``|k| >= N/2``, so its error
      is at least the ``L^2`` norm of the finest solution's modes there (an exact lower
      bound, checked to ``1e-3`` relative); and the differences decrease with every
      doubling until they reach the round-off floor ``1e-12 ||rho||`` (spectral accuracy).
    * tolerance: error-per-step control of Dormand–Prince 5(4) gives step ``h ∝ tol^{1/5}``
      and local error ``∝ tol^{6/5}`` (local extrapolation) or ``tol`` (if the estimate
      were sharp), so the global error scales like ``tol^q`` with ``q`` between ``4/5`` and
      ``6/5`` (Hairer–Nørsett–Wanner I, II.4); the least-squares slope of the successive
      differences against ``rtol`` must lie there.
    """
    from meanfield import Circle, Model
    from meanfield.spectral.convergence import convergence_table, self_convergence

    model = Model(beta=4.0, attention="softmax")
    domain = Circle(32)
    times = np.linspace(0.0, 1.2, 4)

    def rho0(th: np.ndarray) -> np.ndarray:
        return np.exp(np.cos(th)) * (1.0 + 0.3 * np.sin(3.0 * th))

    tols = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10)
    ds = self_convergence(model, domain, rho0, times, levels=4, tolerances=tols,
                          tolerance_resolution=32, tail_tol=1e-2)
    err, tails, lower_ok, decreasing, comparisons = _resolution_criteria(ds, model, domain, rho0, times)
    dq = ds["difference_tolerance"].values[:-1, -1]
    q_tight = float(np.polyfit(np.log(np.asarray(tols[:-1])), np.log(dq), 1)[0])
    comparisons.append(Comparison("order of the error in rtol", q_tight, 1.0, 0.2, "abs"))
    figure = _self_convergence_figure(ds, err, tails, float(times[-1]), out_dir)
    table = convergence_table(ds, time=float(times[-1]))
    ds.attrs["table"] = table
    return CheckResult(
        name="pde.self_convergence",
        quantity="PDE self-convergence (circle, SA beta=4, t=1.2): N doubling and rtol tightening",
        comparisons=tuple(comparisons),
        description=("errors >= spectral tail (to 1e-3) and decreasing to round-off; "
                     "tolerance order in [4/5, 6/5]"),
        details={"table": table, "tails": tails, "lower_bound_ok": lower_ok,
                 "decreasing": decreasing, "tolerance_order": q_tight},
        data=ds,
        figure=figure,
    )


def _resolution_panel(ax: Any, ds: xr.Dataset, err: np.ndarray, tails: Sequence[float], t_end: float,
                      resolution: str, band: str) -> None:
    """The L2 error to the finest grid against the resolution (log 2 axis, ticks at the
    resolutions), with the finest grid's spectral tail beyond ``band`` (a lower bound)."""
    N = ds["resolution"].values[:-1]
    ax.semilogy(N, err, "o-", label="error to finest")
    ax.semilogy(N, tails, "s--", label=f"tail of finest beyond {band} (lower bound)")
    ax.set_xscale("log", base=2)
    plain_log_ticks(ax.xaxis, N)
    ax.set_xlabel(resolution)
    ax.set_ylabel(f"L2 error to the finest grid at t = {t_end:g}")
    ax.set_title(f"resolution doubling (rtol = {ds.attrs.get('rtol', 1e-10):g})", fontsize=10)
    ax.legend(fontsize=7)


def _self_convergence_figure(ds: xr.Dataset, err: np.ndarray, tails: Sequence[float], t_end: float,
                             out_dir: Path) -> str:
    """Left: the L2 error to the finest grid against ``N`` (and the finest grid's spectral
    tail, a lower bound); right: the error to the tightest ``rtol`` against ``rtol``, both at
    ``t_end`` (a :func:`meanfield.spectral.convergence.self_convergence` Dataset ``ds``)."""
    fig, (a1, a2) = subplots(1, 2, figsize=(10, 4))
    N = ds["resolution"].values[:-1]
    _resolution_panel(a1, ds, err, tails, t_end, "N (grid points)", "the band")
    tt = ds["tolerance"].values
    a2.loglog(tt[:-1], ds["error_tolerance"].values[:-1, -1], "o-", label="error to tightest")
    a2.loglog(tt, ds["error_tolerance"].values[-2, -1] * tt / tt[-2], "--", color="gray", label="slope 1")
    a2.set_xlabel("rtol")
    a2.set_ylabel(f"L2 error to the tightest rtol at t = {t_end:g}")
    a2.set_title(f"tolerance tightening (N = {int(setting_of(ds, 'tolerance_resolution', N[0]))})",
                 fontsize=10)
    a2.legend(fontsize=7)
    return save_figure(fig, out_dir, "pde_self_convergence")


@check("pde.self_convergence_sphere", suites=("full",))
def check_pde_self_convergence_sphere(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Numerical convergence of the PDE on ``S^2`` under ``lmax`` doubling (8 .. 64).

    SA, ``beta = 2``, ``rho_0 ∝ e^{cos theta}(1 + 0.3 sin^2 theta cos 2 phi)`` (not
    axisymmetric), ``t = 0.9`` (``lmax = 8`` stays resolved to 0.98), ``rtol = 1e-10``,
    monitor ``tail_tol = 1e-2``. Criteria and
    tolerances of the resolution study as in :func:`check_pde_self_convergence` (exact
    lower bound by the spectral tail to ``1e-3``; differences decreasing until
    ``1e-12 ||rho||``). The tolerance study uses the same integrator as on the circle and is
    tested there; here it is reported only.
    """
    from meanfield import Model
    from meanfield.domains.sphere import Sphere
    from meanfield.spectral.convergence import convergence_table, self_convergence

    model = Model(beta=2.0, attention="softmax")
    domain = Sphere(8)
    times = np.linspace(0.0, 0.9, 3)

    def rho0(th: np.ndarray, ph: np.ndarray) -> np.ndarray:
        return np.exp(np.cos(th)) * (1.0 + 0.3 * np.sin(th) ** 2 * np.cos(2.0 * ph))

    ds = self_convergence(model, domain, rho0, times, levels=4, tolerances=(1e-6, 1e-7, 1e-8, 1e-9),
                          tail_tol=1e-2)
    err, tails, lower_ok, decreasing, comparisons = _resolution_criteria(ds, model, domain, rho0, times)
    fig, ax = subplots(figsize=(5.5, 4))
    _resolution_panel(ax, ds, err, tails, float(times[-1]), "lmax", "lmax")
    figure = save_figure(fig, out_dir, "pde_self_convergence_sphere")
    table = convergence_table(ds, time=float(times[-1]))
    ds.attrs["table"] = table
    return CheckResult(
        name="pde.self_convergence_sphere",
        quantity="PDE self-convergence on S^2 (SA beta=2, t=0.9): lmax doubling",
        comparisons=tuple(comparisons),
        description="errors >= spectral tail (to 1e-3) and decreasing to round-off",
        details={"table": table, "tails": tails, "lower_bound_ok": lower_ok, "decreasing": decreasing},
        data=ds,
        figure=figure,
    )


__all__ = [
    "check_circle_iid",
    "check_circle_quantile",
    "check_circle_time",
    "check_pde_self_convergence",
    "check_pde_self_convergence_sphere",
    "check_sphere_iid",
    "check_zonal_iid",
]
