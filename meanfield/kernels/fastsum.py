r"""Fast summation of the attention field on ``S^1`` and ``S^2`` (docs/particles.md section
"Fast field"; docs/equations.md sections 2-3).

.. autosummary::
   METHODS
   FastSettings
   fast_reason
   band_limit
   use_fast
   fast_field
   zonal_sums
   energy

For zonal attention (``<Q x, K y> = c <x, y>``, ``V = v I``, one head) the field of ``mu =
sum_j w_j delta_{x_j}`` at a point ``x`` needs only two zonal sums (docs/equations.md section 3):

.. math::  Z(x) = \sum_j w_j e^{\beta <x, x_j>}, \qquad
           G(x) = \frac1\beta \sum_j w_j e^{\beta <x, x_j>}  \;(\text{gradient potential}),

since ``P_x sum_j w_j e^{beta <x, x_j>} x_j = grad_S G``. Softmax (SA) and l2 (on the sphere
the same weights): ``v = s grad G / Z``, ``div_S v = s (Delta G / Z - beta |grad G|^2 / Z^2)``;
unnormalized (USA, the mass is 1): ``v = s grad G``, ``div_S v = s Delta G``, with ``s = v``
the value scalar (``value = -1``: repulsion). The divergence is intrinsic, hence equal to
docs/lagrangian.md section 2's ``tr DF - x^T DF x - (d - 1) <x, F>``. Sigmoid is the
unnormalized form with ``Z`` the sum of ``sigma(beta t + b)`` and ``G`` that of
``softplus(beta t + b) / beta`` (:func:`_sigmoid_plan`).

Both sums are zonal convolutions, diagonal in harmonics with the Funk–Hecke multipliers of
:mod:`meanfield.special` (``e^{-beta}`` carried separately, so no overflow for SA):

1. ``mu_hat`` by the adjoint nonuniform transform at the nodes (``S^1``: ducc0 type-1 NUFFT;
   ``S^2``: ``ducc0.sht.adjoint_synthesis_general``);
2. times the multipliers up to the band limit ``L`` (:func:`band_limit`);
3. values, gradient and Laplacian at the points by nonuniform synthesis (``S^1``: type-2
   NUFFT; ``S^2``: ``synthesis_general`` spin 0, and spin 1 ``DERIV1`` for the gradient).

Cost ``O((n + m) log(1/eps) + L^2 log L)`` against ``O(n m)`` for the direct sum.

General weights (any ``Q, K, V``, several heads, l2 with any ``Q, K``, Sinkhorn, the causal
mask) go through :mod:`meanfield.kernels.fastsum_general` (a Chebyshev expansion in ``|Q^T K y|`` of
the same multipliers); :func:`fast_reason` covers both paths, :func:`zonal_reason` this one.

**Accuracy.** With the kernel scaled by ``e^{-beta}`` (its maximum 1) and ``sum w = 1``, each
sum has an absolute error ``delta = tail(L) + C eps max Z`` (truncation, the bound of fast
summation (Keiner, Kunis, Potts 2006), plus the nonuniform transforms' error, relative to the
size of what they compute; ``C`` measured, :data:`NUFFT_ERROR`). The tolerance is relative, per
point, to the scale that bounds the direct sum's own rounding error: the sum of the magnitudes
of its terms (SA: ``|F| <= 1``; USA: ``e^beta Z(x)``; the divergence: ``4 beta + d - 1`` times
that). The relative error at a point is then about ``delta / Z(x)``: tiny where the point sees
mass, large only far from all of it (an isolated particle at large ``beta``). Every point whose
estimate exceeds the tolerance is recomputed by the direct sum (``FastSettings.corrected``
counts them), so the result meets the tolerance at every point. (Sigmoid: the error scales
are the ``l1`` norms of its coefficients, :data:`SIGMOID_NUFFT_ERROR`.)

References:
    J. Keiner, S. Kunis, D. Potts, *Fast summation of radial functions on the sphere*,
    Computing 78 (2006) 1-15.
"""

from __future__ import annotations

import cmath
import functools
import math
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import ducc0
import numpy as np

from meanfield import attention as attention_registry
from meanfield.special import check_exp_beta, kernel_multipliers_over_beta, scaled_kernel_multipliers

METHODS = ("auto", "direct", "fast")
"""``direct``: the tiled ``O(n m)`` sum (the reference); ``fast``: this module (``ValueError``
naming the reason where it does not apply); ``auto``: fast where it applies and pays
(:func:`use_fast`), direct otherwise."""

DEFAULT_TOL = 1e-12
"""Requested relative accuracy per point (the direct sum's accuracy, docs/particles.md)."""

NUFFT_EPS_MIN = 3e-13
"""Smallest ``epsilon`` used: ducc0 accepts ``> 2e-13`` in double precision (its docs); the
field's transforms run at ``max(tol EPS_FRACTION, NUFFT_EPS_MIN)``."""

EPS_FRACTION = 1 / 1024
"""The field's transforms run at ``max(tol EPS_FRACTION, NUFFT_EPS_MIN)``: the per-point
estimate carries ``max Z / Z(x)``, so a transform at ``tol / 8`` could vouch only for the points
with ``Z(x)`` above ``0.3 max Z`` at any looser ``tol`` (a clustered measure sent most points
back to the direct sum: 13-21% of 8 192 Lagrangian nodes at SA beta = 9, measured); the cost
grows only like ``log(1/eps)``. At the default ``tol = 1e-12`` the floor applies."""

SIGMOID_NUFFT_ERROR = (10.0, 1.0, 1.5)
"""Sigmoid: the absolute errors of ``Z``, ``grad G`` and ``Delta G`` are at most ``C eps`` times
the ``l1`` norms of :attr:`_Plan.l1`. Measured (same sets, ``beta`` 0.5 to 40, ``b = -1``):
largest ratios 4.7 (at ``beta = 40``, ``L = 751``: the coefficients' round-off times ``sum
N_l``), 0.48, 0.66; these are those times 2 or more."""

