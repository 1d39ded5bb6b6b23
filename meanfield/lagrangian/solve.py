"""``solve_lagrangian``: the Transformer PDE by the method of characteristics.

.. autosummary::
   solve_lagrangian
   LagrangianError

docs/lagrangian.md derives the method. A quadrature ``sum_j w_j f(y_j)`` of ``int f dmu_0``
(:mod:`meanfield.lagrangian.nodes`) is pushed forward by the flow: since ``mu_t = Phi_t # mu_0``,
``int f dmu_t = sum_j w_j f(x_j(t))`` with ``x_j(t) = Phi_t(y_j)``. The nodes move with the
velocity of the weighted measure (:func:`meanfield.lagrangian.field.weighted_field`, every
attention kind), and the density is carried along each characteristic::

    d/dt x_j      = X[mu_t](x_j)
    d/dt log J_j  = (div X[mu_t])(x_j)          (surface divergence on S^{d-1})
    rho_t(x_j(t)) = rho_0(y_j) / J_j(t)

The state ``[x | log J]`` (shape ``(n, d + 1)``) runs on the project's one integration
engine (:func:`meanfield.integrate.integrate`), adaptive Dormand–Prince 5(4) by default, the
positions projected back onto the sphere after every accepted step. The weights never change,
so the mass ``sum_j w_j`` is conserved exactly; a non-finite state stops the run with
:class:`LagrangianError`, which carries the results up to the last accepted time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import xarray as xr

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.arguments import output_times
from meanfield.finite import DISSIPATION_NOTE, energy_variables, note_nonfinite
from meanfield.integrate import (
    ButcherTableau,
    ConstantStep,
    IntegrationError,
    PIController,
    ProgressTracker,
    RungeKutta,
    StepSizeMonitor,
    Tracker,
    check_step_count,
    finish,
    get_scheme,
    integrate,
    run_attrs,
    stability_radius,
)
from meanfield.integrate.blowup import BlowupMonitor
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, fastsum
from meanfield.kernels.interaction import (
    ambient_field,
    energy_terms,
    fast_energy_reason,
    fast_field_at,
    finish_field,
    has_energy,
)
from meanfield.lagrangian.field import check_measure, weighted_field
from meanfield.lagrangian.node_set import REDUCTIONS, NodeSet, ReducedNodes
from meanfield.lagrangian.quadrature import QuadratureMonitor, SphereQuadratureMonitor
from meanfield.model import Model
from meanfield.schedule import Schedule, forwarded, run_schedule


class LagrangianError(IntegrationError):
    """A Lagrangian run that ended early; ``.dataset`` holds the results up to ``.t``."""


def _check_model(model: Model, nodes: Any) -> None:
    if not isinstance(model, Model):
        msg = f"model must be a meanfield.Model, got {type(model).__name__}"
        raise ValueError(msg)
    if not isinstance(nodes, NodeSet):
        msg = (f"nodes must be a meanfield.lagrangian.nodes.Nodes (positions, weights, density) "
               f"or reduced nodes ({', '.join(sorted(REDUCTIONS))}), got {type(nodes).__name__}; "
               "make them with "
               "meanfield.lagrangian.nodes.circle, sphere, zonal, rings, subspace, gaussian or, from "
               "samples, meanfield.lagrangian.nodes.from_samples")
        raise ValueError(msg)
    if model.noise > 0:
        msg = (f"model.noise={model.noise} > 0: noise has no Lagrangian (characteristics) form; "
               "meanfield.solve (the spectral solver) integrates it, and particles.simulate "
               "with method='euler_maruyama'")
        raise ValueError(msg)
    attention_registry.require(model.attention, "lagrangian")
    if model.causal and nodes.labels is None:
        msg = ("nodes.labels is None, but causal attention needs a position label per node: "
               "make the nodes with meanfield.lagrangian.nodes.with_labels")
        raise ValueError(msg)


def _project(sphere: bool, d: int) -> Any:
    if not sphere:
        return None

    def project(y: Any) -> Any:
        x = y[:, :d]
        x /= bk.namespace(y).sqrt(bk.rows_dot(x, x))[:, None]
        return y

    return project


def _positions_tangent(sphere: bool, d: int) -> Any:
    """Directions of the positions only (tangent to the sphere there): the step's stability
    is the positions' (``log J`` is a quadrature along them, ``d/dt log J = div X(x)``, with
    no feedback), so the step-size monitor measures the rate of the ``x`` block."""

    def tangent(y: Any, v: Any) -> Any:
        v = bk.namespace(v).asarray(v, copy=True)
        v[:, d] = 0.0
        if sphere:
            x = y[:, :d]
            v[:, :d] -= bk.rows_dot(x, v[:, :d])[:, None] * x
        return v

    return tangent


def solve_lagrangian(
    model: Model | Schedule,
    nodes: Any,
    t: Sequence[float] | np.ndarray,
    *,
    scheme: str = "dopri5",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    dt: float | None = None,
    max_steps: int = 1_000_000,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    trackers: Iterable[Tracker] = (),
    progress: bool = False,
    throw: bool = True,
    out: str | Path | None = None,
    overwrite: bool = False,
    handover: dict[str, Any] | None = None,
    backend: str = "numpy",
    device: Any = None,
    dtype: str = "float64",
    field_method: str = "auto",
    field_tol: float = fastsum.FIELD_TOL,
) -> xr.Dataset:
    """Evolve the measure of ``nodes`` under ``model`` by characteristics (docs/lagrangian.md).

    Args:
        model: a :class:`meanfield.Model` of any attention kind (general ``Q, K, V``, heads,
            causal mask with node labels, feed-forward); no noise. Or a
            :class:`meanfield.Schedule` of such models (docs/equations.md section 2, "Layers
            with their own weights"), run piece by piece
            (:func:`meanfield.schedule.run_schedule`): each piece starts from the nodes, weights
            and densities at the switch, and ``log_jacobian`` is carried across.
        nodes: a :class:`meanfield.lagrangian.nodes.Nodes` (positions, weights, initial density).
        t: output times, strictly increasing; ``t[0]`` is the time of ``nodes``.
        scheme: a Runge–Kutta scheme of :mod:`meanfield.integrate` (``dopri5`` adaptive by
            default; a fixed-step scheme needs ``dt``).
        rtol, atol: tolerances of the adaptive controller on ``[x | log J]``.
        dt: the step of a fixed-step scheme (first step of an adaptive one). A fixed step is
            watched by :class:`meanfield.integrate.StepSizeMonitor` (the run stops with
            :attr:`StopReason.UNSTABLE` where ``h L`` exceeds the scheme's stability bound,
            warns near it) and refused up front when it needs more than ``max_steps`` steps
            (:func:`meanfield.integrate.check_step_count`).
        max_steps: bound on attempted steps.
        memory_limit: bytes for the ``n x n`` attention tiles.
        trackers, progress: hooks and a ``tqdm`` bar.
        throw: raise :class:`LagrangianError` when the run ends early; else return the
            partial Dataset with ``attrs["successful"] = 0``.
        out, overwrite: write the Dataset to this NetCDF file (checked before computing).
        handover: where the run continues another (recorded in ``settings``).
        backend, device, dtype: where the state ``[x | log J]`` lives and in what precision
            (:mod:`meanfield.backend`: ``"numpy"`` or ``"torch"`` on ``device``, ``"float64"``
            or ``"float32"``); the Dataset is host NumPy float64 (docs/backends.md).
        field_method: how the field is summed (:func:`weighted_field`'s ``method``):
            ``"direct"``, ``"fast"`` (fast summation on ``S^1``/``S^2``,
            :mod:`meanfield.kernels.fastsum`; stage points off the sphere are evaluated at ``x/|x|``)
            or ``"auto"``; recorded in ``settings`` with the fast field's band limit and error
            estimate.
        field_tol: the fast field's relative accuracy per point (default
            :data:`meanfield.kernels.fastsum.FIELD_TOL`, ``1e-10``, what the fast sums reach at
            fast cost); the nodes whose error estimate exceeds it (those that see almost no
            mass) are recomputed by the direct sum, ``O(n)`` each.

    Returns:
        ``xarray.Dataset`` with ``x`` (time, node, dim), ``weight`` (node), ``density`` and
        ``log_jacobian`` (time, node), ``mass`` (time), and where the model has an energy
        ``energy`` and ``dissipation`` (time; ``log_energy`` too where the energy overflows
        float64); ``label`` (node) for labelled nodes. Every NaN or inf comes with a
        ``note`` on its variable (docs/results.md); tokens in ``R^d`` that blow up stop the
        run (:mod:`meanfield.integrate.blowup`), and so does, in ``R^d``, an attention that tilts the
        mass out of the node cloud, and on the sphere or rings a rule that no longer resolves
        the flow's integrand (:mod:`meanfield.lagrangian.quadrature`,
        :attr:`StopReason.UNRESOLVED_NODES`, docs/lagrangian.md section 10; a warning first).
    """
    if isinstance(model, Schedule):  # every other keyword argument forwarded to each piece
        return _solve_schedule(model, nodes, t, out=out, overwrite=overwrite, options=forwarded(
            solve_lagrangian, locals(), positional=3, skip=("out", "overwrite")))
    _check_model(model, nodes)
    be = bk.get_backend(backend, device, dtype)
    times = output_times(t)
    if out is not None:
        from meanfield.io import check_writable

        check_writable(out, overwrite=overwrite, name="out")
    tab = get_scheme(scheme)
    controller = _controller(tab, rtol, atol, dt, times, max_steps, be)
    x0 = np.asarray(nodes.x, dtype=float)
    n, d = x0.shape
    sphere = nodes.geometry == "sphere"
    weights = np.asarray(nodes.weights, dtype=float)
    labels = None if nodes.labels is None else np.asarray(nodes.labels, dtype=float)
    # validates nodes, weights and labels once; the stages below skip it (a Runge-Kutta stage
    # leaves the sphere by O(h^p) until the accepted state is projected)
    check_measure(model, x0, weights, geometry=nodes.geometry, labels=labels)
    cache: dict[str, Any] = {"state": None}
    wb = be.asarray(weights[None])
    lab = None if labels is None else (be.asarray(labels[None]),) * 2
    deriv = "both" if sphere else "trace"
    _check_field_tol(field_tol)
    route = fastsum.choose_fast(field_method, model, d, nodes.geometry, n, n,
                                causal_labels=labels is not None, backend_numpy=be.is_numpy)
    fast = route is not None

    def rhs(y: Any) -> Any:
        xb = bk.contiguous(y[None, :, :d])
        if fast:
            res = fast_field_at(model, xb, xb, wb, deriv, False, memory_limit,
                                labels=None if labels is None else (labels[None],) * 2,
                                state=cache["state"], tol=float(field_tol), route=route)
            cache["fast"] = fastsum.merge_settings(cache.get("fast"), res.fast)
        else:
            F, tr, xdx, state = ambient_field(model, xb, xb, wb, labels=lab, derivatives=deriv,
                                              state=cache["state"], memory_limit=memory_limit)
            res = finish_field(xb, F, tr, xdx, nodes.geometry, False, state)
        cache["state"] = res.state
        out_ = bk.namespace(y).empty_like(y)
        out_[:, :d] = res.velocity
        out_[:, d] = res.divergence
        return out_

    y0 = be.asarray(np.concatenate([x0, np.zeros((n, 1))], axis=1))
    project = _project(sphere, d)
    reduced = isinstance(nodes, ReducedNodes)
    if reduced:  # exact symmetry reduction (docs/lagrangian.md sections 8, 11): its own state
        rhs, y0, project = _reduced_engine(model, nodes, tab, be, memory_limit)
        fast = False
    saved: list[tuple[float, np.ndarray]] = []

    def output(k: int, tk: float, y: Any, _ctx: Any) -> None:
        saved.append((tk, np.array(bk.to_numpy(y), dtype=float)))  # a host copy

    trackers = list(trackers)
    if progress:
        trackers.append(ProgressTracker(desc="solve_lagrangian", leave=False))
    monitors = _monitors(model, nodes, x0, weights, labels, times, tab, dt, rhs, y0, be,
                         reduced=reduced, state=lambda: cache["state"], memory_limit=memory_limit)
    sol = integrate(RungeKutta(rhs, tab, project=project), y0, times,
                    controller=controller, output=output, monitors=monitors,
                    dt0=dt if tab.adaptive else None, max_steps=max_steps, trackers=trackers)
    last = np.array(bk.to_numpy(sol.y), dtype=float)
    if sol.t_reached > saved[-1][0] and np.all(np.isfinite(last)):
        saved.append((sol.t_reached, last))
    settings = {"geometry": nodes.geometry, "nodes": str(nodes.describe),
                "num_nodes": int(n), "memory_limit": int(memory_limit),
                "handover": handover, "backend": be.label()}
    settings["field_method"] = "fast" if fast else "direct"
    settings["fast_field"] = None if cache.get("fast") is None else cache["fast"].as_dict()
    if be.dtype != "float64" and sphere:  # unit to float64 round-off (from float32's)
        for _, y in saved:
            y[:, :d] /= np.linalg.norm(y[:, :d], axis=1)[:, None]
    ds = _assemble(saved, model, nodes, weights, labels, d, memory_limit,
                   "fast" if fast else "direct")
    ds.attrs.update(run_attrs(
        sol, title="meanfield solve_lagrangian (characteristics)",
        solver="meanfield.solve_lagrangian", model=model.to_json(), settings=settings,
        scheme=tab.name, controller=type(controller).__name__,
        rtol=rtol if tab.adaptive else None, atol=atol if tab.adaptive else None,
        dt=None if dt is None else float(dt)))
    if handover is not None:
        ds["handover_time"] = ((), float(handover["t"]), {
            "long_name": f"time at which this run took over from {handover.get('from', 'another run')}"})
    return finish(sol, ds, name="solve_lagrangian", error=LagrangianError, throw=throw, out=out)


def _controller(tab: ButcherTableau, rtol: float, atol: float, dt: float | None, times: np.ndarray,
                max_steps: int, be: bk.Backend) -> PIController | ConstantStep:
    """The step-size control of :func:`solve_lagrangian`: ``PIController(rtol, atol)`` for an
    adaptive scheme, else ``ConstantStep(dt)`` with ``dt`` checked (finite, positive, and
    finishing within ``max_steps``)."""
    if tab.adaptive:
        controller = PIController(rtol=rtol, atol=atol)
        be.check_rtol(rtol)
        return controller
    if dt is None:
        msg = f"scheme {tab.name!r} has no error estimate: give a step dt"
        raise ValueError(msg)
    if not (np.isfinite(dt) and dt > 0):
        msg = f"dt must be finite and > 0, got {dt!r}"
        raise ValueError(msg)
    check_step_count(times, float(dt), max_steps)  # a step too small to ever finish
    return ConstantStep(dt)


def _check_field_tol(field_tol: Any) -> None:
    if isinstance(field_tol, bool) or not isinstance(field_tol, (int, float)) or not (
            math.isfinite(field_tol) and field_tol > 0):
        msg = f"field_tol must be finite and > 0, got {field_tol!r}"
        raise ValueError(msg)


def _reduced_engine(model: Model, nodes: ReducedNodes, tab: ButcherTableau, be: bk.Backend,
                    memory_limit: int) -> tuple[Any, Any, Any]:
    """``(rhs, y0, project)`` of symmetry-reduced nodes: their own state
    (:meth:`meanfield.lagrangian.node_set.ReducedNodes.engine`), on the same engine; adaptive
    schemes only."""
    if not tab.adaptive:  # the step-size monitor watches positions on S^{d-1}, not phi
        msg = (f"scheme={tab.name!r}: {nodes.reduction} nodes run with an adaptive scheme (e.g. "
               "scheme='dopri5'), whose error control replaces the fixed step's monitor")
        raise ValueError(msg)
    return nodes.engine(model, be, memory_limit)


def _monitors(model: Model, nodes: Any, x0: np.ndarray, weights: np.ndarray,
              labels: np.ndarray | None, times: np.ndarray, tab: ButcherTableau,
              dt: float | None, rhs: Any, y0: Any, be: bk.Backend, *, reduced: bool, state: Any,
              memory_limit: int) -> list[Any]:
    """The monitors of a run, in the order they are asked: the blow-up of tokens in ``R^d``,
    the tilted measure leaving the node cloud (``R^d``), the fixed step against the scheme's
    stability bound, and the rule no longer resolving the flow's integrand (sphere, ring and
    subspace nodes; docs/lagrangian.md section 10)."""
    d = x0.shape[1]
    sphere = nodes.geometry == "sphere"
    monitors: list[Any] = [] if sphere else [BlowupMonitor(model, x0, float(times[0]), positions=d,
                                                           dtype=be.dtype)]
    if not (sphere or reduced):  # the tilted measure may leave the node cloud (docs/lagrangian.md section 10)
        monitors.append(QuadratureMonitor(model, x0, weights, d, float(times[-1]), labels=labels,
                                          state=state, memory_limit=memory_limit))
    if dt is not None and not tab.adaptive:  # a fixed step: h L against the scheme's bound
        monitors.append(StepSizeMonitor(rhs, tab.name, float(dt), times, sphere=False, x0=y0,
                                        radius=stability_radius(tab),
                                        tangent=_positions_tangent(sphere, d),
                                        advice="scheme='dopri5'"))
    # the rule may no longer resolve the flow's integrand; after the step-size monitor, whose
    # diagnosis of a step too large comes first
    if sphere or reduced:
        monitors.append(SphereQuadratureMonitor(model, nodes, float(times[-1]), labels=labels,
                                                state=state, memory_limit=memory_limit))
    return monitors


def _solve_schedule(schedule: Schedule, nodes: Any, t: Any, *, out: str | Path | None,
                    overwrite: bool, options: dict[str, Any]) -> xr.Dataset:
    """:func:`solve_lagrangian` under a schedule: one run per piece, the nodes handed over."""
    from meanfield.lagrangian.nodes import Nodes

    if isinstance(nodes, ReducedNodes):
        msg = (f"solve_lagrangian: a Schedule of models runs on plain Nodes, not on "
               f"{nodes.reduction} nodes")
        raise ValueError(msg)
    for piece in schedule.models:
        _check_model(piece, nodes)

    def handover(ds: xr.Dataset) -> Any:
        labels = ds["label"].values if "label" in ds else None
        return Nodes(ds["x"].values[-1], ds["weight"].values, ds["density"].values[-1],
                     geometry=nodes.geometry, labels=labels, describe=nodes.describe)

    def carry(ds: xr.Dataset, previous: xr.Dataset) -> xr.Dataset:
        ds = ds.copy()
        ds["log_jacobian"] = ds["log_jacobian"] + previous["log_jacobian"].values[-1]
        return ds

    return run_schedule(schedule, t, nodes,
                        lambda m, tt, nd: solve_lagrangian(m, nd, tt, **options),
                        handover, carry, out=out, overwrite=overwrite)


def _assemble(saved: list[tuple[float, np.ndarray]], model: Model, nodes: Any,
              weights: np.ndarray, labels: np.ndarray | None, d: int,
              memory_limit: int, method: str = "direct") -> xr.Dataset:
    """The Dataset of a run; ``method`` (the run's field choice, ``"fast"`` or ``"direct"``)
    also sums its energy, ``Z`` and dissipation outputs (the fast energy where it applies,
    :func:`meanfield.kernels.interaction.use_fast_energy`)."""
    if isinstance(nodes, ReducedNodes):  # reduced nodes: their own variables
        return nodes.assemble(saved, model)
    tvals = np.array([s[0] for s in saved])
    ys = np.stack([s[1] for s in saved])
    x = ys[:, :, :d]
    log_j = ys[:, :, d]
    rho0 = np.asarray(nodes.density, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):  # log 0 = -inf; overflow: see the note
        log_rho = np.log(rho0)[None, :] - log_j
        density = np.exp(log_rho)
    data: dict[str, Any] = {
        "x": (("time", "node", "dim"), x, {"long_name": "node position x_j(t)"}),
        "weight": ("node", weights, {"long_name": "quadrature weight w_j of mu_0 (constant)"}),
        "density": (("time", "node"), density, note_nonfinite({
            "long_name": ("density at the moving node, rho_0(y_j) / J_j(t), w.r.t. "
                          + ("surface measure" if nodes.geometry == "sphere" else "Lebesgue measure"))},
            density, "inf where it exceeds the floating-point range (a collapsing cluster); "
                     "log_density holds every value")),
        "log_density": (("time", "node"), log_rho, note_nonfinite({
            "long_name": "natural log of the density at the moving node, log rho_0(y_j) - log J_j(t)"},
            log_rho, "-inf where rho_0(y_j) = 0")),
        "log_jacobian": (("time", "node"), log_j, {
            "long_name": "log J_j(t), d/dt log J = div X (docs/lagrangian.md)"}),
        "mass": ("time", np.full(tvals.size, float(np.sum(weights))), {
            "long_name": "total mass sum_j w_j (exact along characteristics)"}),
    }
    if labels is not None:
        data["label"] = ("node", labels, {"long_name": "position label in [0, 1]"})
    if has_energy(model):
        # dE/dt = s int |X|^2 dmu (Wasserstein) or s int |X|^2 Z_mu dmu (the attention metric)
        metric = attention_registry.resolve(model.attention).flow_energy().metric
        w = np.broadcast_to(weights, (tvals.size, weights.size))
        fast_energy = method == "fast" and fast_energy_reason(model, d) is None
        terms = energy_terms(model, x, np.ascontiguousarray(w), memory_limit=memory_limit,
                             partition=True, method="fast" if fast_energy else "direct")
        z = terms.partition
        assert z is not None
        speed2 = np.empty(tvals.size)
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: see the note
            for k in range(tvals.size):
                v = weighted_field(model, x[k], weights, geometry=nodes.geometry, labels=labels,
                                   divergence=False, memory_limit=memory_limit,
                                   method=method).velocity
                factor = 1.0 + z[k] if metric == "attention" else 1.0
                speed2[k] = np.sum(weights * factor * np.einsum("nd,nd->n", v, v))
        data.update(energy_variables("time", terms.energy, terms.log_energy, {
            "long_name": "interaction energy E_beta (docs/equations.md (3.5), -1 convention)"}))
        dissipation = model.sign * speed2
        data["dissipation"] = ("time", dissipation, note_nonfinite({
            "long_name": "dE/dt predicted by the dissipation identity (docs/equations.md section 3)"},
            dissipation, DISSIPATION_NOTE))
    coords = {"time": ("time", tvals, {"long_name": "time", "units": "1"}),
              "node": ("node", np.arange(weights.size)),
              "dim": ("dim", np.arange(d))}
    return xr.Dataset(data, coords=coords)


__all__ = ["LagrangianError", "solve_lagrangian"]
