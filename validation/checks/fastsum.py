"""What fast summation of the field makes possible (issue 23, item 4; docs/particles.md, section
"Fast field"): a mean-field convergence study on ``S^2`` up to a million particles, and a
Lagrangian run on ``S^2`` through clustering with ``2 10^5`` nodes against particles.

.. autosummary::
   SPHERE_MILLION
   sphere_million
   check_sphere_million
   LUMPY_SPHERE
   lumpy_sphere_rho0
   lagrangian_clusters_sphere
   check_lagrangian_clusters_sphere
   HANDOVER_SPHERE
   handover_sphere
   check_handover_sphere

Both run with ``method="fast"`` / ``field_method="fast"`` (:mod:`meanfield.kernels.fastsum`): with the
direct ``O(n^2)`` sum they would take hours on 2 cores (65 536 tokens: 22.5 s per velocity).
Every check follows the convention of :mod:`validation.checks`; both are in the full suite.
"""

from __future__ import annotations

import json
import math
import time as _time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr
from scipy import stats

from meanfield.kernels.fastsum import FIELD_TOL
from meanfield.plots.figures import subplots
from validation.checks.common import (
    CI_LEVEL,
    angle_histogram_panel,
    fit_power_law,
    geometric_sizes,
    loglog_panel,
    save_figure,
    slope_ci,
)
from validation.records import CheckResult, Comparison
from validation.suites import check

# -- a million particles against the PDE ---------------------------------------------------

SPHERE_MILLION: dict[str, Any] = {
    "beta": 2.0,
    "t": 0.5,
    "dt": 0.05,
    "lmax": 32,
    "n": tuple(int(v) for v in geometric_sizes(1e3, 1e6, 7)),
    "seeds": (8, 8, 8, 6, 4, 3, 2),
}
"""The study of :func:`check_sphere_million`: SA ``beta = 2``, ``t = 0.5``, RK4 ``dt = 0.05``,
``Sphere(32)``; ``n`` from ``10^3`` to ``10^6`` (7 sizes, half a decade apart) with fewer
seeds at large ``n`` (each size's error is then known to a similar fraction of the fit's
interval: 39 samples)."""


def _million_rho0(dom: Any) -> np.ndarray:
    """The smooth start of ``sphere.meanfield_iid``: a von Mises–Fisher mixture (``kappa`` 2
    and 1, centres the pole and ``e_1``), not axisymmetric."""
    from meanfield import initial

    return initial.von_mises(dom, [[0, 0, 1], [1, 0, 0]], [2.0, 1.0], [0.7, 0.3])


FIELD_ERROR_MAX = 1e-6
"""Largest error estimate of the fast field accepted over a run of :func:`fast_rk4` (relative
to ``|F| <= 1``): a field error ``delta`` moves a token by at most ``delta t e^{L t}`` (``L
<= 2 beta + 1`` the field's Lipschitz constant), below ``1e-4`` at ``t = 0.5``, ``beta = 2``,
while the smallest distance measured is ~``1e-3``."""


def fast_rk4(model: Any, x0: np.ndarray, t: float, dt: float) -> tuple[np.ndarray, float]:
    """Tokens ``x0`` (B, n, 3) at time ``t`` under the particle system (docs/equations.md section 2)
    by RK4 with step ``dt`` (:mod:`meanfield.integrate`, projected onto the sphere after each
    step, as ``particles.simulate(method="rk4")``), the field by
    :func:`meanfield.kernels.fastsum.fast_field` *without* the direct recomputation of the points over
    its tolerance; returns the positions and the largest error estimate over every
    evaluation, which the caller bounds. (The recomputation is ``O(n)`` per point: at the
    default ``tol = 1e-12`` it takes every point whose ``Z`` is below ``0.72 max Z``, which
    after a few steps from a non-uniform start is a large share of ``10^6`` tokens.)"""
    from meanfield.integrate import ConstantStep, RungeKutta, integrate
    from meanfield.kernels import fastsum
    from particles.integrators import normalize_rows

    worst = [0.0]

    def rhs(y: np.ndarray) -> np.ndarray:
        v, _, settings = fastsum.fast_field(model, y, y, None, divergence=False)
        worst[0] = max(worst[0], settings.error_estimate)
        return v

    sol = integrate(RungeKutta(rhs, "rk4", project=normalize_rows), np.asarray(x0, dtype=float),
                    np.array([0.0, t]), controller=ConstantStep(dt), output=lambda *a: None)
    if not sol.successful:
        msg = f"fast_rk4: the run stopped at t = {sol.t_reached}: {sol.message}"
        raise RuntimeError(msg)
    return np.asarray(sol.y), worst[0]