NUFFT_ERROR = (2.0, 0.4, 0.01)
"""``(C_Z, C_G, C_L)``: the absolute errors of the scaled sums ``Z``, ``grad G`` and ``Delta G``
are at most ``C eps max_i Z(x_i)`` (``C_L eps L^2 max Z`` for the Laplacian). Measured over
random, clustered, near-Dirac (also at a pole) and mixed point sets, ``beta`` from 0.5 to 300,
``S^1`` and ``S^2``, ``eps = 3e-13``: largest ratios 0.85, 0.155, 0.0049; these are those times
2.3 or more (the same sets are tests/meanfield/kernels/test_fastsum.py's)."""

TAIL_FRACTION = 1e-4
"""The band limit's truncation tail is at most ``TAIL_FRACTION * tol`` (the tail falls
like ``(beta/2)^l / l!``: a few degrees more cost little, and keep the truncation far below the
tolerance even where ``Z`` is small, e.g. ``Z ~ 1/(2 beta)`` for the uniform measure)."""

FAST_KINDS = ("softmax", "unnormalized", "l2", "sigmoid")
"""Kinds with a fast path (zonal weights); l2 only with ``Q = K = I`` (then, on the sphere,
``|x - y|^2 = 2 - 2 <x, y>`` and its softmax weights are those of SA); sigmoid through the
Legendre (``S^2``) or Fourier (``S^1``) coefficients of ``sigma(beta t + b)`` and of its
antiderivative, computed by quadrature (:func:`_sigmoid_coefficients`)."""

SIGMOID_MAX_BAND = 1024
"""Largest band limit of the sigmoid kernel's expansion (its singularity nears ``[-1, 1]``
like ``pi / beta``: ``L`` grows about linearly in ``beta``; beyond this it stays direct)."""

CROSSOVER = {2: 512, 3: 1024}
"""``auto`` uses the fast field when ``n_points * n_nodes >= CROSSOVER[d]^2`` (and it applies).
Measured with benchmarks/bench_fastsum.py (2 cores shared with other jobs, load ~8, 2026-12-02;
``beta = 4``, uniform tokens, velocity, minimum of 5): the fast velocity beats the direct one
from ``n = 256`` on ``S^1`` and ``n = 512`` on ``S^2`` at every larger ``n`` of the grid; these
are twice that, a margin for larger ``beta`` (a larger band limit: at ``beta = 300``, ``L =
160``, a fast evaluation on ``S^2`` costs ~10 ms at any small ``n``, the direct one at ``n =
1000`` ~100 ms). docs/particles.md, section "Fast field", has the table."""

CROSSOVER_GENERAL: dict[int, int] = {3: 8192}
"""``auto`` on the general path (:mod:`meanfield.kernels.fastsum_general`: ``Q^T K`` or ``V`` not a
multiple of the identity, several heads): ``n_points * n_nodes >= CROSSOVER_GENERAL[d]^2``;
no entry (``S^1``): never (only ``method="fast"``). Its cost is ``C`` syntheses per weight
vector (``C`` Chebyshev terms in ``|A^T x|``, 20-25 at ``beta = 4``; ``d + 1`` weight vectors
for the velocity). Measured with benchmarks/bench_fastsum.py (softmax ``beta = 4``, ``A = I +
0.3 G``, uniform tokens, 2 cores shared with other jobs): on ``S^2`` the fast velocity beat
the direct one from ``n = 4096`` (0.22 s against 0.73 s; at ``n = 16 384`` 0.86 s against
13.2 s, 137 points recomputed directly), not at ``n = 1000``; 8192 is twice that. On ``S^1``
the NUFFT's larger error constant leaves 40-50 % of the points to the direct sum at the
default ``tol`` (fast 2.4 s against 4.4 s at ``n = 16 384``, slower at 4096 with the
divergence): no entry."""


@dataclass(frozen=True)
class FastSettings:
    """What one fast evaluation used (recorded in results' attrs).

    Args:
        tol: requested relative accuracy per point.
        band_limit: ``L``, the largest degree (``S^2``) or frequency (``S^1``) kept.
        epsilon: accuracy asked of the nonuniform transforms.
        tail: truncation bound ``sum_{l > L}`` of the scaled multipliers (value, gradient and
            Laplacian weighted).
        error_estimate: ``delta / min_i Z(x_i)`` over the points computed fast (0 if none).
        corrected: points recomputed by the direct sum (estimate above ``tol``).
        chebyshev: terms of the expansion in the radius ``|A y|`` (general weights,
            :mod:`meanfield.kernels.fastsum_general`); 0 for the zonal kernels.
    """

    tol: float
    band_limit: int
    epsilon: float
    tail: float
    error_estimate: float
    corrected: int
    chebyshev: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def merge_settings(old: FastSettings | None, new: FastSettings | None) -> FastSettings | None:
    """The settings of a run of many evaluations: the largest band limit and error estimate,
    the points corrected summed."""
    if old is None or new is None:
        return new if old is None else old
    return FastSettings(tol=new.tol, band_limit=max(old.band_limit, new.band_limit),
                        epsilon=new.epsilon, tail=max(old.tail, new.tail),
                        error_estimate=max(old.error_estimate, new.error_estimate),
                        corrected=old.corrected + new.corrected,
                        chebyshev=max(old.chebyshev, new.chebyshev))


# -- which models and inputs ------------------------------------------------------------

def _scalar_multiple(m: np.ndarray) -> float | None:
    """``c`` when ``m = c I``, else ``None``."""
    c = float(m[0, 0])
    return c if np.array_equal(m, c * np.eye(m.shape[0])) else None


GENERAL_KINDS = ("softmax", "unnormalized", "l2", "sinkhorn")
"""Kinds with a fast path for any ``Q, K, V`` (exponential kernels)."""

