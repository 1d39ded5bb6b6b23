"""Checks against exact results (docs/equations.md sections 3 and 4).

.. autosummary::
   growth_rate
   check_growth_rates
   check_orthogonal_start
   check_wendel
   collapse_rate
   check_cone_collapse
   check_noise_threshold
   check_wrapped_cauchy
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy import optimize, special, stats

from meanfield import theory
from meanfield.plots.figures import angle_axis, subplots
from validation.checks.common import hemisphere_direction, save_figure
from validation.records import CheckResult, Comparison
from validation.suites import check

REFERENCE_RATES = {
    ("circle", "softmax", 4.0): (0.21588, 0.56824, 0.66439),
    ("circle", "unnormalized", 1.0): (0.56516, 0.54299, 0.19952),
    ("sphere", "unnormalized", 4.0): (2.5607, 4.4721, 4.1841, 2.7035),
}
"""docs/equations.md section 4, reference growth rates for ``k`` (or ``l``) = 1, 2, ..."""


def growth_rate(d: int, attention: str, beta: float, l: int, sign: float = 1.0,
                noise: float = 0.0) -> float:
    """``gamma_l`` of the uniform state (:func:`meanfield.theory.growth_rate`)."""
    return float(theory.growth_rate(d, attention, beta, l, sign, noise))


def _measured_rate(model: Any, domain: Any, key: Any, index: int, T: float) -> float:
    """Growth rate of one mode from ``rho_unif + eps * mode``, ``eps = 1e-7 rho_unif``."""
    from meanfield import initial, solve

    eps = 1e-7 / domain.area
    rho0 = initial.uniform_plus_modes(domain, {key: eps})
    ds = solve(model, domain, rho0, [0.0, T], rtol=1e-12, atol=1e-24, max_resolution=domain.resolution)
    c0 = domain.forward(ds["density"].values[0]).flat[index]
    c1 = domain.forward(ds["density"].values[-1]).flat[index]
    return float(np.log(abs(c1) / abs(c0)) / T)


@check("theory.growth_rates")
def check_growth_rates(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Linear growth rates of the uniform state: formula, reference values and the PDE.

    (a) The formula of docs/equations.md section 3 against its reference values (circle SA ``beta=4``
    and USA ``beta=1``, ``k=1..3``; ``S^2`` USA ``beta=4``, ``l=1..4``): tolerance half a
    unit in the last printed digit (``5e-6`` and ``5e-5``), the rounding of the references.

    (b) The PDE from ``rho_unif (1 + 1e-7 cos k theta)`` (and ``Y_l0`` on ``S^2``),
    ``rate = log|c_k(T)/c_k(0)| / T`` against the formula, relative tolerance ``1e-6``.
    The nonlinear terms are ``O(eps^2) = 1e-14`` relative and the solver's truncation error
    (``rtol = 1e-12``) is below ``1e-9``; the bound comes from round-off: each step rounds
    the ``O(1)`` mean coefficient at ``1e-16``, which is
    ``1e-9`` of the ``eps = 1e-7`` perturbation, and over up to ``10^3`` steps (transforms
    included) this accumulates to at most ``1e-6`` (worst case, linear accumulation).
    """
    from meanfield import Circle, Model
    from meanfield.domains.sphere import Sphere

    rows: list[dict[str, Any]] = []
    comparisons: list[Comparison] = []
    for (dom, att, beta), ref in REFERENCE_RATES.items():
        d = 2 if dom == "circle" else 3
        for l, r in enumerate(ref, start=1):
            g = growth_rate(d, att, beta, l)
            tol = 5e-6 if dom == "circle" else 5e-5
            rows.append({"what": f"formula {dom} {att} beta={beta:g} l={l}", "expected": r,
                         "measured": g, "error": abs(g - r), "tol": tol})
            comparisons.append(Comparison(rows[-1]["what"], g, r, tol, "abs"))
    circle = Circle(32)
    T = 1.0
    for att, beta in (("softmax", 4.0), ("unnormalized", 1.0)):
        model = Model(beta=beta, attention=att)
        for k in (1, 2, 3):
            g = growth_rate(2, att, beta, k)
            m = _measured_rate(model, circle, k, k, T)
            rows.append({"what": f"PDE circle {att} beta={beta:g} k={k}", "expected": g, "measured": m,
                         "error": abs(m - g), "tol": 1e-6 * abs(g)})
            comparisons.append(Comparison(rows[-1]["what"], m, g, 1e-6, "rel"))
    sph = Sphere(8)
    model = Model(beta=4.0, attention="unnormalized")
    for l in (1, 2, 3):
        g = growth_rate(3, "unnormalized", 4.0, l)
        m = _measured_rate(model, sph, (l, 0), sph.index(l, 0), 0.5)
        rows.append({"what": f"PDE sphere unnormalized beta=4 l={l}", "expected": g, "measured": m,
                     "error": abs(m - g), "tol": 1e-6 * abs(g)})
        comparisons.append(Comparison(rows[-1]["what"], m, g, 1e-6, "rel"))
    figure = _growth_rates_figure(rows, out_dir)
    data = xr.Dataset({k: ("row", [r[k] for r in rows]) for k in ("expected", "measured", "error", "tol")},
                      coords={"row": [r["what"] for r in rows]})
    return CheckResult(
        name="theory.growth_rates",
        quantity="linear growth rates gamma_l: formula vs references, PDE vs formula",
        comparisons=tuple(comparisons),
        description=("docs/equations.md section 3 formula and section 4 reference values; "
                     "tolerance: reference rounding, 1e-6 relative for the PDE"),
        details={"rows": rows},
        data=data,
        figure=figure,
    )