def sphere_million(*, n: Sequence[int], seeds: Sequence[int], seed: int, beta: float = 2.0,
                   t: float = 0.5, dt: float = 0.05, lmax: int = 32, pde_beta: float | None = None,
                   method: str = "fast") -> dict[str, Any]:
    """Kernel distance ``||mu_n(t) - mu(t)||_beta`` (docs/equations.md section 6) between ``seeds[i]``
    particle systems of ``n[i]`` i.i.d. tokens from :func:`_million_rho0` (RK4, ``method`` the
    field's) and the spectral PDE solution (``solve`` on ``Sphere(lmax)``, refinement allowed)
    at time ``t``. ``pde_beta``: the PDE's ``beta`` when it should differ (a wrong constant,
    for the tests). Returns ``distance`` (n, max seeds; NaN where a size has fewer seeds), the
    fit, timings and the last snapshot."""
    import particles
    from meanfield import Model, solve
    from meanfield.domains.sphere import Sphere
    from meanfield.io import domain_of
    from meanfield.metrics import kernel_distance_particles

    ns = np.asarray(n, dtype=int)
    counts = np.asarray(seeds, dtype=int)
    if ns.shape != counts.shape or ns.size < 2 or np.any(counts < 1):
        msg = f"n and seeds must be equal-length sequences (>= 2 sizes, seeds >= 1), got {n!r}, {seeds!r}"
        raise ValueError(msg)
    dom = Sphere(int(lmax))
    model = Model(beta=float(beta), attention="softmax")
    pde_model = model if pde_beta is None else Model(beta=float(pde_beta), attention="softmax")
    rho0 = _million_rho0(dom)
    start = _time.perf_counter()
    ds = solve(pde_model, dom, rho0, [0.0, float(t)], rtol=1e-10, atol=1e-13)
    fdom = domain_of(ds)
    c_t = fdom.forward(ds["density"].values[-1])
    pde_s = _time.perf_counter() - start
    rng = np.random.default_rng([seed, 23])
    dist = np.full((ns.size, int(counts.max())), np.nan)
    seconds, worst = [], 0.0
    x0 = xt = np.empty((0, 3))
    for i, (m, S) in enumerate(zip(ns, counts)):
        x0 = np.stack([dom.sample(rho0, int(m), rng) for _ in range(int(S))])
        start = _time.perf_counter()
        if method == "fast":
            xt, est = fast_rk4(model, x0, float(t), float(dt))
            worst = max(worst, est)
        else:
            sim = particles.simulate(model, x0, [0.0, float(t)], method="rk4", dt=float(dt),
                                     observables=False, field_method=method)
            xt = np.asarray(sim["x"].values[-1])
        seconds.append(_time.perf_counter() - start)
        dist[i, : int(S)] = kernel_distance_particles(fdom, c_t, xt, model.beta, method="project",
                                                      kind="coefficients")
    nn = np.repeat(ns[:, None], dist.shape[1], 1)
    fit = fit_power_law(nn, dist)
    return {"n": ns, "seeds": counts, "distance": dist, "fit": fit, "pde_s": pde_s,
            "field_error_estimate": worst,
            "particles_s": seconds, "model": model, "domain": dom, "final_domain": fdom,
            "c0": dom.forward(rho0), "c_t": c_t, "x0": x0[0], "xt": xt[0], "t": float(t)}