def general_reason(model: Any, d: int) -> str | None:
    """Why the general fast path does not apply to ``model`` in dimension ``d`` (``S^1``,
    ``S^2`` already checked by the caller), or ``None``."""
    if model.attention not in GENERAL_KINDS:
        return (f"attention={model.attention!r}: with Q^T K not a multiple of the identity "
                f"the fast field covers {GENERAL_KINDS} (sigmoid's profile is not an "
                "exponential; it stays direct)")
    if model.feedforward is not None:
        return "feedforward: the fast field has no feed-forward term; it stays direct"
    if attention_registry.resolve(model.attention).unshifted:  # e^S / n: e^beta does not cancel
        for Q, K, _ in model.matrices(d):
            try:
                check_exp_beta(float(model.beta) * float(np.linalg.norm(Q.T @ K, 2)),
                               "unnormalized attention (beta |Q^T K|)")
            except ValueError as err:
                return str(err)
    return None


def fast_reason(model: Any, d: int, geometry: str = "sphere", *, causal_labels: bool = False,
                backend_numpy: bool = True) -> str | None:
    """Why the fast field does not apply (a sentence naming the field), or ``None``.

    It applies on ``S^1`` and ``S^2`` (``geometry="sphere"``, ``d`` in 2, 3) to NumPy arrays
    without a feed-forward term, through one of two paths:

    * zonal (:func:`fast_field`): one head, ``Q^T K = c I`` (``c >= 0``), ``V = v I``, no
      causal mask; softmax, unnormalized, sigmoid (band limit up to
      :data:`SIGMOID_MAX_BAND`) and l2 (``Q = K = I``);
    * general (:mod:`meanfield.kernels.fastsum_general`): any ``Q, K, V``, any number of heads, the
      causal mask (labels or index), kinds softmax, unnormalized, l2 and sinkhorn.

    What stays direct: ``R^d`` (no harmonic transform there), ``S^{d-1}`` for ``d >= 4`` (no
    nonuniform harmonic transform in ducc0), sigmoid unless zonal (its profile is not an
    exponential), the feed-forward term, torch tensors.
    """
    if geometry != "sphere":
        return f"geometry={geometry!r}: the fast field is on the sphere only (R^d stays direct)"
    if d not in (2, 3):
        return (f"d={d}: the fast field is on S^1 and S^2 (d = 2, 3); S^(d-1) for d >= 4 stays "
                "direct (no nonuniform harmonic transform there)")
    if not backend_numpy:
        return "a torch tensor: the fast field runs on NumPy (ducc0); torch stays direct"
    if model.feedforward is not None:
        return "feedforward: the fast field has no feed-forward term; it stays direct"
    zonal = zonal_reason(model, d, causal_labels=causal_labels)
    if zonal is None:
        return None
    general = general_reason(model, d)
    if general is None:
        return None
    if model.attention != "sigmoid" or zonal.startswith("attention="):
        return general if model.attention != "sigmoid" else zonal
    return (f"attention='sigmoid': {zonal}; sigmoid has only the zonal path (its profile is "
            "not an exponential)")


def zonal_reason(model: Any, d: int, *, causal_labels: bool = False) -> str | None:
    """Why the zonal path (:func:`fast_field`) does not apply, or ``None`` (``d`` in 2, 3,
    NumPy, no feed-forward term: checked by :func:`fast_reason`)."""
    if model.attention not in FAST_KINDS:
        return (f"attention={model.attention!r}: the zonal fast field covers {FAST_KINDS}")
    if model.heads is not None and len(model.heads) > 1:
        return f"heads: {len(model.heads)} heads; the zonal fast field takes one head"
    if model.causal or causal_labels:
        return "causal=True: masked attention is not a zonal sum"
    Q, K, V = model.matrices(d)[0]
    if model.attention == "l2":
        if not (np.array_equal(Q, np.eye(d)) and np.array_equal(K, np.eye(d))):
            return "attention='l2' with Q, K not the identity: not a zonal kernel on the sphere"
    else:
        c = _scalar_multiple(Q.T @ K)
        if c is None or c < 0:
            return "Q, K: the zonal fast field needs Q^T K = c I with c >= 0"
    if _scalar_multiple(V) is None:
        return "V: the zonal fast field needs V = v I (a scalar multiple of the identity)"
    if attention_registry.resolve(model.attention).unshifted:  # e^S / n: e^beta does not cancel
        try:
            check_exp_beta(_beta_eff(model, d), "unnormalized attention")
        except ValueError as err:
            return str(err)
    if model.attention == "sigmoid":
        L = _sigmoid_band(_beta_eff(model, d), float(model.sigmoid_bias), d, DEFAULT_TOL)
        if L > SIGMOID_MAX_BAND:
            return (f"attention='sigmoid' with beta={model.beta:g}: its expansion needs band "
                    f"limit {L} > {SIGMOID_MAX_BAND} (SIGMOID_MAX_BAND); it stays direct")
    return None


def _beta_eff(model: Any, d: int) -> float:
    Q, K, _ = model.matrices(d)[0]
    c = 1.0 if model.attention == "l2" else _scalar_multiple(Q.T @ K)
    return float(model.beta) * float(c)  # type: ignore[arg-type]


def check_tol(tol: Any, name: str = "fast_tol") -> float:
    """``tol`` as a float in ``(0, 1)`` (a relative accuracy), else ``ValueError`` naming
    ``name``."""
    try:
        t = float(tol)
    except (TypeError, ValueError):
        t = math.nan
    if not 0 < t < 1:
        msg = f"{name} must be a relative accuracy in (0, 1), got {tol!r}"
        raise ValueError(msg)
    return t


