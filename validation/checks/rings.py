"""Checks: ring runs (the ``k = 1`` reduction, docs/lagrangian.md section 8) through collapse in
high dimension, their ``d -> inf`` limit, and particles in reflection-symmetric pairs.

.. autosummary::
   check_rings_collapse
   check_rings_high_dimension
   check_rings_particles

The ring field and energy follow docs/equations.md sections 3 (the field, the dissipation
identities) and (3.5) (the energy, ``-1`` convention); Theorem 6.9 is docs/equations.md
section 4.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from meanfield import Model, nodes, solve_lagrangian
from validation.records import CheckResult, Comparison
from validation.suites import check

_COLLAPSE = {
    "full": dict(dims=(64, 1024), kappas=(8.0, 16.0, 32.0, 64.0), betas=(1.0, 4.0), rings=64,
                 t_max=10.0, times=21),
}

RTOL, ATOL = 1e-10, 1e-12
"""The controller's tolerances of the ring runs of these checks."""


def _run(d: int, kappa: float, beta: float, rings: int, times: np.ndarray) -> Any:
    start = nodes.rings(lambda s: kappa * s, rings, d, log=True)
    return solve_lagrangian(Model(beta), start, times, rtol=RTOL, atol=ATOL, throw=False)


@check("rings.collapse", suites=("full",))
def check_rings_collapse(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Ring runs of vMF starts ``e^{kappa s}`` (``d = 64, 1024``, ``kappa = 8 ... 64``, SA
    ``beta = 1, 4``, 64 rings) to ``t = 10``, through the collapse to a point.

    Per run: success; the mass ``sum_j w_j = 1`` (exact along characteristics, tolerance
    ``1e-14``: the normalisation's round-off); the distribution function monotone (the flow
    keeps the order of the rings: ``s_j(t)`` increasing in ``j`` at every time, tolerance 0);
    the energy non-decreasing (SA ascends ``E_beta``, docs/equations.md section 3; tolerance:
    the controller's ``rtol`` times ``E`` per interval); and the collapse rate. Near collapse
    (``r_j^2 = 1 - s_j^2 -> 0``) the SA field is ``h(s) = <B_1> = 1 - <1 - s_j> - beta
    s <r_j^2 F_1/F_0>/(d - 1) + O(r^4)`` (docs/lagrangian.md section 8: ``B_1 = s_j + w_s F_1/
    ((nu + 1) F_0)``, ``w_s = -beta^2 s r_j^2/2``, ``F_1/F_0 -> 1``), so ``d phi_j/dt = -h -> -1``
    for every ring, every ``d``, every ``beta``: the linearised field ``dy/dt = -y`` about the
    point (tangent coordinates; the mean of the transverse parts is 0 by symmetry), ``theta_j ~
    e^{-t}``, ``1 - s_j ~ e^{-2t}``. Checked: the slope of ``phi_j`` over ``[9, 10]`` of the
    fastest and slowest ring against ``-1``, tolerance ``2 (1 + beta/(d - 1)) max_j r_j^2(9)``
    (``1 - s <= r^2`` for ``s > 0``; the factor 2 covers the ``O(r^4)`` terms and ``F_1/F_0 <=
    1``) plus the controller's ``rtol`` on ``phi``.
    """
    name = "rings.collapse"
    if suite not in _COLLAPSE:
        msg = f"suite must be one of {tuple(_COLLAPSE)}, got {suite!r}"
        raise ValueError(msg)
    size: dict[str, Any] = dict(_COLLAPSE[suite])
    times = np.linspace(0.0, size["t_max"], size["times"])
    comparisons: list[Comparison] = []
    runs: dict[str, Any] = {}
    i9 = int(np.argmin(np.abs(times - (size["t_max"] - 1.0))))
    for d in size["dims"]:
        for kappa in size["kappas"]:
            for beta in size["betas"]:
                tag = f"d = {d}, kappa = {kappa:g}, beta = {beta:g}"
                ds = _run(d, kappa, beta, size["rings"], times)
                runs[tag] = ds
                comparisons.append(Comparison(f"{tag}: successful", ds.attrs["successful"], 1))
                comparisons.append(Comparison(f"{tag}: mass", float(ds["mass"].max()), 1.0, 1e-14))
                s = ds["s"].values
                order = np.argsort(s[0])
                comparisons.append(Comparison(f"{tag}: rings out of order (cdf not monotone)",
                                              float(np.sum(np.diff(s[:, order], axis=1) < 0)), 0.0,
                                              kind="max"))
                E = ds["energy"].values
                drop = float(np.max(-np.diff(E) / np.abs(E[1:])))
                comparisons.append(Comparison(f"{tag}: energy decrease over an interval (relative)",
                                              drop, 0.0, 10 * RTOL, kind="max"))
                phi = ds["phi"].values
                slope = (phi[-1] - phi[i9]) / (times[-1] - times[i9])
                r2 = float(np.max(1.0 - s[i9] ** 2))
                tol = 2 * (1 + beta / (d - 1)) * r2 + 10 * RTOL * float(np.max(np.abs(phi[-1])))
                for which, value in (("slowest", float(slope.max())), ("fastest", float(slope.min()))):
                    comparisons.append(Comparison(f"{tag}: d phi/dt of the {which} ring over [9, 10]",
                                                  value, -1.0, tol))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = out_dir / "rings_collapse.png"
    plot_collapse(runs, figure)
    return CheckResult(
        name=name, quantity="ring runs through collapse: mass, order, energy, collapse rate",
        comparisons=tuple(comparisons),
        description=("SA, vMF starts, 64 rings to t = 10; collapse rate d phi/dt -> -1 "
                     "(linearised field at the point), tolerance 2 (1 + beta/(d-1)) max r^2 at t = 9"),
        details={"dims": list(size["dims"]), "kappas": list(size["kappas"]), "betas": list(size["betas"]),
                 "rings": size["rings"]},
        figure=str(figure))


def logistic(gamma0: float, t: np.ndarray) -> np.ndarray:
    """``gamma(t)`` of ``gamma' = 2 gamma (1 - gamma)``, ``gamma(0) = gamma0``: the ``n -> inf``
    limit of (6.9) (docs/equations.md section 4), ``beta``-free."""
    e = np.exp(2 * np.asarray(t, dtype=float))
    return gamma0 * e / (1 - gamma0 + gamma0 * e)


_HIGH = {"full": dict(dims=(128, 512, 2048), betas=(1.0, 4.0), ratio=0.25, rings=64, t_max=10.0,
                      times=101)}


@check("rings.high_dimension", suites=("full",))
def check_rings_high_dimension(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """The density-level counterpart of Theorem 6.9's curve: ring runs as ``d -> inf`` against
    the ``n -> inf`` limit of (6.9).

    For ``n`` tokens Theorem 6.9 (docs/equations.md section 4) has all ``<x_i, x_j> -> gamma_beta``
    of (6.9), ``gamma' = 2 e^{beta gamma} (1 - gamma)((n - 1) gamma + 1)/(e^beta + (n - 1)
    e^{beta gamma})``. At density level (``n -> inf``) this tends to ``gamma' = 2 gamma (1 - gamma)``:
    no ``beta``, and ``gamma = 0`` (the uniform start of the theorem) is a rest point, so from a
    uniform start there is nothing to compare (the uniform measure is stationary; the curve
    (6.12) is a finite-``n`` effect). The counterpart exists from a start with a mean: vMF with
    ``kappa = d/4`` concentrates ``s`` at ``s_0`` with ``s_0/(1 - s_0^2) = 1/4`` (spread
    ``O(d^{-1/2})``), and for independent ``x, y ~ mu_t`` ``E<x, y> = |E x|^2 = m(t)^2``,
    ``m = E s``. As ``d -> inf`` the ring kernel tends to ``e^{beta s s'}`` (``F_0 - 1 =
    O(beta^2/d)``) and ``s`` to a point mass, on which ``h = s``, ``s' = s (1 - s^2)``: ``gamma = m^2``
    solves the logistic equation. The error ``max_t |m(t)^2 - logistic(m(0)^2, t)|`` is ``O(1/d)``
    (both corrections are). Checked: the observed order ``log(e_d/e_{4d})/log 4`` of each
    consecutive pair within 0.1 of 1 (tolerance: the next term of the expansion changes the
    ratio ``e_d/e_{4d}`` by ``1 + O(1/d)``, measured 4.00-4.10 at ``d >= 128``, an order
    within 0.02 of 1; 0.1 leaves room for ``beta`` up to 4), and the error at the largest ``d``
    below ``1/d`` itself (the ``O(1/d)`` constant, measured 0.7 ``beta = 1`` and 1.2 ``beta = 4``
    times ``1/d``, below 2).
    """
    name = "rings.high_dimension"
    if suite not in _HIGH:
        msg = f"suite must be one of {tuple(_HIGH)}, got {suite!r}"
        raise ValueError(msg)
    size: dict[str, Any] = dict(_HIGH[suite])
    times = np.linspace(0.0, size["t_max"], size["times"])
    comparisons: list[Comparison] = []
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    errors: dict[str, list[float]] = {}
    for beta in size["betas"]:
        errs = []
        for d in size["dims"]:
            ds = _run(d, size["ratio"] * d, beta, size["rings"], times)
            comparisons.append(Comparison(f"beta = {beta:g}, d = {d}: successful", ds.attrs["successful"], 1))
            m = (ds["weight"] * ds["s"]).sum("node").values
            gamma = logistic(float(m[0] ** 2), times)
            errs.append(float(np.max(np.abs(m**2 - gamma))))
            curves[f"beta = {beta:g}, d = {d}"] = (m**2, gamma)
        errors[f"{beta:g}"] = errs
        for (d1, e1), (d2, e2) in zip(zip(size["dims"], errs), zip(size["dims"][1:], errs[1:])):
            order = math.log(e1 / e2) / math.log(d2 / d1)
            comparisons.append(Comparison(
                f"beta = {beta:g}: order in 1/d of max|m^2 - gamma|, d = {d1} -> {d2}",
                                          order, 1.0, 0.1))
        dmax = size["dims"][-1]
        comparisons.append(Comparison(f"beta = {beta:g}: d x max|m^2 - gamma| at d = {dmax}",
                                      dmax * errs[-1], 2.0, kind="max"))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = out_dir / "rings_high_dimension.png"
    plot_high_dimension(times, curves, figure)
    return CheckResult(
        name=name, quantity="m(t)^2 of ring runs against gamma' = 2 gamma (1 - gamma) as d -> inf",
        comparisons=tuple(comparisons),
        description="the n -> inf limit of (6.9); vMF kappa = d/4; O(1/d) convergence",
        details={"errors": errors, "dims": list(size["dims"])}, figure=str(figure))


_PAIRS = {"full": dict(dims=(16, 64, 256), kappa_per_d=0.5, beta=1.0, n=20000, dt=0.25, rings=64, t_max=3.0)}

FAMILY_LEVEL = 0.01
"""Chance that a correct code fails :func:`check_rings_particles`, for each of its two
sampling events (the empirical law about the fitted start; the start's sample mean), shared
by the comparisons of each (Bonferroni)."""


def rings_against_pairs(model: Model, kappa: float, d: int, n: int, *, dt: float, rings: int,
                        times: np.ndarray,
                        seed: int, q: float = 1.63, z: float = 2.576) -> dict[str, Any]:
    """The Kolmogorov distances of ``s = <x, e>`` at ``times`` between ``n`` particles in
    reflection-symmetric pairs (``validation.pairs``, vMF ``kappa`` on ``S^{d-1}``, RK4 step
    ``dt``) and the ring run of the exact start (``ks_exact``), with its level
    (:func:`validation.pairs.kolmogorov_levels` at ``q``, ``z``), and of the start fitted to the
    particles' mean (``ks_fitted``, level ``q/sqrt(n/2)``); ``E[s]`` of the particles at each
    time, the fitted ``kappa`` and the particles' wall time. Shared by :func:`check_rings_particles`
    and ``benchmarks/bench_rings.py``."""
    from meanfield.lagrangian.rings import cdf_s
    from validation.pairs import kolmogorov, kolmogorov_levels, pair_flips, simulate_mirrored, symmetric_pairs

    x0 = symmetric_pairs(kappa, d, n, np.random.default_rng(seed))
    t0 = time.perf_counter()
    px = simulate_mirrored(model, x0, times, dt, pair_flips(d))
    wall = time.perf_counter() - t0
    ds = solve_lagrangian(model, nodes.rings(lambda s: kappa * s, rings, d, log=True), times,
                          rtol=1e-10, atol=1e-12)
    levels, fitted, k_fit = kolmogorov_levels(model, kappa, d, n, float(px[0, :, -1].mean()), times, rings,
                                              z=z, q=q)
    exact, fit = [], []
    for k in range(len(times)):
        s = np.sort(px[k, :, -1])  # along the fixed axis e: the pairs keep the mean on it
        exact.append(kolmogorov(s, cdf_s(ds, k, s)))
        fit.append(kolmogorov(s, cdf_s(fitted, k, s)))
    return {"ks_exact": exact, "level_exact": [float(v) for v in levels], "ks_fitted": fit,
            "level_fitted": q / math.sqrt(n / 2), "mean_s": [float(v) for v in px[:, :, -1].mean(axis=1)],
            "kappa_fitted": k_fit, "successful": int(ds.attrs["successful"]), "wall_s_particles": wall}


@check("rings.particles", suites=("full",))
def check_rings_particles(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """The distribution of ``s = <x, e>`` of ring runs against ``n = 20 000`` particles in
    reflection-symmetric pairs (``validation.pairs``: the mean stays on ``e`` exactly), ``d =
    16, 64, 256``, vMF ``kappa = d/2`` (``E s`` about 0.4), SA ``beta = 1``, to ``t = 3``
    (through collapse: ``E s`` above 0.99).

    Tolerance, at every output time: against the ring run of the start fitted to the
    particles' mean, the Kolmogorov distance below ``q/sqrt(n/2)``, ``q`` the quantile of the
    Dvoretzky–Kiefer–Wolfowitz bound ``P(sqrt(m) D > q) <= 2 e^{-2 q^2}`` at level
    :data:`FAMILY_LEVEL` shared by the ``dims x times`` comparisons (Bonferroni; ``q = 2.04``,
    against 1.63 for one comparison at 99 %) for ``n/2`` i.i.d. draws (the ``s``-values come in
    equal pairs: the empirical distribution function of the ``n`` values is that of the ``n/2``
    representatives; a fitted parameter only lowers the distance); against the exact start,
    that plus the largest change of the ring run's distribution function over the starts whose
    mean is within ``z`` standard errors of the exact one, ``z`` the normal quantile at
    :data:`FAMILY_LEVEL` shared by the dimensions (``z = 2.94``;
    :func:`validation.pairs.kolmogorov_levels`: the sample mean moves every particle's
    collapse time together, a coherent fluctuation that the i.i.d. level does not have). The
    particles' own error (RK4, step 0.25: against step 0.125 at ``n = 400``, the largest change
    of an ``s`` times the largest density of ``s`` at ``t <= 3`` is ``3.8e-4``, ``2.9e-4``,
    ``4.2e-4`` at ``d = 16, 64, 256``, a bound on the change of the distribution function) and
    the ring run's (``cdf`` exact at the rings, cubic Hermite between, ``2.6e-5``) are far
    below ``2.04/sqrt(10 000) = 0.020``.
    """
    from scipy.stats import norm

    name = "rings.particles"
    if suite not in _PAIRS:
        msg = f"suite must be one of {tuple(_PAIRS)}, got {suite!r}"
        raise ValueError(msg)
    p: dict[str, Any] = dict(_PAIRS[suite])
    times = np.arange(0.0, p["t_max"] + 0.25, 0.5)
    model = Model(p["beta"])
    dims = tuple(p["dims"])
    q = math.sqrt(math.log(2 * len(dims) * times.size / FAMILY_LEVEL) / 2)
    z = float(norm.isf(FAMILY_LEVEL / (2 * len(dims))))
    comparisons: list[Comparison] = []
    details: dict[str, Any] = {**p, "q": q, "z": z}
    for i, d in enumerate(dims):
        kappa = p["kappa_per_d"] * d
        r = rings_against_pairs(model, kappa, d, p["n"], dt=p["dt"], rings=p["rings"], times=times,
                                seed=seed + i, q=q, z=z)
        details[f"d = {d}"] = r
        tag = f"d = {d}, kappa = {kappa:g}"
        comparisons.append(Comparison(f"{tag}: ring run successful", r["successful"], 1))
        comparisons.append(Comparison(f"{tag}: E[s] of the particles at t = {times[-1]:g} (through collapse)",
                                      r["mean_s"][-1], 0.99, kind="min"))
        for k, t in enumerate(times):
            comparisons.append(Comparison(f"{tag}, t = {t:g}: Kolmogorov distance of s, exact start",
                                          r["ks_exact"][k], r["level_exact"][k], kind="max"))
            comparisons.append(Comparison(
                f"{tag}, t = {t:g}: Kolmogorov distance of s, start fitted to the mean",
                                          r["ks_fitted"][k], r["level_fitted"], kind="max"))
    return CheckResult(
        name=name, quantity="Kolmogorov distance of s = <x, e>: rings against particle pairs",
        comparisons=tuple(comparisons),
        description=(f"n = {p['n']} particles in pairs, d = {', '.join(map(str, dims))}; level "
                     f"{q:.3g}/sqrt(n/2) against the fitted start, plus the mean's coherent fluctuation "
                     f"({z:.3g} standard errors) against the exact one"),
        details=details)


def plot_collapse(runs: dict[str, Any], path: Path) -> Any:
    """``phi`` of the median ring (``log tan(theta/2)``) against ``t`` for each run (colour:
    ``kappa`` and ``beta``; solid ``d = 64``, dashed larger ``d``), with the collapse rate
    ``-1``; and the energy. Legend outside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io import save_png

    fig, (ax, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    colours: dict[str, Any] = {}
    dims: list[str] = []
    for tag, ds in runs.items():
        dpart, rest = tag.split(", ", 1)
        if dpart not in dims:
            dims.append(dpart)
        colour = colours.setdefault(rest, f"C{len(colours) % 10}")
        style = "-" if dpart == dims[0] else "--"
        t = ds["time"].values
        phi = ds["phi"].values
        ax.plot(t, phi[:, phi.shape[1] // 2], style, color=colour, lw=1)
        E = ds["energy"].values
        ax_e.plot(t, E / E[-1], style, color=colour, lw=1)
    handles = [plt.Line2D([], [], color=c, lw=1.5, label=k) for k, c in colours.items()]
    handles += [plt.Line2D([], [], color="k", ls="-" if i == 0 else "--", lw=1, label=dpart)
                for i, dpart in enumerate(dims)]
    if runs:
        t = next(iter(runs.values()))["time"].values
        ax.plot(t, -t, ":", color="k", lw=1.5)
        handles.append(plt.Line2D([], [], color="k", ls=":", lw=1.5, label="slope -1 (linearised)"))
    ax.set_xlabel("t")
    ax.set_ylabel("log tan(theta/2) of the median ring")
    ax_e.set_xlabel("t")
    ax_e.set_ylabel("E_beta(t) / E_beta(10)")
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    save_png(fig, path)
    return fig


def plot_high_dimension(times: np.ndarray, curves: dict[str, tuple[np.ndarray, np.ndarray]],
                        path: Path) -> Any:
    """``|m(t)^2 - gamma(t)|`` against ``t`` for each ``(beta, d)``: the ``O(1/d)`` distance of
    the ring runs to the ``n -> inf`` limit of (6.9)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io import save_png

    fig, (ax, ax_e) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for tag, (m2, gamma) in curves.items():
        ax.plot(times, m2, lw=1, label=tag)
        ax_e.semilogy(times, np.maximum(np.abs(m2 - gamma), 1e-16), lw=1, label=tag)
    if curves:
        ax.plot(times, next(iter(curves.values()))[1], "k--", lw=1, label="gamma' = 2 gamma (1 - gamma)")
    ax.set_xlabel("t")
    ax.set_ylabel("m(t)^2 = |E x|^2")
    ax.legend(fontsize=7)
    ax_e.set_xlabel("t")
    ax_e.set_ylabel("|m^2 - gamma|")
    save_png(fig, path)
    return fig


__all__ = ["check_rings_collapse", "check_rings_high_dimension", "check_rings_particles", "logistic",
           "plot_collapse", "plot_high_dimension"]
