r"""The ring-averaged attention field of a zonal measure on ``S^{d-1}`` (the ``k = 1`` reduction).

.. autosummary::
   log_hyp0f1
   ring_field
   ring_energy
   engine
   assemble

docs/lagrangian.md section 8 derives it. For ``Q = K = V = I`` and ``x = s e + r u``,
``y = s' e + r' u'`` (``r = sqrt(1 - s^2)``, ``u, u' in S^{d-2}``), the kernel averaged over
the ring of ``y`` is, with ``nu = (d - 3)/2`` and ``w = (beta r r')^2 / 4``,

.. math::  \bar k(s, s') = e^{\beta s s'} F_0(w), \qquad
           F_j(w) = {}_0F_1(; \nu + 1 + j; w) = \Gamma(\nu+1+j) (2/z)^{\nu+j} I_{\nu+j}(z),
           \quad z = \beta r r',

and ``F_j' = F_{j+1} / (nu + 1 + j)``. The potential ``Z(s) = sum_j w_j kbar(s, s_j)`` gives
``ds/dt = (1 - s^2) h(s)`` with ``h = Z'/(beta Z)`` (SA) or ``Z'/beta`` (USA), times the
sign of ``V``, and the surface divergence ``(1 - s^2) h' - (d - 1) s h``. Every quantity is
a ratio ``F_1/F_0``, ``F_2/F_0`` or a logarithm ``log F_0`` (:func:`log_hyp0f1`, the series
where it converges fast, else ``scipy.special.ive``): no overflow for ``d`` to the
thousands and ``beta`` to the hundreds. The state is ``[phi | log J]`` with ``phi = log
tan(theta/2)`` (``s = cos theta = -tanh phi``, ``sin theta = 1/cosh phi``): ``d phi/dt = -h``
is bounded, a collapse is ``phi -> -inf`` at a finite rate, and the distance to the pole keeps
its relative precision (an absolute tolerance on ``theta ~ 1e-9`` would not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from scipy.special import gammaln, logsumexp

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.finite import DISSIPATION_NOTE, energy_variables, note_nonfinite
from meanfield.kernels import DEFAULT_MEMORY_LIMIT
from meanfield.kernels.interaction import EXP_SAFE, has_energy
from meanfield.model import Model
from meanfield.special import log_sphere_area


def ring_kinds() -> tuple[str, ...]:
    """The registered attention kinds whose ring average is the Bessel form: weights ``e^S``
    (:attr:`meanfield.attention.AttentionKind.exponential`) with rows normalised by their sum
    (the ``"softmax"`` form) or divided by the count (``"unnormalized"``); not a doubly
    stochastic kind (not a per-row sum). A key bias (``l2``) depends on ``|k| = 1`` only, the
    same for every key on the sphere (``|x - y|^2 = 2 - 2 <x, y>``), so it cancels or scales."""
    return tuple(k.name for k in attention_registry.kinds()
                 if k.exponential and k.normalization != "doubly")

_SERIES_TOL = 1e-18  # the series stops when a term falls below this fraction of the sum
_SERIES_MAX = 4000


def _series(b: float, w: np.ndarray) -> np.ndarray:
    """``log sum_j w^j / ((b)_j j!)`` (the terms fall once ``j (b + j) > w``)."""
    term = np.ones_like(w)
    acc = np.ones_like(w)
    j = 1
    while True:
        term = term * w / ((b + j - 1) * j)
        acc = acc + term
        if j > w.max(initial=0.0) ** 0.5 + 2 and np.all(term <= _SERIES_TOL * acc):
            break
        j += 1
        if j > _SERIES_MAX:  # pragma: no cover - only where ive does not underflow
            msg = f"log_hyp0f1: series did not converge (b={b}, w up to {w.max():.3g})"
            raise ArithmeticError(msg)
    return np.log(acc)


def log_hyp0f1(b: float, w: np.ndarray) -> np.ndarray:
    """``log 0F1(; b; w)`` for ``w >= 0``, ``b > 0`` (docs/lagrangian.md section 8).

    ``w <= b``: the series ``sum_j w^j / ((b)_j j!)``, whose terms are below ``1/j!`` there
    (32 terms at most); else ``log Gamma(b) + (b - 1) log(2/z) + log(I_{b-1}(z) e^{-z}) + z``,
    ``z = 2 sqrt(w)``, through ``scipy.special.ive``, and the series again where ``ive``
    underflows (``b >> z``, where the series converges fast).
    """
    from scipy import special

    w = np.asarray(w, dtype=float)
    out = np.empty_like(w)
    series = w <= b
    big = ~series
    if np.any(big):
        z = 2.0 * np.sqrt(w[big])
        with np.errstate(divide="ignore"):
            lv = np.log(special.ive(b - 1.0, z))
        out[big] = gammaln(b) + (b - 1.0) * np.log(2.0 / z) + lv + z
        under = np.zeros_like(series)
        under[big] = ~np.isfinite(lv)
        series |= under
    if np.any(series):
        out[series] = _series(b, w[series])
    return out


def check_model(model: Model) -> str:
    """The ring kind of ``model`` (``"softmax"`` or ``"unnormalized"``), or ``ValueError``
    naming why the ``k = 1`` reduction does not hold for it."""
    if not isinstance(model, Model):
        msg = f"model must be a meanfield.Model, got {type(model).__name__}"
        raise ValueError(msg)
    if model.noise > 0:
        msg = (f"model.noise={model.noise} > 0: noise has no Lagrangian (characteristics) form; "
               "meanfield.solve (the spectral solver) integrates it")
        raise ValueError(msg)
    attention_registry.require(model.attention, "lagrangian")
    if attention_registry.resolve(model.attention).name not in ring_kinds():
        msg = (f"model.attention={model.attention!r}: ring nodes (the zonal reduction) have the "
               f"Bessel form only for {ring_kinds()}; use meanfield.lagrangian.nodes.zonal (full nodes)")
        raise ValueError(msg)
    if not model.is_identity or model.causal:
        what = "causal=True" if model.causal else "Q, K, V, heads or feed-forward"
        msg = (f"model has {what}: ring nodes need Q = K = I, V = +-I (the flow keeps a zonal "
               "density zonal only then); use meanfield.lagrangian.nodes.zonal or another node set")
        raise ValueError(msg)
    return "softmax" if attention_registry.resolve(model.attention).normalized else "unnormalized"


def ring_field(model: Model, phi: np.ndarray, weights: np.ndarray, d: int, *,
               memory_limit: int = DEFAULT_MEMORY_LIMIT) -> tuple[np.ndarray, np.ndarray]:
    """``(d phi/dt, surface divergence)`` at the rings ``phi = log tan(theta_j/2)`` of the
    measure ``sum_j w_j (uniform on ring j)`` (docs/lagrangian.md section 8).

    ``d phi/dt = -h(s)``, ``div = (1 - s^2) h' - (d - 1) s h`` with ``s = -tanh phi``; rows of
    the ``n x n`` kernel in tiles of ``memory_limit`` bytes.
    """
    rows = _ring_rows(model, phi, weights, d, memory_limit=memory_limit)
    s, r = ring_coordinates(phi)
    return -rows.h, r * r * rows.dh - (d - 1) * s * rows.h


@dataclass
class _Rows:
    """Row sums of the ring kernel: ``h``, ``h'`` (times the sign of ``V``), ``log Z_i`` with
    ``Z_i = sum_j w_j kbar(s_i, s_j)``, and (``energy=True``, where no exponent exceeds
    :data:`~meanfield.kernels.interaction.EXP_SAFE`) ``Z_i - 1 = sum_j w_j expm1(log kbar_ij)``."""

    h: np.ndarray
    dh: np.ndarray
    log_z: np.ndarray
    z_minus_1: np.ndarray | None


def _ring_rows(model: Model, phi: np.ndarray, weights: np.ndarray, d: int, *,
               memory_limit: int = DEFAULT_MEMORY_LIMIT, energy: bool = False) -> _Rows:
    kind = check_model(model)
    beta = float(model.beta)
    nu = 0.5 * (d - 3)
    s, r = ring_coordinates(phi)
    n = phi.size
    h = np.empty(n)
    dh = np.empty(n)
    log_z = np.empty(n)
    zm1: np.ndarray | None = np.empty(n) if energy else None
    rows = max(1, int(memory_limit // (8 * 12 * max(n, 1))))
    with np.errstate(divide="ignore"):
        logw = np.log(weights)
    r2 = r * r
    for i0 in range(0, n, rows):
        sl = slice(i0, i0 + rows)
        si, ri = s[sl, None], r[sl, None]
        w = 0.25 * (beta * ri * r[None]) ** 2
        L0 = log_hyp0f1(nu + 1, w)
        G1 = np.exp(log_hyp0f1(nu + 2, w) - L0)
        G2 = np.exp(log_hyp0f1(nu + 3, w) - L0)
        ws_b = -0.5 * beta * si * r2[None]  # (dw/ds) / beta
        wss_b2 = -0.5 * r2[None]  # (d^2w/ds^2) / beta^2
        c1 = G1 / (nu + 1)
        B1 = s[None] + ws_b * c1  # (d kbar/ds) / (beta kbar)
        B2 = (s[None] ** 2 + 2 * s[None] * ws_b * c1 + ws_b ** 2 * G2 / ((nu + 1) * (nu + 2))
              + wss_b2 * c1)  # (d^2 kbar/ds^2) / (beta^2 kbar)
        logkbar = beta * si * s[None] + L0
        logk = logkbar + logw[None]
        top = np.max(logk, axis=1, keepdims=True)
        if kind == "softmax":  # h = <B1>, h' = beta (<B2> - <B1>^2) = beta (<B2 - B1^2> + Var B1)
            a = np.exp(logk - top)
            total = np.sum(a, axis=1, keepdims=True)
            log_z[sl] = top[:, 0] + np.log(total[:, 0])
            a /= total
            hi = np.sum(a * B1, axis=1)
            dev = B1 - hi[:, None]
            dh[sl] = beta * np.sum(a * (B2 - B1 * B1 + dev * dev), axis=1)
        else:  # USA: h = Z'/beta, h' = Z''/beta
            k = np.exp(logk)
            log_z[sl] = top[:, 0] + np.log(np.sum(np.exp(logk - top), axis=1))
            hi = np.sum(k * B1, axis=1)
            dh[sl] = beta * np.sum(k * B2, axis=1)
        h[sl] = hi
        if zm1 is not None:
            if np.max(logkbar, initial=-np.inf) > EXP_SAFE:
                zm1 = None  # the energy is taken from log Z (ring_energy)
            else:
                zm1[sl] = np.sum(weights[None] * np.expm1(logkbar), axis=1)
    return _Rows(h * model.sign, dh * model.sign, log_z, zm1)


def ring_energy(model: Model, phi: np.ndarray, weights: np.ndarray, d: int, *,
                memory_limit: int = DEFAULT_MEMORY_LIMIT) -> tuple[float, float, float]:
    """``(E_beta, log E_beta, dE/dt)`` of the measure ``sum_j w_j (uniform on ring j)``
    (docs/equations.md (3.5), the ``-1`` convention; dissipation identities of section 3).

    ``E_beta = (1/(2 beta)) sum_ij w_i w_j (kbar(s_i, s_j) - 1)``: the double ring average of
    ``e^{beta <x, y>}`` is ``kbar`` (docs/lagrangian.md section 8; ``kbar`` does not depend on
    the point of ring ``i``). ``beta = 0``: the limit ``(1/2) (sum_j w_j s_j)^2``. The field at
    a point of ring ``i`` is ``h_i (e - s_i x)``, of squared length ``h_i^2 (1 - s_i^2)``, so
    ``dE/dt = sign(V) sum_i w_i Z_i h_i^2 (1 - s_i^2)`` (SA; ``Z_i = sum_j w_j kbar_ij``) and
    ``sign(V) sum_i w_i h_i^2 (1 - s_i^2)`` (USA). Where no exponent exceeds ``EXP_SAFE`` the
    energy is ``sum_ij w_i w_j expm1(log kbar_ij) / (2 beta)`` (round-off relative to ``E``
    also as ``beta -> 0``); beyond, ``log E = log(S - 1) - log(2 beta)``, ``S = sum_i w_i Z_i``
    from ``log Z_i`` (log-sum-exp), and ``E = inf`` where it exceeds float64 (``log E`` is
    finite); the dissipation is ``inf`` where it does.
    """
    weights = np.asarray(weights, dtype=float)
    beta = float(model.beta)
    rows = _ring_rows(model, phi, weights, d, memory_limit=memory_limit, energy=True)
    s, r = ring_coordinates(phi)
    with np.errstate(divide="ignore"):
        log_speed2 = 2 * np.log(np.abs(rows.h)) + 2 * np.log(r) + np.log(weights)
    if check_model(model) == "softmax":
        log_speed2 = log_speed2 + rows.log_z
    with np.errstate(over="ignore"):
        dissipation = float(model.sign * np.exp(logsumexp(log_speed2)))
    if beta == 0.0:
        e = 0.5 * float(weights @ s) ** 2
        with np.errstate(divide="ignore"):
            return e, math.log(e), dissipation
    if rows.z_minus_1 is not None:
        e = float(weights @ rows.z_minus_1) / (2 * beta)
        with np.errstate(divide="ignore", invalid="ignore"):
            return e, math.log(e) if e > 0 else (-math.inf if e == 0 else math.nan), dissipation
    log_s = float(logsumexp(np.log(weights) + rows.log_z))  # log S > EXP_SAFE - log n > 0 here
    log_e = log_s + math.log(-math.expm1(-log_s)) - math.log(2 * beta)
    with np.errstate(over="ignore"):
        return float(np.exp(log_e)), log_e, dissipation


def ring_coordinates(phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s, sqrt(1 - s^2)) = (-tanh phi, 1/cosh phi)`` for ``phi = log tan(theta/2)``."""
    with np.errstate(over="ignore"):
        return -np.tanh(phi), 1.0 / np.cosh(phi)


