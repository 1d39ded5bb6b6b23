"""Check: two and three clusters in a plane merging on ``S^{127}``, the ``k = 2`` subspace
reduction of the Lagrangian solver against particles (issue 22 item 5, docs/lagrangian.md
section 11; the dynamics of docs/equations.md section 3, ``Q = K = V = I``).

.. autosummary::
   check_subspace_particles
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from validation.records import CheckResult, Comparison
from validation.suites import check

SIZES: dict[str, dict[str, Any]] = {
    "full": dict(beta=4.0, particles=20000, dt=0.1, times=[0.0, 0.5, 1.0, 1.5, 2.0], cases=[
        dict(d=128, kappa=64.0, radial=12, angular=47, configs=("two", "three")),
        dict(d=16, kappa=8.0, radial=8, angular=31, configs=("two",)),
        dict(d=64, kappa=32.0, radial=8, angular=31, configs=("two",)),
        dict(d=256, kappa=128.0, radial=16, angular=47, configs=("two",)),
    ]),
}
"""SA ``beta``, particles (in groups of four mirror images, :data:`FLIPS`), their RK4 step,
the output times, and the cases: ``d``, the clusters' ``kappa`` (``d/2``: the clusters' ``|p|``
about 0.4 at every ``d``), the node rule (``radial x (angular + 1)`` nodes, each with the
start's error estimate ``nodes_reduced.subspace_start_error`` below ``1e-7``: ``2.4e-8`` at
``d = 128`` with 12 x 48, where 8 x 64 left ``1.4e-3`` in the radial direction; ``3.4e-6`` at
``d = 256`` with 16 x 48) and the configurations of :data:`CONFIGS`. RK4 step 0.1: against
step 0.025 (``n = 2000``, ``d = 128``, both configurations) the largest change of a token's
``p`` is ``1.4e-7`` at ``t <= 2`` (step 0.05: ``8.7e-9``, fourth order), far inside the
particles' measured shift from their nodes, which the level includes."""

CONFIGS = {"two": (0.6, -0.6), "three": (-0.8, 0.0, 0.8)}
"""Directions (angles in the plane of ``e_1, e_2``) of the clusters of each start."""

FAMILY_LEVEL = 0.01
"""Chance that a correct code fails the check, shared by its comparisons (Bonferroni)."""


def _start(angles: tuple[float, ...], kappa: float) -> Any:
    m = np.array([[math.cos(a), math.sin(a)] for a in angles])

    def log_f(p: np.ndarray) -> np.ndarray:
        from scipy.special import logsumexp

        return np.asarray(logsumexp(kappa * (p @ m.T), axis=1))

    return log_f


FLIPS = (slice(1, 2), slice(2, None))
"""The two reflections of the check's starts that commute with the flow: ``p_2 -> -p_2`` and
``u -> -u`` (the complement of the plane): each token stands for a group of four
(:func:`validation.pairs.mirror_field`)."""


