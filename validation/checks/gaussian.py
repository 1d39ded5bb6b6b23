"""Particles in ``R^d`` started from a Gaussian against the mean/covariance ODE.

.. autosummary::
   check_gaussian_particles
   SUITES
   CASES

The mean-field limit of the particle system (docs/equations.md section 2, no layer normalisation) from
i.i.d. ``N(m0, Sigma0)`` tokens is the Gaussian ``N(m(t), Sigma(t))`` of docs/equations.md section 4
(``meanfield.gaussian.solve_gaussian``). The empirical mean and covariance of ``n`` particles
at a fixed time ``T`` then differ from ``m(T)``, ``Sigma(T)`` by ``O(n^{-1/2})`` (a CLT: the
initial fluctuations are ``O(n^{-1/2})`` and the flow map is Lipschitz; the bias of the
empirical measure is ``O(1/n)``). This check measures that law, for softmax, two-head
softmax and L2 attention, by the slope of ``log(error)`` against ``log(n)``.
"""

from __future__ import annotations

import json
import math
import pathlib
import time as _time
from typing import Any

import numpy as np
import xarray as xr

from meanfield.fits import fit_power_law
from meanfield.gaussian import solve_gaussian
from meanfield.model import Model
from validation.records import CheckResult, Comparison
from validation.suites import check

NAME = "gaussian.particles"

T_FINAL = 0.5
"""The fixed time of the comparison."""

DT = 0.25
"""RK4 step of the particles. Against a step of 1/16 it moves the empirical mean and
covariance at ``T_FINAL`` by at most 6e-5 for these cases (measured at n = 1000), below 3% of
the sampling error at the largest ``n`` (about ``0.5 / sqrt(50 000) = 2e-3``)."""

DTYPE = "float32"
"""The particles' arithmetic. Float32 halves the cost of the ``n x n`` attention sums (measured:
1.9 s against 3.7 s of CPU for 4 replicas at n = 3200); its round-off moves the empirical moments
at ``T_FINAL`` by about ``1e-8`` (measured against float64 at n = 3200; at most ``n eps_32 ~
4e-4`` relative in the worst case of the sums), at least 1e4 times below the sampling error
``0.5 / sqrt(n)`` that the check measures (``2e-3`` at n = 50 000)."""

SUITES: dict[str, dict[str, tuple[int, ...]]] = {
    # n from 200 to 3200: the same 62 samples per case and the same spread of log(n) (a
    # factor 16) as n from 400 to 6400, hence the same width of the slope intervals (the
    # residuals of log(error) do not depend on n), at a quarter of the n^2 work: 12.6 s of
    # CPU in float32 with the replicas batched (82 s for 400..6400 in float64, one replica a
    # call). The contrasts (details "power", not gated) are weaker at smaller n, where the
    # wrong ODE's offset is a smaller part of the error. Measured, covariance contrasts
    # (slope, upper end of the interval): seed 0, multihead -0.27/-0.10 and l2 -0.23/-0.08
    # (400..6400: -0.28/-0.12, -0.15/-0.006); seed 1, multihead -0.51/-0.28, whose interval
    # holds -1/2, as it does at 400..6400 (-0.31/-0.10, lower end -0.52), and l2 -0.21/-0.07
    # (-0.19/-0.06); the mean contrasts exclude -1/2 in both designs. At 100..1600 the
    # multihead contrast is lost (seed 0: -0.48). The larger n and the sharper contrasts
    # are the full suite's. Since issue 23 the check runs in the full suite only (10 s of the
    # quick suite's 70 on 2 cores); tests/validation/test_quick_suite.py runs these sizes
    "quick": {"n": (200, 400, 800, 1600, 3200), "replicas": (32, 16, 8, 4, 2)},
    # n from 1 000 to 50 000, as in the issue: about 2e11 attention entries x evaluations
    # (some 13 minutes of one core); two replicas at the largest n, where leverage is highest
    "full": {"n": (1000, 2000, 5000, 12500, 50000), "replicas": (32, 16, 8, 4, 2)},
}
"""Sample sizes ``n`` and the number of independent replicas at each (more where cheap)."""

