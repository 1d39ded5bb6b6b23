"""``simulate``: evolve tokens and return a labelled ``xarray.Dataset``.

.. autosummary::
   METHODS
   simulate
   simulate_angles
   SimulationError

The velocity of :mod:`particles.velocity` (and the projection onto the sphere) run on the
project's one integration engine, :func:`meanfield.integrate.integrate`; the methods are
listed in :data:`particles.integrators.METHODS` (``rk4``, ``dopri5``, ``post_ln``,
``angles``, ``euler_maruyama``, and the independent reference ``dop853``). All keep tokens
on ``S^{d-1}`` to round-off with ``geometry="sphere"``.

The result holds ``x`` (time, [batch,] token, dim), ``energy`` and ``dissipation``
(time[, batch]) and, for ``angles``, ``theta``; ``attrs`` follow the project's one result
schema (:data:`meanfield.integrate.RESULT_ATTRS`), so that a file alone says how it was made.
The state lives on one array backend for the whole run (:mod:`meanfield.backend`: NumPy, the
default, or torch on the CPU or a GPU, in float64 or float32): a ``torch.Tensor`` ``x0`` runs
on torch on its device, or ``backend="torch", device="cuda"`` says so. ``x0`` is checked on a
host copy and moved to the backend once; the states are copied to host NumPy (float64) only at
the output times, so the Dataset is the same whichever backend ran it (``settings`` records
which, e.g. ``"backend": "torch cuda:0 float32"``).

A run that ends early (a non-finite state, the step limit, Ctrl-C, an energy that moves
against the flow: :class:`particles.monitors.EnergyMonitor`, or a fixed step far beyond the
stability bound of its scheme: :class:`particles.monitors.StepSizeMonitor`) keeps its results
up to the last state it accepted and says why in ``stop_reason``; a step near the bound gives
a ``UserWarning`` with the measured ``h L``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
import xarray as xr

from meanfield import backend as bk
from meanfield.arguments import output_times
from meanfield.finite import DISSIPATION_NOTE, NOTE, energy_variables, note_nonfinite
from meanfield.integrate import (
    IntegrationError,
    ProgressTracker,
    check_step_count,
    finish,
    integrate,
    run_attrs,
)
from meanfield.integrate.blowup import BlowupMonitor
from meanfield.kernels import DEFAULT_MEMORY_LIMIT, fastsum
from meanfield.memory import check_particles_memory
from meanfield.schedule import Schedule, forwarded, run_schedule
from particles.angles import angle_velocity, check_angle_model, from_angles, to_angles
from particles.inputs import as_angles, as_count, as_rng, as_tokens, check_geometry
from particles.integrators import METHODS, integrate_reference, make_stepper, normalize_rows
from particles.monitors import STABILITY_RADIUS, EnergyMonitor, StepSizeMonitor, has_energy
from particles.observables import dissipation, energies, fast_energy_reason
from particles.velocity import attention, velocity


class SimulationError(IntegrationError):
    """A particle run that ended early; ``.dataset`` holds the results up to ``.t``."""


def _check_method(method: str) -> str:
    if method not in METHODS:
        msg = f"method must be one of {tuple(METHODS)}, got {method!r}"
        raise ValueError(msg)
    return method


def _dataset(
    model: Any,
    t: np.ndarray,
    xs: np.ndarray,
    batched: bool,
    geometry: str,
    observables: bool,
    memory_limit: int,
    summed: str = "direct",
) -> xr.Dataset:
    """The run's Dataset; ``summed``: how the energies are summed (``"fast"`` or ``"direct"``,
    :func:`particles.observables.energies`)."""
    lead = ("time", "batch") if batched else ("time",)
    shape = xs.shape[: len(lead)]
    if observables:
        pairs = [energies(model, xk, memory_limit=memory_limit, method=summed) for xk in xs]
        en = np.array([p[0] for p in pairs]).reshape(shape)
        log_en = np.array([p[1] for p in pairs]).reshape(shape)
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: see the note
            dis = np.array(
                [dissipation(model, xk, geometry, memory_limit=memory_limit) for xk in xs]
            ).reshape(shape)
    else:
        en = log_en = dis = np.full(shape, np.nan)
    coords: dict[str, Any] = {
        "time": ("time", t, {"long_name": "time (depth in layers x step)", "units": "1"}),
        "token": ("token", np.arange(xs.shape[-2])),
        "dim": ("dim", np.arange(xs.shape[-1])),
    }
    if batched:
        coords["batch"] = ("batch", np.arange(xs.shape[1]))
    off = "NaN: not computed (observables=False)"
    energy_attrs = {"long_name": "E_beta (docs/equations.md section 2, -1 inside the sum)",
                    "units": "1"}
    dis_attrs = {"long_name": "dE/dt along the flow", "units": "1"}
    energy_vars = (energy_variables(lead, en, log_en, energy_attrs) if observables
                   else {"energy": (lead, en, {**energy_attrs, NOTE: off})})
    ds = xr.Dataset(
        {
            "x": (lead + ("token", "dim"), xs, {"long_name": "token positions"}),
            **energy_vars,
            "dissipation": (lead, dis, note_nonfinite(
                dis_attrs, dis, DISSIPATION_NOTE if observables else off)),
        },
        coords=coords,
    )
    return ds


def simulate(
    model: Any,
    x0: Any,
    t: Any,
    geometry: str = "sphere",
    method: str = "rk4",
    dt: float | None = None,
    *,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    normalize: bool = False,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    observables: bool = True,
    rng: Any = None,
    max_steps: int = 1_000_000,
    progress: bool = False,
    throw: bool = True,
    backend: str | None = "numpy",
    device: Any = None,
    dtype: Any = None,
    field_method: str = "auto",
    field_tol: float = fastsum.FIELD_TOL,
    settings: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """Evolve tokens under the model's self-attention dynamics (docs/equations.md section 2).

    Args:
        model: a :class:`meanfield.Model`, or a :class:`meanfield.Schedule` of models
            (docs/equations.md section 2, "Layers with their own weights"): run piece by piece by
            :func:`meanfield.schedule.run_schedule`, no step across a switch.
        x0: initial tokens ``(n, d)`` or ``(batch, n, d)``.
        t: output times; ``t[0]`` is the time of ``x0``.
        geometry: ``"sphere"`` (layer normalisation) or ``"euclidean"`` (tokens in ``R^d``).
        method: one of :data:`METHODS`.
        dt: step (fixed-step methods; default from :data:`METHODS`); first step for adaptive.
        rtol, atol: tolerances of ``dopri5`` and ``dop853``.
        normalize: on the sphere, project ``x0`` onto it instead of rejecting it.
        memory_limit: bytes for the ``n x n`` attention tiles.
        observables: compute ``energy`` and ``dissipation`` at the output times (else NaN).
        rng: seed or Generator for ``euler_maruyama``.
        max_steps: bound on attempted steps.
        progress: show a ``tqdm`` progress bar.
        throw: raise :class:`SimulationError` when the run ends early (a non-finite state,
            the step limit); else return the partial Dataset with ``attrs["successful"] = 0``.
        backend: ``"numpy"`` or ``"torch"`` (:data:`meanfield.backend.BACKENDS`); a torch
            tensor ``x0`` selects ``"torch"`` on its device. ``dop853`` (scipy's
            ``solve_ivp``) is the NumPy float64 reference and runs on NumPy only.
        device: a torch device (``"cpu"``, ``"cuda:0"``); default: ``x0``'s, else the CPU.
        dtype: ``"float64"`` or ``"float32"`` for the whole state; default: ``x0``'s for a
            torch tensor, else ``"float64"``.
        field_method: how the velocity is summed (:func:`particles.velocity`'s ``method``):
            ``"direct"``, ``"fast"`` (fast summation on ``S^1``/``S^2``, :mod:`meanfield.kernels.fastsum`)
            or ``"auto"``; recorded in ``settings``. Where the field is fast, the energy (of the
            monitor and of ``energy``) is too (:func:`particles.observables.energies`, ``O(n)``;
            SA/USA with ``Q = K = I``, float64); the dissipation and other observables stay direct.
        field_tol: the fast field's relative accuracy per point (:func:`particles.velocity`'s
            ``field_tol``; default :data:`meanfield.kernels.fastsum.FIELD_TOL`, ``1e-10``, what
            the fast sums reach at fast cost): the points whose error estimate exceeds it (those
            that see almost no mass) are summed directly. Recorded in ``settings``.
        settings: more entries for ``attrs["settings"]``, recorded with the run's own (the
            command line's seed and how it drew ``x0``); none may change what the run records
            itself, except ``seed`` where ``rng`` is not a seed (a ``ValueError`` names the key).

    Returns:
        ``xarray.Dataset`` with ``x``, ``energy``, ``dissipation`` (and ``theta`` for
        ``angles``; ``log_energy`` where the energy overflows float64, every NaN or inf with
        a ``note``: docs/results.md), up to the last time reached. Tokens in ``R^d``
        (``geometry="euclidean"``) that grow past the model's bound or become non-finite stop
        the run with :attr:`StopReason.BLOWUP` (:mod:`meanfield.integrate.blowup`).

    Raises:
        ValueError: on bad input, or when the run would not fit in the available memory
            (:func:`meanfield.memory.check_particles_memory`: the estimate and the memory
            there is, in GiB).
    """
    if isinstance(model, Schedule):  # one run per piece, the state handed over at each switch
        options = forwarded(simulate, locals(), positional=3)  # forwarded to each piece
        # the backend decided once, from x0: the tokens handed over are host arrays
        where = bk.get_backend(backend, device, dtype, like=x0)
        options.update(backend=where.name, device=where.device, dtype=where.dtype,
                       # one generator across the pieces: the noise goes on, not restarts
                       rng=as_rng(rng) if method == "euler_maruyama" else rng)
        return run_schedule(model, t, x0,
                            lambda m, tt, x: simulate(m, x, tt, **options),
                            lambda ds: ds["x"].values[-1].astype(where.dtype))
    check_geometry(geometry)
    _check_method(method)
    seed = rng if isinstance(rng, (int, np.integer)) else None
    extra = _extra_settings(settings, seed)
    bkd = bk.get_backend(backend, device, dtype, like=x0)
    _check_backend(method, bkd, rtol)
    t = output_times(t)
    x0 = _host_tokens(x0, geometry, normalize, model)
    memory_limit = as_count(memory_limit, "memory_limit")
    batched = x0.ndim == 3
    check_particles_memory(x0.shape[0] if batched else 1, x0.shape[-2], x0.shape[-1], t.size,
                           memory_limit, METHODS[method]["adaptive"])
    _check_noise(model, method)
    dt = _check_dt(method, dt, t, max_steps)
    field_tol = fastsum.check_tol(field_tol, "field_tol")
    if field_method not in fastsum.FIELD_METHODS:
        msg = f"field_method must be one of {fastsum.FIELD_METHODS}, got {field_method!r}"
        raise ValueError(msg)
    if method == "angles":
        summed = "direct"  # how the velocity is summed (field_method, decided once)
        ds, sol = _evolve_angles(model, x0, t, geometry, bkd, dt=dt, rtol=rtol, atol=atol,
                                 max_steps=max_steps, progress=progress,
                                 observables=observables, memory_limit=memory_limit)
    else:
        ds, sol, summed = _evolve_tokens(model, x0, t, method, geometry, bkd,
                                         field_method=field_method, field_tol=field_tol,
                                         rng=rng, dt=dt, rtol=rtol, atol=atol,
                                         max_steps=max_steps, progress=progress,
                                         observables=observables, memory_limit=memory_limit)
    _settings(ds, model, method, geometry, dt, rtol, atol, memory_limit, sol, seed, bkd,
              summed, field_tol, extra)
    return _finish(ds, sol, throw)


def _check_backend(method: str, bkd: bk.Backend, rtol: float) -> None:
    """``dop853`` runs on NumPy float64 only; an adaptive method's ``rtol`` must be reachable
    in the backend's precision."""
    if method == "dop853" and (not bkd.is_numpy or bkd.dtype != "float64"):
        msg = ("method='dop853' (scipy's solve_ivp) is the NumPy float64 reference: it needs "
               f"backend='numpy', dtype='float64', got {bkd.label()!r}")
        raise ValueError(msg)
    if METHODS[method]["adaptive"]:
        bkd.check_rtol(rtol)


