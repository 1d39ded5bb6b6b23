r"""Particles in reflection-symmetric pairs: the finite-``n`` reference of the ring runs.

.. autosummary::
   von_mises_fisher_s
   symmetric_pairs
   simulate_pairs
   kolmogorov

A ring run (docs/lagrangian.md section 8) is symmetric about the axis ``e``; ``n`` i.i.d.
particles are not: their mean is tilted from ``e`` by ``~ sqrt(E[1 - s^2]/n)``, and once the
cluster is narrower than the tilt, ``s = <x, e>`` measures the tilt. Started in pairs
``x = s e + t`` and ``x' = s e - t`` (``t`` orthogonal to ``e``) the system is invariant under
the reflection ``R x = 2 <x, e> e - x``, which is orthogonal and commutes with ``Q = K = V = I``
attention (docs/equations.md section 3: the field of ``R mu`` at ``R x`` is ``R`` of the field
of ``mu`` at ``x``). The configuration stays symmetric for all times, so its mean stays on
``e`` exactly, and only the ``n/2`` representatives are integrated: the field at ``x_i`` is

    Z_i = (1/n) sum_j e^{beta s_i s_j} (e^{beta <t_i, t_j>} + e^{-beta <t_i, t_j>})
    Z_i m_i = (1/n) sum_j e^{beta s_i s_j} ((e^{+} + e^{-}) s_j e + (e^{+} - e^{-}) t_j)

and ``X(x_i) = m_i - <m_i, x_i> x_i`` (SA; USA without the division by ``Z_i``), exactly the
field of the ``n`` points: half the products and half the exponentials of the full system.
The ``s``-values come in equal pairs, so the empirical distribution function of the ``n``
values is that of the ``n/2`` representatives: the Kolmogorov sampling level is that of
``n/2`` points.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from meanfield.kernels import DEFAULT_MEMORY_LIMIT
from meanfield.model import Model


def von_mises_fisher_s(kappa: float, d: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. values of ``s = <x, e>`` for ``x`` von Mises–Fisher ``e^{kappa <x, e>}``
    on ``S^{d-1}``: Wood's rejection sampler (1994), exact for every ``d >= 2``, ``kappa >= 0``."""
    if not (math.isfinite(kappa) and kappa >= 0):
        msg = f"kappa must be finite and >= 0, got {kappa!r}"
        raise ValueError(msg)
    m = d - 1
    b = m / (2 * kappa + math.sqrt(4 * kappa * kappa + m * m))  # (-2k + sqrt(4k^2 + m^2)) / m
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + m * math.log(1 - x0 * x0)
    out = np.empty(0)
    while out.size < size:
        k = max(16, 2 * (size - out.size))
        z = rng.beta(m / 2, m / 2, k)
        w = (1 - (1 + b) * z) / (1 - (1 - b) * z)
        keep = kappa * w + m * np.log(1 - x0 * w) - c >= np.log(rng.random(k))
        out = np.concatenate([out, w[keep]])
    return out[:size]


