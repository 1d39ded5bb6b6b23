"""The reference runs of the Lagrangian checks (:mod:`validation.checks.lagrangian`): the
starts and models, and the independent solutions each check sets the Lagrangian one against.

.. autosummary::
   CIRCLE_RHO0
   SPHERE_RHO0
   CAUSAL_RHO0
   lumpy_circle
   particle_variants
   causal_nodes
   gaussian_models
   spectral_values_at_nodes
   circle_vs_spectral
   sphere_vs_spectral
   gaussian_vs_ode
   particle_rate
   cluster_masses_vs_particles

The method (docs/lagrangian.md): nodes ``y_j`` with weights ``w_j`` of a quadrature of
``mu_0`` move with the field of the weighted measure, ``x_j(t) = Phi_t(y_j)``, and carry the
density ``rho_t(x_j) = rho_0(y_j) / J_j(t)``, ``d/dt log J_j = div X(x_j)``. Each function
here sets that solution (:func:`meanfield.solve_lagrangian`) against an independent one:
the spectral solver (:func:`meanfield.solve`) where it applies, the Gaussian ODE
(:func:`meanfield.solve_gaussian`) in ``R^d``, and the particle system (``particles``) for
every attention variant. They return plain numbers so that the tests
(``tests/meanfield/lagrangian/test_lagrangian_mustshow.py``) run them at small sizes; the kernel
distance is :func:`meanfield.metrics.weighted_kernel_distance`.
"""

from __future__ import annotations

import math
import time as _time
import warnings
from typing import Any, Callable, Sequence, TypedDict

import numpy as np
import xarray as xr

from meanfield import solve_lagrangian
from meanfield.fits import fit_power_law
from meanfield.metrics import kernel_self_term, weighted_kernel_distance

# -- starts and models ------------------------------------------------------------------------


def CIRCLE_RHO0(theta: np.ndarray) -> np.ndarray:  # noqa: N802 - a constant of the checks
    """``(1 + 0.3 cos theta + 0.2 sin 2 theta) / (2 pi)``: smooth, non-uniform, mass 1 exactly."""
    return (1.0 + 0.3 * np.cos(theta) + 0.2 * np.sin(2.0 * theta)) / (2.0 * np.pi)


def SPHERE_RHO0(colatitude: np.ndarray, longitude: np.ndarray) -> np.ndarray:  # noqa: N802
    """``(1 + 0.3 x + 0.2 y z + 0.25 x y) / (4 pi)`` on ``S^2``: not axisymmetric about any
    axis, positive (``>= 1 - 0.3 - 0.1 - 0.125``), mass 1 exactly (the three monomials have
    mean zero on the sphere)."""
    st = np.sin(colatitude)
    x, y, z = st * np.cos(longitude), st * np.sin(longitude), np.cos(colatitude)
    return (1.0 + 0.3 * x + 0.2 * y * z + 0.25 * x * y) / (4.0 * np.pi)


def lumpy_circle(theta: np.ndarray) -> np.ndarray:
    """Three von Mises bumps of masses about 0.5, 0.3, 0.2 over a floor (unnormalised): the
    start of the continuation check."""
    bumps = (0.5 * np.exp(4.0 * np.cos(theta - 0.3)) + 0.3 * np.exp(4.0 * np.cos(theta - 2.5))
             + 0.2 * np.exp(4.0 * np.cos(theta + 2.0)))
    return 0.2 + bumps


_Q2 = [[1.0, 0.3], [-0.2, 0.8]]
_K2 = [[0.9, -0.1], [0.4, 1.1]]
_V2 = [[1.0, 0.2], [-0.3, 0.7]]
_Q2B = [[0.6, -0.4], [0.5, 0.9]]
_K2B = [[1.1, 0.2], [-0.3, 0.5]]
_V2B = [[-0.4, 0.6], [0.3, 0.5]]
_FF = ([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6]], [[1.0, 0.5], [-0.7, 0.8], [0.3, -1.2]], [0.1, -0.2, 0.3])