def _check_noise(model: Any, method: str) -> None:
    """Noise (``model.noise > 0``) if and only if ``method="euler_maruyama"``."""
    if model.noise > 0 and method != "euler_maruyama":
        msg = f"model.noise={model.noise} > 0 needs method='euler_maruyama', got {method!r}"
        raise ValueError(msg)
    if method == "euler_maruyama" and model.noise == 0:
        msg = "method='euler_maruyama' needs model.noise > 0 (use rk4 or dopri5 otherwise)"
        raise ValueError(msg)


def _check_dt(method: str, dt: float | None, t: np.ndarray, max_steps: int) -> float | None:
    """The step (the method's default when ``None``), finite and ``> 0``; a fixed-step run
    whose step count exceeds ``max_steps`` is refused up front, with the estimate."""
    if dt is None:
        dt = METHODS[method]["dt"]
    if dt is not None:
        dtf = float(dt)
        if not (np.isfinite(dtf) and dtf > 0):
            msg = f"dt must be finite and > 0, got {dt!r}"
            raise ValueError(msg)
        if not METHODS[method]["adaptive"]:  # refused up front, with the estimate
            check_step_count(t, dtf, max_steps)
    return dt


def _summed(field_method: str, model: Any, x0: np.ndarray, geometry: str, bkd: bk.Backend) -> str:
    """How the velocity is summed: ``"fast"`` or ``"direct"`` (:func:`fastsum.use_fast`)."""
    fast = fastsum.use_fast(field_method, model, x0.shape[-1], geometry, x0.shape[-2],
                            x0.shape[-2], backend_numpy=bkd.is_numpy)
    return "fast" if fast else "direct"


