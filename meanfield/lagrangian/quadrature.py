"""The quadrature monitors of Lagrangian runs: do the nodes still resolve the measure?

.. autosummary::
   QuadratureMonitor
   SphereQuadratureMonitor
   tail_share
   effective_sample_size
   rule_basis
   band_norms

The field at a node ``x_i`` is a quadrature of the *tilted* measure,
``sum_j p_ij V x_j`` with ``p_ij = w_j phi(S_ij) / sum_k w_k phi(S_ik)`` (``phi`` the
attention weight of the logit ``S_ij``: ``e^S`` for softmax, L2, unnormalised and Sinkhorn,
``sigmoid`` for sigmoid; docs/equations.md section 2, docs/lagrangian.md section 10). A rule
in ``R^d`` (Gauss–Hermite, :func:`meanfield.lagrangian.nodes.gaussian`) has a finite cloud of nodes for
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

On ``S^{d-1}``, on ring nodes and on subspace nodes (``k = 2, 3``) there is no outer layer to
leave (the rule covers the compact manifold); what fails there is the pull-back of the field's
integrand to the start, steep at the separatrices of a clustering flow:
:class:`SphereQuadratureMonitor` estimates it by a null rule in the rule's own orthonormal
polynomials, on each coordinate of a product rule (docs/lagrangian.md section 10).

Cost: one ``n x n`` pass of logits (about 1.7 field evaluations, measured) per
check, checked only while the monitor has spent at most :data:`BUDGET` of the run's own
field evaluations (as :mod:`meanfield.integrate.stability`), and always at the final time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from meanfield import attention as attention_registry
from meanfield import backend as bk
from meanfield.integrate import StopReason
from meanfield.integrate.stability import stop_or_warn_once
from meanfield.kernels import DEFAULT_MEMORY_LIMIT
from meanfield.lagrangian.node_set import ReducedNodes

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
    """``log phi(S)`` of the model's attention kind: ``S`` for the exponential kinds (softmax,
    L2 with its column bias, unnormalised, Sinkhorn with its potentials), else the log of its
    :class:`~meanfield.attention.Transform`."""
    transform = attention_registry.resolve(model.attention).transform
    return S if transform is None else transform.log_weight(S, model.parameters)


def _log_weights(model: Any, x: np.ndarray, weights: np.ndarray, labels: np.ndarray | None,
                 potentials: Any, memory_limit: int, queries: np.ndarray | None = None) -> Any:
    """Yield ``(rows, log(w_j phi(S_ij)))`` blocks, per head and block of query rows (of the
    rows ``queries`` of ``x`` where given, else of every row)."""
    n, d = x.shape
    xq = x if queries is None else x[queries]
    lq = None if labels is None or queries is None else labels[queries]
    with np.errstate(divide="ignore"):
        logw = np.log(weights)
    key_bias = attention_registry.resolve(model.attention).key_bias
    rows = max(1, int(memory_limit) // (3 * 8 * max(n, 1)))
    for h, (Q, K, _V) in enumerate(model.matrices(d)):
        q = model.beta * (xq @ np.asarray(Q, dtype=float).T)
        k = x @ np.asarray(K, dtype=float).T
        col = logw.copy()
        if key_bias is not None:  # l2: -beta |k_j|^2 / 2
            col += key_bias(model.beta, k)
        if potentials is not None:  # the Sinkhorn potentials (a field state of that kind only)
            col += np.asarray(bk.to_numpy(potentials[h]), dtype=float).reshape(n)
        for r0 in range(0, xq.shape[0], rows):
            r1 = min(xq.shape[0], r0 + rows)
            L = _log_phi(model, q[r0:r1] @ k.T) + col
            if labels is not None and model.causal:
                lr = labels if lq is None else lq
                L[lr[r0:r1, None] < labels[None, :]] = -np.inf
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


# -- node rules on the sphere: a null rule on the field's integrand pulled back to the start -----

SPHERE_WARN = 3e-3
"""Sphere and ring rules: a warning where the estimate ``P`` (:class:`SphereQuadratureMonitor`,
in units of the field) exceeds this."""

SPHERE_STOP = 1e-2
"""Sphere and ring rules: the run stops where ``P`` exceeds this (docs/lagrangian.md section 10
calibrates both)."""

SPHERE_QUERIES = 16
"""Query nodes of a check on a rule of more nodes than this (all nodes of ring rules)."""


def _distinct(values: np.ndarray) -> int:
    """The number of distinct values to a relative ``1e-12`` (a rule's latitudes)."""
    v = np.sort(np.asarray(values, dtype=float))
    return int(1 + np.count_nonzero(np.diff(v) > 1e-12 * max(1.0, float(np.max(np.abs(v))))))


def rule_basis(coordinate: np.ndarray, weights: np.ndarray, kind: str) -> np.ndarray:
    """Columns ``sqrt(w_j) P_m(y_j)``, ``m = 0, 1, ...``, of the polynomials of increasing
    degree orthonormal for the discrete measure ``sum_j w_j delta_{y_j}`` of a rule at its
    *initial* nodes ``y_j``: ``kind = "interval"``, ``coordinate`` the axis coordinate ``s`` in
    ``[-1, 1]`` (Chebyshev columns); ``"circle"``, the angle (``1, cos m a, sin m a``, two
    columns per degree). Householder QR of the weighted columns; the columns stop where the
    measure has no more independent degrees (``|R_mm|`` below ``1e-10`` of ``|R_00|``: as many
    degrees as distinct nodes of non-negligible weight)."""
    y = np.asarray(coordinate, dtype=float)
    sw = np.sqrt(np.asarray(weights, dtype=float) / float(np.sum(weights)))
    if kind == "interval":
        m = _distinct(y)
        cols = np.cos(np.arange(m)[None, :] * np.arccos(np.clip(y, -1.0, 1.0))[:, None])
    else:
        m = min(y.size, 2 * (_distinct(np.mod(y, 2 * np.pi)) // 2) + 1)
        k = (np.arange(m) + 1) // 2
        cols = np.where(np.arange(m) % 2 == 1, np.cos(k * y[:, None]), np.sin(k * y[:, None]))
        cols[:, 0] = 1.0
    q, r = np.linalg.qr(sw[:, None] * cols)
    diag = np.abs(np.diag(r))
    keep = int(np.argmax(diag < 1e-10 * diag[0])) if np.any(diag < 1e-10 * diag[0]) else m
    return q[:, :keep]


EXTRAPOLATE = 3.5
"""Bands of a third of the represented degrees ``D`` from the top band's centre (``5D/6``) to
the degree ``2D`` where a rule exact to about ``2D`` makes its error: ``(2 - 5/6) / (1/3)``."""

EXTRAPOLATE_PARITY = 9.5
"""The same for the radius ``|p|`` and the polar angle of subspace nodes, whose rules are exact
to about ``4D``: a smooth function of ``p`` has the terms ``|p|^m e^{i l a}`` with ``m = l``
(mod 2), the angular rule removes the odd ``l``, so ``n`` radial nodes (Gauss in ``|p|^2``,
exact to degree ``2n - 1`` there) integrate to degree ``4n - 1`` in ``|p|`` with ``D = n - 1``
degrees represented (likewise Gauss–Legendre in ``cos theta``): ``(4 - 5/6) / (1/3)``."""


def band_norms(basis: np.ndarray, weights: np.ndarray, g: np.ndarray,
               kind: str = "interval") -> tuple[np.ndarray, np.ndarray]:
    """``(|a_top|, |a_mid|)`` of each column ``g[:, i]`` (a function at the rule's nodes), root
    mean square per degree: ``a = basis^T (sqrt(w) g)``, its coefficients in the rule's
    orthonormal polynomials (:func:`rule_basis`, ``sum_j w_j = 1``), in the top and the middle
    third of the ``D`` degrees the rule represents. The top band is a null rule (it integrates
    every polynomial of lower degree to 0): the part of ``g`` the rule resolves least. Leading
    axes of ``basis`` ``(..., n, m)``, ``weights`` ``(..., n)`` and ``g`` ``(..., n, c)``
    stack rules of the same number of degrees (the slices of a product rule)."""
    w = np.asarray(weights, dtype=float)
    sw = np.sqrt(w / np.sum(w, axis=-1, keepdims=True))
    a = np.swapaxes(basis, -1, -2) @ (sw[..., None] * g)
    m = basis.shape[-1]
    degree = np.arange(m) if kind == "interval" else (np.arange(m) + 1) // 2
    D = int(degree[-1])
    top = degree > (2 * D) / 3
    mid = (degree > D / 3) & ~top
    if not np.any(mid):  # a rule of two or three degrees: the band below the top
        mid = degree == max(0, int(degree[top].min()) - 1)
    rms = [np.sqrt(np.sum(a[..., b, :] ** 2, axis=-2) / np.count_nonzero(b)) for b in (top, mid)]
    return rms[0], rms[1]


class SphereQuadratureMonitor:
    """Warns, or stops a Lagrangian run on ``S^{d-1}``, on ring or on subspace nodes, when the
    node rule no longer resolves the field's integrand pulled back to the start (docs/lagrangian.md
    section 10).

    The field at ``x_i`` is a quadrature at the *initial* nodes ``y_j``: softmax (SA),
    ``X_i = sum_j w_j phi_ij V x_j(t) / Z_i``, ``Z_i = sum_j w_j phi_ij``, whose error is the
    rule's error on ``g_ij = phi_ij (V x_j(t) - X_i) / Z_i`` (unnormalised: ``phi_ij V x_j /
    Z_i``); ring and subspace nodes, the same with ``V x_j`` replaced by ``B_1`` of
    docs/lagrangian.md sections 8 and 11 (``h`` or ``<B_1>`` for ``X``). Its coefficients in
    the rule's own orthonormal polynomials at the start (:func:`rule_basis`) give, per query,
    the root-mean-square ``a_top`` of the top third of the ``D`` degrees
    the rule represents (a null rule) and ``a_mid`` of the middle third
    (:func:`band_norms`). A rule of ``D`` degrees is exact to about ``2D``, :data:`EXTRAPOLATE`
    bands above the top band's centre, so the estimate is ``P = a_top min(1, a_top /
    a_mid)^3.5``: extrapolated at the measured decay where it is geometric (a smooth flow),
    ``a_top`` itself where it is not (a separatrix). The extrapolation to the rule's own degree
    is what makes one threshold hold for every size of rule. ``P`` is the mass-weighted mean
    over the queries ``i`` (every ring; else :data:`SPHERE_QUERIES` nodes), the largest over
    the heads, in units of the field. Clusters do not alarm it once tight: inside a cluster
    ``V x_j - X_i`` is small and another cluster's kernel is ``e^{-beta |x - y|^2 / 2}`` smaller.

    Structure read from the nodes: ring nodes (Gauss–Jacobi in ``s``); ``d = 2``, the angle
    (:func:`meanfield.lagrangian.nodes.circle`, trigonometric); ``d >= 3`` with nodes on shared
    latitudes ``<y, e_d>`` (:func:`meanfield.lagrangian.nodes.sphere`,
    :func:`meanfield.lagrangian.nodes.zonal`), the axis
    coordinate (the part of ``g`` that depends on ``s`` only: the angular rule is not checked).
    Subspace nodes (:func:`meanfield.lagrangian.nodes.subspace`, a product of a radial and an angular rule):
    each coordinate of the product, ``|p|`` and the angle (``k = 2``), ``|p|``, the polar angle
    of the shared latitudes and the longitude (``k = 3``), on each of its *slices* (the nodes
    where the other coordinates are fixed, in the orthonormal polynomials of the slice's own
    weights), the bands mass-weighted over the slices; ``P`` the largest over the coordinates.
    The field's per-pair kernel and ``B_1 = p_j - (gamma/beta) p_i`` come from
    :func:`meanfield.lagrangian.subspace.pair_terms`, the function of the field itself. Other
    node sets (samples: a Monte Carlo error, no degree; subspace nodes that are no product) are
    not monitored (:attr:`basis` is ``None``).

    Args:
        model: the :class:`meanfield.Model`.
        nodes: the run's :class:`meanfield.lagrangian.nodes.Nodes`, ring or subspace nodes (at the start).
        t_final: the final time (always checked).
        labels, state, budget, memory_limit: as :class:`QuadratureMonitor`.
        warn, stop: the estimate ``P`` that warns (:data:`SPHERE_WARN`) and stops
            (:data:`SPHERE_STOP`).
    """

    def __init__(self, model: Any, nodes: Any, t_final: float, *, labels: np.ndarray | None = None,
                 state: Any = None, budget: float = BUDGET,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT, warn: float = SPHERE_WARN,
                 stop: float = SPHERE_STOP) -> None:
        self.model = model
        self.reduced = nodes if isinstance(nodes, ReducedNodes) else None
        self.weights = np.asarray(nodes.weights, dtype=float)
        self.weights = self.weights / float(np.sum(self.weights))
        self.d = int(nodes.d) if self.reduced is not None else int(np.asarray(nodes.x).shape[1])
        self.t_final = float(t_final)
        self.labels = labels
        self.state = state
        self.budget = float(budget)
        self.memory_limit = int(memory_limit)
        self.warn_at, self.stop_at = float(warn), float(stop)
        self.accepted = 0
        self.spent = 0
        self.warned = False
        self.worst: tuple[float, float] | None = None  # (E, t) of the largest check
        n = self.weights.size
        # per coordinate the rule is a product in: its kind and its slices, (nodes, basis) with
        # the other coordinates fixed (one slice of every node for rings, circle and latitudes);
        # P is the largest over the coordinates
        self.coordinates: list[tuple[str, list[tuple[np.ndarray, np.ndarray]], float]] = []
        every = np.arange(n)
        if self.reduced is not None:
            self.coordinates = self.reduced.monitor_slices(self.weights)
        else:
            x0 = np.asarray(nodes.x, dtype=float)
            if self.d == 2:
                self.coordinates = [("circle", [(every, rule_basis(np.arctan2(x0[:, 1], x0[:, 0]),
                                                                   self.weights, "circle"))], EXTRAPOLATE)]
            elif _distinct(x0[:, -1]) < n:
                self.coordinates = [("interval", [(every, rule_basis(x0[:, -1], self.weights, "interval"))],
                                     EXTRAPOLATE)]
        # a slice of one degree has no tail
        self.coordinates = [(kind, kept, ex) for kind, sl, ex in self.coordinates
                            if (kept := [(i, q) for i, q in sl if q.shape[-1] >= 2])]
        query_all = self.reduced is not None and self.reduced.query_all
        self.queries = np.arange(n) if (query_all or n <= SPHERE_QUERIES) else \
            np.unique(np.linspace(0, n - 1, SPHERE_QUERIES).round().astype(int))
        self.degrees = " x ".join(str(max(q.shape[-1] for _, q in sl))
                                  for _, sl, _ in self.coordinates) or "0"

    @property
    def basis(self) -> np.ndarray | None:
        """The rule's orthonormal polynomials of its first coordinate (of its first slice:
        :func:`rule_basis`), or ``None`` where the nodes are not monitored."""
        if not self.coordinates:
            return None
        q = self.coordinates[0][1][0][1]
        return q if q.ndim == 2 else q[0]

    def _with_spread(self, vals: np.ndarray, K: np.ndarray) -> np.ndarray:
        """``vals`` (queries, nodes, components) and one more component, ``beta`` times the
        spread ``|vals|^2`` about its tilted mean: the integrand of the divergence's
        covariance term (``d/dt log J``, docs/lagrangian.md section 2), whose quadrature
        decides the densities."""
        spread = np.sum(vals * vals, axis=2)
        mean = (K * spread) @ self.weights / (K @ self.weights)
        extra = float(self.model.beta) * (spread - mean[:, None])
        return np.concatenate([vals, extra[:, :, None]], axis=2)

    def _integrands(self, y: np.ndarray) -> list[np.ndarray]:
        """``g_ij`` (module docstring), shape ``(n, queries, components)``, one per head."""
        # the integrand centred on X_i except for the weights e^S / n (USA); sigmoid, also
        # divided by the count, is monitored as the normalised kinds (as it always was)
        sa = not attention_registry.resolve(self.model.attention).unshifted
        if self.reduced is not None:
            K, vals = self.reduced.monitor_terms(self.model, y, self.queries, self.weights, sa)
            Z = K @ self.weights
            return [np.transpose(K[:, :, None] * self._with_spread(vals, K) / Z[:, None, None],
                                 (1, 0, 2))]
        st = None if self.state is None else self.state()
        pot = None if st is None else getattr(st, "potentials", None)
        x = y[:, : self.d]
        out: list[np.ndarray] = []
        heads = self.model.matrices(self.d)
        rows: list[np.ndarray] = []
        h = 0
        for block, L in _log_weights(self.model, x, np.ones(x.shape[0]), self.labels, pot,
                                     self.memory_limit, queries=self.queries):
            K = np.exp(L - np.max(L, axis=1, keepdims=True))
            rows.append(K)
            if block.stop < self.queries.size:
                continue
            K = np.concatenate(rows, axis=0)
            rows = []
            vx = x @ np.asarray(heads[h][2], dtype=float).T  # V x_j
            h += 1
            Z = K @ self.weights
            X = (K * self.weights) @ vx / Z[:, None]
            vals = vx[None, :, :] - X[:, None, :] if sa else np.broadcast_to(vx, (K.shape[0],) + vx.shape)
            out.append(np.transpose(K[:, :, None] * self._with_spread(vals, K) / Z[:, None, None],
                                    (1, 0, 2)))
        return out

    def estimate(self, y: Any) -> float:
        """``P``, the mass-weighted mean over the queries of ``a_top min(1, a_top/a_mid)^3.5``
        (``^9.5`` in the radius and polar angle of subspace nodes; the largest over the heads
        and the coordinates), at the state ``y`` (positions, ``[phi | log J]`` of rings or
        ``[q | log J]`` of subspace nodes)."""
        if not self.coordinates:
            return 0.0
        y = np.asarray(bk.to_numpy(y), dtype=float)
        E = np.zeros(self.queries.size)
        for g in self._integrands(y):
            n, q, c = g.shape
            g = g.reshape(n, q * c)
            for kind, slices, exponent in self.coordinates:
                # the bands of each slice, mass-weighted over the slices (one slice: itself)
                top2, mid2, mass = np.zeros(q * c), np.zeros(q * c), 0.0
                for idx, basis in slices:  # idx (nodes) or stacked (slices, nodes)
                    w = self.weights[idx]
                    top, mid = band_norms(basis, w, g[idx], kind)
                    m = np.sum(w, axis=-1)[..., None]
                    top2 += np.sum(np.reshape(m * top * top, (-1, q * c)), axis=0)
                    mid2 += np.sum(np.reshape(m * mid * mid, (-1, q * c)), axis=0)
                    mass += float(np.sum(m))
                top = np.sqrt(np.sum(top2.reshape(q, c), axis=1) / mass)
                mid = np.sqrt(np.sum(mid2.reshape(q, c), axis=1) / mass)
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratio = np.nan_to_num(np.minimum(1.0, top / mid), nan=0.0)
                E = np.maximum(E, top * ratio ** exponent)
        wq = self.weights[self.queries]
        return float(np.sum(wq * E) / np.sum(wq)) if np.sum(wq) > 0 else float(np.mean(E))

    def check(self, t: float, y: Any, stage: Any, context: Any) -> None:
        if not self.coordinates:
            return
        self.accepted += 1
        final = t >= self.t_final - 1e-9 * max(1.0, abs(self.t_final))
        if not final and self.spent > self.budget * EVALUATIONS_PER_STEP * self.accepted:
            return
        # a check of rings costs about two field evaluations (two 0F1 logarithms per pair;
        # measured 2.2 at d = 1024), one of other nodes (a pass over 16 query rows); subspace
        # nodes: two 0F1 logarithms per pair of the 16 query rows against three per pair of
        # all rows in an evaluation, measured 0.94 evaluations with 16 nodes (all queried),
        # 0.56 with 64, 0.01 with 512 (radial 8, angular 63), 0.14 with 216 (k = 3)
        self.spent += 1 if self.reduced is None else self.reduced.monitor_cost
        if not np.all(np.isfinite(np.asarray(bk.to_numpy(y), dtype=float))):
            return  # the engine's non-finite check names it
        E = self.estimate(y)
        if self.worst is None or E > self.worst[0]:
            self.worst = (E, t)
        if E <= self.warn_at:
            return
        what = "nodes" if self.reduced is None else self.reduced.unit
        text = (f"at t = {t:.6g} the field's integrand pulled back to the start leaves a "
                f"quadrature error estimated at {E:.3g} of the field (a null rule on the top "
                f"third of the {self.degrees} degrees the rule of {self.weights.size} {what} "
                "represents, extrapolated to its degree), "
                + ("above" if E > self.stop_at else "near")
                + f" the limit {self.stop_at:g}: the {what} no longer resolve the measure "
                "(docs/lagrangian.md section 10); use more " + what)
        stop_or_warn_once(self, E > self.stop_at, StopReason.UNRESOLVED_NODES, text)


__all__ = ["BUDGET", "EXTRAPOLATE", "EXTRAPOLATE_PARITY", "SPHERE_QUERIES", "SPHERE_STOP", "SPHERE_WARN",
           "STOP_GROWTH", "TAIL", "WARN_GROWTH", "QuadratureMonitor", "SphereQuadratureMonitor",
           "effective_sample_size", "band_norms", "outer_layer", "rule_basis", "tail_share"]
