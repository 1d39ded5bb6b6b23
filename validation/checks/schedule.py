"""Checks: layers with their own weights (a :class:`meanfield.schedule.Schedule` of models).

.. autosummary::
   check_schedule_gaussian_layers
   layer_models

A Transformer has one ``(Q, K, V)`` per layer (docs/equations.md section 2, "Layers with their
own weights"). Three softmax
layers with ``V = I`` and their own ``(Q, K)``, switched at ``t = 0.4`` and ``0.8``, run as one
schedule by :func:`meanfield.solve_gaussian` and by ``particles.simulate``:

* the Gaussian covariance follows the closed form layer by layer,
  ``Sigma(t) = (Sigma(t_k)^{-1} - (A_k + A_k^T)(t - t_k))^{-1}`` on ``[t_k, t_{k+1})``
  (:func:`meanfield.gaussian.layered_covariance`);
* the particles' schedule run equals the composition of single-model runs (model ``k`` from
  the state that model ``k - 1`` left at the switch) to round-off;
* the batched ensembles (:func:`particles.ensemble.ensemble_states`, behind the phase diagram
  and metastability) run the same schedule as ``particles.simulate`` does, to round-off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from meanfield import gaussian as mg
from meanfield.model import Model
from meanfield.plots.figures import subplots
from meanfield.schedule import Schedule
from particles.ensemble import ensemble_states
from validation.checks.common import save_figure
from validation.records import CheckResult, Comparison
from validation.suites import check

SWITCHES = (0.0, 0.4, 0.8)
"""Start times of the three layers."""

T_FINAL = 1.2
"""End of the last layer."""

COV0 = np.array([[0.150, 0.025, 0.000], [0.025, 0.100, 0.020], [0.000, 0.020, 0.125]])
"""The initial covariance (anisotropic, positive definite)."""

GAUSS_TOL = 1e-8
"""Relative tolerance of ``Sigma(t)`` against the closed form: ``solve_gaussian`` runs at
``rtol = 1e-12``, ``atol = 1e-14`` per step; over the steps of ``[0, 1.2]`` (16 measured,
fewer than 10^2) the local errors add to at most ~1e-10 and the flow amplifies them by at
most ``|Sigma(T)| / |Sigma_0|`` times the condition number of ``Sigma^{-1}`` (about 2 and 3.5
here: the eigenvalues of ``Sigma^{-1}`` go from 6.2-12.2 at ``t = 0`` to 3.0-10.2 at
``T_FINAL``, far from a blow-up): 1e-8 leaves a margin of 10 on that bound. Measured: 1.9e-13
(``details``)."""

COMPOSE_TOL = 1e-14
"""Absolute tolerance of the particles' schedule run against the composition of single-model
runs. Both make the same RK4 steps with the same arithmetic (the schedule cuts the run at the
switch as the composition does), so they agree bitwise; the allowance covers a BLAS whose
summation order depends on the memory alignment of the state handed over: ``n eps = 16 x
2.2e-16 = 3.6e-15`` per evaluation on unit vectors, not amplified over ``[0, 1.2]`` by more
than a few (the attention flow on the sphere at ``beta <= 1.5``)."""


ENSEMBLE_TOL = 1e-12
"""Absolute tolerance of the ensemble's schedule run against ``particles.simulate``'s. Every
output time and switch is a multiple of ``dt = 0.05``, so the ensemble's equal steps over a
layer and ``particles``' over an output interval are the same RK4 steps, and the ensemble's
Hermite output at a step's end is that step's state; the two differ in the order of the
floating-point operations of the field only (a few ulps per evaluation on unit vectors,
``~1e-15``), carried over 24 steps by a flow that amplifies them by at most ``e^{L T}`` with
``L <~ 2 beta |Q^T K| <~ 4`` (``e^{4.8} ~ 120``): ``<~ 1e-13``; 1e-12 leaves a margin.
Measured: 3.9e-16 (``details["ensemble_gap"]``)."""


def layer_models() -> list[Model]:
    """Three softmax layers with ``V = I`` and their own ``(Q, K)`` (fixed, not seeded)."""
    rng = np.random.default_rng(20251202)
    models = []
    for beta in (1.0, 0.6, 1.5):
        q = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
        k = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
        models.append(Model(beta, Q=q, K=k))
    return models


@check("schedule.gaussian_layers", suites=("quick", "full"))
def check_schedule_gaussian_layers(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """A three-layer schedule: the Gaussian covariance against the closed form layer by layer,
    the particles' schedule run against the composition of single-model runs, and the batched
    ensembles' run of the schedule against the particles'.

    Tolerances: ``1e-8`` relative on the covariance (:data:`GAUSS_TOL`: ``rtol = 1e-12`` per
    step over the 16 accepted steps, amplified by at most the condition numbers of
    ``Sigma^{-1}``, below 4); ``1e-14`` on the composition (:data:`COMPOSE_TOL`: the same steps
    in both runs, so equal to round-off); ``1e-12`` on the batched ensemble against the
    particles (:data:`ENSEMBLE_TOL`: the same steps, the field's operations in another order).

    The output times include times inside each layer, and not the second switch (the engine
    stops there all the same); the first switch is an output time.
    """
    import particles

    models = layer_models()
    schedule = Schedule(list(zip(SWITCHES, models)))
    times = np.r_[np.linspace(0.0, 0.4, 5), 0.55, 0.7, 0.85, 1.0, T_FINAL]
    ds = mg.solve_gaussian(schedule, np.zeros(3), COV0, times, rtol=1e-12, atol=1e-14)
    exact = mg.layered_covariance(schedule, COV0, times)
    rel = (np.linalg.norm(ds["cov"].values - exact, axis=(1, 2))
           / np.linalg.norm(exact, axis=(1, 2)))

    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal((16, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    run = particles.simulate(schedule, x0, times, method="rk4", dt=0.05)
    composed = []
    state, done = x0, 0.0
    for k, model in enumerate(models):
        end = SWITCHES[k + 1] if k + 1 < len(models) else T_FINAL
        inside = times[(times > done) & (times < end)]
        piece = particles.simulate(model, state, np.r_[done, inside, end], method="rk4",
                                   dt=0.05)
        new = piece.isel(time=slice(1 if k else 0, None))  # a switch: the previous end
        composed.append(new.sel(time=np.isin(new["time"].values, times)))
        state, done = piece["x"].values[-1], end
    ref = xr.concat(composed, dim="time")
    gap = float(np.abs(run["x"].values - ref["x"].values).max())
    batched = ensemble_states(x0[None], schedule, times, dt=0.05)[:, 0]
    ensemble_gap = float(np.abs(batched - run["x"].values).max())
    same_times = bool(np.array_equal(run["time"].values, times))

    comparisons = (
        Comparison("Gaussian: max relative error of Sigma(t) vs the layer-by-layer closed form",
                   float(rel.max()), 0.0, GAUSS_TOL, "abs"),
        Comparison("particles: max |x| difference, schedule run vs composed single-model runs",
                   gap, 0.0, COMPOSE_TOL, "abs"),
        Comparison("particles: the schedule run's times are the output times",
                   float(same_times), 1.0, 0.0, "abs"),
        Comparison("ensembles: max |x| difference, simulate_ensemble vs particles.simulate "
                   "under the schedule", ensemble_gap, 0.0, ENSEMBLE_TOL, "abs"),
    )
    fig, ax = subplots(figsize=(6, 4.2))
    lam = np.linalg.eigvalsh(ds["cov"].values)
    fine = np.linspace(0.0, T_FINAL, 121)
    lam_exact = np.linalg.eigvalsh(mg.layered_covariance(schedule, COV0, fine))
    for j in range(3):
        ax.plot(fine, lam_exact[:, j], "-", color=f"C{j}", lw=1,
                label="closed form" if j == 0 else None)
        ax.plot(times, lam[:, j], "o", color=f"C{j}", label="solve_gaussian" if j == 0 else None)
    for s in SWITCHES[1:]:
        ax.axvline(s, color="0.6", ls=":", lw=1)
    ax.set_xlabel("t (layers switch at the dotted lines)")
    ax.set_ylabel("eigenvalues of Sigma(t)")
    ax.set_title("Three layers as a schedule: Sigma(t) layer by layer")
    ax.legend(fontsize=8)
    figure = save_figure(fig, out_dir, "schedule_gaussian_layers")
    data = xr.Dataset({"eig_solver": (("time", "k"), lam),
                       "rel_error": (("time",), rel)}, coords={"time": times})
    return CheckResult(
        name="schedule.gaussian_layers",
        quantity="a schedule of three layers: Gaussian Sigma(t) vs the closed form; particles "
                 "vs composed runs",
        comparisons=comparisons,
        description=(f"Sigma(t) = (Sigma(t_k)^-1 - (A_k + A_k^T)(t - t_k))^-1 per layer to "
                     f"{GAUSS_TOL:g} relative; composition to {COMPOSE_TOL:g} (same steps)"),
        details={"max_rel_error": float(rel.max()), "particles_gap": gap,
                 "ensemble_gap": ensemble_gap,
                 "switches": list(SWITCHES), "steps_gaussian": int(ds.attrs["num_steps"])},
        data=data, figure=figure)


__all__ = ["ENSEMBLE_TOL", "check_schedule_gaussian_layers", "layer_models"]