FAMILY_LEVEL = 0.99
"""Family-wise confidence of the six slope intervals (3 cases x mean, covariance), by
Bonferroni: each interval has level ``1 - (1 - FAMILY_LEVEL) / 6``. At 95% one run in twenty
would fail by chance (seen: seed 0 of an earlier full design, one replica at n = 50 000, whose
initial sample means happened to lie 0.2-0.5 of their standard deviation from ``MEAN0``)."""

EXPECTED_SLOPE = -0.5

MEAN0 = np.array([0.3, -0.2, 0.1])
COV0 = np.array([[0.21, 0.035, 0.035], [0.035, 0.21, 0.035], [0.035, 0.035, 0.21]])

_Q1 = [[1.09, -0.3, 0.22], [0.27, 0.44, -0.38], [0.04, -0.09, 1.0]]
_K1 = [[-1.48, 0.71, 0.14], [-0.24, 0.08, 0.6], [-0.44, 0.26, -1.44]]
_V1 = [[1.25, -0.01, -0.05], [-0.2, 1.35, -0.04], [-0.12, -0.1, 1.15]]
_Q2 = [[0.21, 0.24, 0.25], [1.24, -0.23, -0.3], [-0.47, 0.36, 0.65]]
_K2 = [[-0.07, -0.49, -0.48], [0.38, 0.43, 0.31], [-0.38, 0.13, 0.07]]
_V2 = [[0.09, 0.35, 0.09], [0.27, 0.03, 0.12], [0.26, -0.59, -0.13]]

CASES: dict[str, Model] = {
    "softmax": Model(beta=1.0, Q=_Q1, K=_K1, V=_V1),
    "multihead": Model(beta=1.0, heads=[(_Q1, _K1, _V1), (_Q2, _K2, _V2)]),
    "l2": Model(beta=1.0, attention="l2", Q=_Q1, K=_K1, V=_V1),
}
"""The models compared, in ``R^3``. ``K1`` is close to ``-Q1`` (a contracting, clustering
flow). With ``COV0``, every head has ``tail = lambda_max(2 S^{1/2} A^T S A S^{1/2}) < 1/2``
(``S = Sigma``), which decreases along the flow: the softmax weights ``e^{<Ax, y>}`` of the
particles have relative variance ``e^{x^T A^T S A x} - 1`` at a query ``x``, and its mean under
``x ~ N(m, S)`` is finite only when ``tail < 1``. Above that, the per-particle field error has
no finite variance and the moments converge more slowly than ``n^{-1/2}`` at accessible
``n`` (measured: ``tail = 3.4`` gives a field error falling like ``n^{-0.3}``). ``details``
records ``tail``."""

_CONTRASTS = {"multihead": "softmax", "l2": "softmax"}
"""Power of the test: the particles of a case set against the ODE of another case (a wrong
reduction, e.g. L2 particles against the softmax ODE) must give a slope whose interval
excludes -1/2. Reported in ``details``, not part of ``passed``."""


def _tail(model: Model, cov: np.ndarray) -> float:
    """``max_h lambda_max(2 S^{1/2} A_h^T S A_h S^{1/2})``: below 1, the relative variance of
    the softmax weights has a finite mean over the queries (see :data:`CASES`)."""
    lam, vec = np.linalg.eigh(cov)
    root = (vec * np.sqrt(lam)) @ vec.T
    out = 0.0
    for q, k, _ in model.matrices(cov.shape[0]):
        a = model.beta * k.T @ q
        out = max(out, float(np.linalg.eigvalsh(2.0 * root @ a.T @ cov @ a @ root)[-1]))
    return out


def _simulate(model: Model, x0: np.ndarray) -> np.ndarray:
    """Tokens at ``T_FINAL`` from ``particles.simulate`` (euclidean geometry, RK4); ``x0``
    ``(n, d)`` or a batch ``(B, n, d)`` of independent systems."""
    import particles

    ds = particles.simulate(model, x0, np.array([0.0, T_FINAL]), geometry="euclidean", method="rk4", dt=DT,
                            observables=False, dtype=DTYPE)  # energies are not needed here
    return np.asarray(ds["x"].isel(time=-1).values)


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = x.mean(axis=0)
    c = x - m
    return m, c.T @ c / len(x)  # the empirical measure's covariance (1/n)


