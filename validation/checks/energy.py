"""Energy checks: monotonicity and the dissipation identity, PDE and particles (docs/equations.md
sections 2, 3 and 6).

.. autosummary::
   check_energy_pde
   check_energy_particles
   check_energy_pde_vs_particles

Along SA and USA the energy ``E_beta`` never decreases (never increases for ``V = -I``), and
``dE/dt`` equals the dissipation ``D`` (Lemma 3.7, (3.6)); the checks integrate ``D`` in time
and compare with the change of ``E``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats

from meanfield.plots.figures import subplots
from validation.checks.common import save_figure, smooth_density
from validation.records import CheckResult, Comparison
from validation.suites import check


def _models() -> dict[str, Any]:
    from meanfield import Model

    return {
        "SA": Model(beta=1.0, attention="softmax"),
        "USA": Model(beta=1.0, attention="unnormalized"),
        "SA repulsive": Model(beta=1.0, attention="softmax", value=-1),
    }


def _simpson(y: np.ndarray, h: float) -> float:
    """Composite Simpson rule (even number of intervals)."""
    return float(h / 3.0 * (y[0] + y[-1] + 4.0 * y[1:-1:2].sum() + 2.0 * y[2:-1:2].sum()))


def _energy_row(E: np.ndarray, D: np.ndarray, times: np.ndarray, sign: float, mono_tol: float,
                identity_floor: float) -> dict[str, Any]:
    """One model's numbers: the worst signed increment of ``E`` against ``mono_tol``, and
    ``|Delta E - int D dt|`` against ``3 eps_S + identity_floor`` (``eps_S`` from
    :func:`_identity`; the tolerances are argued in each check's docstring)."""
    worst = float(np.min(sign * np.diff(E)))
    dE, intD, eps = _identity(E, D, times)
    tol = 3 * eps + identity_floor
    return {"min signed increment": worst, "monotone tol": mono_tol, "Delta E": dE,
            "int D dt": intD, "identity error": abs(dE - intD), "identity tol": tol}


def _energy_comparisons(label: str, row: dict[str, Any]) -> list[Comparison]:
    """Monotone (``min signed increment >= -monotone tol``) and the dissipation identity
    (``Delta E = int D dt`` within ``identity tol``) of one :func:`_energy_row`."""
    return [Comparison(f"{label}: min signed increment of E", row["min signed increment"], 0.0,
                       row["monotone tol"], "min"),
            Comparison(f"{label}: Delta E vs int D dt", row["Delta E"], row["int D dt"],
                       row["identity tol"], "abs")]


def _identity(E: np.ndarray, D: np.ndarray, times: np.ndarray) -> tuple[float, float, float]:
    """``(Delta E, int D dt, Richardson estimate of the quadrature error)``."""
    h = float(times[1] - times[0])
    fine = _simpson(D, h)
    coarse = _simpson(D[::2], 2 * h)
    return float(E[-1] - E[0]), fine, abs(fine - coarse) / 15.0


def _energy_figure_and_data(curves: dict, times: np.ndarray, out_dir: Path, name: str,
                            energy_label: str, dissipation_label: str) -> tuple:
    """Energy and dissipation against t per model (figure) and the same numbers as a Dataset."""
    fig, axes = subplots(1, 2, figsize=(10, 4))
    for label, (E, D) in curves.items():
        axes[0].plot(times, E, label=label)
        axes[1].plot(times, D, label=label)
    axes[0].set_xlabel("t")
    axes[0].set_ylabel(energy_label)
    axes[1].set_xlabel("t")
    axes[1].set_ylabel(dissipation_label)
    axes[0].legend(fontsize=7)
    figure = save_figure(fig, out_dir, name)
    labels = list(curves)
    data = xr.Dataset(
        {"energy": (("model", "time"), np.array([curves[k][0] for k in labels])),
         "dissipation": (("model", "time"), np.array([curves[k][1] for k in labels]))},
        coords={"model": labels, "time": times},
    )
    return figure, data


def _pde_vs_particles_figure(times: np.ndarray, E_pde: np.ndarray, ns: Sequence[int],
                             Ep_all: Sequence[np.ndarray], corr_all: Sequence[np.ndarray],
                             zcrit: float, out_dir: Path) -> str:
    """PDE energy against the particles' mean energy (error bars ``zcrit`` standard errors
    over the seeds, the columns of ``Ep_all[i]``), raw and corrected; the legend beside the
    axes, where it covers no point."""
    fig, ax = subplots(figsize=(8.5, 4.5))
    ax.plot(times, E_pde, "k-", lw=2, label=r"PDE $E_\beta[\rho(t)]$")
    for i, n in enumerate(ns):
        m = Ep_all[i].mean(axis=1)
        se = Ep_all[i].std(axis=1, ddof=1) / math.sqrt(Ep_all[i].shape[1])
        ax.errorbar(times, m, yerr=zcrit * se, fmt="o", ms=3, color=f"C{i}",
                    label=f"particles n = {n} (mean)")
        ax.plot(times, m - corr_all[i], "--", color=f"C{i}", label=f"particles n = {n}, corrected")
    ax.set_xlabel("t")
    ax.set_ylabel(r"energy $E_\beta$")
    ax.set_title(r"SA $\beta$ = 1 on the circle: PDE vs particles")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return save_figure(fig, out_dir, "energy_pde_vs_particles")


@check("energy.pde")
def check_energy_pde(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """PDE energy: monotone, and ``E(T) - E(0) = int_0^T D dt`` (dissipation identity).

    Circle, ``beta = 1``: SA, USA and repulsive SA, ``rho_0 ∝ e^{cos theta}(1 + 0.3 sin 2
    theta)``, ``t in [0, 1]`` with 41 outputs, ``rtol = 1e-10``.

    Tolerances:

    * monotonicity: every increment ``s (E_{i+1} - E_i) >= -10 rtol max|E|``; the solver
      controls the coefficients to ``rtol`` per step, so the computed energy carries a
      relative error of that order (10: accumulation over the steps of an output interval).
    * identity: ``|Delta E - int D| <= 3 eps_S + 10 rtol max|E|`` with ``eps_S`` the
      Richardson estimate ``|S_h - S_{2h}|/15`` of the Simpson rule's ``O(h^4)`` error
      (the factor 3 covers the estimate's own uncertainty, its next term being ``O(h^6)``).
    """
    from meanfield import Circle, solve

    rtol = 1e-10
    times = np.linspace(0.0, 1.0, 41)
    rows, curves = {}, {}
    comparisons: list[Comparison] = []
    for label, model in _models().items():
        ds = solve(model, Circle(64), smooth_density, times, rtol=rtol, atol=1e-13)
        E, D = ds["energy"].values, ds["dissipation"].values
        scale = float(np.max(np.abs(E)))
        rows[label] = _energy_row(E, D, times, model.sign, 10 * rtol * scale, 10 * rtol * scale)
        comparisons += _energy_comparisons(label, rows[label])
        curves[label] = (E, D)
    figure, data = _energy_figure_and_data(
        curves, times, out_dir, "energy_pde", "E_beta[rho(t)]", "dissipation D (= dE/dt)")
    return CheckResult(
        name="energy.pde",
        quantity="PDE energy monotone and dE = int D dt (circle; SA, USA, repulsive)",
        comparisons=tuple(comparisons),
        description=("monotone to 10 rtol max|E|; identity within quadrature + solver error "
                     "(3 Richardson + 10 rtol max|E|)"),
        details=rows,
        data=data,
        figure=figure,
    )


@check("energy.particles")
def check_energy_particles(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Particle energy: monotone, and ``E(T) - E(0) = int_0^T D dt`` (docs/equations.md section 2).

    ``n = 32`` tokens on ``S^2`` (i.i.d. uniform), ``beta = 1``: SA, USA, repulsive SA; RK4
    with ``dt = 0.01`` to ``t = 2``, 41 outputs.

    Tolerances: the trajectory error of RK4 is ``O(dt^4)``; its effect on ``E`` is estimated
    by a second run with ``dt/2`` (Richardson: ``|E_dt - E_{dt/2}| 16/15``). Monotone:
    increments ``>= -(2 eps_RK + 1e-13 max|E|)`` (round-off of the energy sum). Identity:
    ``|Delta E - int D| <= 3 (eps_S + eps_RK) + 1e-13 max|E|`` with ``eps_S`` Simpson's
    Richardson estimate (factor 3 as in :func:`check_energy_pde`).
    """
    import particles

    times = np.linspace(0.0, 2.0, 41)
    rng = np.random.default_rng(seed)
    x0 = particles.sample_sphere(32, 3, rng)
    rows, curves = {}, {}
    comparisons: list[Comparison] = []
    for label, model in _models().items():
        a = particles.simulate(model, x0, times, method="rk4", dt=0.01)
        b = particles.simulate(model, x0, times, method="rk4", dt=0.005)
        E, D = a["energy"].values, a["dissipation"].values
        eps_rk = float(np.max(np.abs(E - b["energy"].values))) * 16 / 15
        scale = float(np.max(np.abs(E)))
        rows[label] = _energy_row(E, D, times, model.sign, 2 * eps_rk + 1e-13 * scale,
                                  3 * eps_rk + 1e-13 * scale)
        comparisons += _energy_comparisons(label, rows[label])
        curves[label] = (E, D)
    figure, data = _energy_figure_and_data(
        curves, times, out_dir, "energy_particles", "E_beta(X(t)), n = 32, d = 3",
        "dissipation D")
    return CheckResult(
        name="energy.particles",
        quantity="particle energy monotone and dE = int D dt (S^2, n=32; SA, USA, repulsive)",
        comparisons=tuple(comparisons),
        description=("monotone; identity within quadrature + RK4 error (Richardson estimates "
                     "of the RK4 and Simpson errors, x3, + round-off)"),
        details=rows,
        data=data,
        figure=figure,
    )


@check("energy.pde_vs_particles")
def check_energy_pde_vs_particles(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """PDE and particle energies on the same axes, with the self-interaction correction.

    Circle, SA, ``beta = 1``, ``rho_0 ∝ e^{cos theta}(1 + 0.3 sin 2 theta)``, ``t in [0, 1]``;
    ``n = 64`` and ``256``, 32 i.i.d. starts each (64 in the full suite). docs/equations.md section 6:
    for i.i.d. ``x_i ~ mu``,

        E[E_beta(mu_n)] - E_beta[mu] = (e^beta - iint e^{beta <x,y>} dmu dmu) / (2 beta n),

    exactly (the ``n`` diagonal terms of the double sum). The figure shows the PDE energy,
    the particles' mean energy and the corrected mean at all times.

    The test at ``t = 0``, where the law is exact, splits the gap exactly (for probability
    measures ``nu``, ``mu``):

        E(nu) - E(mu) = (1/beta) int (K * mu) d(nu - mu) + (1/(2 beta)) ||nu - mu||_beta^2.

    The linear term has mean zero and standard deviation ``O(n^{-1/2})``; it is computed
    from the PDE's potential at the particles and removed (a control variate), so the
    quadratic part ``Q = E(mu_n) - E(mu) - linear``, of spread ``O(1/n)``, tests the
    correction sharply: ``E[Q] = (e^beta - iint K dmu dmu)/(2 beta n)``.

    Tolerances: (1) statistical: ``|mean(Q) - correction| / (sd(Q)/sqrt(S))`` within the
    Student-t quantile with ``S - 1`` degrees of freedom at 99% two-sided, Bonferroni over
    the two ``n``; (2) exact identity: ``Q = ||mu_n - mu||_beta^2/(2 beta)`` with the
    kernel distance of :mod:`meanfield.metrics` (exact method), to ``1e-10`` absolute, the
    round-off of the ``n^2``-term sums (terms ``<= e^beta/(2 beta n^2)``, pairwise summation).
    At ``t > 0`` the gap has further ``O(1/n)`` terms from the fluctuations' dynamics; it
    is reported (``corrected gap x n``), not tested.
    """
    import particles
    from meanfield import Circle, Model, solve

    model = Model(beta=1.0, attention="softmax")
    domain = Circle(64)
    times = np.linspace(0.0, 1.0, 11)
    S = 32 if suite == "quick" else 64
    ns = (64, 256)
    pde = solve(model, domain, smooth_density, times, rtol=1e-10, atol=1e-13)
    from meanfield.io import domain_of

    fdom = domain_of(pde)
    lam = fdom.scaled_kernel_multipliers(model.beta) * math.exp(model.beta)
    KK = np.array([fdom.inner(c, lam * c) for c in (fdom.forward(r) for r in pde["density"].values)])
    E_pde = pde["energy"].values
    rho0 = smooth_density(domain.grid)
    rho0 /= domain.integrate(rho0)
    rng = np.random.default_rng(seed)
    from meanfield.metrics import kernel_distance_particles

    zcrit = float(stats.t.ppf(1 - 0.01 / 4, S - 1))
    zcrit_plot = float(stats.norm.ppf(1 - 0.01 / 4))
    c0 = fdom.forward(pde["density"].values[0])
    res: dict[str, Any] = {}
    Ep_all, corr_all = [], []
    comparisons: list[Comparison] = []
    for n in ns:
        x0 = np.stack([domain.sample(rho0, n, rng) for _ in range(S)])
        Ep = particles.simulate(model, x0, times, method="rk4", dt=0.05)["energy"].values  # (time, batch)
        corr = (math.exp(model.beta) - KK) / (2 * model.beta * n)
        lin = np.array([(fdom.inner(lam * c0, fdom.project(x)) - KK[0]) / model.beta for x in x0])
        Q = Ep[0] - E_pde[0] - lin
        kd2 = np.asarray(kernel_distance_particles(fdom, c0, x0, model.beta, method="exact",
                                                   kind="coefficients")) ** 2 / (2 * model.beta)
        identity = float(np.max(np.abs(Q - kd2)))
        z0 = float((Q.mean() - corr[0]) / (Q.std(ddof=1) / math.sqrt(S)))
        comparisons += [Comparison(f"n={n}: z of mean(Q) - correction at t=0", z0, 0.0, zcrit, "abs"),
                        Comparison(f"n={n}: max |Q - ||mu_n - mu||^2/(2 beta)|", identity, 0.0, 1e-10, "abs")]
        gap = Ep - E_pde[:, None] - corr[:, None]
        res[f"n={n}"] = {"z at t=0": z0, "correction at t=0": float(corr[0]),
                         "mean quadratic part at t=0": float(Q.mean()),
                         "identity error": identity,
                         "corrected gap x n at t=1": float(gap[-1].mean() * n),
                         "uncorrected gap x n at t=1": float((gap[-1].mean() + corr[-1]) * n)}
        Ep_all.append(Ep)
        corr_all.append(corr)
    figure = _pde_vs_particles_figure(times, E_pde, ns, Ep_all, corr_all, zcrit_plot, out_dir)
    data = xr.Dataset(
        {"energy_pde": ("time", E_pde),
         "energy_particles": (("n", "time", "seed"), np.array(Ep_all)),
         "correction": (("n", "time"), np.array(corr_all))},
        coords={"n": list(ns), "time": times, "seed": np.arange(S)},
        attrs={"model": model.to_json()},
    )
    return CheckResult(
        name="energy.pde_vs_particles",
        quantity="mean of E(mu_n) - E(mu) - linear term vs (e^beta - iint K dmu dmu)/(2 beta n), t = 0",
        comparisons=tuple(comparisons),
        description=(f"z = 0 (exact for i.i.d. starts), |z| <= {zcrit:.2f} (Student t); "
                     "identity with ||mu_n - mu||^2/(2 beta) to 1e-10"),
        details=res,
        data=data,
        figure=figure,
    )


__all__ = ["check_energy_particles", "check_energy_pde", "check_energy_pde_vs_particles"]