def _log_sin(phi: np.ndarray) -> np.ndarray:
    """``log sin theta = -log cosh phi``, without overflow."""
    a = np.abs(phi)
    return -(a + np.log1p(np.exp(-2 * a)) - math.log(2.0))


def engine(model: Model, nodes: Any, be: Any, memory_limit: int) -> tuple[Any, np.ndarray, Any]:
    """``(rhs, y0, project)`` of the state ``[phi | log J]`` (shape ``(n, 2)``) for
    :func:`meanfield.solve_lagrangian`'s engine (no projection: ``phi`` is unconstrained)."""
    check_model(model)
    if be.label() != bk.get_backend("numpy", None, "float64").label():
        msg = f"backend={be.label()!r}: ring nodes run on numpy float64 only (n is small in 1-D)"
        raise ValueError(msg)
    weights = np.asarray(nodes.weights, dtype=float)
    d = int(nodes.d)

    def rhs(y: np.ndarray) -> np.ndarray:
        out = np.empty_like(y)
        out[:, 0], out[:, 1] = ring_field(model, y[:, 0], weights, d, memory_limit=memory_limit)
        return out

    y0 = np.stack([np.log(np.tan(0.5 * np.asarray(nodes.theta, dtype=float))), np.zeros(nodes.n)],
                  axis=1)
    return rhs, y0, None