def _evolve_angles(model: Any, x0: np.ndarray, t: np.ndarray, geometry: str, bkd: bk.Backend, *,
                   dt: float | None, rtol: float, atol: float, max_steps: int, progress: bool,
                   observables: bool, memory_limit: int) -> tuple[xr.Dataset, Any]:
    """``method="angles"``: tokens on ``S^1`` evolved as their angles (:func:`angle_velocity`);
    the Dataset (with ``theta``) and the engine's :class:`Solution`."""
    if geometry != "sphere" or x0.shape[-1] != 2:
        msg = (
            "method='angles' needs geometry='sphere' and d = 2, got "
            f"geometry={geometry!r}, d={x0.shape[-1]}"
        )
        raise ValueError(msg)
    check_angle_model(model)
    assert dt is not None  # a fixed-step method: its default step is in METHODS

    def g(th: Any) -> Any:
        return angle_velocity(model, th, memory_limit=memory_limit, check=False)

    th0 = bkd.asarray(to_angles(x0))
    times, th, sol = _run("angles", g, th0, t, dt=dt, sphere=False, rtol=rtol,
                          atol=atol, max_steps=max_steps, progress=progress,
                          monitors=[StepSizeMonitor(g, "angles", float(dt), t, sphere=False,
                                                    x0=th0)])
    batched = x0.ndim == 3
    ds = _dataset(model, times, from_angles(th), batched, geometry, observables,
                  memory_limit)
    lead = ("time", "batch") if batched else ("time",)
    ds["theta"] = (lead + ("token",), th, {"long_name": "angle", "units": "rad"})
    return ds, sol


