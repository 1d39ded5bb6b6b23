"""The quadrature monitor of Lagrangian runs in ``R^d``: do the nodes still resolve the measure?

.. autosummary::
   QuadratureMonitor
   tail_share
   effective_sample_size

The field at a node ``x_i`` is a quadrature of the *tilted* measure,
``sum_j p_ij V x_j`` with ``p_ij = w_j phi(S_ij) / sum_k w_k phi(S_ik)`` (``phi`` the
attention weight of the logit ``S_ij``: ``e^S`` for softmax, L2, unnormalised and Sinkhorn,
``sigmoid`` for sigmoid; docs/equations.md section 2, docs/lagrangian.md section 10). A rule
in ``R^d`` (Gauss–Hermite, :func:`meanfield.nodes.gaussian`) has a finite cloud of nodes for
an unbounded support: it is accurate only while the tilted integrand decays inside the cloud.
Near the covariance blow-up of a Gaussian start the tilt ``e^{beta <Q x_i, K y>}`` grows with
the spread and carries the mass onto the outermost nodes: the rule then truncates the
tilted law and the field is wrong by ``O(1)``, whatever the number of nodes.

The estimator is embedded in the rule: its *outer layer* ``T``, the nodes of least weight
that together hold at most :data:`TAIL` of the mass (for a Gauss–Hermite rule the nodes
farthest out). The field of the rule without ``T`` differs from the full field by the tilted
share of ``T``, ``s_i = sum_{j in T} p_ij`` (times the spread of the values), so ``s_i`` is
the part of the field the rule cannot trust. Untilted, ``s_i`` equals the weight ``w_T`` of
the layer; the monitor takes the mass-weighted mean ``s = sum_i w_i s_i`` over the queries,
its *amplification* ``A = s / w_T``, and the growth ``G = A(t) / A(t_0)`` since the start
(the start's own tilt is the rule's, resolved or not by the user's choice of nodes; what the
monitor watches is the flow carrying the tilted law out of the cloud), and

* warns once (``UserWarning``) where ``G > `` :data:`WARN_GROWTH`,
* stops the run with :attr:`meanfield.integrate.StopReason.UNRESOLVED_NODES` where
  ``G > `` :data:`STOP_GROWTH`, with ``G``, the time, the threshold and the remedy,
  keeping the results up to that time.

Calibration (docs/lagrangian.md section 10, measured): near a covariance blow-up the
relative error of the mean or covariance where ``G`` is about 4 was 1e-2 to 4e-2 (``4^3``
nodes), 8e-4 to 2e-3 (``6^2``, ``6^3``), 6e-6 (``8^3``) and 1e-6 (``12^2``), against 41% at
``G = 7.5`` (``4^3``) and 36% at ``G = 108`` (``8^3``): the stop is conservative for large
rules; the smallest rule measured (``4^3``) stops with its mean 6.5% off, warned at under 1%.

On ``S^{d-1}`` the rule covers the whole (compact) manifold and the flow maps the sphere
onto itself, so the nodes always cover the support: there is no outer layer to leave, and a
concentrating measure is followed by its nodes (their error is the resolution of each
cluster, watched by the solver's tolerances). Sphere runs, and ring nodes (on the sphere),
are not monitored (:func:`effective_sample_size` is a diagnostic, not calibrated there).

Cost: one ``n x n`` pass of logits (about 1.7 field evaluations, measured) per
check, checked only while the monitor has spent at most :data:`BUDGET` of the run's own
field evaluations (as :mod:`meanfield.integrate.stability`), and always at the final time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from .. import attention as attention_registry
from .. import backend as bk
from ..integrate import StopReason
from ..integrate.stability import stop_or_warn_once
from ..kernels import DEFAULT_MEMORY_LIMIT

TAIL = 1e-3
"""The mass of the rule's outer layer ``T`` (the nodes of least weight)."""

WARN_GROWTH = 2.0
"""A warning where the amplification ``A`` has grown more than this factor since the start."""

STOP_GROWTH = 4.0
"""The run stops above this growth of ``A`` (docs/lagrangian.md section 10 calibrates both:
the largest error measured where it is reached is 3e-2, with ``4^3`` nodes)."""

BUDGET = 0.03
"""A step is checked only while the monitor has spent at most this fraction of the run's own
field evaluations, a check counted as one (one exp per ``n x n`` entry, about 1.7 field
evaluations: measured, ``8^3`` nodes in ``R^3``, 0.023 s against 0.014 s), so about one
step in six is checked and the monitor costs about 5% of the run."""