@check("fastsum.sphere_million", suites=("full",))
def check_sphere_million(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Mean-field convergence on ``S^2`` up to ``n = 10^6`` particles: kernel distance to the
    PDE ``~ n^{-1/2}`` over three decades (:data:`SPHERE_MILLION`; the particles by the fast
    field, ``method="fast"``, :mod:`meanfield.kernels.fastsum`).

    Law: as :func:`validation.checks.convergence.check_sphere_iid` (i.i.d. starts give
    ``E ||mu_n(0) - mu_0||^2 = (e^beta - iint K dmu_0 dmu_0) / n`` exactly, and the flow is
    Lipschitz on bounded times), here from ``n = 10^3`` to ``10^6`` where that check stops at
    ``3 10^3``.

    Tolerance: the 99% CI of the fitted log–log slope (39 samples) must contain ``-1/2``
    (sampling error only). The deterministic errors stay far below the smallest distance
    (about ``1e-3`` at ``n = 10^6``): the PDE to ``1e-10``; RK4 at ``dt = 0.05`` (``O(dt^4)``,
    ~1e-6); the fast field to ``1e-12`` relative per point; the kernel distance truncated at
    ``l <= 32``, which drops ``sum_{l > 32} (2l + 1) lambda_l e^{-beta} / (4 pi)`` of the
    squared distance, below ``1e-30`` at ``beta = 2``.
    """
    res = sphere_million(n=SPHERE_MILLION["n"], seeds=SPHERE_MILLION["seeds"], seed=seed,
                         beta=SPHERE_MILLION["beta"], t=SPHERE_MILLION["t"],
                         dt=SPHERE_MILLION["dt"], lmax=SPHERE_MILLION["lmax"])
    figure = _million_figure(res, out_dir)
    ns, dist, fit = res["n"], res["distance"], res["fit"]
    data = xr.Dataset({"kernel_distance": (("n", "seed"), dist),
                       "particles_seconds": ("n", np.array(res["particles_s"]))},
                      coords={"n": ns, "seed": np.arange(dist.shape[1])},
                      attrs={"model": res["model"].to_json(), "t": res["t"], "ci_level": CI_LEVEL,
                             "field_method": "fast"})
    sqrt_n = {int(m): float(math.sqrt(m) * np.sqrt(np.nanmean(dist[i] ** 2))) for i, m in enumerate(ns)}
    return CheckResult(
        name="fastsum.sphere_million",
        quantity="log-log slope of the kernel distance to the PDE vs n on S^2, n = 1e3 ... 1e6",
        comparisons=(slope_ci("kernel distance", fit),
                     Comparison("fast field: largest error estimate over every evaluation",
                                res["field_error_estimate"], FIELD_ERROR_MAX, kind="max")),
        description=(f"-1/2 inside the {CI_LEVEL:.0%} CI of the fitted slope over three decades; "
                     f"fast field error estimate <= {FIELD_ERROR_MAX:g}"),
        details={"fit_kernel": fit, "n": ns.tolist(), "seeds": res["seeds"].tolist(),
                 "sqrt_n_rms_distance": sqrt_n, "pde_s": res["pde_s"],
                 "field_error_estimate": res["field_error_estimate"],
                 "particles_s": dict(zip(map(int, ns), res["particles_s"]))},
        data=data,
        figure=figure,
    )


def _million_figure(res: dict[str, Any], out_dir: Path) -> str:
    fig, (ax, ax2) = subplots(1, 2, figsize=(12, 4.5))
    loglog_panel(ax, res["n"], res["distance"], res["fit"], -0.5, "kernel distance", "C1")
    ax.set_xlabel("n (particles, fast field)")
    ax.set_ylabel(f"kernel distance to the PDE at t = {res['t']:g}")
    ax.set_title(f"S^2, SA beta = {res['model'].beta:g}, i.i.d. start: slope -1/2 expected (dashed)",
                 fontsize=9)
    ax.legend(fontsize=7)
    angle_histogram_panel(ax2, ((res["domain"], res["c0"], res["x0"], 0.0),
                                 (res["final_domain"], res["c_t"], res["xt"], res["t"])))
    return save_figure(fig, out_dir, "fastsum_sphere_million")


# -- a Lagrangian run through clustering with 2 10^5 nodes ----------------------------------

LUMPY_SPHERE: dict[str, Any] = {
    "centres": ((0.0, 0.0), (1.9, 0.0), (1.9, 2.3), (2.0, 4.4)),
    "amplitudes": (0.3, 0.25, 0.25, 0.2),
    "kappa": 4.0,
    "background": 0.2,
}
"""The start of :func:`check_lagrangian_clusters_sphere`: a uniform background of mass
``background`` plus four von Mises–Fisher bumps (``kappa``; centres by ``(colatitude,
longitude)``, masses ``(1 - background) amplitudes``), not axisymmetric about any axis. Under SA
``beta = 9`` each bump, with the background of its basin, gathers into one cluster by ``t ~
6`` (measured at 8 192 nodes), and the four stay apart (metastability)."""

LAGRANGIAN_CLUSTERS: dict[str, Any] = {
    "beta": 9.0,
    "t_final": 8.0,
    "lmax": 319,
    "coarse_lmax": 159,
    "n": 20_000,
    "replicas": 8,
    "dt": 0.1,
    "rtol": 1e-7,
    "atol": 1e-9,
    "field_tol": FIELD_TOL,
}
"""Sizes of :func:`check_lagrangian_clusters_sphere`: ``nodes.sphere(rho0, 319)`` (320 x 640 =
204 800 nodes) and ``nodes.sphere(rho0, 159)`` (51 200, the node-rule error), ``replicas``
particle systems of ``n`` tokens (RK4, ``dt = 0.1``: ``h beta = 0.9``, inside RK4's stability
bound 2.78), the fast field at its default tolerance (``fastsum.FIELD_TOL``, ``1e-10``
relative per point; the ODE's ``rtol`` is ``1e-7``)."""


def _centres(spec: dict[str, Any]) -> np.ndarray:
    th, ph = np.array(spec["centres"], dtype=float).T
    return np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], axis=-1)


def lumpy_sphere_rho0(spec: dict[str, Any] = LUMPY_SPHERE) -> Any:
    """``rho0(colatitude, longitude)`` of :data:`LUMPY_SPHERE`: ``b / (4 pi) + (1 - b) sum_k a_k
    kappa e^{kappa (<x, c_k> - 1)} / (2 pi (1 - e^{-2 kappa}))``, mass 1 exactly (each vMF
    factor integrates to 1 on ``S^2``)."""
    centres = _centres(spec)
    amps = np.asarray(spec["amplitudes"], dtype=float)
    kappa, bg = float(spec["kappa"]), float(spec["background"])
    norm = kappa / (2 * np.pi * -np.expm1(-2 * kappa))

    def rho0(colatitude: np.ndarray, longitude: np.ndarray) -> np.ndarray:
        st = np.sin(colatitude)
        x = np.stack(np.broadcast_arrays(st * np.cos(longitude), st * np.sin(longitude),
                                         np.cos(colatitude)), axis=-1)
        bumps = sum(a * norm * np.exp(kappa * (x @ c - 1.0)) for a, c in zip(amps, centres))
        return bg / (4 * np.pi) + (1 - bg) * bumps

    return rho0