def _evolve_tokens(model: Any, x0: np.ndarray, t: np.ndarray, method: str, geometry: str,
                   bkd: bk.Backend, *, field_method: str, field_tol: float, rng: Any,
                   dt: float | None, rtol: float, atol: float, max_steps: int, progress: bool,
                   observables: bool, memory_limit: int) -> tuple[xr.Dataset, Any, str]:
    """Every method but ``angles``: the tokens evolved by the velocity or, for ``post_ln``, by
    attention layers; the Dataset, the engine's :class:`Solution` and how the velocity was
    summed (``"fast"`` or ``"direct"``, decided once from ``field_method``)."""
    sphere = geometry == "sphere"
    summed = "direct"
    if method == "post_ln":
        assert dt is not None  # a fixed-step method: its default step is in METHODS
        _check_layers(t, float(dt))

        def f(x: Any) -> Any:
            return attention(model, x, memory_limit=memory_limit, check=False)
    else:
        summed = _summed(field_method, model, x0, geometry, bkd)

        def f(x: Any) -> Any:
            return velocity(model, x, geometry, memory_limit=memory_limit, check=False,
                            method=summed, field_tol=field_tol)

    y0 = bkd.asarray(x0)

    # the energy follows the field's decision: the fast sum (O(n)) where the field is fast
    # and the fast energy applies (float64 tokens, on the sphere to round-off)
    esummed = ("fast" if summed == "fast" and bkd.dtype == "float64"
               and fast_energy_reason(model, x0.shape[-1]) is None else "direct")
    monitors = _monitors(model, method, f, dt, t, x0, y0, sphere, bkd, esummed, memory_limit)
    times, xs, sol = _run(method, f, y0, t, dt=dt, sphere=sphere, rtol=rtol, atol=atol,
                          max_steps=max_steps, progress=progress, sigma=model.noise,
                          rng=as_rng(rng) if method == "euler_maruyama" else None,
                          monitors=monitors)
    ds = _dataset(model, times, xs, x0.ndim == 3, geometry, observables, memory_limit, esummed)
    return ds, sol, summed


