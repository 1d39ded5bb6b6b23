"""Checks of the papers' exact statements (docs/equations.md sections 4 and 8).

.. autosummary::
   REPULSIVE_CASES
   repulsive_limit
   check_repulsive_designs

* ``theory.repulsive_designs``: long repulsive (``V = -I``) runs reach the sharp
  configurations of Theorem 9.2 (simplex, cross-polytope, icosahedron, regular polygon):
  their distinct inner products and the design sums ``S_l = 0`` for ``1 <= l <= t``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from meanfield import theory
from meanfield.figures import subplots

from ..records import CheckResult, Comparison
from ..suites import check
from .convergence import _save

# -- the repulsive case (Section 9.1, Theorem 9.2) -------------------------------------------

REPULSIVE_CASES: dict[str, tuple[tuple[str, int, int], ...]] = {
    # the three families the issue names, on S^2 (about 1.5 s together)
    "quick": (("simplex", 4, 3), ("cross-polytope", 6, 3), ("icosahedron", 12, 3)),
    "full": (("simplex", 4, 3), ("cross-polytope", 6, 3), ("icosahedron", 12, 3),
             ("polygon", 5, 2), ("simplex", 5, 4), ("cross-polytope", 8, 4), ("simplex", 3, 5)),
}
"""``(kind, n, d)`` per suite: the known sharp configurations (:func:`meanfield.theory.sharp_configuration`)."""

REPULSIVE_BETA = 3.0
"""Inverse temperature of the repulsive runs. At ``beta = 1`` the energy is nearly
quadratic in the Gram matrix and the modes that select a 3- or 5-design are slow (measured:
the octahedron and icosahedron still moved at 1e-3 at ``t = 60``); at ``beta = 3`` every
case reaches speed ``< 1e-12`` by ``t = 150``."""

REPULSIVE_T, REPULSIVE_DT, REPULSIVE_STARTS = 150.0, 0.2, 4
"""End time, RK4 step and number of random starts per case. The step changes the path, not
the end point: a fixed point of an RK4 step is a zero of the field (the step is the identity
exactly where ``x' = 0``), so it sets only how fast the run gets there (at ``0.2`` the
decay rates measured are those of ``0.1``)."""

SPEED_TOL = 1e-12
"""Stationarity: the largest token speed ``max_i |x_i'|`` at the end of the run."""

GRAM_TOL = 1e-10
"""Tolerance on ``max |<x_i, x_j> - <y_i, y_j>|`` (both sorted), ``y`` the exact configuration.

Argument: near a minimum that is non-degenerate up to rotations, the distance to the set of
minimisers is at most ``|grad| / lambda_min``, ``lambda_min`` the smallest non-zero rate of the
linearised flow. The check measures that rate from the decay of the speed (``details``:
``decay_rate``, at least 0.2 in every case), so a final speed below ``SPEED_TOL = 1e-12``
puts each token within ``5e-12`` of an exact configuration and each inner product within
``2e-11``, a factor 5 below this tolerance. Round-off in the Gram matrix is ``1e-16``."""


def _design_tol(l: int) -> float:
    """Tolerance on ``|S_l|``: the inner products are within ``GRAM_TOL`` of the exact ones and
    ``|P_l'| <= l^2`` on ``[-1, 1]`` (the normalised zonal polynomial peaks at ``t = 1`` with
    derivative ``l(l + d - 2)/(d - 1) <= l^2``), so ``|S_l| <= l^2 GRAM_TOL``."""
    return l * l * GRAM_TOL


def repulsive_limit(kind: str, n: int, d: int, *, beta: float = REPULSIVE_BETA,
                    t_end: float = REPULSIVE_T, dt: float = REPULSIVE_DT,
                    starts: int = REPULSIVE_STARTS, seed: int = 0) -> dict[str, Any]:
    """Run USA with ``V = -I`` (gradient descent of ``E_beta``, docs/equations.md section 2) from
    ``starts`` uniform random starts and compare the end points with the exact configuration.

    Returns a dict with ``comparisons`` (per start: final speed, Gram error, design sums and the
    next sum, which must equal the exact configuration's, non-zero), ``speed`` (time, start),
    ``times``, ``design`` (start, l) and the numbers of ``details``.
    """
    import particles
    from meanfield import Model

    exact, strength = theory.sharp_configuration(kind, n, d)
    model = Model(beta, attention="unnormalized", value=-1)
    rng = np.random.default_rng([seed, n, d])
    x0 = particles.sample_sphere(n, d, rng, batch=starts)
    times = np.linspace(0.0, t_end, 151)
    ds = particles.simulate(model, x0, times, method="rk4", dt=dt, observables=False)
    x = np.asarray(ds["x"].values)  # (time, start, n, d)
    v = np.asarray(particles.velocity(model, x.reshape(-1, n, d))).reshape(x.shape)
    speed = np.linalg.norm(v, axis=-1).max(axis=-1)  # (time, start)
    iu = np.triu_indices(n, 1)
    g_exact = np.sort((exact @ exact.T)[iu])
    lmax = strength + 1
    s_exact = theory.design_sums(exact, lmax)
    label = f"{kind} n={n} d={d}"
    comparisons: list[Comparison] = []
    gram_err, design, rates = [], [], []
    for b in range(starts):
        xb = x[-1, b]
        gram_err.append(float(np.max(np.abs(np.sort((xb @ xb.T)[iu]) - g_exact))))
        design.append(theory.design_sums(xb, lmax))
        window = (speed[:, b] > 1e-11) & (speed[:, b] < 1e-5)  # the linear regime, above round-off
        rates.append(float(-np.polyfit(times[window], np.log(speed[window, b]), 1)[0])
                     if window.sum() >= 3 else float("nan"))
        comparisons += [
            Comparison(f"{label} start {b}: final max speed", speed[-1, b], SPEED_TOL, 0.0, "max"),
            Comparison(f"{label} start {b}: sorted inner products vs exact", gram_err[-1], 0.0, GRAM_TOL, "abs"),
        ]
        comparisons += [Comparison(f"{label} start {b}: design sum S_{l}", design[-1][l - 1], 0.0,
                                   _design_tol(l), "abs") for l in range(1, strength + 1)]
        # the strength is exactly t: S_{t+1} is the exact configuration's (non-zero) value
        comparisons.append(Comparison(f"{label} start {b}: S_{lmax} (strength exactly {strength})",
                                      design[-1][-1], s_exact[-1], _design_tol(lmax), "abs"))
    values, counts = np.unique(np.round(g_exact, 9), return_counts=True)
    return {"comparisons": comparisons, "speed": speed, "times": times, "design": np.array(design),
            "strength": strength, "row": {
                "case": label, "strength": strength, "inner_products": values.tolist(),
                "multiplicities": counts.tolist(), "max_gram_error": max(gram_err),
                "max_final_speed": float(speed[-1].max()), "decay_rate": rates,
                "S_exact_next": float(s_exact[-1])}}


