r"""The right-hand side of the mean-field equation, written once against :class:`Domain`.

.. autosummary::
   Flow
   ContinuityFlow
   GradientFlow
   InteractionEnergy
   WassersteinMetric
   AttentionMetric
   make_flow

``d rho/dt = -div(rho X[rho]) + sigma Laplacian(rho)`` (docs/equations.md section 3, (3.4)), in
coefficients. The drift ``N(c) = -div(rho X)`` is evaluated on the dealiased grid; the
diffusion ``sigma Laplacian`` is diagonal (``sigma * laplacian_eigenvalues``) and is treated
exactly by the integrator (integrating factor), so it is not part of :meth:`Flow.drift`.

Two forms, equal up to round-off:

* :class:`ContinuityFlow` evaluates the velocity of (3.4) directly:
  USA ``X = grad(G_beta * mu)``; SA ``X = grad(K_beta * mu) / (beta K_beta * mu)``;
  times the sign of ``V = +-I``.
* :class:`GradientFlow` builds it from an energy and a metric: ``X = s grad(dE/drho) / m``
  with the Wasserstein metric (``m = 1``, USA) or the attention metric (``m = Z_mu``, SA,
  section 3.4.2 with docs/equations.md's erratum). Any zonal kernel ``W`` is allowed.

The factor ``e^beta`` of ``K_beta`` is carried separately: the multipliers are stored as
``lambda_l e^{-beta}``, so that ``beta`` up to ~700 neither overflows nor loses accuracy.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
from scipy.special import logsumexp

from meanfield.domains.base import Domain, FusedDrift
from meanfield.model import Model
from meanfield.special import check_exp_beta, exp_beta


def _check_pde_model(model: Model) -> str:
    """The metric of the model's flow (:class:`meanfield.attention.Energy`: ``"attention"``
    for SA, ``"wasserstein"`` for USA); ``ValueError`` for a model the PDE solvers do not take."""
    from meanfield.attention import require  # noqa: PLC0415

    metric = require(model.attention, "spectral").flow_energy().metric
    if not model.is_identity:
        msg = (
            "the spherical PDE solvers need Q = K = I and V = value*I (zonal interaction); "
            "use the particle system or solve_gaussian for general matrices"
        )
        raise ValueError(msg)
    return metric


class Flow(ABC):
    """A mean-field right-hand side on one domain (abstract).

    Attributes:
        domain: the spectral domain.
        noise: ``sigma`` of the exact diffusion term.
        max_speed: largest ``|X|`` seen by the last :meth:`drift` call (for the CFL bound).
    """

    def __init__(self, domain: Domain, noise: float) -> None:
        self.domain = domain
        self.noise = float(noise)
        self._max_speed = 0.0
        self._buffers: dict[str, np.ndarray] = {}
        self._fused: FusedDrift | None = None
        self._fused_ready = False

    @property
    def max_speed(self) -> float:
        """Largest ``|X|`` of the last :meth:`drift` call (for the CFL bound)."""
        if self._fused is not None:
            return self._fused.max_speed()
        return self._max_speed

    def _velocity_parts(self) -> tuple[np.ndarray, float, np.ndarray | None, float]:
        """``(grad_mult, scale, z_mult, beta)`` of ``X = s grad(phi) / m`` (see
        :func:`_velocity`)."""
        raise NotImplementedError

    def _fused_drift(self) -> FusedDrift | None:
        """The domain's fused drift for this flow, if it has one (made on first use).

        When there is one, it also replaces :meth:`drift` on this instance, so that each
        later call goes straight to it: at ``N = 256`` on the circle the two method frames
        it saves are half an FFT pair."""
        if not self._fused_ready:
            grad_mult, scale, z_mult, _ = self._velocity_parts()
            self._fused = self.domain.fused_drift(grad_mult, scale, z_mult, self.sign)
            self._fused_ready = True
            if self._fused is not None:
                self.drift = self._fused.evaluate  # type: ignore[method-assign,assignment]
        return self._fused

    def _out(self, name: str, template: Callable[[], np.ndarray]) -> np.ndarray:
        """The work buffer ``name``, shaped like ``template()`` (called on first use only).

        Every domain takes ``out=`` buffers (the :class:`Domain` contract); they are made
        once per flow, so arrays returned by :meth:`velocity_padded` are valid until the
        next call."""
        buf = self._buffers.get(name)
        if buf is None:
            buf = self._buffers[name] = np.empty_like(template())
        return buf

    @cached_property
    def linear(self) -> np.ndarray:
        """Diagonal linear part ``sigma * Laplacian`` (per coefficient)."""
        return self.noise * self.domain.laplacian_eigenvalues

    def velocity_padded(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rho, X, m)`` on the dealiased grid: density, velocity, metric weight."""
        return _velocity(self, c, *self._velocity_parts())

    def drift(self, c: np.ndarray) -> np.ndarray:
        """``-div(rho X[rho])`` in coefficients.

        Domains with a fused evaluation (:meth:`Domain.fused_drift`) compute it there; the
        result is the same to round-off."""
        fused = self._fused_drift()
        if fused is not None:  # first call only: later calls go to fused.evaluate directly
            return fused.evaluate(c)
        rho, X, _ = self.velocity_padded(c)
        # componentwise max (no temporary): within sqrt(d) of max |X|
        self._max_speed = max(float(X.max()), -float(X.min()))
        flux = np.multiply(X, rho, out=X)  # X is this flow's work buffer
        out = self.domain.divergence_padded(flux)
        out *= -1.0
        return out

    def rhs(self, c: np.ndarray) -> np.ndarray:
        """The whole right-hand side ``drift + sigma Laplacian`` (the solver's stages evaluate
        :meth:`drift` and integrate ``sigma Laplacian`` exactly)."""
        out = self.drift(c)
        if self.noise:
            out += self.linear * c
        return out

    @abstractmethod
    def energy(self, c: np.ndarray) -> float:
        """The energy the flow ascends (or descends, repulsive), docs/equations.md (3.5)."""

    def log_energy(self, c: np.ndarray) -> float:
        """``log E`` (:meth:`energy`): ``-inf`` where ``E = 0``, NaN where ``E < 0``; the
        exponential kernel's flows give it finite where ``E`` overflows float64."""
        return _log(self.energy(c))

    @abstractmethod
    def potential(self, c: np.ndarray) -> np.ndarray:
        """Coefficients of the first variation ``dE/drho``."""

    def dissipation(self, c: np.ndarray) -> float:
        """The right-hand side of the dissipation identity, so that ``dE/dt = dissipation``.

        ``s int |X|^2 m rho dA`` (Lemma 3.7, (3.6); ``m = 1`` USA, ``Z_mu`` SA) plus, with
        noise, ``sigma int rho Laplacian(dE/drho) dA``.
        """
        rho, X, weight = self.velocity_padded(c)
        d = self.domain
        drift = self.sign * float(np.sum(d.padded_weights * d.dot(X, X) * weight * rho))
        if self.noise:
            lap = d.laplacian_eigenvalues * self.potential(c)
            drift += self.noise * d.inner(c, lap)
        return drift

    sign: float = 1.0