def use_fast(method: str, model: Any, d: int, geometry: str, n_points: int, n_nodes: int, *,
             causal_labels: bool = False, backend_numpy: bool = True) -> bool:
    """The choice point of ``method`` (:data:`METHODS`): ``True`` for the fast field.

    ``fast`` where it does not apply raises ``ValueError`` with :func:`fast_reason`;
    ``auto`` takes it where it applies and ``n_points * n_nodes >= CROSSOVER[d]^2`` (zonal
    path) or ``>= CROSSOVER_GENERAL[d]^2`` (general path); sigmoid, Sinkhorn and the causal
    mask only with ``fast`` (no crossover measured for them).
    """
    if method not in METHODS:
        msg = f"method must be one of {METHODS}, got {method!r}"
        raise ValueError(msg)
    if method == "direct":
        return False
    reason = fast_reason(model, d, geometry, causal_labels=causal_labels,
                         backend_numpy=backend_numpy)
    if method == "fast":
        if reason is not None:
            msg = f"method='fast' does not apply: {reason}"
            raise ValueError(msg)
        return True
    # sigmoid only when asked for: its error estimate (l1 norms of sign-changing coefficients)
    # may send most points back to the direct sum (at beta = 9, every point of some test sets),
    # so no crossover holds for it
    if reason is not None or model.attention == "sigmoid":
        return False
    if zonal_reason(model, d, causal_labels=causal_labels) is None:
        return n_points * n_nodes >= CROSSOVER[d] ** 2
    if model.attention == "sinkhorn" or model.causal or causal_labels:
        return False
    cross = CROSSOVER_GENERAL.get(d)
    return cross is not None and n_points * n_nodes >= cross**2