@check("theory.repulsive_designs")
def check_repulsive_designs(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Repulsive dynamics (``V = -I``, USA, ``beta = 3``) from random starts reach the sharp
    configurations of Theorem 9.2 (Section 9.1; docs/equations.md section 8).

    For ``(n, d)`` with a known sharp configuration (simplex ``n <= d + 1``, cross-polytope
    ``n = 2d``, icosahedron ``n = 12, d = 3``; the full suite adds the pentagon and ``d = 4, 5``),
    each run must end (a) stationary: max speed ``<= 1e-12``; (b) with the exact configuration's
    inner products and multiplicities (sorted Gram entries within ``1e-10``); (c) a spherical
    ``t``-design: ``S_l = (1/n^2) sum_ij P_l(<x_i, x_j>) = 0`` for ``1 <= l <= t`` within
    ``l^2 1e-10``, and ``S_{t+1}`` equal to the exact configuration's non-zero value (the
    strength is exactly ``t``).

    Tolerance: see :data:`GRAM_TOL` (speed over the measured linear decay rate bounds the
    distance to the limit) and :func:`_design_tol` (the derivative of ``P_l``).
    """
    rows, comparisons, runs = [], [], {}
    for kind, n, d in REPULSIVE_CASES[suite]:
        out = repulsive_limit(kind, n, d, seed=seed)
        comparisons += out["comparisons"]
        rows.append(out["row"])
        runs[out["row"]["case"]] = out
    fig, (ax1, ax2) = subplots(1, 2, figsize=(11, 4))
    for i, (label, out) in enumerate(runs.items()):
        col = f"C{i % 10}"
        ax1.semilogy(out["times"], np.maximum(out["speed"], 1e-17), color=col, lw=0.8)
        ax1.plot([], [], color=col, label=label)
        ls = np.arange(1, out["strength"] + 2)
        ax2.semilogy(ls + 0.05 * i, np.maximum(np.abs(out["design"]).T, 1e-18), "o", color=col, ms=3)
    ax1.axhline(SPEED_TOL, color="k", ls="--", lw=1)
    ax1.set_xlabel("t")
    ax1.set_ylabel("max_i |x_i'|")
    ax1.set_title(f"repulsive USA, beta = {REPULSIVE_BETA:g}")
    ax1.legend(fontsize=7)
    lmax = max(out["strength"] for out in runs.values()) + 1
    ll = np.arange(1, lmax + 1)
    ax2.semilogy(ll, [_design_tol(l) for l in ll], "k--", lw=1, label="tolerance of S_l, l <= t")
    ax2.set_xlabel("degree l")
    ax2.set_ylabel("|S_l| (zero for l <= t, the design strength)")
    ax2.legend(fontsize=7)
    figure = _save(fig, out_dir, "repulsive_designs")
    data = xr.Dataset({"final_speed": ("case", [r["max_final_speed"] for r in rows]),
                       "gram_error": ("case", [r["max_gram_error"] for r in rows]),
                       "strength": ("case", [r["strength"] for r in rows])},
                      coords={"case": [r["case"] for r in rows]},
                      attrs={"beta": REPULSIVE_BETA, "t_end": REPULSIVE_T, "dt": REPULSIVE_DT,
                             "starts": REPULSIVE_STARTS})
    return CheckResult(
        name="theory.repulsive_designs",
        quantity="end points of repulsive runs vs the sharp configurations of Theorem 9.2",
        comparisons=tuple(comparisons),
        description=(f"speed <= {SPEED_TOL:g}; sorted inner products within {GRAM_TOL:g}; "
                     "S_l = 0 within l^2 1e-10 for l <= t; S_{t+1} the exact value"),
        details={"rows": rows},
        data=data,
        figure=figure,
    )


__all__ = ["REPULSIVE_CASES", "check_repulsive_designs", "repulsive_limit"]