def particle_variants() -> dict[str, Any]:
    """The models of the particle check on the circle (``d = 2``, layer normalisation), one
    per attention variant of issue 12: general ``Q, K, V``, unnormalised, two heads, L2,
    sigmoid, Sinkhorn, causal (masked, with labels), and the feed-forward term (2.8).

    The feed-forward activation is ``tanh``: with ``relu`` the divergence jumps where a node
    crosses a kink, which the characteristics carry correctly but the adaptive step-size
    controller pays for (measured: 2000 rejected steps). Sinkhorn runs to ``sinkhorn_tol =
    1e-8`` (marginals), a field error far below the sampling error."""
    from meanfield import Model

    qkv: dict[str, Any] = dict(Q=_Q2, K=_K2, V=_V2)
    return {
        "softmax_qkv": Model(beta=2.0, **qkv),
        "unnormalized": Model(beta=1.0, attention="unnormalized", **qkv),
        "multihead": Model(beta=2.0, heads=[(_Q2, _K2, _V2), (_Q2B, _K2B, _V2B)]),
        "l2": Model(beta=2.0, attention="l2", **qkv),
        "sigmoid": Model(beta=2.0, attention="sigmoid", sigmoid_bias=-0.5, **qkv),
        "sinkhorn": Model(beta=2.0, attention="sinkhorn", sinkhorn_tol=1e-8, **qkv),
        "causal": Model(beta=2.0, causal=True, **qkv),
        "feedforward": Model(beta=2.0, feedforward=_FF, activation="tanh", **qkv),
    }


# -- reference runs ------------------------------------------------------------------------


def spectral_values_at_nodes(ds: xr.Dataset, x: np.ndarray, k: int = -1) -> np.ndarray:
    """The density of a :func:`meanfield.solve` Dataset at saved time index ``k``, evaluated
    at the points ``x`` by its spectral series (``Domain.values_at``)."""
    from meanfield.io import domain_of

    dom = domain_of(ds)
    c = dom.forward(np.asarray(ds["density"].values[k], dtype=float))
    return np.asarray(dom.values_at(c, np.asarray(x, dtype=float)))


def _max_rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.abs(b)))


class Tolerances(TypedDict):
    """``rtol``, ``atol`` of a solve, passed as ``**tol``."""

    rtol: float
    atol: float


SPECTRAL_TOL: Tolerances = {"rtol": 1e-12, "atol": 1e-16}
"""Tolerances of the reference spectral solves: global time error about steps x rtol
``<= 1e-9`` of the density; the grid is refined until the spectral tail is below
``tail_tol = 1e-10`` of the mean coefficient, so the series is exact to about ``1e-10``
relative where the density is ``O(mean)`` (the starts here stay within a factor 5 of it)."""

LAGRANGIAN_TOL: Tolerances = {"rtol": 1e-10, "atol": 1e-12}
"""Tolerances of the Lagrangian runs compared with spectral ones: the global time error is
about (steps) x rtol; measured ``4e-12`` at the best node count on the circle (``1e-13`` with
``rtol = 1e-12``), far below the ``1e-8`` asked."""


def circle_vs_spectral(model: Any, t_final: float, sizes: Sequence[int], *,
                       rho0: Callable[[np.ndarray], np.ndarray] = CIRCLE_RHO0) -> dict[str, Any]:
    """Lagrangian density at the nodes against the spectral density at the same points, at
    ``t_final``, for each node count ``N`` of ``sizes`` (trapezoid nodes,
    :func:`meanfield.lagrangian.nodes.circle`). Returns ``N``, ``error`` (max relative), the spectral
    run's final resolution and wall times."""
    from meanfield import Circle, nodes, solve
    from meanfield.io import domain_of

    start = _time.perf_counter()
    ref = solve(model, Circle(64), rho0, [0.0, t_final], **SPECTRAL_TOL)
    spectral_s = _time.perf_counter() - start
    errors, lag_s = [], []
    for N in sizes:
        start = _time.perf_counter()
        lag = solve_lagrangian(model, nodes.circle(rho0, int(N)), [0.0, t_final], **LAGRANGIAN_TOL)
        lag_s.append(_time.perf_counter() - start)
        dens = lag["density"].values[-1]
        errors.append(_max_rel(dens, spectral_values_at_nodes(ref, lag["x"].values[-1])))
    return {"N": [int(n) for n in sizes], "error": errors,
            "spectral_resolution": int(domain_of(ref).resolution), "spectral_s": spectral_s,
            "lagrangian_s": lag_s}