def assemble(saved: list[tuple[float, np.ndarray]], model: Model, nodes: Any) -> xr.Dataset:
    """The Dataset of a ring run: ``s``, ``theta``, ``log_density`` (per unit surface measure
    on ``S^{d-1}``, at any point of the ring) and ``log_density_s`` (of ``s`` w.r.t. ``ds``),
    ``density`` (``inf`` beyond float64), ``log_jacobian``, ``weight``, ``mass``; where the
    model has an energy (:func:`~meanfield.kernels.interaction.has_energy`) ``energy`` and
    ``dissipation`` (:func:`ring_energy`; ``log_energy`` too where the energy overflows)."""
    d = int(nodes.d)
    tvals = np.array([t for t, _ in saved])
    ys = np.stack([y for _, y in saved])
    phi, log_j = ys[:, :, 0], ys[:, :, 1]
    log_rho = np.asarray(nodes.log_density)[None, :] - log_j
    log_s = log_rho + log_sphere_area(d - 1) + (d - 3) * _log_sin(phi)
    with np.errstate(over="ignore"):
        density = np.exp(log_rho)
        theta = 2 * np.arctan(np.exp(phi))
    w = np.asarray(nodes.weights, dtype=float)
    data: dict[str, Any] = {
        "s": (("time", "node"), ring_coordinates(phi)[0], {"long_name": "s_j(t) = <x, e_d> on ring j"}),
        "phi": (("time", "node"), phi, {"long_name": "log tan(theta_j/2), the state of ring j"}),
        "theta": (("time", "node"), theta, {"long_name": "polar angle of ring j, arccos s_j"}),
        "weight": ("node", w, {"long_name": "mass w_j of ring j (constant)"}),
        "log_density": (("time", "node"), log_rho, {
            "long_name": "log rho at ring j per unit surface measure on S^{d-1}, "
                         "log rho_0 - log J (docs/lagrangian.md section 8)"}),
        "density": (("time", "node"), density, {
            "long_name": "density at ring j per unit surface measure on S^{d-1}",
            "note": "inf where it exceeds float64 (large d or a collapsing cluster); "
                    "log_density holds every value"}),
        "log_density_s": (("time", "node"), log_s, {
            "long_name": "log of the density of s w.r.t. ds on [-1, 1]: "
                         "log rho + log|S^{d-2}| + (d-3)/2 log(1 - s^2)"}),
        "log_jacobian": (("time", "node"), log_j, {
            "long_name": "log J_j(t) w.r.t. surface measure, d/dt log J = div X"}),
        "mass": ("time", np.full(tvals.size, float(np.sum(w))), {
            "long_name": "total mass sum_j w_j (exact along characteristics)"}),
    }
    if getattr(nodes, "cdf", None) is not None:
        data["cdf"] = ("node", np.asarray(nodes.cdf, dtype=float), {
            "long_name": "P(s <= s_j(t)): constant along characteristics (the flow keeps the "
                         "order of the rings)"})
    if has_energy(model):
        terms = np.array([ring_energy(model, phi[k], w, d) for k in range(tvals.size)])
        data.update(energy_variables("time", terms[:, 0], terms[:, 1], {
            "long_name": "interaction energy E_beta (docs/equations.md (3.5), -1 convention), "
                         "double ring average"}))
        data["dissipation"] = ("time", terms[:, 2], note_nonfinite({
            "long_name": "dE/dt predicted by the dissipation identity (docs/equations.md section 3)"},
            terms[:, 2], DISSIPATION_NOTE))
    coords = {"time": ("time", tvals, {"long_name": "time", "units": "1"}),
              "node": ("node", np.arange(w.size))}
    ds = xr.Dataset(data, coords=coords)
    ds.attrs["reduction"] = "rings"
    ds.attrs["dimension"] = d
    return ds