def _monitors(model: Any, method: str, f: Callable[[Any], Any], dt: float | None, t: np.ndarray,
              x0: np.ndarray, y0: Any, sphere: bool, bkd: bk.Backend, esummed: str,
              memory_limit: int) -> list[Any]:
    """The monitors of a token run: the energy against the flow (``rk4``, ``dopri5`` with an
    energy; summed as ``esummed``), ``h L`` against the stability bound (fixed steps), the
    blow-up of tokens in ``R^d``."""
    monitors: list[Any] = ([EnergyMonitor(model, t, memory_limit, method=esummed)]
                           if method in ("rk4", "dopri5") and has_energy(model) else [])
    if method in STABILITY_RADIUS:  # fixed steps: h L against the stability bound
        assert dt is not None  # a fixed-step method: its default step is in METHODS
        monitors.append(StepSizeMonitor(f, method, float(dt), t, sphere=sphere, x0=y0))
    if not sphere:  # tokens in R^d: growth past the model's bound, or non-finite
        monitors.append(BlowupMonitor(model, x0, float(t[0]), dtype=bkd.dtype))
    return monitors


def _host_tokens(x0: Any, geometry: str, normalize: bool, model: Any) -> np.ndarray:
    """``x0`` checked on a host copy (:func:`particles.inputs.as_tokens`), float64. Float32
    tokens (a float32 tensor, say) are on the sphere only to float32 round-off: rounding the
    ``d`` coordinates and the float32 normalisation that made them move ``|x_i|`` by up to
    ``~(d + 2) eps32 / 2``; within ``(d + 2) eps32`` of 1 they are projected (in float64)
    instead of refused."""
    host = bk.to_numpy(x0)
    if (geometry == "sphere" and not normalize and getattr(host, "dtype", None) == np.float32
            and host.ndim in (2, 3) and host.size and np.all(np.isfinite(host))):
        norms = np.linalg.norm(host.astype(float), axis=-1)
        normalize = bool(np.max(np.abs(norms - 1.0))
                         <= (host.shape[-1] + 2) * float(np.finfo(np.float32).eps))
    return as_tokens(host, "x0", geometry=geometry, normalize=normalize, model=model)