def sphere_vs_spectral(model: Any, t_final: float, sizes: Sequence[int], *,
                       rho0: Callable[..., np.ndarray] = SPHERE_RHO0) -> dict[str, Any]:
    """As :func:`circle_vs_spectral` on ``S^2``: Gauss–Legendre x trapezoid nodes of band
    limit ``lmax`` in ``sizes`` (:func:`meanfield.lagrangian.nodes.sphere`) against
    :class:`meanfield.Sphere`."""
    from meanfield import Sphere, nodes, solve
    from meanfield.io import domain_of

    start = _time.perf_counter()
    ref = solve(model, Sphere(16), rho0, [0.0, t_final], **SPECTRAL_TOL)
    spectral_s = _time.perf_counter() - start
    errors, counts, lag_s, warned = [], [], [], []
    for L in sizes:
        nd = nodes.sphere(rho0, int(L))
        start = _time.perf_counter()
        # a convergence study runs its coarse rules on purpose: the quadrature monitor's
        # warning (docs/lagrangian.md section 10) is recorded per size, beside the error it
        # estimates, instead of printed
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lag = solve_lagrangian(model, nd, [0.0, t_final], **LAGRANGIAN_TOL)
        mine = [w for w in caught if "no longer resolve the measure" in str(w.message)]
        for w in caught:
            if w not in mine:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        warned.append(bool(mine))
        lag_s.append(_time.perf_counter() - start)
        errors.append(_max_rel(lag["density"].values[-1],
                               spectral_values_at_nodes(ref, lag["x"].values[-1])))
        counts.append(nd.n)
    return {"lmax": [int(L) for L in sizes], "nodes": counts, "error": errors,
            "spectral_resolution": int(domain_of(ref).resolution), "spectral_s": spectral_s,
            "lagrangian_s": lag_s, "quadrature_monitor_warned": warned}


def gaussian_models(d: int) -> dict[str, Any]:
    """The models of the Gaussian check in ``R^d`` (``d = 2, 3``): every attention kind that
    :func:`meanfield.solve_gaussian` supports (softmax with general ``Q, K, V``, two heads,
    L2, Sinkhorn), the matrices of :mod:`validation.checks.gaussian` (top-left blocks for
    ``d = 2``).

    L2 at ``beta = 1/2``: its weight ``e^{-beta |Q x - K y|^2 / 2}`` is a Gaussian in the
    quadrature variable, narrower than the rule's own weight as ``beta`` grows, and the
    Gauss–Hermite error grows with it (measured in R^3 at ``beta = 1``: mean ``1.6e-8``,
    density ``3e-7`` with ``10^3`` nodes, ``1.1e-8`` with ``12^3``; at ``beta = 1/2``:
    ``1.4e-10`` and ``9e-10`` with ``10^3``)."""
    from meanfield import Model
    from validation.checks.gaussian import CASES

    out: dict[str, Any] = {}
    for name, model in CASES.items():
        mats = [(q[:d, :d], k[:d, :d], v[:d, :d]) for q, k, v in model.matrices(3)]
        if model.heads is not None:
            out[name] = model.replace(heads=mats)
        else:
            out[name] = model.replace(Q=mats[0][0], K=mats[0][1], V=mats[0][2])
    out["l2"] = out["l2"].replace(beta=0.5)
    q, k, v = out["softmax"].matrices(d)[0]
    out["sinkhorn"] = Model(beta=1.0, attention="sinkhorn", Q=q, K=k, V=v)
    return out


GAUSSIAN_T = 0.5
"""The time of the Gaussian comparison (as in :mod:`validation.checks.gaussian`)."""