def symmetric_pairs(kappa: float, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n/2`` representatives ``(n/2, d)`` of a von Mises–Fisher sample on ``S^{d-1}`` about
    ``e = e_d`` (last coordinate ``s``, the rest ``t``); their partners are ``(-t, s)``."""
    if n < 2 or n % 2:
        msg = f"n must be an even number >= 2 (pairs), got {n!r}"
        raise ValueError(msg)
    s = von_mises_fisher_s(kappa, d, n // 2, rng)
    u = rng.standard_normal((n // 2, d - 1))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return np.concatenate([np.sqrt(np.maximum(1 - s * s, 0.0))[:, None] * u, s[:, None]], axis=1)


def pair_field(model: Model, x: np.ndarray, *, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """The attention field (docs/equations.md section 3) at the representatives ``x`` of the
    ``2 len(x)`` points ``{x_i, R x_i}`` (module docstring), rows in tiles of ``memory_limit``
    bytes. ``Q = K = I``, ``V = +-I``, softmax or unnormalized, no noise."""
    kind = {"softmax": "softmax", "unnormalized": "unnormalized"}.get(model.attention)
    if kind is None or not model.is_identity or model.causal or model.noise > 0:
        msg = ("model: pairs need Q = K = I, V = +-I, softmax or unnormalized attention, no mask "
               f"or noise (got attention={model.attention!r})")
        raise ValueError(msg)
    beta = float(model.beta)
    if not beta <= 250.0:  # e^{a - top} underflows below a - top ~ -745, a - top >= -2.83 beta
        msg = f"model.beta={beta!r}: pair_field scales by a Cauchy-Schwarz bound, beta <= 250"
        raise ValueError(msg)
    t, s = x[:, :-1], x[:, -1]
    n2 = x.shape[0]
    bt = beta * t
    tn = np.linalg.norm(t, axis=1)
    out = np.empty_like(x)
    rows = max(1, int(memory_limit // (8 * 4 * n2)))
    for i0 in range(0, n2, rows):
        sl = slice(i0, i0 + rows)
        # e^{beta <x_i, x_j>} and e^{beta <x_i, R x_j>} = e^{a} e^{+-b}, a = beta s_i s_j,
        # b = beta <t_i, t_j>; scaled by e^{-top_i}, top_i = beta (|s_i| max|s| + |t_i| max|t|)
        # >= a + |b| (Cauchy-Schwarz) and <= sqrt(2) beta <= sqrt(2) (the row maximum
        # >= beta at j = i): nothing overflows, nothing that counts underflows
        eb = bt[sl] @ t.T
        np.exp(eb, out=eb)
        top = beta * (np.abs(s[sl]) * np.max(np.abs(s)) + tn[sl] * np.max(tn)) if kind == "softmax" \
            else np.zeros(eb.shape[0])
        ea = np.multiply.outer(beta * s[sl], s)
        ea -= top[:, None]
        np.exp(ea, out=ea)
        inv = np.reciprocal(eb)
        even = eb + inv
        even *= ea
        eb -= inv
        eb *= ea  # odd part: e^{a} (e^{b} - e^{-b})
        del inv, ea
        m = np.empty((even.shape[0], x.shape[1]))
        m[:, -1] = even @ s
        m[:, :-1] = eb @ t
        if kind == "softmax":
            m /= np.sum(even, axis=1, keepdims=True)
        else:
            m /= 2 * n2
        xi = x[sl]
        out[sl] = m - np.sum(m * xi, axis=1, keepdims=True) * xi
    return model.sign * out


def simulate_pairs(model: Model, x0: np.ndarray, times: np.ndarray, dt: float, *,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """Positions ``(len(times), n/2, d)`` of the representatives at ``times`` (``times[0]``:
    the time of ``x0``): classical RK4 with steps ``<= dt`` landing on each output time,
    projected back onto the sphere after each step (the projection is ``R``-equivariant, so
    the pair symmetry stays exact)."""
    times = np.asarray(times, dtype=float)
    x = np.array(x0, dtype=float)
    out = np.empty((times.size, *x.shape))
    out[0] = x
    for k in range(1, times.size):
        steps = max(1, math.ceil((times[k] - times[k - 1]) / dt - 1e-9))
        h = (times[k] - times[k - 1]) / steps
        for _ in range(steps):
            k1 = pair_field(model, x, memory_limit=memory_limit)
            k2 = pair_field(model, x + 0.5 * h * k1, memory_limit=memory_limit)
            k3 = pair_field(model, x + 0.5 * h * k2, memory_limit=memory_limit)
            k4 = pair_field(model, x + h * k3, memory_limit=memory_limit)
            x = x + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[k] = x
    return out


def kolmogorov(sample: np.ndarray, cdf: np.ndarray) -> float:
    """``sup |F_m - F|`` of the sorted ``sample`` (size ``m``) against ``cdf`` at its points."""
    m = sample.size
    return float(max(np.max(np.arange(1, m + 1) / m - cdf), np.max(cdf - np.arange(m) / m)))




def vmf_kappa(mean: float, d: int) -> float:
    """The ``kappa`` of the von Mises–Fisher law on ``S^{d-1}`` with ``E <x, e> = mean``
    (``A_d(kappa) = I_{d/2}(kappa)/I_{d/2-1}(kappa)``, increasing; as a ratio of ``0F1`` in
    logarithms, no underflow at large ``d``), for ``0 < mean < 1``."""
    from scipy.optimize import brentq

    from meanfield.lagrangian.rings import log_hyp0f1

    if not 0.0 < mean < 1.0:
        msg = f"mean must be in (0, 1), got {mean!r}"
        raise ValueError(msg)
    def a(k: float) -> float:  # I_{d/2}/I_{d/2-1} = (k/d) 0F1(; d/2+1; k^2/4)/0F1(; d/2; k^2/4)
        w = np.array([0.25 * k * k])
        return float(k / d * np.exp(log_hyp0f1(d / 2 + 1, w) - log_hyp0f1(d / 2, w))[0])

    lo, hi = 0.0, 1.0  # A_d(0) = 0
    while a(hi) < mean:
        hi *= 2
    return float(brentq(lambda k: a(k) - mean, lo, hi, xtol=1e-13))


def kolmogorov_levels(model: Model, kappa: float, d: int, n: int, sample_mean: float, times: np.ndarray,
                      rings: int = 64, z: float = 2.576, q: float = 1.63) -> tuple[np.ndarray, Any, float]:
    """The sampling level at each of ``times`` of the Kolmogorov distance between the ``s``
    of ``n`` particles in pairs started from vMF ``kappa`` and the ring run of the exact start;
    the ring run of the start fitted to the particles' mean; its ``kappa``.

    The empirical measure's fluctuation is not i.i.d. at ``t > 0``: its mean ``m_0`` moves the
    collapse time of every particle together (measured: ``sqrt(n/2) KS`` grows from 0.5-1.5 at
    ``t = 0`` to 1-2.4 at ``t = 3``, ``d = 16``, ``kappa = 8``, ``n = 2000``, and stays flat
    against the run fitted to the sample mean). So, by the triangle inequality,
    ``KS(particles, F_t) <= KS(particles, F_t^fit) + sup |F_t^fit - F_t|``: the first term
    below ``q/sqrt(n/2)`` (``q = 1.63``: the 99 % Kolmogorov quantile; a fitted parameter
    only lowers it), the second below its largest value over the starts whose mean lies
    within ``z`` standard errors of the exact one (``z = 2.576``, 99 %; the family is
    monotone in ``kappa``, so the endpoints bound it). Level: ``1 - 0.02``."""
    from meanfield import nodes, solve_lagrangian
    from meanfield.lagrangian.rings import cdf_s

    def run(k: float) -> Any:
        return solve_lagrangian(model, nodes.rings(lambda s: k * s, rings, d, log=True), times,
                                rtol=1e-10, atol=1e-12)

    exact = nodes.rings(lambda s: kappa * s, rings, d, log=True)
    m = exact.integrate(lambda s: s)
    se = math.sqrt(exact.integrate(lambda s: s * s) - m * m) / math.sqrt(n / 2)
    base = run(kappa)
    grid = np.linspace(-1.0, 1.0, 20001)
    shift = np.zeros(np.asarray(times).size)
    for mk in (m - z * se, m + z * se):
        ds = run(vmf_kappa(mk, d))
        for k in range(shift.size):
            pts = np.unique(np.concatenate([grid, ds["s"].values[k], base["s"].values[k]]))
            shift[k] = max(shift[k], float(np.max(np.abs(cdf_s(ds, k, pts) - cdf_s(base, k, pts)))))
    k_fit = vmf_kappa(sample_mean, d)
    return q / math.sqrt(n / 2) + shift, run(k_fit), k_fit


__all__ = ["kolmogorov", "kolmogorov_levels", "pair_field", "simulate_pairs", "symmetric_pairs", "vmf_kappa",
           "von_mises_fisher_s"]