def _sample_lumpy(spec: dict[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` i.i.d. points of :func:`lumpy_sphere_rho0`, exactly: the mixture's component, then
    a uniform point or a von Mises–Fisher one (``w = 1 + log(u + (1 - u) e^{-2 kappa}) /
    kappa`` the cosine to the centre, the azimuth uniform)."""
    centres = _centres(spec)
    amps = np.asarray(spec["amplitudes"], dtype=float)
    kappa, bg = float(spec["kappa"]), float(spec["background"])
    probs = np.concatenate([[bg], (1 - bg) * amps / amps.sum()])
    comp = rng.choice(probs.size, size=n, p=probs / probs.sum())
    u, phi = rng.uniform(size=n), rng.uniform(0, 2 * np.pi, n)
    w = np.where(comp == 0, 2 * u - 1, 1 + np.log(u + (1 - u) * np.exp(-2 * kappa)) / kappa)
    r = np.sqrt(np.maximum(1 - w * w, 0.0))
    local = np.stack([r * np.cos(phi), r * np.sin(phi), w], axis=-1)  # about the pole
    uniform = rng.normal(size=(n, 3))
    out = np.where((comp == 0)[:, None], uniform / np.linalg.norm(uniform, axis=1)[:, None], local)
    for k, c in enumerate(centres, start=1):  # rotate the pole onto c_k
        sel = comp == k
        out[sel] = _rotate_pole_to(c, local[sel])
    return out / np.linalg.norm(out, axis=1)[:, None]


def _rotate_pole_to(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``R x`` with ``R`` a rotation taking ``e_3`` to the unit vector ``c``."""
    e3 = np.array([0.0, 0.0, 1.0])
    v = np.cross(e3, c)
    s, cth = np.linalg.norm(v), float(c @ e3)
    if s < 1e-15:
        return x if cth > 0 else x * np.array([1.0, -1.0, -1.0])
    k = v / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    R = np.eye(3) + s * K + (1 - cth) * (K @ K)
    return x @ R.T


CHEAP_CORRECTIONS_LMAX = 100
"""From this ``lmax`` on (``2 10^4`` nodes) :func:`lagrangian_clusters_sphere` first asks that
the fast field can vouch for the nodes near the clusters (:func:`_require_cheap_corrections`)."""


def _require_cheap_corrections(model: Any, tol: float) -> None:
    """Stop (``RuntimeError`` with the reason) unless the fast field runs its transforms at
    ``epsilon <= tol / 240``. The field's error estimate at a node is about ``2.4 epsilon max Z /
    Z(x)``, and every node over ``tol`` is recomputed by the direct sum, ``O(n)`` each: with
    ``epsilon = tol / 8`` (the zonal path of :mod:`meanfield.kernels.fastsum` before ``EPS_FRACTION``)
    that is every node with ``Z(x) < 0.3 max Z``, 13-21% of the nodes of a run through clustering (measured at
    8 192 nodes, ``t`` = 2, 3), which makes each evaluation ``O(n^2)`` again (hours at ``2 10^5``
    nodes). At ``epsilon <= tol / 240`` only the nodes with ``Z(x) < 0.01 max Z``, far from all
    mass, are left over (they now go to the re-centred expansions of
    :mod:`meanfield.kernels.fastsum_local` first; the transforms run at ``1e-14`` where ducc0
    takes it)."""
    from meanfield.kernels import fastsum

    probe = np.array([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
    eps = fastsum.fast_field(model, probe, probe, None, divergence=False, tol=tol)[2].epsilon
    if eps > tol / 240:
        msg = (f"lagrangian_clusters_sphere: the fast field runs its transforms at epsilon = "
               f"{eps:.3g} for tol = {tol:.3g} (> tol / 240), so every node with Z(x) < "
               f"{min(1.0, 2.4 * eps / tol):.2g} max Z would be recomputed by the O(n) direct sum "
               "(the run would take hours at 2e5 nodes); meanfield.kernels.fastsum must run the "
               "transforms at a fraction of tol (as its general path does, EPS_FRACTION)")
        raise RuntimeError(msg)


def _heavy(x: np.ndarray, w: np.ndarray | None, min_mass: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Masses and positions of the clusters of mass ``>= min_mass`` (criterion of
    :data:`validation.checks.lagrangian_references.CLUSTER_TOL`), and the mass of the others."""
    from meanfield.lagrangian.clusters import clusters
    from validation.checks.lagrangian_references import CLUSTER_TOL

    c = clusters(x, w, CLUSTER_TOL, geometry="sphere")
    keep = c.masses >= min_mass
    return c.masses[keep], c.positions[keep], float(c.masses[~keep].sum())


def _particle_cluster_masses(model: Any, x0: np.ndarray, t_final: float, dt: float,
                             positions: np.ndarray, out: dict[str, Any]) -> np.ndarray:
    """Run the particle systems ``x0`` (R, n, 3) to ``t_final`` (:func:`fast_rk4`) and record in
    ``out`` the time, the largest field estimate, and each system's clusters (mass ``>=
    MIN_CLUSTER_MASS``) joined to the nearest of the reference ``positions``; returns the final
    states."""
    from validation.checks.lagrangian_references import MIN_CLUSTER_MASS

    start = _time.perf_counter()
    xt, out["particle_field_error_estimate"] = fast_rk4(model, x0, t_final, dt)
    out["particles_s"] = _time.perf_counter() - start
    pm, counts = [], []
    for y in xt:
        cmass, cpos, _ = _heavy(y, None, MIN_CLUSTER_MASS)
        counts.append(int(cmass.size))
        near = np.argmax(cpos @ positions.T, axis=1) if cmass.size else np.array([], dtype=int)
        pm.append(np.bincount(near, weights=cmass, minlength=len(positions)).tolist())
    out["particle_masses"], out["particle_counts"] = pm, counts
    return xt


def lagrangian_clusters_sphere(*, lmax: int, coarse_lmax: int | None, n: int, replicas: int,
                               seed: int, beta: float = 9.0, t_final: float = 8.0,
                               dt: float = 0.1, rtol: float = 1e-7, atol: float = 1e-9,
                               field_tol: float = FIELD_TOL, spec: dict[str, Any] = LUMPY_SPHERE,
                               particle_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """SA ``beta`` on ``S^2`` from :func:`lumpy_sphere_rho0` by characteristics
    (``nodes.sphere(rho0, lmax)``, ``field_method="fast"``) to ``t_final``, and the same with
    ``coarse_lmax`` nodes (the node rule's error; ``None``: not run); cluster masses at
    ``t_final`` against those of ``replicas`` particle systems of ``n`` i.i.d. tokens (RK4,
    fast field; each particle cluster joins the Lagrangian cluster nearest to it).
    ``particle_spec``: the particles' start when it should differ (a wrong start, for the
    tests)."""
    from meanfield import Model, nodes, solve_lagrangian
    from validation.checks.lagrangian_references import MIN_CLUSTER_MASS

    model = Model(beta=float(beta))
    if int(lmax) >= CHEAP_CORRECTIONS_LMAX:
        _require_cheap_corrections(model, float(field_tol))
    times = np.linspace(0.0, float(t_final), int(round(float(t_final))) + 1)
    out: dict[str, Any] = {"times": times}
    runs = {}
    for key, L in (("fine", lmax), ("coarse", coarse_lmax)):
        if L is None:
            continue
        nd = nodes.sphere(lumpy_sphere_rho0(spec), int(L))
        start = _time.perf_counter()
        ds = solve_lagrangian(model, nd, times, rtol=rtol, atol=atol, field_method="fast",
                              field_tol=field_tol, throw=False)
        out[f"{key}_s"] = _time.perf_counter() - start
        out[f"{key}_nodes"] = int(nd.x.shape[0])
        runs[key] = ds
    lag = runs["fine"]
    out["t_reached"] = float(lag.attrs["t_reached"])
    out["successful"] = int(lag.attrs["successful"])
    out["mass_error"] = float(np.max(np.abs(lag["mass"].values - 1.0)))
    out["stats"] = {k: int(lag.attrs[k]) for k in ("num_steps", "num_evaluations")}
    out["fast_field"] = lag.attrs.get("settings", "")
    energy = lag["energy"].values
    out["energy"] = energy.tolist()
    masses, positions, stray = _heavy(lag["x"].values[-1], lag["weight"].values, MIN_CLUSTER_MASS)
    out["lagrangian_masses"], out["lagrangian_stray_mass"] = masses.tolist(), stray
    out["counts"] = [int(_heavy(x, lag["weight"].values, MIN_CLUSTER_MASS)[0].size)
                     for x in lag["x"].values]
    if "coarse" in runs:
        cm, cpos, _ = _heavy(runs["coarse"]["x"].values[-1], runs["coarse"]["weight"].values,
                             MIN_CLUSTER_MASS)
        near = np.argmax(cpos @ positions.T, axis=1) if cm.size else np.array([], dtype=int)
        matched = np.bincount(near, weights=cm, minlength=masses.size)
        out["coarse_masses"] = matched.tolist()
        out["coarse_count"] = int(cm.size)
    rng = np.random.default_rng([seed, 23, 2])
    x0 = np.stack([_sample_lumpy(particle_spec or spec, int(n), rng) for _ in range(int(replicas))])
    xt = _particle_cluster_masses(model, x0, float(t_final), float(dt), positions, out)
    out["snapshot"] = (lag["x"].values[-1], lag["weight"].values, xt[0])
    out["x_start"] = (lag["x"].values[0], lag["weight"].values)
    return out


@check("fastsum.lagrangian_clusters_sphere", suites=("full",))
def check_lagrangian_clusters_sphere(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """A Lagrangian run on ``S^2`` through clustering with ``2 10^5`` nodes: SA ``beta = 9``
    from :func:`lumpy_sphere_rho0` (not axisymmetric) to ``t = 8``, by characteristics with the
    fast field (:data:`LAGRANGIAN_CLUSTERS`); its cluster masses against particles.

    Comparisons and tolerances:

    * the run reaches ``t_final``; mass conserved to ``1e-12`` (the weights never change; the
      sum rounds at ``n eps``);
    * the energy non-decreasing over the outputs (SA attracts: ``dE/dt >= 0``), to twice the
      fast energy's error ``2 eps e^beta`` (``eps = 3e-13``);
    * the particles' fast field (:func:`fast_rk4`, no direct recomputation) with an error
      estimate ``<= FIELD_ERROR_MAX`` at every evaluation (relative to ``|F| <= 1``; a token
      changes cluster only from within such a distance, amplified by the flow, of a basin's
      boundary: a mass far below the replicas' spread);
    * 4 clusters of mass ``>= MIN_CLUSTER_MASS`` (one per bump of the start), for the nodes
      and for every particle system;
    * each cluster's mean particle mass over the replicas within its Student-``t`` interval
      (level :data:`MASS_LEVEL`, the replicas' own spread) ``+ delta_p`` of the Lagrangian mass
      ``p``. The deviation is ``O(n^{-1/2})`` and of mean zero to leading order, but not
      binomial: the basins themselves move with the empirical measure's field (measured at
      ``n = 2 10^4``: replica spread 2-3x the binomial ``sqrt(p (1 - p) / n)``; one replica
      in four was 5.8 binomial sd off), hence the replicas' own spread. ``delta_p`` bounds the
      node rule's error, the quadrature of the basin's indicator (a discontinuous integrand:
      error ``O(h)`` times the mass near the basin's boundary), by the difference between the
      runs at ``lmax = 319`` and ``159`` (at an ``O(h)`` rate the error of the finer run is at
      most that difference).
    """
    cfg = LAGRANGIAN_CLUSTERS
    res = lagrangian_clusters_sphere(seed=seed, **cfg)
    comps, delta, half = cluster_comparisons(res, cfg)
    figure = _clusters_figure(res, cfg, out_dir)
    details = {k: v for k, v in res.items() if k not in ("snapshot", "x_start", "times")}
    details["node_rule_error_bound"] = delta.tolist()
    details["mean_mass_half_width"] = half.tolist()
    return CheckResult(
        name="fastsum.lagrangian_clusters_sphere",
        quantity=(f"S^2, SA beta = {cfg['beta']:g}, {res['fine_nodes']} Lagrangian nodes through clustering: "
                  "cluster masses vs particles"),
        comparisons=tuple(comps),
        description=(f"mass to 1e-12; 4 clusters; mean particle cluster masses within their "
                     f"{MASS_LEVEL:.1%} t-interval + node-rule error of the Lagrangian ones"),
        details=details,
        figure=figure,
    )


MASS_LEVEL = 0.999
"""Confidence level of each cluster's Student-``t`` interval of the mean particle mass (four
clusters: a family false-alarm rate below 0.4%)."""


def cluster_comparisons(res: dict[str, Any], cfg: dict[str, Any]
                        ) -> tuple[list[Comparison], np.ndarray, np.ndarray]:
    """The comparisons of :func:`check_lagrangian_clusters_sphere` (its docstring argues the
    tolerances) for a result of :func:`lagrangian_clusters_sphere` run with ``cfg``; also the
    node-rule error bounds and the binomial standard deviations."""
    from meanfield import Model
    from particles.observables import fast_energy_error

    beta = float(cfg["beta"])
    comps = [Comparison("Lagrangian run: time reached", res["t_reached"], cfg["t_final"],
                        1e-9 * cfg["t_final"], kind="min"),
             Comparison("Lagrangian run: max |mass - 1| over time", res["mass_error"], 0.0, 1e-12)]
    e = np.asarray(res["energy"])
    comps.append(Comparison("Lagrangian energy: smallest increment over the outputs",
                            float(np.min(np.diff(e))), -2 * fast_energy_error(Model(beta=beta)),
                            kind="min"))
    comps.append(Comparison("particles: largest fast-field error estimate over the run",
                            res["particle_field_error_estimate"], FIELD_ERROR_MAX, kind="max"))
    p = np.asarray(res["lagrangian_masses"])
    comps.append(Comparison("number of Lagrangian clusters (mass >= MIN_CLUSTER_MASS)", float(p.size),
                            4.0, 0.0))
    delta = np.abs(np.asarray(res.get("coarse_masses", np.zeros_like(p))) - p)
    for r, count in enumerate(res["particle_counts"]):
        comps.append(Comparison(f"replica {r}: number of particle clusters", float(count), float(p.size),
                                0.0))
    pm = np.asarray(res["particle_masses"])  # (replica, cluster)
    R = pm.shape[0]
    half = stats.t.ppf(0.5 + MASS_LEVEL / 2, R - 1) * pm.std(axis=0, ddof=1) / np.sqrt(R)
    for i, (pi, qi, hi, di) in enumerate(zip(p, pm.mean(axis=0), half, delta)):
        comps.append(Comparison(f"cluster {i}: mean particle mass over {R} replicas vs Lagrangian mass",
                                float(qi), float(pi), float(hi + di)))
    return comps, delta, half


def _clusters_figure(res: dict[str, Any], cfg: dict[str, Any], out_dir: Path) -> str:
    """Left: the start (20 000 of the nodes, coloured by the density) and the clusters at ``t_final``
    (Lagrangian: dots sized by mass; one particle system: crosses), longitude against
    colatitude. Right: cluster masses, Lagrangian against every particle system, with the
    tolerance bars."""
    fig, (ax, ax2) = subplots(1, 2, figsize=(12, 4.5))
    x0, _ = res["x_start"]
    pick = np.random.default_rng(0).permutation(x0.shape[0])[:20_000]  # a subsample of the nodes
    th0 = np.arccos(np.clip(x0[pick, 2], -1, 1))
    ph0 = np.mod(np.arctan2(x0[pick, 1], x0[pick, 0]), 2 * np.pi)
    sc = ax.scatter(ph0, th0, c=lumpy_sphere_rho0()(th0, ph0), s=1, cmap="Greys", rasterized=True)
    fig.colorbar(sc, ax=ax, label="density at the node, t = 0")
    xl, wl, xp = res["snapshot"]
    masses, positions, _ = _heavy(xl, wl, 0.01)
    ax.scatter(np.mod(np.arctan2(positions[:, 1], positions[:, 0]), 2 * np.pi),
               np.arccos(np.clip(positions[:, 2], -1, 1)), s=2000 * masses, facecolors="none",
               edgecolors="C3", lw=2, label=f"Lagrangian clusters, t = {cfg['t_final']:g}")
    ax.plot(np.mod(np.arctan2(xp[:, 1], xp[:, 0]), 2 * np.pi), np.arccos(np.clip(xp[:, 2], -1, 1)),
            "x", color="C0", ms=6, label="particles (one system)")
    ax.set_xlabel("longitude")
    ax.set_ylabel("colatitude")
    ax.invert_yaxis()
    ax.set_title(f"S^2, SA beta = {cfg['beta']:g}: {res['fine_nodes']} nodes", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    p = np.asarray(res["lagrangian_masses"])
    pm = np.asarray(res["particle_masses"])
    idx = np.arange(p.size)
    _, delta, half = cluster_comparisons(res, cfg)
    ax2.errorbar(idx, p, yerr=half + delta, fmt="o", color="C3", capsize=6,
                 label="Lagrangian (bars: tolerance of the mean)")
    ax2.plot(idx - 0.08, pm.mean(axis=0), "s", color="k", ms=5, label="particles, mean")
    for r in range(pm.shape[0]):
        ax2.plot(idx + 0.08 * (r + 1), pm[r], "x", color="C0", label="particles" if r == 0 else None)
    ax2.set_xticks(idx)
    ax2.set_xlabel("cluster")
    ax2.set_ylabel(f"mass at t = {cfg['t_final']:g}")
    ax2.set_title(f"{pm.shape[0]} x {cfg['n']} particles (fast field)", fontsize=9)
    ax2.legend(fontsize=7)
    return save_figure(fig, out_dir, "fastsum_lagrangian_clusters_sphere")


HANDOVER_SPHERE: dict[str, Any] = {
    "beta": 6.0,
    "kappa": 8.0,
    "resolution": 32,
    "t_final": 10.0,
    "n": 20_000,
    "replicas": 8,
    "dt": 0.1,
}
"""The documented S^2 hand-over (issue 31, item 5; docs/lagrangian.md section 6): three von
Mises–Fisher bumps (``kappa = 8``) at ``e_3, e_1, e_2``, SA ``beta = 6``, ``Sphere(32)``,
``solve(..., continue_lagrangian=True)`` to ``t = 10`` at every other default; ``replicas``
particle systems of ``n`` i.i.d. tokens of the same start (RK4, ``dt = 0.1``: ``h beta =
0.6``, inside RK4's stability bound 2.78)."""

HANDOVER_SPEC: dict[str, Any] = {
    "centres": [(0.0, 0.0), (math.pi / 2, 0.0), (math.pi / 2, math.pi / 2)],
    "amplitudes": [1.0, 1.0, 1.0],
    "kappa": HANDOVER_SPHERE["kappa"],
    "background": 0.0,
}
""":data:`HANDOVER_SPHERE`'s start in the form of :data:`LUMPY_SPHERE` (colatitude,
longitude of ``e_3, e_1, e_2``), for :func:`_sample_lumpy`."""


def handover_sphere(*, seed: int, beta: float, kappa: float, resolution: int, t_final: float,
                    n: int, replicas: int, dt: float) -> dict[str, Any]:
    """:data:`HANDOVER_SPHERE`'s run: the spectral solver on ``Sphere(resolution)`` handing
    over to the Lagrangian one, timed; its cluster masses at ``t_final`` against those of
    ``replicas`` particle systems of ``n`` tokens (:func:`fast_rk4`; each particle cluster
    joins the Lagrangian cluster nearest to it)."""
    import meanfield as mf
    from validation.checks.lagrangian_references import MIN_CLUSTER_MASS

    model = mf.Model(beta=float(beta))
    sphere = mf.Sphere(int(resolution))
    centres = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    rho0 = mf.initial.von_mises(sphere, centres, [float(kappa)] * 3)
    times = np.linspace(0.0, float(t_final), int(round(float(t_final))) + 1)
    start = _time.perf_counter()
    ds = mf.solve(model, sphere, rho0, times, continue_lagrangian=True)
    out: dict[str, Any] = {"wall_s": _time.perf_counter() - start}
    settings = json.loads(ds.attrs["settings"])
    out["handover_time"] = float(ds["handover_time"])
    out["t_reached"] = float(ds.attrs["t_reached"])
    out["successful"] = int(ds.attrs["successful"])
    out["stop_reason"] = str(ds.attrs["stop_reason"])
    out["nodes"] = int(settings["num_nodes"])
    out["fast_field"] = settings["fast_field"]
    out["stats"] = {k: int(ds.attrs[k]) for k in ("num_steps", "num_evaluations")}
    out["mass_error"] = float(np.max(np.abs(ds["mass"].values - 1.0)))
    out["energy"] = ds["energy"].values.tolist()
    out["times"] = ds["time"].values.tolist()
    out["spectral_energy"] = ds["spectral_energy"].values.tolist()
    out["spectral_times"] = ds["spectral_time"].values.tolist()
    masses, positions, stray = _heavy(ds["x"].values[-1], ds["weight"].values, MIN_CLUSTER_MASS)
    out["lagrangian_masses"], out["lagrangian_stray_mass"] = masses.tolist(), stray
    out["lagrangian_positions"] = positions.tolist()
    rng = np.random.default_rng([seed, 31, 5])
    x0 = np.stack([_sample_lumpy(HANDOVER_SPEC | {"kappa": float(kappa)}, int(n), rng)
                   for _ in range(int(replicas))])
    _particle_cluster_masses(model, x0, float(t_final), float(dt), positions, out)
    return out


HANDOVER_SYMMETRY_TOL = 1e-3
"""How far each Lagrangian cluster mass may be from ``1/3``. The start and the flow are
invariant under the cyclic permutation of the axes (a rotation taking ``e_3, e_1, e_2`` to one
another), so the exact masses are ``1/3`` each; the nodes (Gauss–Legendre x trapezoid about
``e_3``) are not, and the quadrature of a basin's indicator is ``O(h)`` times the mass near
the basin's boundary (``h = pi / 256`` after the hand-over; the mass within ``h`` of the
boundaries at ``t = 10`` is below ``0.1``: ``O(h) x 0.1 ~ 1e-3``)."""


def handover_comparisons(res: dict[str, Any], cfg: dict[str, Any]) -> tuple[list[Comparison], np.ndarray]:
    """The comparisons of :func:`check_handover_sphere` and the half-widths of the mean
    particle masses' intervals."""
    comps = [Comparison("hand-over run: time reached", res["t_reached"], cfg["t_final"],
                        1e-9 * cfg["t_final"], kind="min"),
             Comparison("hand-over run: successful (its quadrature monitor satisfied)",
                        float(res["successful"]), 1.0, 0.0),
             Comparison("Lagrangian part: max |mass - 1| over time", res["mass_error"], 0.0, 1e-12),
             Comparison("particles: largest fast-field error estimate over the run",
                        res["particle_field_error_estimate"], FIELD_ERROR_MAX, kind="max")]
    p = np.asarray(res["lagrangian_masses"])
    comps.append(Comparison("number of Lagrangian clusters (mass >= MIN_CLUSTER_MASS)",
                            float(p.size), 3.0, 0.0))
    for i, pi in enumerate(p):
        comps.append(Comparison(f"cluster {i}: Lagrangian mass vs 1/3 (the start's symmetry)",
                                float(pi), 1 / 3, HANDOVER_SYMMETRY_TOL))
    for r, count in enumerate(res["particle_counts"]):
        comps.append(Comparison(f"replica {r}: number of particle clusters", float(count),
                                float(p.size), 0.0))
    pm = np.asarray(res["particle_masses"])
    R = pm.shape[0]
    half = stats.t.ppf(0.5 + MASS_LEVEL / 2, R - 1) * pm.std(axis=0, ddof=1) / np.sqrt(R)
    for i, (pi, qi, hi) in enumerate(zip(p, pm.mean(axis=0), half)):
        comps.append(Comparison(f"cluster {i}: mean particle mass over {R} replicas vs Lagrangian mass",
                                float(qi), float(pi), float(hi + HANDOVER_SYMMETRY_TOL)))
    return comps, half


@check("fastsum.handover_sphere", suites=("full",))
def check_handover_sphere(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """The S^2 hand-over of :data:`HANDOVER_SPHERE` at its defaults: it reaches ``t = 10``
    with its quadrature monitor satisfied; mass conserved to ``1e-12`` (the weights never
    change); three clusters of mass ``1/3`` each to :data:`HANDOVER_SYMMETRY_TOL` (the start's
    symmetry); each cluster's mean particle mass over the replicas within its Student-``t``
    interval (level :data:`MASS_LEVEL`, the replicas' own spread: the basins move with the
    empirical measure, see :func:`check_lagrangian_clusters_sphere`) plus the node rule's
    error (:data:`HANDOVER_SYMMETRY_TOL`) of the Lagrangian mass; the particles' fast-field
    estimate within :data:`FIELD_ERROR_MAX`. Each tolerance's argument is in the docstring
    of its constant. The wall time is recorded (``details["wall_s"]``), not compared: machines
    differ."""
    cfg = HANDOVER_SPHERE
    res = handover_sphere(seed=seed, **cfg)
    comps, half = handover_comparisons(res, cfg)
    figure = _handover_figure(res, half, out_dir)
    details = {k: v for k, v in res.items() if k not in ("times", "spectral_times")}
    details["mean_mass_half_width"] = half.tolist()
    return CheckResult(
        name="fastsum.handover_sphere",
        quantity=(f"S^2, SA beta = {cfg['beta']:g}, three vMF bumps: spectral to Lagrangian "
                  f"({res['nodes']} nodes from t = {res['handover_time']:.2f}) in "
                  f"{res['wall_s']:.0f} s; cluster masses vs particles"),
        comparisons=tuple(comps),
        description=("reaches t = 10, monitor satisfied; mass to 1e-12; masses 1/3 (symmetry); "
                     f"mean particle masses within their {MASS_LEVEL:.1%} t-interval"),
        details=details,
        figure=figure,
    )


def _handover_figure(res: dict[str, Any], half: np.ndarray, out_dir: Path) -> str:
    """Left: the energy along the run, spectral then Lagrangian, the hand-over marked. Right:
    cluster masses, Lagrangian against every particle system, with the tolerance bars."""
    fig, (ax, ax2) = subplots(1, 2, figsize=(11, 4.2))
    ax.plot(res["spectral_times"], res["spectral_energy"], "o-", color="C0", label="spectral")
    ax.plot(res["times"], res["energy"], "s-", color="C3", label="Lagrangian")
    ax.axvline(res["handover_time"], color="0.5", ls="--", lw=1, label="hand-over")
    ax.set_xlabel("t")
    ax.set_ylabel("interaction energy")
    ax.set_title(f"{res['nodes']} nodes after the hand-over; {res['wall_s']:.0f} s in all", fontsize=9)
    ax.legend(fontsize=7)
    p = np.asarray(res["lagrangian_masses"])
    pm = np.asarray(res["particle_masses"])
    idx = np.arange(p.size)
    ax2.errorbar(idx, p, yerr=half + HANDOVER_SYMMETRY_TOL, fmt="o", color="C3", capsize=6,
                 label="Lagrangian (bars: tolerance of the mean)")
    ax2.plot(idx - 0.08, pm.mean(axis=0), "s", color="k", ms=5, label="particles, mean")
    for r in range(pm.shape[0]):
        ax2.plot(idx + 0.06 * (r + 1), pm[r], "x", color="C0", label="particles" if r == 0 else None)
    ax2.axhline(1 / 3, color="0.5", lw=1, ls=":", label="1/3 (symmetry)")
    ax2.set_xticks(idx)
    ax2.set_xlabel("cluster")
    ax2.set_ylabel("mass at t = 10")
    ax2.set_title(f"{pm.shape[0]} x {HANDOVER_SPHERE['n']} particles (fast field)", fontsize=9)
    ax2.legend(fontsize=7)
    return save_figure(fig, out_dir, "fastsum_handover_sphere")