@dataclass(frozen=True)
class InteractionEnergy:
    """``E[rho] = 1/2 iint W(<x,y>) rho rho`` for a zonal kernel (docs/equations.md (3.5)).

    With ``kernel=None`` it is ``W(t) = (e^{beta t} - 1)/beta`` (the project's convention,
    finite as ``beta -> 0``). A user kernel ``W`` is any vectorised function of ``t``.
    """

    beta: float = 1.0
    kernel: Callable[[np.ndarray], np.ndarray] | None = None

    def multipliers(self, domain: Domain) -> tuple[np.ndarray, float]:
        """``(mu_l, scale)``: the Funk–Hecke multipliers of ``W`` are ``scale * mu_l``
        for ``l >= 1`` (``scale = e^beta`` for the exponential kernel, which keeps ``mu_l``
        finite)."""
        if self.kernel is None:
            return domain.kernel_multipliers_over_beta(self.beta), exp_beta(self.beta)
        lam = np.asarray(domain.zonal_multipliers(self.kernel), dtype=float)
        return np.where(domain.degrees > 0, lam, 0.0), 1.0

    def constant_part(self, domain: Domain) -> float:
        """``(lambda_0 / |S| - W-mean correction)``: energy of the constant mode per ``M^2``."""
        if self.kernel is None:
            return domain.geometry.constant_mode_energy_factor(self.beta)
        lam0 = float(np.ravel(domain.zonal_multipliers(self.kernel))[0])
        return lam0 / domain.area


class WassersteinMetric:
    """``<u, v>_mu = int <u, v> dmu``: mobility 1 (USA is this gradient flow, Lemma 3.6)."""

    name = "wasserstein"


class AttentionMetric:
    """``<u, v>_mu = int <u, v> Z_mu dmu``, ``Z_mu = K_beta * mu`` (SA, Section 3.4.2)."""

    name = "attention"