def cdf_s(ds: xr.Dataset, time_index: int, s: np.ndarray) -> np.ndarray:
    """``P(<x, e> <= s)`` at the saved time ``time_index`` of a ring run: the exact values
    ``cdf`` at the rings ``s_j(t)`` joined by cubic Hermite pieces whose slopes are the
    densities of ``s`` there (``exp(log_density_s)``), linear to the poles (docs/lagrangian.md
    section 8). Between rings the error is that of the cubic, fourth order in the gap."""
    if "cdf" not in ds:
        msg = "ds has no cdf: make the ring nodes with meanfield.lagrangian.nodes.rings"
        raise ValueError(msg)
    sj = np.asarray(ds["s"].isel(time=time_index).values, dtype=float)
    order = np.argsort(sj)
    sj = sj[order]
    F = np.asarray(ds["cdf"].values, dtype=float)[order]
    g = np.exp(np.asarray(ds["log_density_s"].isel(time=time_index).values, dtype=float))[order]
    s = np.asarray(s, dtype=float)
    out = np.interp(s, np.concatenate([[-1.0], sj, [1.0]]), np.concatenate([[0.0], F, [1.0]]))
    k = np.searchsorted(sj, s) - 1
    inner = (k >= 0) & (k < sj.size - 1)
    if np.any(inner):
        i = k[inner]
        h = sj[i + 1] - sj[i]
        u = (s[inner] - sj[i]) / h
        h00, h10 = (1 + 2 * u) * (1 - u) ** 2, u * (1 - u) ** 2
        h01, h11 = u * u * (3 - 2 * u), u * u * (u - 1)
        out[inner] = h00 * F[i] + h10 * h * g[i] + h01 * F[i + 1] + h11 * h * g[i + 1]
    return np.clip(out, 0.0, 1.0)


__all__ = ["ring_kinds", "assemble", "cdf_s", "check_model", "engine", "log_hyp0f1", "ring_coordinates",
           "ring_energy", "ring_field"]