def _run(method: str, f: Callable[[Any], Any], x0: Any, t: np.ndarray, *,
         dt: float | None, sphere: bool, rtol: float, atol: float, max_steps: int,
         progress: bool, sigma: float = 0.0, rng: np.random.Generator | None = None,
         monitors: list[Any] | None = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """Integrate; the times reached (the output times, plus the last accepted time when the
    run ended early), the states there (host NumPy float64: the state ``x0`` stays on its
    backend and is copied here at the output times only), and the engine's :class:`Solution`."""
    out = np.empty((t.size,) + tuple(x0.shape))
    reached = [0]

    def output(k: int, tk: float, x: Any, _ctx: Any) -> None:
        out[k] = bk.to_numpy(x)
        reached[0] = k + 1

    if method == "dop853":
        sol = integrate_reference(f, x0, t, rtol, atol, normalize_rows if sphere else None,
                                  output)
    else:
        stepper, controller = make_stepper(method, f, sphere=sphere, rtol=rtol, atol=atol,
                                           dt=dt, sigma=sigma, rng=rng)
        trackers = [ProgressTracker(desc=f"particles {method}", leave=False)] if progress else []
        sol = integrate(stepper, x0, t, controller=controller, output=output,
                        dt0=dt if controller.adaptive else None, max_steps=max_steps,
                        trackers=trackers, monitors=monitors or ())
    n = reached[0]
    times = t[:n]
    xs = out[:n]
    if sol.t_reached > times[-1]:  # ended between outputs: keep the last accepted state
        times = np.append(times, sol.t_reached)
        xs = np.concatenate([xs, np.asarray(bk.to_numpy(sol.y), dtype=float)[None]])
    return times, xs, sol


def _check_layers(t: np.ndarray, dt: float) -> None:
    """Post-LN: the output times must be whole numbers of layers ``(t_k - t_0) / dt``."""
    steps = (t - t[0]) / dt
    layers = np.rint(steps)
    if np.any(np.abs(steps - layers) > 1e-9 * np.maximum(1.0, layers)):
        msg = f"output times t must be t[0] + (whole number of layers) * dt, with dt={dt!r}"
        raise ValueError(msg)


def _finish(ds: xr.Dataset, sol: Any, throw: bool) -> xr.Dataset:
    return finish(sol, ds, name="particles", error=SimulationError, throw=throw)


_OWN_SETTINGS = ("method", "geometry", "field_method", "field_tol", "memory_limit", "seed",
                  "backend")
"""The entries of ``attrs["settings"]`` that :func:`simulate` records itself."""


def _extra_settings(settings: Mapping[str, Any] | None, seed: Any) -> dict[str, Any]:
    """``simulate``'s ``settings`` argument, checked (before the run): a dict of JSON-able
    entries, none of :data:`_OWN_SETTINGS` (but ``seed`` where the run has none)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        msg = f"settings must be a mapping, got {settings!r}"
        raise ValueError(msg)
    own = [k for k in settings if k in _OWN_SETTINGS and not (k == "seed" and seed is None)]
    if own:
        msg = (f"settings must not change what simulate records itself, got {own[0]!r} = "
               f"{settings[own[0]]!r}")
        raise ValueError(msg)
    return dict(settings)


def _settings(
    ds: xr.Dataset,
    model: Any,
    method: str,
    geometry: str,
    dt: float | None,
    rtol: float,
    atol: float,
    memory_limit: int,
    sol: Any,
    seed: Any,
    backend: bk.Backend | None = None,
    field_method: str = "direct",
    field_tol: float = fastsum.FIELD_TOL,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Fill ``attrs`` with the result schema (NetCDF-safe); ``extra``: checked by
    :func:`_extra_settings`."""
    adaptive = METHODS[method]["adaptive"]
    settings: dict[str, Any] = {"method": method, "geometry": geometry,
                                "field_method": field_method, "field_tol": float(field_tol),
                                "memory_limit": int(memory_limit), "seed": seed,
                                "backend": (backend or bk.Backend()).label(), **(extra or {})}
    ds.attrs.update(run_attrs(
        sol, title=f"particles.simulate ({method})", solver="particles.simulate",
        model=model.to_json(), settings=settings, scheme=METHODS[method]["scheme"],
        controller="PIController" if adaptive else "ConstantStep",
        rtol=rtol if adaptive else None, atol=atol if adaptive else None,
        dt=None if dt is None else float(dt),
    ))


def simulate_angles(
    model: Any,
    theta0: Any,
    t: Any,
    dt: float = 0.01,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    throw: bool = True,
) -> xr.Dataset:
    """The circle in angles, (7.1) (USA) or its softmax form, with RK4.

    Args:
        model: a :class:`meanfield.Model` with ``Q = K = V = I``.
        theta0: initial angles ``(n,)`` or ``(batch, n)``.
        t: output times (``t[0]`` the time of ``theta0``).
        dt: fixed step.

    Returns:
        ``xarray.Dataset`` with ``theta`` (time, [batch,] token; unwrapped, not reduced mod
        ``2 pi``) and ``x`` (the points ``(cos, sin)``), ``energy``, ``dissipation``.
    """
    check_angle_model(model)
    t = output_times(t)
    th0 = as_angles(theta0, "theta0")

    def g(th: np.ndarray) -> np.ndarray:
        return angle_velocity(model, th, memory_limit=memory_limit)

    times, th, sol = _run("angles", g, th0, t, dt=dt, sphere=False, rtol=0.0, atol=0.0,
                   max_steps=10**9, progress=False)
    batched = th0.ndim == 2
    ds = _dataset(model, times, from_angles(th), batched, "sphere", True, memory_limit)
    lead = ("time", "batch") if batched else ("time",)
    ds["theta"] = (lead + ("token",), th, {"long_name": "angle", "units": "rad"})
    _settings(ds, model, "angles", "sphere", dt, 0.0, 0.0, memory_limit, sol, None)
    return _finish(ds, sol, throw)


__all__ = ["METHODS", "SimulationError", "simulate", "simulate_angles"]