class GradientFlow(Flow):
    """``d rho/dt = -div(rho s grad(dE/drho) / m) + sigma Laplacian(rho)``.

    Args:
        domain: spectral domain.
        energy: an :class:`InteractionEnergy`.
        metric: :class:`WassersteinMetric` (``m = 1``) or :class:`AttentionMetric`
            (``m = Z_mu``, needs the exponential kernel).
        sign: ``+1`` ascends ``E`` (attraction), ``-1`` descends it (repulsion).
        noise: ``sigma >= 0``.
    """

    def __init__(
        self,
        domain: Domain,
        energy: InteractionEnergy,
        metric: WassersteinMetric | AttentionMetric,
        sign: float = 1.0,
        noise: float = 0.0,
    ) -> None:
        super().__init__(domain, noise)
        self.energy_functional = energy
        self.metric = metric
        self.sign = float(sign)
        mult, self._scale = energy.multipliers(domain)
        self._potential_mult = mult
        self._constant = energy.constant_part(domain)
        if isinstance(metric, AttentionMetric):
            if energy.kernel is not None:
                msg = "the attention metric is defined for the exponential kernel only (kernel=None)"
                raise ValueError(msg)
            # Z e^{-beta}: the e^beta of grad(dE) = e^beta grad(mu_l c) cancels against it.
            self._z_mult = domain.scaled_kernel_multipliers(energy.beta)
        elif not isinstance(metric, WassersteinMetric):
            msg = f"metric must be WassersteinMetric() or AttentionMetric(), got {metric!r}"
            raise ValueError(msg)

    def potential(self, c: np.ndarray) -> np.ndarray:
        return self._scale * self._potential_mult * c

    def _velocity_parts(self) -> tuple[np.ndarray, float, np.ndarray | None, float]:
        attention = isinstance(self.metric, AttentionMetric)
        return (self._potential_mult, self._scale, self._z_mult if attention else None,
                self.energy_functional.beta)

    def energy(self, c: np.ndarray) -> float:
        d = self.domain
        mass = d.mass(c)
        pos = d.degrees > 0
        quad = np.sum((d.parseval_weights * self._potential_mult * np.abs(c) ** 2)[pos])
        with np.errstate(over="ignore", invalid="ignore"):  # e^beta quad beyond float64: inf
            energy = 0.5 * (self._constant * mass**2 + self._scale * float(quad))
        if math.isfinite(energy) or self.energy_functional.kernel is not None:
            return energy
        # e^beta = inf times multipliers that underflowed (beta ~ 1e300): NaN; from the log
        log_e = self._log_exponential(c)
        return math.exp(log_e) if log_e < _MAX_LOG else (math.inf if log_e > 0 else math.nan)

    def log_energy(self, c: np.ndarray) -> float:
        """``log E``, finite where ``E`` overflows float64 (``beta`` beyond ~710, up to
        ``1e300``). For the exponential kernel (docs/equations.md (3.5), -1 convention)::

            E = (e^beta / (2 beta)) (s_0 M^2 / |S| + sum_{l >= 1} s_l |c_l|^2) - M^2 / (2 beta)

        with ``s_l = lambda_l e^{-beta}`` (:meth:`Domain.scaled_kernel_multipliers`, finite
        at any ``beta``) and ``|c_l|^2`` in the Parseval weights: one log-sum-exp of the two
        terms."""
        energy = self.energy(c)
        if math.isfinite(energy) or self.energy_functional.kernel is not None:
            return _log(energy)
        return self._log_exponential(c)

    def _log_exponential(self, c: np.ndarray) -> float:
        beta = self.energy_functional.beta
        d = self.domain
        mass = d.mass(c)
        scaled = d.scaled_kernel_multipliers(beta)
        lead = float(np.sum(d.parseval_weights * scaled * np.abs(c) ** 2 * (d.degrees > 0)))
        lead += float(np.ravel(scaled[d.degrees == 0])[0]) / d.area * mass**2
        log_2beta = math.log(2.0) + math.log(beta)
        value, sign = logsumexp([beta - log_2beta, -log_2beta], b=[lead, -mass**2],
                                return_sign=True)
        return float(value) if sign > 0 else _log(float(sign))