EVALUATIONS_PER_STEP = 6
"""Field evaluations of one accepted Dormand–Prince step (FSAL: 6 new stages)."""


def _log_phi(model: Any, S: np.ndarray) -> np.ndarray:
    """``log phi(S)`` of the model's attention kind."""
    if model.attention == "sigmoid":
        return -np.logaddexp(0.0, -(S + model.sigmoid_bias))
    return S  # e^S: softmax, L2 (with its column bias), unnormalised, Sinkhorn (potentials)


def _log_weights(model: Any, x: np.ndarray, weights: np.ndarray, labels: np.ndarray | None,
                 potentials: Any, memory_limit: int) -> Any:
    """Yield ``(rows, log(w_j phi(S_ij)))`` blocks, per head and block of query rows."""
    n, d = x.shape
    with np.errstate(divide="ignore"):
        logw = np.log(weights)
    kind = attention_registry.resolve(model.attention).name
    rows = max(1, int(memory_limit) // (3 * 8 * max(n, 1)))
    for h, (Q, K, _V) in enumerate(model.matrices(d)):
        q = model.beta * (x @ np.asarray(Q, dtype=float).T)
        k = x @ np.asarray(K, dtype=float).T
        col = logw.copy()
        if kind == "l2":
            col -= 0.5 * model.beta * np.einsum("nd,nd->n", k, k)
        if kind == "sinkhorn" and potentials is not None:
            col += np.asarray(bk.to_numpy(potentials[h]), dtype=float).reshape(n)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            L = _log_phi(model, q[r0:r1] @ k.T) + col
            if labels is not None and model.causal:
                L[labels[r0:r1, None] < labels[None, :]] = -np.inf
            yield slice(r0, r1), L


def outer_layer(weights: np.ndarray, tail: float = TAIL) -> np.ndarray:
    """Indices of the rule's outer layer: the nodes of least weight that together hold at
    most ``tail`` of the mass (empty when the smallest weight alone is more)."""
    w = np.asarray(weights, dtype=float)
    order = np.argsort(w, kind="stable")
    return order[np.cumsum(w[order]) <= tail * float(np.sum(w))]


def tail_share(model: Any, x: np.ndarray, weights: np.ndarray, layer: np.ndarray, *,
               labels: np.ndarray | None = None, potentials: Any = None,
               memory_limit: int = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """``s_i = sum_{j in layer} p_ij``, the share of the tilted measure at node ``x_i`` on
    the nodes ``layer`` (module docstring), the largest over the heads; shape ``(n,)``.

    Args:
        model: a :class:`meanfield.Model`.
        x: ``(n, d)`` node positions; weights: ``(n,)`` quadrature weights.
        layer: node indices (:func:`outer_layer`).
        labels: ``(n,)`` position labels of a causal model.
        potentials: Sinkhorn's column potentials, one ``(1, n)`` array per head (the
            field's state); ``None`` for the other kinds.
        memory_limit: bytes for a block of logits.
    """
    x = np.asarray(x, dtype=float)
    share = np.zeros(x.shape[0])
    if layer.size == 0:
        return share
    in_layer = np.zeros(x.shape[0], dtype=bool)
    in_layer[layer] = True
    for rows, L in _log_weights(model, x, np.asarray(weights, dtype=float), labels, potentials,
                                memory_limit):
        L -= np.max(L, axis=1, keepdims=True)  # one exp per entry, none overflows
        np.exp(L, out=L)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (L @ in_layer.astype(float)) / np.sum(L, axis=1)
        share[rows] = np.maximum(share[rows], np.nan_to_num(s))
    return share


def effective_sample_size(model: Any, x: np.ndarray, weights: np.ndarray, *,
                          labels: np.ndarray | None = None, potentials: Any = None,
                          memory_limit: int = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """Kish's ``ESS_i = (sum_j p_ij)^2 / sum_j p_ij^2`` of the tilted weights at every node,
    the smallest over the heads; shape ``(n,)``, in ``[1, n]``. A diagnostic (docs/lagrangian.md
    section 10 says why it is not the monitor's estimator: a resolved cluster has a small ESS
    too). Arguments as :func:`tail_share`."""
    x = np.asarray(x, dtype=float)
    ess = np.full(x.shape[0], np.inf)
    for rows, L in _log_weights(model, x, np.asarray(weights, dtype=float), labels, potentials,
                                memory_limit):
        with np.errstate(invalid="ignore"):
            e = np.exp(2.0 * logsumexp(L, axis=1) - logsumexp(2.0 * L, axis=1))
        ess[rows] = np.minimum(ess[rows], e)
    return ess


class QuadratureMonitor:
    """Warns, or stops a Lagrangian run in ``R^d``, when the tilted measure leaves the node
    cloud (module docstring).

    Args:
        model: the :class:`meanfield.Model`.
        x0: ``(n, d)`` the nodes at the start (the reference amplification ``A(t_0)``).
        weights: ``(n,)`` quadrature weights of the nodes.
        d: the dimension (the state's first ``d`` columns are the positions).
        t_final: the final time (always checked).
        labels: node labels of a causal model.
        state: a callable returning the field's current state (Sinkhorn potentials), or
            ``None``.
        budget: :data:`BUDGET`; ``math.inf``: every accepted step.
        memory_limit: bytes for a block of logits.
        warn, stop: the growth of ``A`` that warns (:data:`WARN_GROWTH`) and stops
            (:data:`STOP_GROWTH`).
    """

    def __init__(self, model: Any, x0: Any, weights: np.ndarray, d: int, t_final: float, *,
                 labels: np.ndarray | None = None, state: Any = None, budget: float = BUDGET,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT, warn: float = WARN_GROWTH,
                 stop: float = STOP_GROWTH) -> None:
        self.model = model
        self.weights = np.asarray(weights, dtype=float)
        self.d = int(d)
        self.t_final = float(t_final)
        self.labels = labels
        self.state = state
        self.budget = float(budget)
        self.memory_limit = int(memory_limit)
        self.warn_at, self.stop_at = float(warn), float(stop)
        self.layer = outer_layer(self.weights)
        self.mass = float(np.sum(self.weights))
        self.layer_mass = float(np.sum(self.weights[self.layer])) / self.mass
        self.accepted = 0
        self.spent = 0
        self.warned = False
        self.worst: tuple[float, float] | None = None  # (G, t) of the largest check
        # Sinkhorn's rows need the potentials of the field's state, which exists only after
        # the first evaluation: its reference is taken at the first check
        self.reference: float | None = None
        if attention_registry.resolve(model.attention).name != "sinkhorn":
            self.reference = self.amplification(np.asarray(bk.to_numpy(x0), dtype=float)[:, : self.d])

    def amplification(self, x: np.ndarray) -> float:
        """``A = sum_i w_i s_i / (sum_i w_i w_T)`` at positions ``x`` (``0``: no layer)."""
        if self.layer.size == 0:
            return 0.0
        st = None if self.state is None else self.state()
        pot = None if st is None else getattr(st, "potentials", None)
        s = tail_share(self.model, x, self.weights, self.layer, labels=self.labels,
                       potentials=pot, memory_limit=self.memory_limit)
        return float(np.sum(self.weights * s) / self.mass) / self.layer_mass

    def check(self, t: float, y: Any, stage: Any, context: Any) -> None:
        self.accepted += 1
        final = t >= self.t_final - 1e-9 * max(1.0, abs(self.t_final))
        if not final and self.spent > self.budget * EVALUATIONS_PER_STEP * self.accepted:
            return
        self.spent += 1
        x = np.asarray(bk.to_numpy(y), dtype=float)[:, : self.d]
        if not np.all(np.isfinite(x)):
            return  # the engine's non-finite check names it
        A = self.amplification(x)
        if self.reference is None:
            self.reference = A
        if not self.reference > 0:
            return
        G = A / self.reference
        if self.worst is None or G > self.worst[0]:
            self.worst = (G, t)
        if G <= self.warn_at:
            return
        text = (f"at t = {t:.6g} the attention tilts {A:.3g} times its share of the mass onto "
                f"the outer nodes of the rule (the {self.layer.size} nodes of least weight, "
                f"{self.layer_mass:.2g} of the mass), {G:.3g} times its {self.reference:.3g} at the "
                "start, " + ("above" if G > self.stop_at else "near")
                + f" the limit {self.stop_at:g}: the tilted measure leaves the node cloud and "
                "the field's quadrature error grows to O(1) (near a blow-up of the covariance, "
                "docs/lagrangian.md section 10); end the run before this time (a Gaussian start: "
                "meanfield.solve_gaussian has the closed form)")
        stop_or_warn_once(self, G > self.stop_at, StopReason.UNRESOLVED_NODES, text)


__all__ = ["BUDGET", "STOP_GROWTH", "TAIL", "WARN_GROWTH", "QuadratureMonitor",
           "effective_sample_size", "outer_layer", "tail_share"]