@check(NAME, suites=("full",))  # 10 s of the quick suite: its quick sizes run in the tests
def check_gaussian_particles(*, seed: int, out_dir: pathlib.Path, suite: str) -> CheckResult:
    """Empirical mean and covariance of ``n`` particles at ``T_FINAL`` against the Gaussian
    ODE; their errors must fall like ``n^{-1/2}`` (softmax, multi-head, L2).

    Tolerance: each fitted log-log slope (all replicas, least squares) has a Student-t
    interval at level ``1 - 0.01/6`` (Bonferroni over the six fits, family-wise 99%), which
    must contain ``-1/2``. The residuals are those of ``log`` of a norm of a Gaussian vector
    (3 or 6 components), identically distributed across ``n``, so the interval is valid up
    to the ``O(n^{-1/2})`` skew of the finite-n distribution.

    Measured: the particles' moments at ``T`` are, to about a tenth of the error, those of
    the ODE started from the sample's own initial moments, so the error is the initial
    sampling error of the mean and covariance carried by the (linearised) flow; ``details``
    report the remainder (``..._vs_ode_from_sample_moments``). ``details`` also hold the
    intervals, ``sqrt(n)`` times the RMS errors (flat under the
    law), the tail condition along the run (see :data:`CASES`), and the power of the test:
    the slopes obtained against the ODE of another case, whose intervals should exclude -1/2.
    """
    import particles

    if suite not in SUITES:
        msg = f"suite must be one of {tuple(SUITES)}, got {suite!r}"
        raise ValueError(msg)
    out_dir = pathlib.Path(out_dir)
    sizes, replicas = SUITES[suite]["n"], SUITES[suite]["replicas"]
    level = 1.0 - (1.0 - FAMILY_LEVEL) / (2 * len(CASES))
    targets, tails = {}, {}
    for name, model in CASES.items():
        ds = solve_gaussian(model, MEAN0, COV0, np.linspace(0.0, T_FINAL, 11))
        targets[name] = (ds["mean"].values[-1], ds["cov"].values[-1])
        tails[name] = max(_tail(model, c) for c in ds["cov"].values)

    ns, reps, errs, timings = [], [], {}, {}
    contrast_errs: dict[str, list[tuple[float, float]]] = {k: [] for k in _CONTRASTS}
    resid: dict[str, list[tuple[float, float]]] = {k: [] for k in CASES}
    for case_index, (name, model) in enumerate(CASES.items()):
        start = _time.perf_counter()
        rows = []
        for n, count in zip(sizes, replicas):
            # the replicas of one n run as one batch (one call, one set of monitors): the
            # same samples, the same per-replica computation, less Python per replica
            x0s = np.stack([particles.sample_gaussian(MEAN0, COV0, n,
                                                      np.random.default_rng([seed, case_index, n, r]))
                            for r in range(count)])
            xs = _simulate(model, x0s)
            for r in range(count):
                x0 = x0s[r]
                m, c = _moments(xs[r])
                rows.append((np.linalg.norm(m - targets[name][0]),
                             np.linalg.norm(c - targets[name][1])))
                # the same ODE started from the sample's own moments: what remains is the
                # non-Gaussian, mean-field part of the error (diagnostic, not gated)
                m0, c0 = _moments(x0)
                own = solve_gaussian(model, m0, c0, [0.0, T_FINAL])
                resid[name].append((float(np.linalg.norm(m - own["mean"].values[-1])),
                                    float(np.linalg.norm(c - own["cov"].values[-1]))))
                if name in _CONTRASTS:
                    wm, wc = targets[_CONTRASTS[name]]
                    contrast_errs[name].append((float(np.linalg.norm(m - wm)),
                                                float(np.linalg.norm(c - wc))))
                if case_index == 0:
                    ns.append(n)
                    reps.append(r)
        errs[name] = np.array(rows)
        timings[name] = _time.perf_counter() - start
    n_arr = np.array(ns, dtype=float)

    fits = {name: {q: fit_power_law(n_arr, errs[name][:, i], level)
                   for i, q in enumerate(("mean", "cov"))} for name in CASES}
    comparisons = tuple(Comparison(f"{name} {q}: log-log slope of the error", f["slope"], EXPECTED_SLOPE,
                                   kind="ci", low=f["lo"], high=f["hi"])
                        for name, fq in fits.items() for q, f in fq.items())
    power = {}
    for name, other in _CONTRASTS.items():
        e = np.array(contrast_errs[name])
        power[f"{name} particles vs {other} ODE"] = {
            q: fit_power_law(n_arr, e[:, i], level) for i, q in enumerate(("mean", "cov"))}

    data = xr.Dataset(
        {"error": (("case", "quantity", "sample"),
                   np.stack([errs[name].T for name in CASES]),
                   {"long_name": "|particles - ODE| at T (mean: Euclidean, cov: Frobenius)"})},
        coords={"case": list(CASES), "quantity": ["mean", "cov"],
                "n": ("sample", n_arr.astype(int)), "replica": ("sample", np.array(reps))},
        attrs={"t_final": T_FINAL, "dt": DT, "seed": seed, "suite": suite,
               "models": json.dumps({k: m.state() for k, m in CASES.items()}),
               "mean0": json.dumps(MEAN0.tolist()), "cov0": json.dumps(COV0.tolist())},
    )
    figure = _figure(n_arr, errs, fits, out_dir / "gaussian_particles.png")
    return CheckResult(
        name=NAME,
        quantity=(f"log-log slope of |mean| and |cov| errors of particles vs the Gaussian ODE at "
                  f"t = {T_FINAL}, against n (softmax, 2-head softmax, L2; R^3)"),
        comparisons=comparisons,
        description=f"-1/2 inside the {level:.4f} confidence interval of each slope",
        details={
            "fits": fits, "power": power, "n": list(sizes),
            "replicas": list(replicas), "t_final": T_FINAL, "dt": DT,
            "wall_time_s": timings, "tail_max_over_t": tails,
            "sqrt_n_rms_error": {name: _scaled_rms(n_arr, errs[name]) for name in CASES},
            "sqrt_n_rms_error_vs_ode_from_sample_moments": {
                name: _scaled_rms(n_arr, np.array(resid[name])) for name in CASES},
        },
        data=data,
        figure=str(figure),
    )