class ContinuityFlow(Flow):
    """The velocity field of (3.4) evaluated directly from the model (docs/equations.md section 3).

    USA: ``X = s grad(G_beta * mu)``, ``G_beta = e^{beta t}/beta``.
    SA:  ``X = s grad(K_beta * mu) / (beta K_beta * mu)``.
    """

    def __init__(self, model: Model, domain: Domain) -> None:
        metric = _check_pde_model(model)
        super().__init__(domain, model.noise)
        self.model = model
        self.sign = model.sign
        beta = model.beta
        if metric != "attention":  # the Wasserstein flow carries e^beta (it does not cancel)
            check_exp_beta(beta, f"{model.attention} attention")
        self._exp_beta = exp_beta(beta)  # SA: cancels in X; inf only in the diagnostics
        self._grad_mult = domain.kernel_multipliers_over_beta(beta)  # lambda e^{-b}/b
        self._kernel_mult = domain.scaled_kernel_multipliers(beta)  # lambda e^{-b}
        self._softmax = metric == "attention"  # X = grad Z / (beta Z)
        self._energy = GradientFlow(domain, InteractionEnergy(beta), WassersteinMetric())

    def _velocity_parts(self) -> tuple[np.ndarray, float, np.ndarray | None, float]:
        # grad(K * mu)/beta and (K * mu), both times e^{-beta}
        return (self._grad_mult, self._exp_beta, self._kernel_mult if self._softmax else None,
                self.model.beta)

    def potential(self, c: np.ndarray) -> np.ndarray:
        return self._energy.potential(c)

    def energy(self, c: np.ndarray) -> float:
        return self._energy.energy(c)

    def log_energy(self, c: np.ndarray) -> float:
        return self._energy.log_energy(c)


_MAX_LOG = math.log(np.finfo(float).max)


def _log(value: float) -> float:
    """``log value``; ``-inf`` for 0, NaN for a negative value (no warning)."""
    if value > 0:
        return math.log(value)
    return -math.inf if value == 0 else math.nan


def _velocity(
    flow: Flow,
    c: np.ndarray,
    grad_mult: np.ndarray,
    scale: float,
    z_mult: np.ndarray | None,
    beta: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rho, X, m)`` on the dealiased grid for ``X = s grad(phi) / m``:

    ``phi`` has coefficients ``scale * grad_mult * c``; ``m = 1`` (Wasserstein) or, when
    ``z_mult`` is given, ``m = scale * Z`` with ``Z`` of coefficients ``z_mult * c`` (the
    attention metric; ``scale = e^beta`` then cancels). For the exponential kernel with
    ``beta > 0``, ``grad_mult = z_mult / beta`` on ``l >= 1``, so ``X = s grad Z / (beta Z)``
    comes from one :meth:`Domain.synthesize_with_gradient_padded` call (one pass on domains
    that share a stage between the two). Work buffers are reused.
    """
    d = flow.domain
    rho = d.synthesize_padded(c, out=flow._out("rho", lambda: d.synthesize_padded(c)))
    if z_mult is not None and beta > 0:
        zc = z_mult * c
        z_buf = flow._out("z", lambda: d.synthesize_padded(zc))
        g_buf = flow._out("grad", lambda: d.gradient_padded(zc))
        z, X = d.synthesize_with_gradient_padded(zc, out=(z_buf, g_buf))
        X *= flow.sign / (beta * z)
        return rho, X, z * scale
    gc = grad_mult * c
    X = d.gradient_padded(gc, out=flow._out("grad", lambda: d.gradient_padded(gc)))
    if z_mult is None:
        X *= flow.sign * scale
        return rho, X, _ones(flow, rho)
    zc = z_mult * c
    z = d.synthesize_padded(zc, out=flow._out("z", lambda: d.synthesize_padded(zc)))
    X *= flow.sign / z
    return rho, X, z * scale


def _ones(flow: Flow, like: np.ndarray) -> np.ndarray:
    buf = flow._buffers.get("ones")
    if buf is None or buf.shape != like.shape:
        buf = flow._buffers["ones"] = np.ones_like(like)
    return buf


_METRICS: dict[str, Callable[[], AttentionMetric | WassersteinMetric]] = {
    "attention": AttentionMetric, "wasserstein": WassersteinMetric}
"""The metric classes of :data:`meanfield.attention.METRICS`."""


def make_flow(model: Model, domain: Domain, form: str = "continuity") -> Flow:
    """The flow of ``model`` on ``domain`` in the ``continuity`` or ``gradient`` form."""
    if form == "continuity":
        return ContinuityFlow(model, domain)
    if form == "gradient":
        metric = _METRICS[_check_pde_model(model)]()
        return GradientFlow(
            domain, InteractionEnergy(model.beta), metric, sign=model.sign, noise=model.noise
        )
    msg = f"form must be 'continuity' or 'gradient', got {form!r}"
    raise ValueError(msg)


__all__ = [
    "AttentionMetric",
    "ContinuityFlow",
    "Flow",
    "GradientFlow",
    "InteractionEnergy",
    "WassersteinMetric",
    "make_flow",
]
