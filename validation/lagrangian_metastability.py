"""Figure 4 (metastability, cluster merging) at density level: the Lagrangian solver against
the particle system (docs/equations.md section 5; docs/lagrangian.md).

.. autosummary::
   smooth_start
   cluster_counts_vs_particles
   plot_cluster_counts_vs_particles

The spectral solver follows a smooth start only until the clusters sharpen beyond its grid
(:func:`validation.metastability.pde_cluster_counts` stops there). The characteristics
solver carries the same density on: its nodes gather into clusters, which then stay apart
for a long time before they merge. A cluster is a connected component of
``<x_i, x_j> >= 1 - tol`` (:func:`meanfield.lagrangian.clusters.clusters`, the criterion of
``particles.count_clusters``); at density level only clusters holding at least ``min_mass``
count (a node, or a particle, alone is not a cluster of the measure). The same count is taken
for ``seeds`` particle systems of ``n`` i.i.d. tokens from the same start, with
``particles.count_clusters`` (every cluster, however light) alongside.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import numpy as np
import xarray as xr


def smooth_start(amplitude: float = 0.05, modes: int = 8, seed: int = 0
                 ) -> Callable[[np.ndarray], np.ndarray]:
    """``rho0(theta) = (1 + 2 a sum_{k=1}^{modes} cos(k theta + phi_k)) / (2 pi)`` with phases
    ``phi_k`` drawn from ``seed``: the smooth start of
    :func:`validation.metastability.pde_cluster_counts` (mass 1 exactly, positive when
    ``2 a modes < 1``)."""
    if not 0 <= 2 * amplitude * modes < 1:
        msg = f"2 * amplitude * modes must lie in [0, 1) (a positive density), got {2 * amplitude * modes!r}"
        raise ValueError(msg)
    phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, int(modes))
    ks = np.arange(1, int(modes) + 1)

    def rho0(theta: np.ndarray) -> np.ndarray:
        th = np.asarray(theta, dtype=float)
        wave = np.cos(ks[:, None] * th.reshape(1, -1) + phases[:, None]).sum(axis=0).reshape(th.shape)
        return (1 + 2 * amplitude * wave) / (2 * np.pi)

    return rho0


def _heavy_counts(x: np.ndarray, weights: np.ndarray | None, tol: float, min_mass: float) -> int:
    from meanfield.lagrangian.clusters import clusters

    return int(np.count_nonzero(clusters(x, weights, tol, geometry="sphere").masses >= min_mass))


def cluster_counts_vs_particles(beta: float = 9.0, *, N: int = 256, n: int = 256, seeds: int = 8,
                                t_max: float = 30.0, times: int = 61, amplitude: float = 0.05,
                                modes: int = 8, start_seed: int = 0, seed: int = 0,
                                attention: str = "softmax", tol: float = 1e-3,
                                min_mass: float = 0.02, dt: float = 0.1, rtol: float = 1e-8,
                                atol: float = 1e-10) -> xr.Dataset:
    """Clusters over time on the circle: the Lagrangian solution from :func:`smooth_start`
    (``N`` trapezoid nodes, :func:`meanfield.solve_lagrangian`) against ``seeds`` particle
    systems of ``n`` i.i.d. tokens from it (``particles.simulate``, RK4 step ``dt``).

    Returns ``lagrangian_clusters`` (time) and ``particle_clusters`` (seed, time): clusters of
    mass ``>= min_mass``; ``particle_clusters_all`` (seed, time): ``particles.count_clusters``
    (every cluster); ``angle`` (time, node) and ``log_density`` (time, node) of the nodes
    (for the figure).
    """
    import particles
    from meanfield import Circle, Model, nodes, solve_lagrangian

    for name, value in (("N", N), ("n", n), ("seeds", seeds), ("times", times)):
        if int(value) != value or value < 2 - (name == "seeds"):
            msg = f"{name} must be an integer >= {2 - (name == 'seeds')}, got {value!r}"
            raise ValueError(msg)
    if not (np.isfinite(t_max) and t_max > 0):
        msg = f"t_max must be finite and > 0, got {t_max!r}"
        raise ValueError(msg)
    if not 0 < min_mass <= 1:
        msg = f"min_mass must lie in (0, 1], got {min_mass!r}"
        raise ValueError(msg)
    model = Model(beta=float(beta), attention=attention)
    rho0 = smooth_start(amplitude, modes, start_seed)
    t = np.linspace(0.0, float(t_max), int(times))
    lag = solve_lagrangian(model, nodes.circle(rho0, int(N)), t, rtol=rtol, atol=atol)
    xs, w = lag["x"].values, lag["weight"].values
    lag_counts = np.array([_heavy_counts(x, w, tol, min_mass) for x in xs])
    dom = Circle(max(256, int(N)))
    rng = np.random.default_rng([seed, 4])
    x0 = np.stack([particles.sample_density(dom, rho0(dom.grid), int(n), rng) for _ in range(int(seeds))])
    sim = particles.simulate(model, x0, t, method="rk4", dt=dt, observables=False)
    px = sim["x"].values  # (time, seed, token, dim)
    heavy = np.array([[_heavy_counts(px[k, s], None, tol, min_mass) for k in range(t.size)]
                      for s in range(int(seeds))])
    every = np.stack([particles.count_clusters(px[k], tol) for k in range(t.size)], axis=1)
    log_density = lag["log_density"].values if "log_density" in lag else np.log(lag["density"].values)
    settings = {"beta": float(beta), "attention": attention, "N": int(N), "n": int(n),
                "seeds": int(seeds), "amplitude": float(amplitude), "modes": int(modes),
                "start_seed": int(start_seed), "seed": int(seed), "tol": float(tol),
                "min_mass": float(min_mass), "dt": float(dt), "rtol": float(rtol), "atol": float(atol)}
    return xr.Dataset(
        {"lagrangian_clusters": ("time", lag_counts,
                                 {"long_name": f"clusters of mass >= {min_mass:g}, Lagrangian"}),
         "particle_clusters": (("seed", "time"), heavy,
                               {"long_name": f"clusters of mass >= {min_mass:g}, particles"}),
         "particle_clusters_all": (("seed", "time"), every,
                                   {"long_name": "particles.count_clusters (every cluster)"}),
         "angle": (("time", "node"), np.arctan2(xs[..., 1], xs[..., 0]), {"long_name": "node angle"}),
         "log_density": (("time", "node"), log_density, {"long_name": "log density at the node"})},
        coords={"time": ("time", t, {"long_name": "time", "units": "1"}), "seed": np.arange(int(seeds)),
                "node": np.arange(xs.shape[1])},
        attrs={"title": "metastability at density level: Lagrangian solver vs particles (Figure 4)",
               "solver": "validation.lagrangian_metastability", "model": model.to_json(),
               "settings": json.dumps(settings),
               "criterion": f"connected components of <x_i, x_j> >= 1 - {tol:g}, mass >= {min_mass:g}"},
    )


def plot_cluster_counts_vs_particles(ds: xr.Dataset, path: str | os.PathLike[str] | None = None) -> Any:
    """Left: the node angles over time coloured by the log density they carry (the density
    level Figure 4). Right: the number of clusters against time, Lagrangian and particles
    (median and quartiles over seeds; dashed: ``particles.count_clusters`` of every
    cluster)."""
    from meanfield.plots.figures import angle_axis, finish, new_figure

    settings = json.loads(ds.attrs.get("settings", "{}"))
    t = ds["time"].values
    fig = new_figure(figsize=(10, 3.8))
    left, right = fig.subplots(1, 2)
    ang = np.mod(ds["angle"].values, 2 * np.pi)  # (-pi, pi] -> [0, 2 pi)
    logd = ds["log_density"].values
    T = np.broadcast_to(t[:, None], ang.shape)
    finite = np.isfinite(logd)
    lo, hi = np.percentile(logd[finite], [2, 98]) if finite.any() else (0.0, 1.0)
    sc = left.scatter(T.ravel(), ang.ravel(), c=np.clip(logd.ravel(), lo, hi), s=1.5, cmap="viridis",
                      rasterized=True)
    fig.colorbar(sc, ax=left, label="log density at the node")
    left.set_xlabel("t")
    angle_axis(left.yaxis, r"node angle $\theta_j(t)$")
    left.set_title(f"Lagrangian nodes, {settings.get('attention', '')} "
                   f"$\\beta$ = {settings.get('beta', '')}, N = {settings.get('N', '')}", fontsize=9)
    right.step(t, ds["lagrangian_clusters"].values, where="post", color="C3", lw=2, label="Lagrangian")
    pc = ds["particle_clusters"].values
    q = np.percentile(pc, [25, 50, 75], axis=0)
    right.step(t, q[1], where="post", color="k", lw=1.2,
               label=f"particles, n = {settings.get('n', '')} (median)")
    right.fill_between(t, q[0], q[2], step="post", color="k", alpha=0.15, label="quartiles")
    every = np.median(ds["particle_clusters_all"].values, axis=0)
    right.step(t, every, where="post", color="k", ls="--", lw=0.8, label="particles, every cluster (median)")
    right.set_ylim(bottom=0)
    right.yaxis.get_major_locator().set_params(integer=True)
    right.set_xlabel("t")
    right.set_ylabel(f"clusters (mass >= {settings.get('min_mass', '')})")
    right.legend(fontsize=7)
    return finish(fig, path)


__all__ = ["cluster_counts_vs_particles", "plot_cluster_counts_vs_particles", "smooth_start"]
