"""The blow-up monitor of tokens in ``R^d``: a norm bound derived from the model.

.. autosummary::
   BlowupMonitor
   growth_rate
   overflow_radius

On the sphere the tokens cannot grow; in ``R^d`` (``geometry="euclidean"``) they can, and a
run whose tokens grow past what the model allows, or become non-finite, stops with
:attr:`meanfield.integrate.StopReason.BLOWUP`, keeping its results up to the last state it
accepted (issue 21). The bounds, for ``x_i' = sum_h sum_j A^h_ij V_h x_j`` (docs/equations.md
section 2) and ``M(t) = max_i |x_i(t)|``:

* **Rows of ``A`` summing to at most 1** (softmax, L2 and Sinkhorn: exactly 1; sigmoid:
  ``sigmoid(.) / n`` sums to less than 1): ``|x_i'| <= sum_h ||V_h|| M``, so by Grönwall
  ``M(t) <= M(t_0) e^{L (t - t_0)}`` with ``L = sum_h ||V_h||_2`` (:func:`growth_rate`). The
  exact flow never leaves this bound; a numerical solution beyond twice it (an error of 100%,
  far beyond any accepted step's tolerance) has blown up numerically (a step too large).
* **Unnormalised attention** has no such bound: its rows sum to
  ``(1/n) sum_j e^{beta <Q x_i, K x_j>}`` and the flow can blow up in finite time. Its
  weights exceed the float64 range once ``beta ||Q|| ||K|| M^2 > log(float max) ~ 709.78``:
  :func:`overflow_radius` is that ``M``, beyond which the field cannot be computed.
* A feed-forward term ``w sigma(a x + b)`` grows (ReLU) like ``||w|| ||a|| M + ||w|| |b|``:
  then only the overflow radius (if unnormalised) and non-finite states are watched.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from meanfield.attention import kinds, resolve
from meanfield.integrate import Stop, StopReason
from meanfield.special import MAX_EXP_ARG

ROW_BOUNDED = tuple(k.name for k in kinds() if k.row_bounded)
"""The built-in attention kinds whose rows ``sum_j A_ij`` are at most 1 (derived from their
entries when this module is imported: :attr:`meanfield.attention.AttentionKind.row_bounded`
is the live answer, for kinds registered later too)."""

MARGIN = 2.0
"""How far past the Grönwall bound a numerical solution may go before it is declared blown up
(a relative error of 100%)."""


def growth_rate(model: Any, d: int) -> float | None:
    """``L = sum_h ||V_h||_2`` with ``M(t) <= M(t_0) e^{L (t - t_0)}`` for the kinds of
    :data:`ROW_BOUNDED` without a feed-forward term; ``None`` where no such bound holds."""
    if not resolve(model.attention).row_bounded or getattr(model, "feedforward", None) is not None:
        return None
    return float(sum(np.linalg.norm(V, 2) for _, _, V in model.matrices(d)))


def overflow_radius(model: Any, d: int, dtype: str = "float64") -> float:
    """The norm ``M`` beyond which ``e^{beta <Q x, K y>}`` (``|x|, |y| <= M``) may exceed the
    range of ``dtype``: ``sqrt(709.78 / (beta max_h ||Q_h|| ||K_h||))`` in float64 (88.72 in
    float32); ``inf`` for the kinds that never form these weights unshifted (all but
    unnormalised attention)."""
    if not resolve(model.attention).unshifted:
        return math.inf
    qk = max(float(np.linalg.norm(Q, 2) * np.linalg.norm(K, 2)) for Q, K, _ in model.matrices(d))
    scale = float(model.beta) * qk
    max_exp = MAX_EXP_ARG if dtype == "float64" else math.log(float(np.finfo(dtype).max))
    return math.sqrt(max_exp / scale) if scale > 0 else math.inf


def _max_norm(x: Any) -> float:
    return math.sqrt(float((x * x).sum(-1).max()))


class BlowupMonitor:
    """Stops a run in ``R^d`` with :attr:`StopReason.BLOWUP` when ``max_i |x_i|`` passes the
    model's bound (module docstring) or the state becomes non-finite.

    Args:
        model: the :class:`meanfield.Model`.
        x0: the initial tokens (``([batch,] n, d)``, or the state whose first ``d`` columns
            are the positions: ``positions`` says how many).
        t0: the start time.
        positions: the number of leading columns of the state that are positions (default:
            all).
        dtype: the precision of the state (``"float64"`` or ``"float32"``: its range sets
            the overflow radius).
    """

    def __init__(self, model: Any, x0: Any, t0: float, positions: int | None = None,
                 dtype: str = "float64") -> None:
        self.d = int(x0.shape[-1] if positions is None else positions)
        self.t0 = float(t0)
        self.r0 = _max_norm(x0[..., : self.d])
        self.rate = growth_rate(model, self.d)
        self.radius = overflow_radius(model, self.d, dtype)

    def bound(self, t: float) -> float:
        """The largest ``max_i |x_i|`` accepted at time ``t``."""
        if self.rate is None:
            return self.radius
        with np.errstate(over="ignore"):
            growth = MARGIN * self.r0 * math.exp(min(self.rate * (t - self.t0), MAX_EXP_ARG))
        return min(growth, self.radius)

    def _why(self, t: float) -> str:
        if math.isinf(self.bound(t)):
            return "no a-priori bound of the model (a feed-forward term)"
        if self.rate is not None and self.bound(t) < self.radius:
            return (f"twice the bound max|x(t_0)| e^(L (t - t_0)) = {self.bound(t) / MARGIN:.3g} "
                    f"of the exact flow (rows of the attention sum to at most 1, L = sum ||V_h|| "
                    f"= {self.rate:.3g}): a numerical blow-up; take a smaller step")
        return (f"the radius {self.radius:.3g} beyond which e^(beta <Q x, K y>) leaves the float range "
                f"(unnormalized attention can blow up in finite time)")

    def check(self, t: float, y: Any, stage: Any, context: Any) -> None:
        r = _max_norm(y[..., : self.d])
        if r > self.bound(t):
            raise Stop(StopReason.BLOWUP, f"max |x_i| = {r:.3g} at t = {t:.6g} is beyond "
                       f"{self._why(t)}")

    def explain_small_step(self, t: float, y: Any, h: float) -> None:
        """Unnormalised attention only (the kinds of :data:`ROW_BOUNDED` cannot blow up): a
        step that collapses while the tokens have grown is the finite-time blow-up of the
        flow (its speed ``~ e^{beta |x|^2}``); other collapses keep their own reason."""
        r = _max_norm(y[..., : self.d])
        if self.rate is None and math.isfinite(self.radius) and r > self.r0:
            raise Stop(StopReason.BLOWUP, f"the step collapsed to dt = {h:.3g} at t = {t:.6g} "
                       f"while max |x_i| grew from {self.r0:.3g} to {r:.3g}: the finite-time "
                       "blow-up of unnormalized attention")

    def explain_non_finite(self, t: float, y: Any, h: float) -> None:
        """A non-finite state in ``R^d`` is a blow-up: say so, with the last finite norm."""
        r = _max_norm(y[..., : self.d])
        raise Stop(StopReason.BLOWUP, f"non-finite tokens in the step from t = {t:.6g} to "
                   f"{t + h:.6g} (max |x_i| = {r:.3g} before it; {self._why(t)})")


__all__ = ["ROW_BOUNDED", "BlowupMonitor", "growth_rate", "overflow_radius"]