# -- band limit ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _multipliers(beta: float, d: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Scaled multipliers ``k_l`` of ``Z`` and ``g_l`` of ``G`` for ``l = 0..L`` such that
    ``e^{beta(<x,y> - 1)} = sum_l k_l N_l P_l`` (docs/equations.md section 3)."""
    l = np.arange(L + 1, dtype=float)
    out = scaled_kernel_multipliers(l, beta, d), kernel_multipliers_over_beta(l, beta, d)
    for a in out:
        a.setflags(write=False)  # cached: shared by every call
    return out


def _tail_terms(beta: float, d: int, L: int) -> np.ndarray:
    """Per degree ``l``, the bound ``N_l (k_l + 2 l(l + d - 2) g_l)`` of the degree-``l``
    terms of the scaled value, gradient and Laplacian sums (``|P_l| <= 1``, ``|grad P_l| <=
    l(l + d - 2)``; ``N_l = 2l + 1`` on ``S^2``, 2 on ``S^1``)."""
    k, g = _multipliers(beta, d, L)
    l = np.arange(L + 1, dtype=float)
    mult = 2 * l + 1 if d == 3 else np.where(l > 0, 2.0, 1.0)
    return mult * (k + 2 * l * (l + d - 2) * g)


def band_limit(beta: float, d: int, tol: float) -> tuple[int, float]:
    """The smallest ``L`` whose truncation tail is below ``TAIL_FRACTION * tol``, and that tail.

    The tail bounds ``sup |K - K_L|`` of the scaled kernel and of its gradient and Laplacian
    (``|P_l| <= 1``, ``|P_l'| <= l(l + d - 2)`` on ``[-1, 1]``): it is summed over ``l > L``
    of :func:`_tail_terms` (the terms decay like ``(beta/2)^l / l!`` past ``l ~ beta``).
    Cached: a run asks for the same ``(beta, d, tol)`` at every step.
    """
    if not tol > 0:
        msg = f"tol must be > 0, got {tol!r}"
        raise ValueError(msg)
    return _band_limit(float(beta), int(d), float(tol))


@functools.lru_cache(maxsize=64)
def _band_limit(beta: float, d: int, tol: float) -> tuple[int, float]:
    lmax = 64 + 2 * math.ceil(beta)
    while True:
        terms = _tail_terms(beta, d, lmax)
        tails = np.concatenate([np.cumsum(terms[::-1])[::-1][1:], [0.0]])  # sum_{l > L}
        ok = np.nonzero(tails <= TAIL_FRACTION * tol)[0]
        if ok.size and ok[0] < lmax // 2:  # the part beyond lmax is negligible then
            L = max(int(ok[0]), 1)
            return L, float(tails[L])
        if lmax > 1 << 16:
            msg = f"beta={beta:g}: no band limit <= {lmax} reaches tol={tol:g}"
            raise ValueError(msg)
        lmax *= 2


def _degree_weights(d: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """``N_l`` (``2l + 1`` on ``S^2``; 1, 2, 2, ... on ``S^1``) and ``l(l + d - 2)``."""
    l = np.arange(L + 1, dtype=float)
    return (2 * l + 1 if d == 3 else np.where(l > 0, 2.0, 1.0)), l * (l + d - 2)


def _sigmoid_log_rho(beta: float, b: float) -> float:
    """``log rho``, ``rho`` the Bernstein-ellipse parameter of the singularity of ``sigma(beta
    t + b)`` nearest to ``[-1, 1]``, ``t* = (-b + i pi) / beta``: the coefficients decay like
    ``rho^{-l}``. For ``|t*|`` large (tiny ``beta``), ``rho ~ 2 |t*|``, in logarithms."""
    z = complex(-b, math.pi)
    if abs(z) > 1e8 * beta:
        return math.log(2.0) + math.log(abs(z)) - math.log(beta)
    t = z / beta
    r = abs(t + cmath.sqrt(t * t - 1))
    return abs(math.log(r))


def _sigmoid_band(beta: float, b: float, d: int, tol: float) -> int:
    return _sigmoid_plan(beta, b, d, tol)[0]


@functools.lru_cache(maxsize=64)
def _sigmoid_plan(beta: float, b: float, d: int, tol: float) -> tuple[int, float, Any, Any, Any]:
    """``(L, tail, k, g, q)`` for sigmoid attention: ``k`` the coefficients of ``sigma(beta t +
    b)`` (the reference sum), ``g`` those of its antiderivative ``softplus(beta t + b) / beta``
    (the potential: ``P_x sum_j w_j sigma(.) x_j = grad_S G``), ``g_0 = 0``, ``q`` those of its
    Laplacian; normalised as
    :func:`_multipliers` (``f(t) = sum_l N_l f_l P_l(t)`` on ``S^2``, ``sum_k f_|k| e^{ik theta}``
    on ``S^1``). Computed by quadrature (Gauss-Legendre on ``S^2``, the FFT on ``S^1``) up
    to a little beyond the band limit. The tail past ``L`` is bounded by the envelope ``A
    rho^{-l}`` (``A`` the largest ``|f_l| rho^l`` among the coefficients above round-off,
    ``rho`` from :func:`_sigmoid_log_rho`), summed like :func:`_tail_terms`; ``L > SIGMOID_MAX_BAND``
    is returned without coefficients."""
    if beta <= 1e-2 * tol:  # sigma(b) constant (to beta / 4 <= 1e-2 tol); potential sigma(b) t
        sb = 1.0 / (1.0 + math.exp(-b))
        k = np.array([sb, 0.0])
        g = np.array([0.0, sb / 3 if d == 3 else sb / 2])
        return 1, 0.0, k, g, -np.array([0.0, d - 1.0]) * g
    log_rho = _sigmoid_log_rho(beta, b)
    target = TAIL_FRACTION * tol
    big = 4 * SIGMOID_MAX_BAND
    N, ev = _degree_weights(d, big)
    with np.errstate(under="ignore"):
        crude = N * (1 + 2 * ev) * np.exp(-np.arange(big + 1) * log_rho)
    crude_tail = np.cumsum(crude[::-1])[::-1]
    guess = int(np.argmax(crude_tail <= target * 1e-3)) if crude_tail[-1] <= target * 1e-3 else big
    if guess > SIGMOID_MAX_BAND:
        return guess, math.inf, None, None, None
    Lc = guess + 16
    M = 2 * (Lc + 16)

    def kernels(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sigma(beta t + b)`` and the Laplacian kernel ``(1 - t^2) H'' - (d - 1) t H'`` of
        ``H = softplus(beta t + b) / beta`` (``Delta_S H(<x, y>)`` in ``x``)."""
        sg = 1.0 / (1.0 + np.exp(-(beta * t + b)))
        return sg, (1 - t * t) * beta * sg * (1 - sg) - (d - 1) * t * sg

    # Coefficients of the values and of the Laplacian by quadrature (errors at round-off of
    # their own size); those of the potential from the values' by the identity (P_{l+1} -
    # P_{l-1})' = (2l + 1) P_l (on S^1: -sin(theta) e^{ik theta} shifts k by one):
    # g_l = (k_{l-1} - k_{l+1}) / (2l + 1) on S^2, (k_{l-1} - k_{l+1}) / (2l) on S^1. Computing g
    # and then l(l + d - 2) g would multiply the coefficients' round-off by l^2.
    if d == 3:
        # ducc0's Gauss-Legendre rule: weights to round-off (numpy's leggauss errs by ~1e-14
        # at these sizes, which the (2l + 1)-weighted sums would amplify)
        t = np.cos(ducc0.misc.GL_thetas(M))
        wq = ducc0.misc.GL_weights(M, 1) / (2 * np.pi)
        S, Lk = kernels(t)
        k, q = np.empty(Lc + 2), np.empty(Lc + 2)
        p0, p1 = np.ones_like(t), t.copy()
        for l in range(Lc + 2):
            if l >= 2:
                p0, p1 = p1, ((2 * l - 1) * t * p1 - (l - 1) * p0) / l
            pl = p0 if l == 0 else p1
            k[l], q[l] = 0.5 * np.dot(wq * S, pl), 0.5 * np.dot(wq * Lk, pl)
        denom = 2 * np.arange(1, Lc + 1) + 1.0
    else:
        S, Lk = kernels(np.cos(2 * np.pi * np.arange(M) / M))
        k = np.fft.rfft(S).real[: Lc + 2] / M
        q = np.fft.rfft(Lk).real[: Lc + 2] / M
        denom = 2 * np.arange(1, Lc + 1, dtype=float)
    g = np.zeros(Lc + 1)
    g[1:] = (k[:Lc] - k[2 : Lc + 2]) / denom
    k, q = k[: Lc + 1], q[: Lc + 1]
    q[0] = 0.0
    lr = np.arange(Lc + 1) * log_rho

    def envelope(f: np.ndarray) -> float:
        ok = np.abs(f) > 1e-13 * np.max(np.abs(f))  # above the quadrature's round-off
        return float(np.max(np.abs(f[ok]) * np.exp(lr[ok]))) if np.any(ok) else 0.0

    N, ev = _degree_weights(d, big)
    with np.errstate(under="ignore"):
        env = N * (envelope(k) + 2 * ev * envelope(g)) * np.exp(-np.arange(big + 1) * log_rho)
    tails = np.concatenate([np.cumsum(env[::-1])[::-1][1:], [0.0]])  # sum_{L < l <= big}
    L = max(int(np.argmax(tails <= target)), 1)
    if tails[L] > target or L > Lc:  # the envelope constant exceeded the guess's margin
        return big, math.inf, None, None, None
    k, g, q = k[: L + 1].copy(), g[: L + 1].copy(), q[: L + 1].copy()
    for a in (k, g, q):
        a.setflags(write=False)
    return L, float(tails[L]), k, g, q


class _Plan(NamedTuple):
    """Band limit, tail, coefficients ``k`` (reference sum) and ``g`` (potential), the factor
    of the field (``e^beta`` for USA) and whether it is normalised (softmax, l2)."""

    L: int
    tail: float
    k: np.ndarray
    g: np.ndarray
    q: np.ndarray
    scale: float
    normalized: bool
    beta: float
    l1: tuple[float, float, float] | None = None
    """sigmoid: ``sum_l N_l |k_l|``, ``sum_l N_l sqrt(l(l + d - 2)) |g_l|``, ``sum_l N_l |q_l|``,
    the scales of the transforms' errors (its coefficients change sign: these exceed the
    largest values, which bound them for the positive multipliers of the exponential kinds)."""


def _plan(model: Any, d: int, tol: float) -> _Plan:
    beta = _beta_eff(model, d)
    if model.attention == "sigmoid":
        L, tail, k, g, q = _sigmoid_plan(beta, float(model.sigmoid_bias), d, float(tol))
        N, ev = _degree_weights(d, L)
        l1 = (float(np.sum(N * np.abs(k))), float(np.sum(N * np.sqrt(ev) * np.abs(g))),
              float(np.sum(N * np.abs(q))))
        return _Plan(L, tail, k, g, q, 1.0, False, beta, l1)
    L, tail = band_limit(beta, d, tol)
    k, g = _multipliers(beta, d, L)
    q = -_degree_weights(d, L)[1] * g  # exact multipliers: no round-off to amplify
    normalized = attention_registry.resolve(model.attention).normalized
    return _Plan(L, tail, k, g, q, 1.0 if normalized else math.exp(beta), normalized, beta)


# -- transforms ---------------------------------------------------------------------------

def _sphere_angles(x: np.ndarray) -> np.ndarray:
    """``(colatitude, longitude)`` of unit vectors (n, 3), accurate at the poles
    (``atan2(rho, z)``, not ``arccos z``, which loses half the digits there)."""
    theta = np.arctan2(np.hypot(x[:, 0], x[:, 1]), x[:, 2])
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    return np.stack([theta, phi], axis=-1)


def _tangent_frame(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``cos theta, sin theta, cos phi, sin phi`` of unit vectors (n, 3), without trigonometry
    (``phi = 0`` on the axis, as :func:`_sphere_angles`)."""
    rho = np.hypot(x[:, 0], x[:, 1])
    on_axis = rho == 0
    safe = np.where(on_axis, 1.0, rho)
    cp = np.where(on_axis, 1.0, x[:, 0] / safe)
    sp = np.where(on_axis, 0.0, x[:, 1] / safe)
    r = np.hypot(rho, x[:, 2])  # 1, up to a Runge-Kutta stage's departure from the sphere
    return x[:, 2] / r, rho / r, cp, sp


def _sums_sphere(points: np.ndarray, nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int) -> tuple[Any, Any, Any]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 3)) and ``Delta G`` at ``points`` (S^2)."""
    same = points is nodes or np.array_equal(points, nodes)
    loc_n = _sphere_angles(nodes)
    loc_p = loc_n if same else _sphere_angles(points)
    L = len(k) - 1
    mu = ducc0.sht.adjoint_synthesis_general(
        map=w[None].astype(float), spin=0, lmax=L, loc=loc_n, epsilon=eps, nthreads=nthreads)[0]
    ls = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])  # degree of each alm
    four_pi = 4 * np.pi
    zlm = (four_pi * k[ls] * mu)[None]
    glm = four_pi * g[ls] * mu
    Z = ducc0.sht.synthesis_general(alm=zlm, spin=0, lmax=L, loc=loc_p, epsilon=eps,
                                    nthreads=nthreads)[0]
    # DERIV1: (d_theta G, d_phi G / sin theta), checked against differences in the tests
    gt, gp = ducc0.sht.synthesis_general(alm=glm[None], spin=1, lmax=L, loc=loc_p, epsilon=eps,
                                         nthreads=nthreads, mode="DERIV1")
    ct, st, cp, sp = _tangent_frame(points)
    grad = np.empty((len(points), 3))
    a = gt * ct
    grad[:, 0] = a * cp - gp * sp
    grad[:, 1] = a * sp + gp * cp
    grad[:, 2] = -gt * st
    lap = None
    if laplacian:
        lap = ducc0.sht.synthesis_general(alm=(four_pi * q[ls] * mu)[None], spin=0, lmax=L,
                                          loc=loc_p, epsilon=eps, nthreads=nthreads)[0]
    return Z, grad, lap