def _growth_rates_figure(rows: list[dict[str, Any]], out_dir: Path) -> str:
    """One bar per row of :func:`check_growth_rates`: ``|error| / tolerance`` (log scale),
    the row's name as its tick label (8 pt; the figure grows with the rows)."""
    fig, ax = subplots(figsize=(7.5, 1.2 + 0.19 * len(rows)))
    y = np.array([r["error"] / r["tol"] for r in rows])
    ax.barh(np.arange(len(rows)), np.maximum(y, 1e-12), color=["C0" if v <= 1 else "C3" for v in y])
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=1)
    ax.set_yticks(np.arange(len(rows)), [r["what"] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top, as in the report's table
    ax.set_xlabel("|error| / tolerance (pass < 1)")
    ax.set_ylabel("comparison")
    ax.set_title("growth rates gamma_l: formula vs references, PDE vs formula", fontsize=10)
    return save_figure(fig, out_dir, "growth_rates")


@check("theory.orthogonal_start")
def check_orthogonal_start(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Theorem 6.8: from pairwise orthogonal tokens all inner products equal ``gamma(t)``.

    ``n = 6`` tokens in ``d = 8``; SA and USA at ``beta = 1``, and ``beta = 0`` against the
    closed form ``(e^{2t} - 1)/(e^{2t} + n - 1)``; particles by adaptive Dormand–Prince
    (``rtol = 1e-10``) to ``t = 4``, the ODE by DOP853 (``rtol = 1e-12``).

    Tolerance: ``1e-7`` on the largest deviation over all pairs and times. An adaptive
    integrator's global error is at most about (number of steps) x rtol, here ``~10^2 x
    1e-10 = 1e-8``; the factor 10 covers the growth of errors along the unstable directions
    of the flow over ``t <= 4``.
    """
    import particles
    from meanfield import Model

    n, d = 6, 8
    times = np.linspace(0.0, 4.0, 21)
    x0 = particles.orthogonal(n, d, np.random.default_rng(seed))
    iu = np.triu_indices(n, 1)
    rows, curves = {}, {}
    comparisons = []
    for att, beta in (("softmax", 1.0), ("unnormalized", 1.0), ("softmax", 0.0)):
        model = Model(beta=beta, attention=att)
        xs = particles.simulate(model, x0, times, method="dopri5", rtol=1e-10, atol=1e-12,
                                observables=False)["x"].values
        ip = np.einsum("tid,tjd->tij", xs, xs)[:, iu[0], iu[1]]
        if beta == 0.0:
            g = (np.exp(2 * times) - 1) / (np.exp(2 * times) + n - 1)
        else:
            g = theory.gamma(beta, n, times, att)
        err = float(np.max(np.abs(ip - g[:, None])))
        label = f"{att} beta={beta}"
        rows[label] = {"max deviation": err}
        comparisons.append(Comparison(f"{label}: max |<x_i, x_j> - gamma(t)|", err, 0.0, 1e-7, "abs"))
        curves[label] = (g, ip)
    fig, ax = subplots(figsize=(6, 4))
    for i, (label, (g, ip)) in enumerate(curves.items()):
        ax.plot(times, g, "-", color=f"C{i}", label=f"gamma(t), {label}")
        ax.plot(times, ip, ".", color=f"C{i}", ms=3)
    ax.set_xlabel("t")
    ax.set_ylabel("<x_i(t), x_j(t)>")
    ax.set_title(f"orthogonal start, n = {n}, d = {d} (dots: all pairs)")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "orthogonal_start")
    labels = list(curves)
    data = xr.Dataset(
        {"gamma": (("model", "time"), np.array([curves[k][0] for k in labels])),
         "inner_products": (("model", "time", "pair"), np.array([curves[k][1] for k in labels]))},
        coords={"model": labels, "time": times},
    )
    return CheckResult(
        name="theory.orthogonal_start",
        quantity="max |<x_i, x_j> - gamma(t)| over pairs and t <= 4 (Theorem 6.8)",
        comparisons=tuple(comparisons),
        description="0; tolerance 1e-7",
        details=rows,
        data=data,
        figure=figure,
    )


def wendel_probability(n: int, d: int) -> float:
    """``P(n uniform points on S^{d-1} lie in an open hemisphere)`` (Theorem 6.7)."""
    return sum(math.comb(n - 1, k) for k in range(d)) / 2 ** (n - 1)


def in_open_hemisphere(x: np.ndarray) -> bool:
    """Whether the points ``x`` (n, d) lie in an open hemisphere, i.e. ``0`` is not in their
    convex hull: the distance from ``0`` to the hull (non-negative least squares with a
    heavily weighted ``sum = 1`` row) is positive."""
    n, d = x.shape
    w = 1e3
    A = np.vstack([x.T, w * np.ones((1, n))])
    b = np.concatenate([np.zeros(d), [w]])
    _, resid = optimize.nnls(A, b)
    return bool(resid > 1e-8)


@check("theory.wendel")
def check_wendel(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Wendel's theorem (Theorem 6.7) against Monte Carlo.

    ``P = 2^{-(n-1)} sum_{k<d} C(n-1, k)`` for ``(n, d) = (5, 2), (6, 3), (10, 4)``
    (``5/16, 1/2, 65/256``), with 4000 (quick) or 20000 (full) uniform draws each.

    Tolerance: the exact probability must lie in the Clopper–Pearson interval of the
    observed frequency at level ``1 - 0.01/3`` (99% for the family, Bonferroni over the
    three cases): a binomial sampling error only.
    """
    rng = np.random.default_rng(seed)
    M = 4000 if suite == "quick" else 20000
    cases = ((5, 2), (6, 3), (10, 4))
    alpha = 0.01 / len(cases)
    rows = []
    for n, d in cases:
        g = rng.standard_normal((M, n, d))
        x = g / np.linalg.norm(g, axis=-1, keepdims=True)
        hits = sum(in_open_hemisphere(xi) for xi in x)
        ci = stats.binomtest(hits, M).proportion_ci(confidence_level=1 - alpha, method="exact")
        p = wendel_probability(n, d)
        rows.append({"n": n, "d": d, "exact": p, "frequency": hits / M, "lo": ci.low, "hi": ci.high})
    comparisons = tuple(Comparison(f"n={r['n']}, d={r['d']}: frequency in an open hemisphere", r["frequency"],
                                   r["exact"], kind="ci", low=r["lo"], high=r["hi"]) for r in rows)
    fig, ax = subplots(figsize=(5.5, 4))
    xs = np.arange(len(rows))
    ax.errorbar(xs, [r["frequency"] for r in rows],
                yerr=[[r["frequency"] - r["lo"] for r in rows], [r["hi"] - r["frequency"] for r in rows]],
                fmt="o", capsize=4, label="Monte Carlo (Clopper–Pearson CI)")
    ax.plot(xs, [r["exact"] for r in rows], "kx", ms=10, label="Wendel")
    ax.set_xticks(xs, [f"n={r['n']}, d={r['d']}" for r in rows])
    ax.set_xlabel("n uniform points on the sphere in R^d")
    ax.set_ylabel("P(all in one open hemisphere)")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "wendel")
    data = xr.Dataset({k: ("case", [r[k] for r in rows])
                       for k in ("n", "d", "exact", "frequency", "lo", "hi")},
                      attrs={"draws": M})
    return CheckResult(
        name="theory.wendel",
        quantity="P(n uniform points in an open hemisphere of S^{d-1})",
        comparisons=comparisons,
        description=f"Wendel's probability inside the {1 - alpha:.4f} Clopper–Pearson interval",
        details={"rows": rows, "draws": M},
        data=data,
        figure=figure,
    )


def collapse_rate(attention: str, beta: float) -> float:
    """Asymptotic rate of ``1 - min_ij <x_i, x_j>`` as the tokens collapse to one point:
    ``2`` (SA) and ``2 e^beta`` (USA).

    Near consensus, ``x_i = x* + e_i`` with ``e_i`` small and tangent: the attention weights
    are ``1/n`` (SA) and ``e^beta / n`` (USA) up to ``O(|e|^2)``, and ``P_{x_i} x_j = x_j - x_i
    + O(|e|^2)``, so ``e_i' = c (mean(e) - e_i)`` with ``c = 1`` (SA) or ``e^beta`` (USA):
    differences contract at rate ``c``, and ``1 - <x_i, x_j> = |x_i - x_j|^2 / 2`` at ``2c``.
    """
    return 2.0 if attention == "softmax" else 2.0 * math.exp(beta)


@check("theory.cone_collapse", suites=("full",))
def check_cone_collapse(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """After Wendel's event: tokens in an open hemisphere collapse to one point at an
    exponential rate (Lemma 6.4), for SA and USA at ``beta = 1``.

    Uniform draws of ``(n, d) = (6, 3)`` and ``(10, 4)`` are kept when they lie in an open
    hemisphere (8 per case, quick; 24, full), and run with RK4 (``dt = 0.02``, quick;
    ``0.01``, full) to ``t = 30``. Two statements are checked on every run:

    1. Step 1 of the proof: with ``w`` the direction of the hemisphere (the largest margin,
       :func:`hemisphere_direction`), ``r(t) = min_i <x_i(t), w>`` never decreases.
       Tolerance ``1e-9`` on each decrease between outputs: ``r`` increases strictly, and
       RK4's error over a step is about ``(lambda dt)^4 / 120 <= 1.2e-6`` (USA, ``dt =
       0.02``) of what the step moves the tokens, so only round-off can make a decrease
       (measured: at most ``2.2e-16`` at either step).
    2. The rate: the diameter ``D(t) = 1 - min_ij <x_i, x_j>`` decays like
       ``e^{-lambda t}`` with ``lambda`` = :func:`collapse_rate` (2 for SA, ``2e`` for USA),
       fitted where ``1e-12 < D < 1e-6``. The paper proves only ``lambda >= 1/(2 n e^{2 beta})``
       ((6.7)); the linearisation gives the rate exactly. Tolerance ``1e-4`` relative: the
       corrections to the linear rate are ``O(D) <= 1e-6`` relative in the window (with
       constants of order ``e^{2 beta}``), RK4's error on the rate ``(lambda dt)^4 / 120 <=
       1.2e-6`` (USA, ``dt = 0.02``). Measured (seed 0): at most ``4.3e-6`` at ``dt = 0.01``,
       ``5.0e-6`` at ``0.02``: the ``O(D)`` term dominates.

    The quick sizes' step (twice the full suite's) halves the cost, 3 000 RK4 steps of
    tiny systems being Python overhead (12 s of CPU at ``dt = 0.01``, 7 s at ``0.02``); the
    statements and tolerances are the same. Since issue 23 the check is in the full suite
    only (7 s of the quick suite's 70); tests/validation/test_quick_suite.py runs its quick
    sizes.
    """
    import particles
    from meanfield import Model

    rng = np.random.default_rng(seed)
    beta, T = 1.0, 30.0
    per_case = 8 if suite == "quick" else 24
    dt = 0.02 if suite == "quick" else 0.01
    t = np.linspace(0.0, T, 601)
    rows: list[dict[str, Any]] = []
    comparisons: list[Comparison] = []
    curves: dict[str, np.ndarray] = {}
    for n, d in ((6, 3), (10, 4)):
        starts: list[np.ndarray] = []
        dirs: list[np.ndarray] = []
        while len(starts) < per_case:
            g = rng.standard_normal((n, d))
            x = g / np.linalg.norm(g, axis=1, keepdims=True)
            w, margin = hemisphere_direction(x)
            if margin > 1e-3:  # in an open hemisphere, with a margin the LP resolves
                starts.append(x)
                dirs.append(w)
        X, W = np.array(starts), np.array(dirs)
        for attention in ("softmax", "unnormalized"):
            ds = particles.simulate(Model(beta, attention=attention), X, t, method="rk4",
                                    dt=dt, observables=False)
            x = np.asarray(ds["x"].values)  # (time, batch, token, dim)
            r = np.einsum("tbnd,bd->tbn", x, W).min(axis=2)
            D = 1.0 - np.einsum("tbnd,tbmd->tbnm", x, x).min(axis=(2, 3))
            rates = []
            for b in range(X.shape[0]):
                window = (D[:, b] > 1e-12) & (D[:, b] < 1e-6)
                rates.append(-np.polyfit(t[window], np.log(D[window, b]), 1)[0]
                             if window.sum() >= 5 else np.nan)
            expected = collapse_rate(attention, beta)
            worst_drop = float(max(0.0, -np.diff(r, axis=0).min()))
            rel = (float(np.nanmax(np.abs(np.array(rates) / expected - 1.0)))
                   if not np.all(np.isnan(rates)) else np.inf)
            rows.append({"n": n, "d": d, "attention": attention, "expected_rate": expected,
                         "rate_min": float(np.nanmin(rates)), "rate_max": float(np.nanmax(rates)),
                         "rate_rel_error": rel, "worst_r_drop": worst_drop,
                         "runs_without_rate": int(np.sum(np.isnan(rates)))})
            label = f"{'SA' if attention == 'softmax' else 'USA'} n={n} d={d}"
            comparisons += [
                Comparison(f"{label}: largest drop of r(t)", worst_drop, 0.0, 1e-9, "abs"),
                # a run whose diameter never enters the fitting window has no rate: it fails
                Comparison(f"{label}: runs without a fitted rate", rows[-1]["runs_without_rate"], 0.0, 0.0,
                           "abs"),
                Comparison(f"{label}: max |rate / expected - 1|", rel, 0.0, 1e-4, "abs"),
            ]
            curves[f"{attention} n={n} d={d}"] = D
    fig, ax = subplots(figsize=(6.5, 4.5))
    for (label, D), col in zip(curves.items(), ("C0", "C1", "C2", "C3")):
        ax.semilogy(t, np.maximum(D, 1e-17), color=col, lw=0.8, alpha=0.6)
        ax.plot([], [], color=col, label=label)
    for attention, ls in (("softmax", "--"), ("unnormalized", ":")):
        lam = collapse_rate(attention, beta)
        # through the median time at which this attention's runs cross D = 1e-6
        D = np.concatenate([v for k, v in curves.items() if k.startswith(attention)], axis=1)
        t_cross = float(np.median(t[np.argmax(D < 1e-6, axis=0)]))
        ax.semilogy(t, 1e-6 * np.exp(-lam * (t - t_cross)), "k", ls=ls, lw=1,
                    label=f"slope -{lam:.3f} ({'SA' if attention == 'softmax' else 'USA'})")
    ax.set_ylim(1e-17, 3)
    ax.set_xlabel("t")
    ax.set_ylabel("diameter 1 - min <x_i, x_j>")
    ax.set_title("tokens in an open hemisphere collapse (Lemma 6.4), beta = 1")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "cone_collapse")
    data = xr.Dataset(
        {key: ("case", [r[key] for r in rows])
         for key in ("n", "d", "attention", "expected_rate", "rate_min", "rate_max",
                     "rate_rel_error", "worst_r_drop")},
        attrs={"beta": beta, "runs_per_case": per_case, "dt": dt, "t_end": T},
    )
    return CheckResult(
        name="theory.cone_collapse",
        quantity="min_i <x_i, w> monotone and the collapse rate of the diameter (hemisphere starts)",
        comparisons=tuple(comparisons),
        description="r(t) non-decreasing (drop <= 1e-9); rate 2 (SA), 2e = 5.4366 (USA), 1e-4 relative",
        details={"rows": rows},
        data=data,
        figure=figure,
    )


@check("theory.noise_threshold")
def check_noise_threshold(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """The noise threshold on the circle (USA, ``beta = 1``): ``sigma_c = I_1(beta)/beta``.

    With noise the rate of mode 1 is ``gamma_1 - sigma`` (docs/equations.md section 3), so the uniform
    state is stable iff ``sigma > I_1(beta)/beta`` (section 4). The PDE's measured rate of
    mode 1 at ``sigma = (0.9, 0.95, 1.05, 1.1) sigma_c`` is fitted by a line in ``sigma``; its
    root must equal ``sigma_c`` and its slope ``-1``.

    Tolerance: ``1e-6`` relative on both, the error budget of each measured rate (see
    :func:`check_growth_rates`; the diffusion is integrated exactly).
    """
    from meanfield import Circle, Model

    beta = 1.0
    sc = float(special.iv(1, beta) / beta)
    sig = sc * np.array([0.9, 0.95, 1.05, 1.1])
    dom = Circle(16)
    rates = np.array([_measured_rate(Model(beta=beta, attention="unnormalized", noise=s), dom, 1, 1, 1.0)
                      for s in sig])
    slope, icpt = np.polyfit(sig, rates, 1)
    root = -icpt / slope
    fig, ax = subplots(figsize=(5.5, 4))
    ss = np.linspace(sig[0], sig[-1], 50)
    ax.plot(sig, rates, "o", label="PDE: measured rate of mode 1")
    ax.plot(ss, slope * ss + icpt, "-", label=f"fit, root {root:.7f}")
    ax.axvline(sc, color="k", ls="--", label=f"I_1(1)/1 = {sc:.7f}")
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xlabel("sigma")
    ax.set_ylabel("growth rate")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "noise_threshold")
    data = xr.Dataset({"rate": ("sigma", rates)}, coords={"sigma": sig}, attrs={"sigma_c": sc})
    return CheckResult(
        name="theory.noise_threshold",
        quantity="noise level at which mode 1 of the uniform state turns stable (USA, beta = 1)",
        comparisons=(Comparison("root of the fitted rate: sigma_c", root, sc, 1e-6, "rel"),
                     Comparison("slope of the rate in sigma", slope, -1.0, 1e-6, "abs")),
        description="root I_1(1)/1 to 1e-6 relative, slope -1 to 1e-6",
        details={"root": float(root), "slope": float(slope), "sigma_c": sc, "rates": rates.tolist()},
        data=data,
        figure=figure,
    )


@check("theory.wrapped_cauchy")
def check_wrapped_cauchy(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """``beta = 0`` exact solution: the wrapped Cauchy family (Ott–Antonsen, docs/equations.md section 4).

    ``rho_0`` wrapped Cauchy with ``r_0 = 0.3``, ``phi = 1``; then ``phi`` is constant and
    ``r(t)^2 = r_0^2 e^t / (1 - r_0^2 + r_0^2 e^t)``. SA and USA (equal at ``beta = 0``), PDE
    on the circle with refinement, ``rtol = 1e-11``, compared at ``t = 0.5, 1, 2``.

    Tolerance: ``1e-8`` on ``max|rho - rho_exact| / max rho_exact``. The solver keeps the
    spectral tail below ``tail_tol = 1e-10`` (relative to the mean, so the truncation error
    is below ``1e-10 * N``-ish of the mean, ``< 1e-9`` relative to the peak for ``N <= 512``)
    and the time error at ``rtol = 1e-11`` accumulated over ``~10^2`` steps is ``~1e-9``.
    """
    from meanfield import Circle, Model, initial, solve

    r0, phi = 0.3, 1.0
    times = np.array([0.0, 0.5, 1.0, 2.0])
    rows, curves = {}, {}
    comparisons = []
    for att in ("softmax", "unnormalized"):
        model = Model(beta=0.0, attention=att)
        dom = Circle(64)
        ds = solve(model, dom, initial.wrapped_cauchy(dom, r0, phi), times, rtol=1e-11, atol=1e-14)
        th = ds["theta"].values
        worst = 0.0
        for i, t in enumerate(times):
            r = math.sqrt(r0**2 * math.exp(t) / (1 - r0**2 + r0**2 * math.exp(t)))
            exact = (1 - r * r) / (2 * np.pi * (1 - 2 * r * np.cos(th - phi) + r * r))
            worst = max(worst, float(np.max(np.abs(ds["density"].values[i] - exact)) / exact.max()))
        rows[att] = {"max relative error": worst}
        comparisons.append(Comparison(f"{att}: max|rho - rho_exact| / max rho_exact", worst, 0.0, 1e-8,
                                      "abs"))
        curves[att] = ds
    fig, ax = subplots(figsize=(6, 4))
    ds = curves["softmax"]
    th = ds["theta"].values
    for i, t in enumerate(times):
        r = math.sqrt(r0**2 * math.exp(t) / (1 - r0**2 + r0**2 * math.exp(t)))
        ax.plot(th, (1 - r * r) / (2 * np.pi * (1 - 2 * r * np.cos(th - phi) + r * r)), "k--", lw=1)
        ax.plot(th, ds["density"].values[i], "-", label=f"PDE t = {t}")
    angle_axis(ax.xaxis, r"$\theta$")
    ax.set_ylabel("density (dashed: exact)")
    ax.legend(fontsize=7)
    figure = save_figure(fig, out_dir, "wrapped_cauchy")
    return CheckResult(
        name="theory.wrapped_cauchy",
        quantity="beta = 0 PDE vs the exact wrapped Cauchy solution (max relative error)",
        comparisons=tuple(comparisons),
        description="0; tolerance 1e-8",
        details=rows,
        data=curves["softmax"],
        figure=figure,
    )


__all__ = [
    "REFERENCE_RATES",
    "check_growth_rates",
    "check_noise_threshold",
    "check_orthogonal_start",
    "check_wendel",
    "check_wrapped_cauchy",
    "growth_rate",
    "in_open_hemisphere",
    "wendel_probability",
]