def _scaled_rms(n: np.ndarray, err: np.ndarray) -> dict[str, list[float]]:
    """``sqrt(n) * RMS error`` per ``n`` (flat for an ``n^{-1/2}`` law)."""
    out: dict[str, list[float]] = {"n": [], "mean": [], "cov": []}
    for value in np.unique(n):
        sel = n == value
        out["n"].append(int(value))
        for i, q in enumerate(("mean", "cov")):
            out[q].append(float(math.sqrt(value * np.mean(err[sel, i] ** 2))))
    return out


def _figure(n: np.ndarray, errs: dict[str, np.ndarray], fits: dict[str, Any],
            path: pathlib.Path) -> pathlib.Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    from meanfield import io

    fig = Figure(figsize=(4.2 * len(errs), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(errs), sharey=True)
    grid = np.geomspace(n.min(), n.max(), 20)
    for ax, (name, e) in zip(np.atleast_1d(axes), errs.items()):
        for i, (q, marker, colour) in enumerate((("mean", "o", "C0"), ("cov", "s", "C1"))):
            f = fits[name][q]
            ax.loglog(n, e[:, i], marker, color=colour, ms=3, alpha=0.5, ls="none")
            ax.loglog(grid, np.exp(f["intercept"]) * grid ** f["slope"], color=colour,
                      label=f"{q}: slope {f['slope']:.2f} [{f['lo']:.2f}, {f['hi']:.2f}]")
        ref = np.exp(fits[name]["mean"]["intercept"]) * n.min() ** fits[name]["mean"]["slope"]
        ax.loglog(grid, ref * (grid / n.min()) ** -0.5, "k--", lw=0.8, label=r"$n^{-1/2}$")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: no overlapping labels
        ax.set_title(name)
        ax.set_xlabel("n")
        # below the axes: the replicas fill the plot from corner to corner
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18))
    np.atleast_1d(axes)[0].set_ylabel(f"|particles - ODE| at t = {T_FINAL}")
    return io.save_png(fig, path)


__all__ = ["CASES", "SUITES", "check_gaussian_particles"]