CIRCLE_ONE_THREAD = 20_000
""":func:`_sums_circle` with ``nthreads = 0`` (all) runs its transforms on one thread when the
points and nodes number at most this many together: there the threads' start and join cost
more than they save. Measured (2 cores shared, load ~8, mean of repeated calls of
``_sums_circle`` with the Laplacian, points = nodes): n = 100: 0.86-2.1 ms on all threads,
0.29-0.33 ms on one; n = 1 000: 0.80 / 0.45; n = 4 000: 1.7 / 1.1-1.3; n = 16 000: 3.8-4.7 /
2.5-3.9; n = 65 536: 16-17 / 16 (about even)."""


def _same_points(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold the same points: the same memory seen the same way (no
    pass over the data; ``points[b]`` and ``nodes[b]`` of one array are new views each time),
    else equal values."""
    if a is b:
        return True
    ia, ib = a.__array_interface__, b.__array_interface__
    if (ia["data"], ia["strides"], a.shape, a.dtype) == (ib["data"], ib["strides"], b.shape, b.dtype):
        return True
    return bool(np.array_equal(a, b))


def _sums_circle(points: np.ndarray, nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int) -> tuple[Any, Any, Any]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 2)) and ``Delta G`` at ``points`` (S^1).

    One type-1 NUFFT gives ``mu_k = sum_j w_j e^{-i k theta_j}``; one type-2 NUFFT gives
    ``Z + i G'`` (both real, so one complex transform carries both), and with the Laplacian a
    batch of two (``ntrans = 2``: ``Z + i G'`` and ``G''``), which spreads the points once for
    both. Where ``points`` are the nodes (the particle system, the Lagrangian solver) one plan
    (one sort of the points) serves the type-1 and the type-2 transforms.
    """
    if nthreads == 0 and len(points) + len(nodes) <= CIRCLE_ONE_THREAD:
        nthreads = 1
    tn = np.arctan2(nodes[:, 1], nodes[:, 0])
    same = _same_points(points, nodes)
    tp = tn if same else np.arctan2(points[:, 1], points[:, 0])
    L = len(k) - 1
    N = 2 * L + 2
    freq = np.fft.fftfreq(N, 1.0 / N)
    freq[L + 1] = 0.0  # the Nyquist slot stays empty
    a = np.minimum(np.abs(freq).astype(int), L)
    kk, gg, qq = k[a], g[a], q[a]
    kk[L + 1] = gg[L + 1] = qq[L + 1] = 0.0
    plan = ducc0.nufft.plan(nu2u=False, coord=tp[:, None], grid_shape=(N,), epsilon=eps,
                            nthreads=nthreads, fft_order=True)
    if same:  # mu_k = sum_j w_j e^{-i k theta_j}, on the same plan
        mu = plan.nu2u(points=w.astype(complex), forward=True)
    else:
        mu = ducc0.nufft.nu2u(points=w.astype(complex), coord=tn[:, None], forward=True,
                              epsilon=eps, nthreads=nthreads, out=np.empty(N, complex),
                              fft_order=True)
    c1 = (kk + 1j * (1j * freq) * gg) * mu  # Z + i G'
    if laplacian:
        v1, v2 = plan.u2nu(grid=np.stack([c1, qq * mu]), forward=False)
        lap = v2.real
    else:
        v1, lap = plan.u2nu(grid=c1, forward=False), None
    # d/dtheta along (-y, x) / r: r = 1 up to a stage's departure from the circle (sqrt of the
    # sum of squares: near 1, no overflow to guard against, 5-10 times cheaper than hypot)
    x0, x1 = points[:, 0], points[:, 1]
    dG = v1.imag / np.sqrt(x0 * x0 + x1 * x1)
    grad = np.empty((len(points), 2))
    np.multiply(dG, points[:, 1], out=grad[:, 0])
    np.negative(grad[:, 0], out=grad[:, 0])
    np.multiply(dG, points[:, 0], out=grad[:, 1])
    return v1.real, grad, lap


def zonal_sums(model: Any, x: np.ndarray, weights: np.ndarray, *,
               tol: float = DEFAULT_TOL) -> np.ndarray:
    """The scaled zonal sums ``sum_j w_j e^{beta (<x_i, x_j> - 1)} = e^{-beta} Z_mu(x_i)`` at
    the nodes ``x`` (B, n, d) themselves, ``d`` 2 or 3 (``weights`` (B, n)): the adjoint
    transform of the measure, the Funk–Hecke multipliers and the synthesis at the nodes (module
    docstring), with the coefficients to ``max(tol / 8, NUFFT_EPS_MIN)``. ``(B, n)``; no
    validation (SA or USA, ``Q = K = I``, ``beta > 0``)."""
    B, n, d = x.shape
    plan = _plan(model, d, tol)
    eps = max(tol / 8, NUFFT_EPS_MIN)
    sums = _sums_sphere if d == 3 else _sums_circle
    out = np.empty((B, n))
    for b in range(B):
        out[b] = sums(x[b], x[b], np.asarray(weights[b], dtype=float), plan.k, plan.g, plan.q,
                      eps, False, 0)[0]
    return out


# -- the field ----------------------------------------------------------------------------

def fast_field(
    model: Any,
    points: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray | None,
    *,
    divergence: bool,
    tol: float = DEFAULT_TOL,
    nthreads: int = 0,
    direct: Any = None,
) -> tuple[np.ndarray, np.ndarray | None, FastSettings]:
    """The tangent field ``P_x F`` and its surface divergence at ``points`` (B, n, d) of
    ``sum_j w_j delta_{nodes_j}`` (nodes (B, m, d), weights (B, m) or ``None``: ``1/m``),
    by fast summation (module docstring). No validation (the callers validate; the model must
    pass :func:`fast_reason`).

    Args:
        divergence: also return ``div_S``.
        tol: relative accuracy per point (module docstring).
        nthreads: threads of ducc0 (0: all).
        direct: ``direct(points_subset (1, k, d), b) -> (velocity, divergence or None)`` for
            batch item ``b``, the exact field used at the points whose estimate exceeds
            ``tol``; ``None``: no correction (the estimate is still reported).

    Returns:
        ``(velocity, divergence or None, settings)``.
    """
    B, n, d = points.shape
    plan = _plan(model, d, tol)
    beta, normalized, scale, L = plan.beta, plan.normalized, plan.scale, plan.L
    sign = float(_scalar_multiple(model.matrices(d)[0][2]))  # type: ignore[arg-type]
    eps = max(tol * EPS_FRACTION, NUFFT_EPS_MIN)
    sums = _sums_sphere if d == 3 else _sums_circle
    cz, cg, cl = NUFFT_ERROR
    ref_div = 4 * beta + d - 1  # |div| <= (4 beta + d - 1) x the velocity's scale (docs)
    vel = np.empty(points.shape)
    div = np.empty((B, n)) if divergence else None
    worst, corrected = 0.0, 0
    m = nodes.shape[1]
    for b in range(B):
        w = np.full(m, 1.0 / m) if weights is None else np.asarray(weights[b], dtype=float)
        Z, grad, lap = sums(points[b], nodes[b], w, plan.k, plan.g, plan.q, eps, divergence,
                            nthreads)
        if plan.l1 is None:
            zmax = float(np.max(Z))
            dz, dg, dl = (plan.tail + c * eps * zmax for c in (cz, cg, cl * L * L))
        else:
            dz, dg, dl = (plan.tail + c * eps * n1 for c, n1 in zip(SIGMOID_NUFFT_ERROR, plan.l1))
        zpos = np.maximum(Z - dz, 1e-300)  # a lower bound of the exact Z
        if normalized:
            v = grad / Z[:, None]
            speed = np.sqrt(np.sum(v * v, axis=-1))
            est = (dg + speed * dz) / zpos  # relative to the bound |F| <= 1
            vel[b] = sign * v
            if divergence:
                dv = lap / Z - beta * speed**2
                div[b] = sign * dv  # type: ignore[index]
                est = np.maximum(est, (dl + np.abs(lap / Z) * dz + 2 * beta * speed * est * zpos)
                                 / zpos / ref_div)
        else:  # relative to e^beta Z, the sum of the terms' magnitudes
            vel[b] = sign * scale * grad
            est = dg / zpos
            if divergence:
                div[b] = sign * scale * lap  # type: ignore[index]
                est = np.maximum(est, dl / zpos / ref_div)
        bad = np.nonzero(est > tol)[0] if direct is not None else np.array([], dtype=int)
        if bad.size:
            vb, db = direct(points[b][bad][None], b)
            vel[b, bad] = vb[0]
            if divergence:
                div[b, bad] = db[0]  # type: ignore[index]
            corrected += int(bad.size)
        good = np.ones(n, dtype=bool)
        good[bad] = False
        if np.any(good):
            worst = max(worst, float(np.max(est[good])))
    return vel, div, FastSettings(tol=tol, band_limit=L, epsilon=eps, tail=plan.tail,
                                  error_estimate=worst, corrected=corrected)


# -- the energy ----------------------------------------------------------------------------

def energy(model: Any, x: Any, weights: Any = None, *, tol: float = DEFAULT_TOL,
           nthreads: int = 0) -> np.ndarray:
    """The interaction energy ``E_beta[mu] = (1/(2 beta)) sum_ij w_i w_j (e^{beta <x_i, x_j>} -
    1)`` (docs/equations.md section 3, the ``-1`` convention of (3.5)) of ``mu = sum_j w_j
    delta_{x_j}`` on ``S^1`` or ``S^2``, from the coefficients of ``mu`` alone (Parseval):
    ``O(n + L^2 log L)`` against the direct ``O(n^2)`` of
    :func:`meanfield.kernels.interaction.weighted_energy`.

    ``E = c / 2 + (e^beta / 2) sum_{l >= 1} g_l |S^{d-1}| sum_m |mu_lm|^2`` with ``c`` =
    :func:`meanfield.special.constant_mode_energy_factor` (the ``l = 0`` term minus 1, without
    cancellation) and ``g_l = lambda_l / (beta |S^{d-1}|) e^{-beta}``, finite as ``beta -> 0``.
    The error is at most about ``2 eps e^beta`` (the coefficients' error ``eps`` enters twice,
    and ``sum_{l >= 1} N_l g_l <= 1``), ``+inf`` where ``e^beta`` overflows.

    Args:
        model: softmax or unnormalized attention, ``Q = K = I`` (the energy of the flow; the
            value sign does not enter it).
        x: unit vectors ``(n, d)`` or ``(B, n, d)``, ``d`` 2 or 3 (not validated).
        weights: ``(n,)`` or ``(B, n)`` summing to 1; ``None``: ``1/n`` (the particle energy).

    Returns:
        ``(B,)`` or a 0-d array.
    """
    from meanfield.special import constant_mode_energy_factor, exp_beta

    xa = np.asarray(x, dtype=float)
    xb = xa if xa.ndim == 3 else xa[None]
    B, n, d = xb.shape
    if (d not in (2, 3) or model.attention not in ("softmax", "unnormalized")
            or not model.is_identity or model.causal):
        msg = ("energy: the fast energy needs d = 2 or 3 and softmax or unnormalized attention "
               f"with Q = K = V = I, no mask; got d={d}, attention={model.attention!r}")
        raise ValueError(msg)
    w = (np.full((B, n), 1.0 / n) if weights is None
         else np.broadcast_to(np.asarray(weights, dtype=float), (B, n)))
    beta = float(model.beta)
    L, _ = band_limit(beta, d, tol)
    eps = max(tol / 8, NUFFT_EPS_MIN)
    g = _multipliers(beta, d, L)[1]
    const = 0.5 * constant_mode_energy_factor(beta, d)
    out = np.empty(B)
    for b in range(B):
        if d == 3:
            mu = ducc0.sht.adjoint_synthesis_general(
                map=np.ascontiguousarray(w[b])[None], spin=0, lmax=L, loc=_sphere_angles(xb[b]),
                epsilon=eps, nthreads=nthreads)[0]
            ls = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])
            power = np.abs(mu) ** 2 * np.where(np.arange(len(mu)) <= L, 1.0, 2.0)  # m = 0 first
            s = 4 * np.pi * float(np.sum(g[ls] * power))
        else:
            th = np.arctan2(xb[b][:, 1], xb[b][:, 0])
            mu = ducc0.nufft.nu2u(points=w[b].astype(complex), coord=th[:, None], forward=True,
                                  epsilon=eps, nthreads=nthreads, out=np.empty(2 * L + 2, complex),
                                  fft_order=True)[1 : L + 1]
            s = 2 * float(np.sum(g[1:] * np.abs(mu) ** 2))
        scale = exp_beta(beta)
        out[b] = const + 0.5 * scale * s if s > 0 else const
    return out if xa.ndim == 3 else out[0]


__all__ = [
    "CROSSOVER",
    "CROSSOVER_GENERAL",
    "DEFAULT_TOL",
    "FAST_KINDS",
    "GENERAL_KINDS",
    "METHODS",
    "FastSettings",
    "band_limit",
    "check_tol",
    "energy",
    "fast_field",
    "fast_reason",
    "general_reason",
    "merge_settings",
    "use_fast",
    "zonal_reason",
    "zonal_sums",
]