def gaussian_vs_ode(model: Any, d: int, per_dim: int, t_final: float = GAUSSIAN_T) -> dict[str, float]:
    """Gauss–Hermite nodes of ``N(m0, Sigma0)`` (:func:`meanfield.lagrangian.nodes.gaussian`) moved by
    characteristics in ``R^d``, against :func:`meanfield.solve_gaussian`: the errors of the
    weighted mean and covariance (max abs entry) and of the node densities against the
    Gaussian density of the evolved ``(m, Sigma)``, relative to its peak (``sup_density``) and
    pointwise at the nodes (``pointwise_density``, reported only)."""
    from scipy.stats import multivariate_normal

    from meanfield import nodes, solve_gaussian
    from validation.checks.gaussian import COV0, MEAN0

    m0, c0 = MEAN0[:d], COV0[:d, :d]
    ode = solve_gaussian(model, m0, c0, [0.0, t_final], rtol=1e-12, atol=1e-14)
    m_t, c_t = ode["mean"].values[-1], ode["cov"].values[-1]
    start = _time.perf_counter()
    lag = solve_lagrangian(model, nodes.gaussian(m0, c0, per_dim), [0.0, t_final], **LAGRANGIAN_TOL)
    wall = _time.perf_counter() - start
    x, w = lag["x"].values[-1], lag["weight"].values
    mean = w @ x
    cen = x - mean
    cov = cen.T @ (cen * w[:, None])
    pdf = multivariate_normal(m_t, c_t).pdf(x)
    dens = lag["density"].values[-1]
    return {"mean": float(np.max(np.abs(mean - m_t))), "cov": float(np.max(np.abs(cov - c_t))),
            "sup_density": float(np.max(np.abs(dens - pdf)) / np.max(pdf)),
            "pointwise_density": _max_rel(dens, pdf), "nodes": int(x.shape[0]), "wall_s": wall}


# -- particles ---------------------------------------------------------------------------------

PARTICLE_T = 1.0
"""The time of the particle comparison."""

PARTICLE_DT = 0.1
"""RK4 step of the particles and of the causal Lagrangian run. Its error, ``O(dt^4)`` of
order ``1e-5`` in the positions at ``PARTICLE_T``, is far below the sampling error
``~ 0.9 / sqrt(n) >= 0.04`` at the largest ``n``."""


PARTICLE_LEVEL = 1.0 - 0.01 / 8
"""Confidence of each slope interval: Bonferroni over the 8 variants, family-wise 99%."""

CAUSAL_LABELS = 32
"""Label nodes of the causal reference (midpoint rule, prefix masses ``(k+1)/m`` like the
particles' ``(i+1)/n``): a node at label level ``k`` sees the levels ``<= k``, a Riemann sum
of the continuum's integral over labels ``[0, s]`` with an ``O(1/m)`` error (the particle
system's own at ``n = m``). Measured: 32 against 64 levels moves the kernel distance at
``t = 1`` by ``4e-4`` (16 levels: ``1.3e-3``), 1% of the sampling error ``0.04`` at
``n = 512``."""

CAUSAL_SPACE_NODES = 32
"""Trapezoid nodes per label level in the causal reference."""


def CAUSAL_RHO0(theta: np.ndarray, label: np.ndarray) -> np.ndarray:  # noqa: N802
    """``(1 + 0.4 cos(theta - 3 s) + 0.2 sin 2 theta) / (2 pi)``: the density of the position
    of a token with label ``s``. It must depend on ``s``: from a product start
    ``mu_0 x Uniform(labels)`` every label level evolves as the whole measure does (the tokens
    of labels ``<= s`` see only themselves, all distributed alike), so the causal solution's
    positions would be the unmasked ones and the check would not see the mask."""
    return (1.0 + 0.4 * np.cos(theta - 3.0 * label) + 0.2 * np.sin(2.0 * theta)) / (2.0 * np.pi)


def causal_nodes(N: int = CAUSAL_SPACE_NODES, m: int = CAUSAL_LABELS) -> Any:
    """The product quadrature of (angle, label) for :func:`CAUSAL_RHO0`: trapezoid angles
    times midpoint labels ``(k + 1/2) / m``, weights ``rho0(theta_j | s_k) (2 pi / N) / m``
    (the label's density is 1)."""
    from meanfield.lagrangian.nodes import Nodes

    th = 2 * np.pi * np.arange(N) / N
    s = (np.arange(m) + 0.5) / m
    T, S = np.meshgrid(th, s)  # label-major: node k N + j is (theta_j, s_k)
    dens = CAUSAL_RHO0(T, S).ravel()
    x = np.stack([np.cos(T.ravel()), np.sin(T.ravel())], axis=-1)
    return Nodes(x, dens * (2 * np.pi / N) / m, dens, "sphere", labels=S.ravel(),
                 describe=f"causal check: {N} trapezoid angles x {m} midpoint labels")