def _particles_from_nodes(sn: Any, n: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n/4`` representatives ``(n/4, d)`` of ``n`` tokens drawn from the node measure
    ``sum_j w_j (uniform on {Px = p_j})``: node ``j`` with probability ``w_j``, ``u`` uniform on
    the unit sphere of the complement, the token ``p_j + r_j u``; its images under the two
    reflections :data:`FLIPS` are the other three tokens of its group. Both reflections commute
    with the flow and map the (symmetric) start onto itself, so the cloud keeps both symmetries
    of the mean field: its mean stays in the plane, and on the axis ``e_1`` (no random tilt of
    the merged cluster, which the mean field does not have). Returns the representatives, the
    node of each and the node ``mirror[j]`` with ``p_2`` flipped."""
    p_all = np.asarray(sn.p)
    flip = np.array([1.0, -1.0])
    mirror = np.array([int(np.argmin(np.sum((p_all - q * flip) ** 2, axis=1))) for q in p_all])
    if not (np.allclose(p_all[mirror] * np.array([1.0, -1.0]), p_all, rtol=0, atol=1e-12)
            and np.allclose(np.asarray(sn.weights)[mirror], sn.weights, rtol=1e-12, atol=0)):
        msg = "the node measure is not symmetric under p_2 -> -p_2 (the check's starts are)"
        raise ValueError(msg)
    if n < 4 or n % 4:
        msg = f"particles must be a multiple of 4 (groups of four images), got {n!r}"
        raise ValueError(msg)
    j = rng.choice(sn.n, size=n // 4, p=np.asarray(sn.weights))
    u = rng.standard_normal((n // 4, sn.d - sn.k))
    u /= np.linalg.norm(u, axis=1)[:, None]
    p = p_all[j]
    r = np.sqrt(1.0 - np.sum(p * p, axis=1))
    return np.concatenate([p, r[:, None] * u], axis=1), j, mirror


def window_mass(atoms: np.ndarray, weights: np.ndarray, delta: float) -> float:
    """``sup_c mu([c - delta, c + delta])`` of the discrete law ``sum_j w_j delta_{a_j}``
    (normalised): the most mass a shift of every value by at most ``delta`` can move across
    one point."""
    order = np.argsort(atoms)
    a = np.asarray(atoms, dtype=float)[order]
    cw = np.concatenate([[0.0], np.cumsum(np.asarray(weights, dtype=float)[order])])
    cw /= cw[-1]
    hi = np.searchsorted(a, a + 2 * delta, side="right")
    return float(np.max(cw[hi] - cw[np.arange(a.size)]))


def kolmogorov_weighted(sample: np.ndarray, atoms: np.ndarray, weights: np.ndarray) -> float:
    """``sup_c |F_sample(c) - F_atoms(c)|`` for an empirical sample and a discrete law
    ``sum_j w_j delta_{a_j}``, both one-sided limits at every jump."""
    xs = np.sort(np.asarray(sample, dtype=float))
    order = np.argsort(atoms)
    a, w = np.asarray(atoms, dtype=float)[order], np.asarray(weights, dtype=float)[order]
    cw = np.concatenate([[0.0], np.cumsum(w) / np.sum(w)])
    pts = np.concatenate([xs, a])
    worst = 0.0
    for side in ("right", "left"):
        fs = np.searchsorted(xs, pts, side=side) / xs.size
        fa = cw[np.searchsorted(a, pts, side=side)]
        worst = max(worst, float(np.max(np.abs(fs - fa))))
    return worst


def compare_with_particles(size: dict[str, Any], seed: int) -> tuple[list[Comparison], dict[str, Any],
                                                                   dict[str, Any], dict[str, Any]]:
    """The runs of :func:`check_subspace_particles` at ``size`` (a :data:`SIZES` entry; the
    benchmark ``benchmarks/bench_subspace.py`` passes its own): ``(comparisons, details,
    data variables, curves)``."""
    from meanfield import Model, nodes, solve_lagrangian
    from validation.pairs import simulate_mirrored

    beta, n = float(size["beta"]), int(size["particles"])
    times = np.asarray(size["times"], dtype=float)
    rng = np.random.default_rng(seed)
    runs = [(case, name) for case in size["cases"] for name in case["configs"]]
    m_comp = len(runs) * times.size * 2
    K = math.sqrt(math.log(2 * m_comp / FAMILY_LEVEL) / 2)
    comps: list[Comparison] = []
    details: dict[str, Any] = {"K": K, "particles": n}
    data: dict[str, Any] = {}
    curves: dict[str, Any] = {}
    for case, config in runs:
        d, angles = int(case["d"]), CONFIGS[config]
        name = f"{config} clusters, d = {d}"
        sn = nodes.subspace(_start(angles, float(case["kappa"])), int(case["radial"]), d, 2,
                            angular=int(case["angular"]), log=True)
        t0 = time.perf_counter()
        ds = solve_lagrangian(Model(beta), sn, times, rtol=1e-7, atol=1e-9)
        t1 = time.perf_counter()
        x0, atom, mirror = _particles_from_nodes(sn, n, rng)
        reps = simulate_mirrored(Model(beta), x0, times, float(size["dt"]), FLIPS)
        t2 = time.perf_counter()
        # the group's tokens in the plane: p_1 the same for all four, p_2 = +-p_2 of the
        # representative (its node: the node, or its mirror); the same empirical laws as all n
        px = np.concatenate([reps[:, :, :2], reps[:, :, :2] * np.array([1.0, -1.0])], axis=1)
        atoms = np.concatenate([atom, mirror[atom]])
        w = np.asarray(ds["weight"].values)
        ks = np.empty((times.size, 2))
        level = np.empty((times.size, 2))
        shift = np.empty((times.size, 2))
        for i in range(times.size):
            p_nodes = ds["p"].values[i]
            for c in range(2):
                shift[i, c] = float(np.max(np.abs(px[i][:, c] - p_nodes[atoms, c])))
                level[i, c] = K / math.sqrt(n // 4) + window_mass(p_nodes[:, c], w, shift[i, c])
                ks[i, c] = kolmogorov_weighted(px[i][:, c], p_nodes[:, c], w)
                comps.append(Comparison(f"{name}: Kolmogorov distance of p_{c + 1} at t = {times[i]:g}",
                                        measured=ks[i, c], expected=level[i, c], kind="max"))
        spread = [float(np.sum(w * np.abs(np.arctan2(ds["p"].values[i][:, 1], ds["p"].values[i][:, 0]))))
                  for i in range(times.size)]
        details[name] = {"ks": ks.tolist(), "level": level.tolist(), "shift": shift.tolist(), "nodes": sn.n,
                         "max_weight": float(np.max(w)),
                         "mean_abs_angle": spread, "successful": int(ds.attrs["successful"]),
                         "wall_s_nodes": t1 - t0, "wall_s_particles": t2 - t1}
        data[f"ks_{config}_d{d}"] = (("time", "marginal"), ks)
        curves[name] = (ds, px)
    return comps, details, data, curves


@check("lagrangian.subspace_particles", suites=("full",))
def check_subspace_particles(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """Two and three clusters in the plane of ``e_1, e_2`` on ``S^{127}`` (a mixture of von
    Mises–Fisher densities ``sum_i e^{kappa <x, m_i>}``, ``kappa = 64``), and two clusters on
    ``S^{15}``, ``S^{63}``, ``S^{255}`` (``kappa = d/2``), SA ``beta = 4``, merging by ``t =
    2``: the ``k = 2`` subspace nodes (docs/lagrangian.md section 11) against 20 000 particles
    drawn from the same node measure, the laws of ``p_1`` and ``p_2`` by the Kolmogorov
    distance at every output time.

    The particles are an i.i.d. sample (``n/4`` independent values of ``p``, each in a group
    of four images under the flow's two reflections ``u -> -u`` and ``p_2 -> -p_2``, whose
    field :func:`validation.pairs.mirror_field` computes exactly from the ``n/4``) of the
    node measure itself, ``sum_j w_j (uniform on {Px = p_j})``, whose mean-field
    evolution the reduced solver computes exactly (no quadrature error: the node measure is
    itself invariant under the rotations of the complement). So at ``t = 0`` the Kolmogorov
    distance of ``p_1``, ``p_2`` is that of an i.i.d. sample from a (discrete) law, below the
    Kolmogorov quantile ``K / sqrt(n/4)`` with the probability of the continuous case or
    more; later the particles carry the propagation-of-chaos fluctuation ``O(1/sqrt n)``
    that the attractive flow contracts (as for the rings, docs/lagrangian.md section 8).

    Tolerance: each token is drawn from a node ``j(i)``, and the mean field moves it with its
    node (the reduction is exact for the node measure); the finite-``n`` system moves it by
    ``delta(t) = max_i |p_i(t) - p_{j(i)}(t)|`` from there (measured, in ``details``, per
    marginal). The drawn nodes are an i.i.d. sample (``n/4`` values, symmetrised: the
    symmetrised empirical law is no farther from the symmetric node law) of the node law,
    within ``K / sqrt(n/4)`` of it in Kolmogorov distance, ``K`` the
    Dvoretzky–Kiefer–Wolfowitz quantile of level ``FAMILY_LEVEL`` (0.01) shared by all
    comparisons (Bonferroni: ``P(sup > K/sqrt m) <= 2 e^{-2K^2}``); moving every value by at
    most ``delta`` changes the empirical distribution function at any point by at most the
    node law's mass in a window of width ``2 delta`` (:func:`window_mass`). The bound is
    their sum: a wrong field moves the particles' law away from the nodes' by more than the
    window holds only if the particles stray from their nodes, which ``delta`` reports. The
    solvers' errors (``rtol`` ``1e-7`` for the nodes; RK4 step 0.1 for the particles,
    ``1.4e-7``, :data:`SIZES`) move positions by far less than that spread.
    """
    if suite not in SIZES:
        msg = f"suite must be one of {tuple(SIZES)}, got {suite!r}"
        raise ValueError(msg)
    size = SIZES[suite]
    comps, details, data, curves = compare_with_particles(size, seed)
    times = np.asarray(size["times"], dtype=float)
    K, n = details["K"], details["particles"]
    dims = ", ".join(str(case["d"]) for case in size["cases"])
    result_data = xr.Dataset(data, coords={"time": times, "marginal": ["p_1", "p_2"]})
    figure = _figure(curves, times, Path(out_dir))
    return CheckResult(
        name="lagrangian.subspace_particles",
        quantity=f"Kolmogorov distance of p_1, p_2: subspace nodes (k = 2) against {n} particles, d = {dims}",
        comparisons=tuple(comps),
        description=(f"<= K/sqrt(n/4) + the node law's mass within the particles' largest shift from their "
                     f"nodes, at every output time (K = {K:.3g}, family level {FAMILY_LEVEL})"),
        details=details, data=result_data, figure=figure)


def _figure(curves: dict[str, Any], times: np.ndarray, out_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(curves))
    rows = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    for ax, (name, (ds, px)) in zip(axes.flat, curves.items()):
        w = np.asarray(ds["weight"].values)
        for i in range(times.size):
            a = ds["p"].values[i][:, 1]
            o = np.argsort(a)
            line, = ax.step(a[o], np.cumsum(w[o]), where="post", label=f"t = {times[i]:g}")
            s = np.sort(px[i][:, 1])
            ax.plot(s, np.arange(1, s.size + 1) / s.size, ls="--", color=line.get_color())
        ax.set_xlabel("p_2 = <x, e_2>")
        ax.set_ylabel("P(p_2 <= c)")
        ax.set_title(f"{name.split(',')[0]} on S^{ds.attrs['dimension'] - 1}: "
                     "nodes (solid), particles (dashed)",
                     fontsize=9)
        ax.legend(fontsize=7)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "subspace_particles.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return str(path)


__all__ = ["CONFIGS", "SIZES", "check_subspace_particles", "compare_with_particles", "kolmogorov_weighted",
           "window_mass"]