def _sample_causal(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` tokens, token ``i`` (label ``i / (n - 1)``, the particles' causal order) drawn
    from :func:`CAUSAL_RHO0` given its label, by rejection from the uniform angle
    (the density is at most ``1.6 / (2 pi)``)."""
    labels = np.arange(n) / max(n - 1, 1)
    th = np.empty(n)
    todo = np.arange(n)
    while todo.size:
        prop = rng.uniform(0.0, 2 * np.pi, todo.size)
        ok = rng.uniform(0.0, 1.6, todo.size) <= 2 * np.pi * CAUSAL_RHO0(prop, labels[todo])
        th[todo[ok]] = prop[ok]
        todo = todo[~ok]
    return np.stack([np.cos(th), np.sin(th)], axis=-1)


def _reference(name: str, model: Any) -> xr.Dataset:
    """The Lagrangian reference of the particle check: 128 trapezoid nodes of
    :data:`CIRCLE_RHO0` (the causal model: :func:`causal_nodes`, RK4 at :data:`PARTICLE_DT`).
    Its spatial quadrature error is spectral (``< 1e-8`` at 64 nodes in
    ``lagrangian.circle_sa``), far below the sampling error."""
    from meanfield import nodes

    if model.causal:
        return solve_lagrangian(model, causal_nodes(), [0.0, PARTICLE_T], scheme="rk4", dt=PARTICLE_DT)
    return solve_lagrangian(model, nodes.circle(CIRCLE_RHO0, 128), [0.0, PARTICLE_T],
                             rtol=1e-9, atol=1e-11)


def particle_rate(name: str, model: Any, *, sizes: Sequence[int], replicas: Sequence[int],
                  seed: int, level: float = PARTICLE_LEVEL) -> dict[str, Any]:
    """Kernel distance (:func:`weighted_kernel_distance`, ``beta = 1``) between the Lagrangian
    solution at :data:`PARTICLE_T` and ``n`` particles started i.i.d. from
    :data:`CIRCLE_RHO0` (causal: :func:`CAUSAL_RHO0` given the token's label;
    ``particles.simulate``, RK4), for each ``n`` of ``sizes``, with
    ``replicas`` independent draws each (one batched run); and the power-law fit of the
    distance against ``n`` (:func:`meanfield.fits.fit_power_law`)."""
    import particles
    from meanfield import Circle

    ref = _reference(name, model)
    xl, wl = ref["x"].values[-1], ref["weight"].values
    xx = kernel_self_term(xl, wl)
    dom = Circle(256)
    rho = CIRCLE_RHO0(dom.grid)
    ns, dist = [], []
    for n, count in zip(sizes, replicas):
        rng = np.random.default_rng([seed, int(n), sum(map(ord, name))])
        if model.causal:
            x0 = np.stack([_sample_causal(int(n), rng) for _ in range(int(count))])
        else:
            x0 = np.stack([particles.sample_density(dom, rho, int(n), rng) for _ in range(int(count))])
        sim = particles.simulate(model, x0, [0.0, PARTICLE_T], method="rk4", dt=PARTICLE_DT,
                                 observables=False)
        for y in sim["x"].values[-1]:
            ns.append(int(n))
            dist.append(weighted_kernel_distance(xl, wl, y, xx=xx))
    fit = fit_power_law(np.array(ns, dtype=float), np.array(dist), level)
    scaled = {int(n): float(math.sqrt(n * np.mean(np.square(np.array(dist)[np.array(ns) == n]))))
              for n in sizes}
    return {"n": ns, "distance": dist, "fit": fit, "sqrt_n_rms": scaled,
            "reference_nodes": int(xl.shape[0])}


# -- continuation ------------------------------------------------------------------------------


CONTINUATION = {"beta": 9.0, "t_final": 10.0}
"""Circle, SA, ``beta = 9`` from :func:`lumpy_circle`: the spectral solver stops near
``t = 3`` (three clusters sharpen beyond any grid); by ``t = 10`` the three clusters are
points (node spread ``< 1e-7``) far apart, and stay so (metastability)."""

CLUSTER_TOL = 1e-3
"""Nodes (tokens) ``i, j`` are in one cluster when ``<x_i, x_j> >= 1 - tol``, the criterion of
``particles.count_clusters`` (docs/equations.md section 5)."""

MIN_CLUSTER_MASS = 0.01
"""Lagrangian clusters lighter than this are stray nodes left near the unstable points
between clusters (their mass is reported as ``lagrangian_stray_mass``)."""

def cluster_masses_vs_particles(*, resolution: int | None, n: int, replicas: int, seed: int,
                                beta: float = CONTINUATION["beta"],
                                t_final: float = CONTINUATION["t_final"]) -> dict[str, Any]:
    """Run the spectral solver past its limit, continue by characteristics, and set the
    cluster masses at ``t_final`` against those of ``replicas`` particle systems of ``n``
    i.i.d. tokens from the same start (clusters: :func:`meanfield.lagrangian.clusters.clusters`)."""
    import particles
    from meanfield import Circle, Model, ResolutionError, nodes, solve
    from meanfield.lagrangian.clusters import clusters

    model = Model(beta=beta)
    times = np.linspace(0.0, t_final, 11)
    out: dict[str, Any] = {}
    start = _time.perf_counter()
    if resolution is None:  # solve hands over by itself: handover_time is where it stopped
        lag = solve(model, Circle(64), lumpy_circle, times, continue_lagrangian=True)
        out["spectral_t_stop"] = float(lag["handover_time"]) if "handover_time" in lag else math.inf
    else:  # the two-line recipe
        try:
            solve(model, Circle(64), lumpy_circle, times)
            out["spectral_t_stop"] = math.inf
        except ResolutionError as err:
            out["spectral_t_stop"] = float(err.t)
            t_h = float(err.dataset["time"].values[-1])
            nd = nodes.from_dataset(err.dataset, t_h, resolution=resolution)
            lag = solve_lagrangian(model, nd, np.concatenate([[t_h], times[times > t_h]]),
                                    rtol=1e-9, atol=1e-11)
    if not math.isfinite(out["spectral_t_stop"]):
        return out
    out["lagrangian_s"] = _time.perf_counter() - start
    out["t_reached"] = float(lag.attrs["t_reached"])
    mass = lag["mass"].values
    out["mass_error"] = float(np.max(np.abs(mass - 1.0)))
    c = clusters(lag["x"].values[-1], lag["weight"].values, CLUSTER_TOL, geometry="sphere")
    keep = c.masses >= MIN_CLUSTER_MASS
    masses, positions = c.masses[keep], c.positions[keep]
    out["lagrangian_masses"], out["lagrangian_positions"] = masses.tolist(), positions.tolist()
    out["lagrangian_stray_mass"] = float(c.masses[~keep].sum())
    dom = Circle(256)
    rho = lumpy_circle(dom.grid)
    rng = np.random.default_rng([seed, 5])
    x0 = np.stack([particles.sample_density(dom, rho / dom.integrate(rho), n, rng) for _ in range(replicas)])
    start = _time.perf_counter()
    sim = particles.simulate(model, x0, [0.0, t_final], method="rk4", dt=0.05, observables=False)
    out["particles_s"] = _time.perf_counter() - start
    matched = []
    for y in sim["x"].values[-1]:
        cp = clusters(y, None, CLUSTER_TOL, geometry="sphere")
        # each particle cluster joins the Lagrangian cluster nearest to it (largest <x, y>)
        near = np.argmax(cp.positions @ positions.T, axis=1)
        matched.append(np.bincount(near, weights=cp.masses, minlength=masses.size).tolist())
    out["particle_masses"] = matched
    return out


__all__ = [
    "CAUSAL_LABELS",
    "CAUSAL_RHO0",
    "CAUSAL_SPACE_NODES",
    "CIRCLE_RHO0",
    "CLUSTER_TOL",
    "CONTINUATION",
    "GAUSSIAN_T",
    "LAGRANGIAN_TOL",
    "MIN_CLUSTER_MASS",
    "PARTICLE_DT",
    "PARTICLE_LEVEL",
    "PARTICLE_T",
    "SPECTRAL_TOL",
    "SPHERE_RHO0",
    "Tolerances",
    "causal_nodes",
    "circle_vs_spectral",
    "cluster_masses_vs_particles",
    "gaussian_models",
    "gaussian_vs_ode",
    "lumpy_circle",
    "particle_rate",
    "particle_variants",
    "spectral_values_at_nodes",
    "sphere_vs_spectral",
]
