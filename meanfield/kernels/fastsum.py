r"""Fast summation of the attention field on ``S^1`` and ``S^2`` (docs/particles.md section
"Fast field"; docs/equations.md sections 2-3).

.. autosummary::
   FIELD_METHODS
   PROFILES
   FastSettings
   FastRoute
   fast_route
   choose_fast
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
sum has an absolute error: the expansion's (truncation, and for sigmoid its coefficients'
quadrature; measured per band limit against the kernel in extended precision,
:func:`_kernel_errors`) plus the nonuniform transforms' (about uniform over the sphere). The
latter is estimated by the same sums in a second, rotated frame (:func:`fast_sums`,
:func:`_paired_estimate`, :data:`PAIR_SAFETY`): a second draw of the transforms' error, whose
difference from the first samples it. The tolerance is relative, per point, to the scale that
bounds the direct sum's own rounding error: the sum of the magnitudes of its terms (SA: ``|F|
<= 1``; USA: ``e^beta Z(x)``; the divergence: ``4 beta + d - 1`` times that). The relative
error at a point is then about ``delta / Z(x)`` (``delta ~ 1e-15``): tiny where the point sees
mass, large only far from all of it. Every point whose estimate exceeds the tolerance is
summed again by re-centred expansions per cap (:mod:`meanfield.kernels.fastsum_local`,
``FastSettings.recentred``) or, where those cannot vouch for it, by the direct sum
(``FastSettings.corrected``), so the result meets the tolerance at every point; the default
:data:`FIELD_TOL` (``1e-10``) is what the sums reach at
fast cost on the states the dynamics produce.

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
from meanfield.kernels.fastsum_frames import (
    NUFFT_EPS_MIN,
    _Errors,
    _estimate,
    _paired_estimate,
    _probes,
    _rotation,
    _sample_indices,
    _sphere_angles,
    _Sums,
    node_angles,
)
from meanfield.kernels.fastsum_local import LOCAL_MIN_TARGETS, direct_is_cheaper, local_sums
from meanfield.special import check_exp_beta, kernel_multipliers_over_beta, scaled_kernel_multipliers

FIELD_METHODS = ("auto", "direct", "fast")
"""``direct``: the tiled ``O(n m)`` sum (the reference); ``fast``: this module (``ValueError``
naming the reason where it does not apply); ``auto``: fast where it applies and pays
(:func:`use_fast`), direct otherwise."""

DEFAULT_TOL = 1e-12
"""Requested relative accuracy of the energy and of the zonal sums (:func:`energy`,
:func:`zonal_sums`): the coefficients of the measure alone, no per-point division."""

FIELD_TOL = 1e-10
"""The field's default relative accuracy per point (velocity and divergence, the scales of
the module docstring): what the fast sums reach at fast cost on the states the dynamics
produce. Their error is an absolute ``~1e-14`` (the transforms' round-off, measured by the
paired estimate) over ``Z(x)``: ``1e-10`` holds wherever ``Z(x) >= 4e-4`` (scaled: the mass
within ``~1/sqrt(beta)`` of the point), i.e. every token of a particle system of up to ``10^3``
tokens, every point of a measure with a uniform background of mass ``0.2`` up to ``beta ~
100``; the points below it go to the direct sum."""

EPS_FRACTION = 1e-4
"""The field's transforms run at ``max(tol EPS_FRACTION, NUFFT_EPS_MIN)``: the error relative
to ``Z(x)`` is the transforms' absolute error over ``Z(x)``, so they must be far more accurate
than ``tol`` where ``Z(x)`` is small; the cost grows only like ``log(1/eps)``. At the default
``tol = 1e-10`` the floor applies."""

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
        estimator: how the error was estimated: ``"rotated pair"`` (the zonal kernels: the
            same sums in a second, rotated frame, :func:`_paired_estimate`) or ``"a priori"``
            (the transforms' requested accuracy times measured constants).
        recentred: points whose global estimate exceeded ``tol``, computed instead by the
            re-centred expansions of :mod:`meanfield.kernels.fastsum_local`.
    """

    tol: float
    band_limit: int
    epsilon: float
    tail: float
    error_estimate: float
    corrected: int
    chebyshev: int = 0
    estimator: str = "a priori"
    recentred: int = 0

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
                        recentred=old.recentred + new.recentred,
                        chebyshev=max(old.chebyshev, new.chebyshev),
                        estimator=" + ".join(sorted({*old.estimator.split(" + "),
                                                     *new.estimator.split(" + ")})))


# -- which models and inputs ------------------------------------------------------------

def _scalar_multiple(m: np.ndarray) -> float | None:
    """``c`` when ``m = c I``, else ``None``."""
    c = float(m[0, 0])
    return c if np.array_equal(m, c * np.eye(m.shape[0])) else None


def zonal_kinds() -> tuple[str, ...]:
    """The registered kinds with a zonal fast path: a :data:`PROFILES` entry
    (:attr:`meanfield.attention.AttentionKind.fast_profile`) and rows normalised by their sum or
    a count (a doubly stochastic kind is not a zonal sum); those with a key bias (l2) only with
    ``Q = K = I``, where the bias is the same for every key on the sphere."""
    return tuple(k.name for k in attention_registry.kinds()
                 if k.fast_profile in PROFILES and k.normalization != "doubly")


def general_kinds() -> tuple[str, ...]:
    """The registered kinds with the general fast path (any ``Q, K, V``,
    :mod:`meanfield.kernels.fastsum_general`): those whose profile is exponential."""
    return tuple(k.name for k in attention_registry.kinds()
                 if k.fast_profile in PROFILES and PROFILES[k.fast_profile].general)


def general_reason(model: Any, d: int, kind: Any = None) -> str | None:
    """Why the general fast path does not apply to ``model`` in dimension ``d`` (``S^1``,
    ``S^2`` already checked by the caller), or ``None``."""
    kind = attention_registry.resolve(model.attention) if kind is None else kind
    if kind.name not in general_kinds():
        return (f"attention={model.attention!r}: with Q^T K not a multiple of the identity "
                f"the fast field covers {general_kinds()} (a profile that is not an "
                "exponential stays direct)")
    if model.feedforward is not None:
        return "feedforward: the fast field has no feed-forward term; it stays direct"
    if kind.unshifted:  # e^S / n: e^beta does not cancel
        for Q, K, _ in model.matrices(d):
            try:
                check_exp_beta(float(model.beta) * float(np.linalg.norm(Q.T @ K, 2)),
                               "unnormalized attention (beta |Q^T K|)")
            except ValueError as err:
                return str(err)
    return None


class FastRoute(NamedTuple):
    """Which fast path a model takes (:func:`fast_route`), decided once per call.

    ``path``: ``"zonal"`` (:func:`fast_field`), ``"general"``
    (:mod:`meanfield.kernels.fastsum_general`) or ``None`` (direct, ``reason`` says why);
    ``auto``: whether ``method="auto"`` may take it (a crossover is measured for it)."""

    path: str | None
    reason: str | None
    auto: bool = False


def fast_route(model: Any, d: int, geometry: str = "sphere", *, causal_labels: bool = False,
               backend_numpy: bool = True) -> FastRoute:
    """The fast path of ``model`` in dimension ``d`` (:func:`fast_reason` states the rules);
    the attention kind's entry decides (its profile, normalisation and key bias)."""
    if geometry != "sphere":
        return FastRoute(None, f"geometry={geometry!r}: the fast field is on the sphere only "
                               "(R^d stays direct)")
    if d not in (2, 3):
        return FastRoute(None, f"d={d}: the fast field is on S^1 and S^2 (d = 2, 3); S^(d-1) "
                               "for d >= 4 stays direct (no nonuniform harmonic transform there)")
    if not backend_numpy:
        return FastRoute(None, "a torch tensor: the fast field runs on NumPy (ducc0); torch "
                               "stays direct")
    if model.feedforward is not None:
        return FastRoute(None, "feedforward: the fast field has no feed-forward term; it stays "
                               "direct")
    kind = attention_registry.resolve(model.attention)
    zonal = zonal_reason(model, d, causal_labels=causal_labels, kind=kind)
    if zonal is None:
        return FastRoute("zonal", None, PROFILES[str(kind.fast_profile)].auto)
    general = general_reason(model, d, kind)
    if general is None:
        auto = kind.normalization != "doubly" and not (model.causal or causal_labels)
        return FastRoute("general", None, auto and d in CROSSOVER_GENERAL)
    if kind.fast_profile not in PROFILES or PROFILES[kind.fast_profile].general:
        return FastRoute(None, general)
    return FastRoute(None, f"attention={kind.name!r}: {zonal}; {kind.name} has only the zonal "
                           "path (its profile is not an exponential)")


def fast_reason(model: Any, d: int, geometry: str = "sphere", *, causal_labels: bool = False,
                backend_numpy: bool = True) -> str | None:
    """Why the fast field does not apply (a sentence naming the field), or ``None``.

    It applies on ``S^1`` and ``S^2`` (``geometry="sphere"``, ``d`` in 2, 3) to NumPy arrays
    without a feed-forward term, through one of two paths:

    * zonal (:func:`fast_field`): one head, ``Q^T K = c I`` (``c >= 0``), ``V = v I``, no
      causal mask; the kinds of :func:`zonal_kinds` (softmax, unnormalized, sigmoid up to
      its profile's largest band limit, l2 with ``Q = K = I``);
    * general (:mod:`meanfield.kernels.fastsum_general`): any ``Q, K, V``, any number of heads, the
      causal mask (labels or index), the kinds of :func:`general_kinds` (softmax,
      unnormalized, l2 and sinkhorn).

    What stays direct: ``R^d`` (no harmonic transform there), ``S^{d-1}`` for ``d >= 4`` (no
    nonuniform harmonic transform in ducc0), sigmoid unless zonal (its profile is not an
    exponential), the feed-forward term, torch tensors.
    """
    return fast_route(model, d, geometry, causal_labels=causal_labels,
                      backend_numpy=backend_numpy).reason


def zonal_reason(model: Any, d: int, *, causal_labels: bool = False,
                 kind: Any = None) -> str | None:
    """Why the zonal path (:func:`fast_field`) does not apply, or ``None`` (``d`` in 2, 3,
    NumPy, no feed-forward term: checked by :func:`fast_route`)."""
    kind = attention_registry.resolve(model.attention) if kind is None else kind
    if kind.name not in zonal_kinds():
        return f"attention={model.attention!r}: the zonal fast field covers {zonal_kinds()}"
    if model.heads is not None and len(model.heads) > 1:
        return f"heads: {len(model.heads)} heads; the zonal fast field takes one head"
    if model.causal or causal_labels:
        return "causal=True: masked attention is not a zonal sum"
    Q, K, V = model.matrices(d)[0]
    if kind.key_bias is not None:
        if not (np.array_equal(Q, np.eye(d)) and np.array_equal(K, np.eye(d))):
            return (f"attention={kind.name!r} with Q, K not the identity: its key bias makes "
                    "the kernel not zonal on the sphere")
    else:
        c = _scalar_multiple(Q.T @ K)
        if c is None or c < 0:
            return "Q, K: the zonal fast field needs Q^T K = c I with c >= 0"
    if _scalar_multiple(V) is None:
        return "V: the zonal fast field needs V = v I (a scalar multiple of the identity)"
    if kind.unshifted:  # e^S / n: e^beta does not cancel
        try:
            check_exp_beta(_beta_eff(model, d), "unnormalized attention")
        except ValueError as err:
            return str(err)
    profile = PROFILES[str(kind.fast_profile)]
    if profile.max_band is not None:
        L = profile.plan(_beta_eff(model, d), _bias(model, kind), d, FIELD_BAND_TOL)[0]
        if L > profile.max_band:
            return (f"attention={kind.name!r} with beta={model.beta:g}: its expansion needs "
                    f"band limit {L} > {profile.max_band}; it stays direct")
    return None


def _beta_eff(model: Any, d: int) -> float:
    """``beta c`` for ``Q^T K = c I`` (zonal path; l2: ``Q = K = I``, ``c = 1``)."""
    Q, K, _ = model.matrices(d)[0]
    return float(model.beta) * float(_scalar_multiple(Q.T @ K))  # type: ignore[arg-type]


def _bias(model: Any, kind: Any) -> float:
    """The profile's bias ``b``: the model's value of the kind's parameter
    :attr:`meanfield.attention.Transform.bias` (0 without)."""
    t = kind.transform
    return 0.0 if t is None or t.bias is None else float(model.parameters[t.bias])


def field_tol_of(field_tol: Any, fast_tol: Any, where: str) -> float:
    """The fast field's tolerance a front door was given, checked (:func:`check_tol`):
    ``field_tol``, or ``fast_tol``, its old spelling, with a ``FutureWarning`` that says so
    (``where``: the function's name)."""
    if fast_tol is None:
        return check_tol(field_tol, "field_tol")
    import warnings

    warnings.warn(f"{where}: fast_tol is the old spelling of field_tol (the same tolerance "
                  "everywhere: particles.simulate, solve_lagrangian); use field_tol=",
                  FutureWarning, stacklevel=3)
    return check_tol(fast_tol, "fast_tol")


def check_tol(tol: Any, name: str = "field_tol") -> float:
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


def choose_fast(method: str, model: Any, d: int, geometry: str, n_points: int, n_nodes: int, *,
                causal_labels: bool = False, backend_numpy: bool = True) -> FastRoute | None:
    """The choice point of ``method`` (:data:`FIELD_METHODS`): the :class:`FastRoute` to take, or
    ``None`` for the direct sum.

    ``fast`` where it does not apply raises ``ValueError`` with :func:`fast_reason`;
    ``auto`` takes it where it applies, :attr:`FastRoute.auto` holds and ``n_points * n_nodes
    >= CROSSOVER[d]^2`` (zonal path) or ``>= CROSSOVER_GENERAL[d]^2`` (general path); sigmoid,
    Sinkhorn and the causal mask only with ``fast`` (no crossover measured for them).
    """
    if method not in FIELD_METHODS:
        msg = f"method must be one of {FIELD_METHODS}, got {method!r}"
        raise ValueError(msg)
    if method == "direct":
        return None
    route = fast_route(model, d, geometry, causal_labels=causal_labels,
                       backend_numpy=backend_numpy)
    if method == "fast":
        if route.reason is not None:
            msg = f"method='fast' does not apply: {route.reason}"
            raise ValueError(msg)
        return route
    if route.path is None or not route.auto:
        return None
    cross = (CROSSOVER if route.path == "zonal" else CROSSOVER_GENERAL)[d]
    return route if n_points * n_nodes >= cross**2 else None


def use_fast(method: str, model: Any, d: int, geometry: str, n_points: int, n_nodes: int, *,
             causal_labels: bool = False, backend_numpy: bool = True) -> bool:
    """Whether :func:`choose_fast` takes the fast field."""
    return choose_fast(method, model, d, geometry, n_points, n_nodes, causal_labels=causal_labels,
                       backend_numpy=backend_numpy) is not None


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
def _gauss_legendre_extended(M: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``M``-point Gauss-Legendre rule on ``[-1, 1]`` in ``np.longdouble``: ducc0's nodes
    refined by two Newton steps on ``P_M`` (three-term recurrence in extended precision),
    weights ``2 / ((1 - t^2) P_M'(t)^2)``; where ``longdouble`` is float64, ducc0's rule."""
    t = np.cos(ducc0.misc.GL_thetas(M)).astype(np.longdouble)
    for newton in (True, True, False):  # two refinements, then the weights at the nodes
        p0, p1 = np.ones_like(t), t.copy()  # P_{n-1}, P_n up to n = M
        for n in range(2, M + 1):
            p0, p1 = p1, ((2 * n - 1) * t * p1 - (n - 1) * p0) / n
        dp = M * (t * p1 - p0) / (t * t - 1)  # P_M'
        if newton:
            t = t - p1 / dp
    return t, 2 / ((1 - t * t) * dp * dp)


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
        # the Gauss-Legendre rule and the sums in extended precision (x87 long double where
        # the platform has it), rounded once at the end: in float64 each coefficient errs by
        # ~beta 2^-53 (the rule's rounded nodes), which the (2l + 1)-weighted series adds up
        # to ~L^2 beta 2^-53 (measured at beta = 30: the series' error 1.9e-12 in float64)
        t, wq = _gauss_legendre_extended(M)
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
    kernel: tuple[float, ...] = (0.0,) * 6
    """The expansion's measured error in the value, gradient and Laplacian kernels, relative
    and absolute parts (:func:`_kernel_errors`)."""
    profile: str = "exponential"
    """The :data:`PROFILES` key."""


FIELD_BAND_TOL = 1e-14
"""The field's band limit is that of ``min(tol, FIELD_BAND_TOL)``: a truncation tail below
``TAIL_FRACTION * 1e-14 = 1e-18``, under the transforms' round-off (``~1e-17`` in the scaled
sums) even where ``Z(x)`` is small; the tail bound would otherwise dominate the estimate at
``tol = 1e-10`` (a few more degrees: ``L`` 151 to 160 at ``beta = 300``)."""


def _exponential_plan(beta: float, b: float, d: int, band_tol: float
                      ) -> tuple[int, float, np.ndarray, np.ndarray, np.ndarray]:
    """``(L, tail, k, g, q)`` of ``e^{beta (t - 1)}`` (:func:`band_limit`,
    :func:`_multipliers`; ``b`` unused): exact multipliers, no round-off to amplify."""
    L, tail = band_limit(beta, d, band_tol)
    k, g = _multipliers(beta, d, L)
    return L, tail, k, g, -_degree_weights(d, L)[1] * g


def _exponential_values(t: np.ndarray, beta: float, b: float, d: int) -> tuple[Any, Any]:
    """``K(t) = e^{beta (t - 1)}`` and its Laplacian kernel ``Q`` (any float type)."""
    K = np.exp(beta * (t - 1))
    return K, K * (beta * (1 - t * t) - (d - 1) * t)


def _sigmoid_values(t: np.ndarray, beta: float, b: float, d: int) -> tuple[Any, Any]:
    """``K(t) = sigma(beta t + b)`` and its Laplacian kernel ``Q`` (any float type)."""
    K = 1.0 / (1.0 + np.exp(-(beta * t + b)))
    return K, (1 - t * t) * beta * K * (1 - K) - (d - 1) * t * K


class Profile(NamedTuple):
    """A zonal profile the fast field expands in harmonics: the kernel ``K(t) = phi(beta t +
    b)`` of the attention kinds whose entry names it
    (:attr:`meanfield.attention.AttentionKind.fast_profile`)."""

    plan: Any
    """``plan(beta, b, d, band_tol) -> (L, tail, k, g, q)``: band limit, truncation tail and
    the coefficients of ``K``, of its potential ``H`` (``H' = K``) and of ``Delta H``."""
    values: Any
    """``values(t, beta, b, d) -> (K, Q)`` in any float type (:func:`_kernel_errors` measures
    the series against them in extended precision)."""
    max_band: int | None = None
    """The largest band limit taken (``None``: any); beyond it the kind stays direct."""
    auto: bool = True
    """Whether ``method="auto"`` may take it (a crossover is measured, :data:`CROSSOVER`)."""
    general: bool = False
    """Whether the general path (any ``Q, K, V``) covers it: the exponential kernels."""
    scaled: bool = False
    """Whether the sums are computed scaled by ``e^{-beta}`` (the exponential kernels: no
    overflow); the count-normalised kinds multiply it back."""
    signed: bool = False
    """Whether its coefficients change sign: the a priori estimate's scales are their ``l1``
    norms (:attr:`_Plan.l1`), not the largest value; no re-centred expansion
    (:mod:`meanfield.kernels.fastsum_local` needs ``e^{beta <x, y>}``)."""


PROFILES: dict[str, Profile] = {
    "exponential": Profile(_exponential_plan, _exponential_values, general=True, scaled=True),
    # auto=False: its error estimate (l1 norms of sign-changing coefficients) may send most
    # points back to the direct sum (at beta = 9, every point of some test sets), so no
    # crossover holds for it
    "logistic": Profile(_sigmoid_plan, _sigmoid_values, max_band=SIGMOID_MAX_BAND, auto=False,
                        signed=True),
}
"""The zonal profiles, by the name an attention kind's entry gives
(:attr:`meanfield.attention.Transform.profile`; ``"exponential"`` for the kinds without a
transform): softmax, unnormalized and l2 have ``e^{beta t}`` (l2 with ``Q = K = I``: on the
sphere ``|x - y|^2 = 2 - 2 <x, y>``, its softmax weights are those of SA); sigmoid has the
Legendre (``S^2``) or Fourier (``S^1``) coefficients of ``sigma(beta t + b)`` and of its
antiderivative, computed by quadrature (:func:`_sigmoid_plan`)."""


def _plan(model: Any, d: int, tol: float) -> _Plan:
    kind = attention_registry.resolve(model.attention)
    name = str(kind.fast_profile)  # a zonal kind (zonal_reason): a PROFILES key
    profile = PROFILES[name]
    beta, b = _beta_eff(model, d), _bias(model, kind)
    band_tol = min(float(tol), FIELD_BAND_TOL)
    L, tail, k, g, q = profile.plan(beta, b, d, band_tol)
    l1 = None
    if profile.signed:
        N, ev = _degree_weights(d, L)
        l1 = (float(np.sum(N * np.abs(k))), float(np.sum(N * np.sqrt(ev) * np.abs(g))),
              float(np.sum(N * np.abs(q))))
    kernel = _kernel_errors(name, beta, b, d, band_tol)
    scale = math.exp(beta) if profile.scaled and not kind.normalized else 1.0
    return _Plan(L, tail, k, g, q, scale, kind.normalized and profile.scaled, beta, l1, kernel,
                 name)


KERNEL_SAMPLES = 8
""":func:`_kernel_errors` samples ``t`` at ``KERNEL_SAMPLES (L + 1)`` Chebyshev points: the
error of the truncated series is a polynomial of degree ``L`` plus a tail far below it, whose
maximum such a grid finds to a few per cent; the estimate doubles it."""


KERNEL_RELATIVE = 8 * 2.0**-52
""":func:`_kernel_errors`' relative part: eight units of round-off of the kernel's value
(each multiplier is accurate to a few units; where the series' positive terms do not
cancel, near ``t = 1``, their errors add up relative to the value)."""


@functools.lru_cache(maxsize=64)
def _kernel_errors(profile: str, beta: float, bias: float, d: int,
                   band_tol: float) -> tuple[float, ...]:
    """The measured error of the kernel's expansion as ``(a_K, b_K, a_G, b_G, a_Q, b_Q)``:
    ``e(t) <= a K(t) + b`` on ``[-1, 1]`` for each of ``|K_L - K|`` (the value),
    ``|H_L' - H'| sqrt(1 - t^2)`` (the gradient of the potential)
    and ``|Q_L - Q|`` (its Laplacian kernel ``(1 - t^2) H'' - (d - 1) t H'``), so that at every
    point of every measure ``|Z_L - Z| <= a_K Z + b_K`` (``K >= 0``, ``sum w = 1``), and the
    same for the gradient and the Laplacian (``Q`` against ``K``); ``a`` is
    :data:`KERNEL_RELATIVE`, ``b`` the largest excess of the error over ``a K``, both
    doubled. ``K_L``,
    ``H_L``, ``Q_L`` are the series the transforms sum (Legendre on ``S^2``, Chebyshev in ``t =
    cos theta`` on ``S^1``). This covers the truncation and the coefficients' own round-off
    (sigmoid's quadrature), which are the same in both frames of the paired estimate; scaled
    as the sums (``e^{beta (t - 1)}`` for the exponential kinds)."""
    from numpy.polynomial import chebyshev, legendre

    prof = PROFILES[profile]
    L, _, k, g, q = prof.plan(beta, bias, d, band_tol)
    M = KERNEL_SAMPLES * (L + 1)
    # in extended precision (x87 long double where the platform has it): the error measured is
    # the float64 series' own, not that of evaluating it
    t = np.cos(np.pi * np.arange(M + 1, dtype=np.longdouble) / M)
    k, g, q = (np.asarray(c, dtype=np.longdouble) for c in (k, g, q))
    K, Q = prof.values(t, beta, bias, d)
    dH = K  # H' is the kernel itself for both profiles
    if d == 3:
        N = 2 * np.arange(L + 1, dtype=np.longdouble) + 1
        val, der = legendre.legval, lambda c: legendre.legval(t, legendre.legder(c))
    else:
        N = np.where(np.arange(L + 1) > 0, 2.0, 1.0).astype(np.longdouble)
        val, der = chebyshev.chebval, lambda c: chebyshev.chebval(t, chebyshev.chebder(c))
    cs = [N * k, N * g, N * q]
    errs = (np.abs(val(t, cs[0]) - K), np.abs(der(cs[1]) - dH) * np.sqrt(np.maximum(1 - t * t, 0)),
            np.abs(val(t, cs[2]) - Q))
    out: list[float] = []
    for e, ref in zip(errs, (np.abs(K), np.abs(dH), np.abs(K))):
        a = KERNEL_RELATIVE
        b = float(np.max(np.maximum(e - a * ref, 0.0)))
        out.extend((2 * a, 2 * b))
    return tuple(out)  # type: ignore[return-value]


# -- transforms ---------------------------------------------------------------------------

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


def _sphere_sums(targets: list[np.ndarray], nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int, node_angles: np.ndarray | None = None) -> list[tuple[Any, Any, Any]]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 3)) and ``Delta G`` at each point set of
    ``targets`` (S^2), from one adjoint transform of the measure at the nodes
    (``node_angles``: their :func:`_sphere_angles`, if the caller has them)."""
    loc_n = _sphere_angles(nodes) if node_angles is None else node_angles
    L = len(k) - 1
    mu = ducc0.sht.adjoint_synthesis_general(
        map=w[None].astype(float), spin=0, lmax=L, loc=loc_n, epsilon=eps, nthreads=nthreads)[0]
    ls = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])  # degree of each alm
    four_pi = 4 * np.pi
    zlm = (four_pi * k[ls] * mu)[None]
    glm = (four_pi * g[ls] * mu)[None]
    qlm = (four_pi * q[ls] * mu)[None] if laplacian else None
    out = []
    for points in targets:
        loc_p = loc_n if (points is nodes or np.array_equal(points, nodes)) else _sphere_angles(points)
        Z = ducc0.sht.synthesis_general(alm=zlm, spin=0, lmax=L, loc=loc_p, epsilon=eps,
                                        nthreads=nthreads)[0]
        # DERIV1: (d_theta G, d_phi G / sin theta), checked against differences in the tests
        gt, gp = ducc0.sht.synthesis_general(alm=glm, spin=1, lmax=L, loc=loc_p, epsilon=eps,
                                             nthreads=nthreads, mode="DERIV1")
        ct, st, cp, sp = _tangent_frame(points)
        grad = np.empty((len(points), 3))
        a = gt * ct
        grad[:, 0] = a * cp - gp * sp
        grad[:, 1] = a * sp + gp * cp
        grad[:, 2] = -gt * st
        lap = None
        if qlm is not None:
            lap = ducc0.sht.synthesis_general(alm=qlm, spin=0, lmax=L, loc=loc_p, epsilon=eps,
                                              nthreads=nthreads)[0]
        out.append((Z, grad, lap))
    return out


def _sums_sphere(points: np.ndarray, nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int) -> tuple[Any, Any, Any]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 3)) and ``Delta G`` at ``points`` (S^2)."""
    return _sphere_sums([points], nodes, w, k, g, q, eps, laplacian, nthreads)[0]


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


def _circle_sums(targets: list[np.ndarray], nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int, node_angles: np.ndarray | None = None) -> list[tuple[Any, Any, Any]]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 2)) and ``Delta G`` at each point set of
    ``targets`` (S^1).

    One type-1 NUFFT gives ``mu_k = sum_j w_j e^{-i k theta_j}``; one type-2 NUFFT per point
    set gives ``Z + i G'`` (both real, so one complex transform carries both), and with the
    Laplacian a batch of two (``ntrans = 2``: ``Z + i G'`` and ``G''``), which spreads the
    points once for both. Where the first point set is the nodes (the particle system, the
    Lagrangian solver) one plan (one sort of the points) serves the type-1 and its type-2
    transform.
    """
    if nthreads == 0 and len(targets[0]) + len(nodes) <= CIRCLE_ONE_THREAD:
        nthreads = 1
    tn = np.arctan2(nodes[:, 1], nodes[:, 0]) if node_angles is None else node_angles
    L = len(k) - 1
    N = 2 * L + 2
    freq = np.fft.fftfreq(N, 1.0 / N)
    freq[L + 1] = 0.0  # the Nyquist slot stays empty
    a = np.minimum(np.abs(freq).astype(int), L)
    kk, gg, qq = k[a], g[a], q[a]
    kk[L + 1] = gg[L + 1] = qq[L + 1] = 0.0
    same = _same_points(targets[0], nodes)
    plan = None
    if same:  # mu_k = sum_j w_j e^{-i k theta_j}, on the plan of the first point set
        plan = ducc0.nufft.plan(nu2u=False, coord=tn[:, None], grid_shape=(N,), epsilon=eps,
                                nthreads=nthreads, fft_order=True)
        mu = plan.nu2u(points=w.astype(complex), forward=True)
    else:
        mu = ducc0.nufft.nu2u(points=w.astype(complex), coord=tn[:, None], forward=True,
                              epsilon=eps, nthreads=nthreads, out=np.empty(N, complex),
                              fft_order=True)
    c1 = (kk + 1j * (1j * freq) * gg) * mu  # Z + i G'
    grid = np.stack([c1, qq * mu]) if laplacian else c1
    out = []
    for i, points in enumerate(targets):
        if i == 0 and plan is not None:
            v = plan.u2nu(grid=grid, forward=False)
        else:
            tp = np.arctan2(points[:, 1], points[:, 0])
            v = ducc0.nufft.u2nu(grid=grid, coord=tp[:, None], forward=False, epsilon=eps,
                                 nthreads=nthreads, fft_order=True)
        v1, lap = (v[0], v[1].real) if laplacian else (v, None)
        # d/dtheta along (-y, x) / r: r = 1 up to a stage's departure from the circle (sqrt of
        # the sum of squares: near 1, no overflow to guard against, 5-10 times cheaper than hypot)
        x0, x1 = points[:, 0], points[:, 1]
        dG = v1.imag / np.sqrt(x0 * x0 + x1 * x1)
        grad = np.empty((len(points), 2))
        np.multiply(dG, points[:, 1], out=grad[:, 0])
        np.negative(grad[:, 0], out=grad[:, 0])
        np.multiply(dG, points[:, 0], out=grad[:, 1])
        out.append((v1.real, grad, lap))
    return out


def _sums_circle(points: np.ndarray, nodes: np.ndarray, w: np.ndarray, k: np.ndarray,
                 g: np.ndarray, q: np.ndarray, eps: float, laplacian: bool,
                 nthreads: int) -> tuple[Any, Any, Any]:
    """Scaled ``Z``, ``grad G`` (Cartesian, (n, 2)) and ``Delta G`` at ``points`` (S^1)
    (:func:`_circle_sums` with one point set)."""
    return _circle_sums([points], nodes, w, k, g, q, eps, laplacian, nthreads)[0]


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


# -- the error estimate: a second transform in a rotated frame ---------------------------

def _a_priori_errors(plan: _Plan, Z: np.ndarray, eps: float) -> _Errors:
    """The a priori error scales (:data:`NUFFT_ERROR`, :data:`SIGMOID_NUFFT_ERROR`): the
    transforms' accuracy ``eps`` times the largest value (sigmoid: the ``l1`` norms), plus the
    expansion's error (:func:`_kernel_errors`)."""
    ak, bk, ag, bg, aq, bq = plan.kernel
    if plan.l1 is None:
        zmax = float(np.max(Z)) if Z.size else 0.0
        cz, cg, cl = NUFFT_ERROR
        dz, dg, dl = (e + c * eps * zmax
                      for e, c in zip((bk, bg, bq), (cz, cg, cl * plan.L * plan.L)))
    else:
        dz, dg, dl = (e + c * eps * n1
                      for e, c, n1 in zip((bk, bg, bq), SIGMOID_NUFFT_ERROR, plan.l1))
    if not plan.normalized:
        return _Errors(dz, dg, dl, "a priori", ak, ag, aq)
    # v = grad G / Z: Z |dv| <= dg + |v| dz <= dg + dz; the divergence likewise (|v| <= 1)
    spread = plan.L * plan.L + 2 * plan.beta
    return _Errors(dz, dg + dz, dl + dz * spread, "a priori", ak, ag + ak, aq + ak * spread)


# -- the field ----------------------------------------------------------------------------

class FastResult(NamedTuple):
    """:func:`fast_sums`' result: the field, its divergence (or ``None``), the per-point
    relative error estimate ``(B, n)`` (the scales of the module docstring) and the error
    scales of each batch item."""

    velocity: np.ndarray
    divergence: np.ndarray | None
    estimate: np.ndarray
    errors: list[_Errors]
    plan: _Plan
    epsilon: float
    sign: float = 1.0
    angles: list[np.ndarray] | None = None
    """Per batch item, the nodes' :func:`node_angles` (for the re-centred expansions)."""
    turned_angles: list[np.ndarray | None] | None = None
    """The same in the pair's rotated frame, where it was computed."""


def fast_sums(model: Any, points: np.ndarray, nodes: np.ndarray, weights: np.ndarray | None, *,
              divergence: bool, tol: float = FIELD_TOL, nthreads: int = 0,
              paired: bool | None = None) -> FastResult:
    """The fast field of :func:`fast_field` at every point, uncorrected, with its per-point
    error estimate. ``tol`` sets the band limit and the transforms' accuracy.

    ``paired``: ``True``, the rotated pair (:func:`_paired_estimate`; the a priori bound where
    too few samples resolve ``Z``); ``False``, the a priori bound (:func:`_a_priori_errors`);
    ``None`` (the default), the a priori bound where it vouches for every point at ``tol``
    (no second frame to pay for: uniform-like states), else the pair."""
    B, n, d = points.shape
    plan = _plan(model, d, tol)
    beta = plan.beta
    sign = float(_scalar_multiple(model.matrices(d)[0][2]))  # type: ignore[arg-type]
    eps = max(tol * EPS_FRACTION, NUFFT_EPS_MIN)
    sums = _sphere_sums if d == 3 else _circle_sums
    ref_div = 4 * beta + d - 1  # |div| <= (4 beta + d - 1) x the velocity's scale (docs)
    R, probes = _rotation(d), _probes(d)
    vel = np.empty(points.shape)
    div = np.empty((B, n)) if divergence else None
    est = np.empty((B, n))
    errors = []
    angles: list[np.ndarray] = []
    turned_angles: list[np.ndarray | None] = []
    m = nodes.shape[1]
    idx = _sample_indices(n)
    for b in range(B):
        w = np.full(m, 1.0 / m) if weights is None else np.asarray(weights[b], dtype=float)
        angles.append(node_angles(nodes[b]))
        at, at_probes = (_Sums(*s) for s in sums([points[b], probes], nodes[b], w, plan.k,
                                                  plan.g, plan.q, eps, divergence, nthreads,
                                                  angles[-1]))
        Z, grad, lap = at
        err = _a_priori_errors(plan, Z, eps)
        turned_angles.append(None)
        if paired or (paired is None and np.max(_estimate(err, Z, lap, ref_div)) > tol):
            turned = np.concatenate([points[b][idx], probes]) @ R.T
            turned_angles[-1] = node_angles(nodes[b] @ R.T)
            (z2, g2, l2), = sums([turned], nodes[b] @ R.T, w, plan.k, plan.g, plan.q, eps,
                                 divergence, nthreads, turned_angles[-1])
            err = _paired_estimate(plan, at.take(idx).join(at_probes), _Sums(z2, g2 @ R, l2)) or err
        errors.append(err)
        vel[b], div_b = _field_from_sums(plan, sign, at)
        if div is not None:
            div[b] = div_b
        est[b] = _estimate(err, Z, lap, ref_div)
    return FastResult(vel, div, est, errors, plan, eps, sign, angles, turned_angles)


def _field_from_sums(plan: _Plan, sign: float, sums: _Sums) -> tuple[np.ndarray, np.ndarray | None]:
    """The field and (with ``sums.lap``) its divergence from the scaled sums (module
    docstring): ``v = s grad G / Z`` (softmax, l2), ``s e^beta grad G`` (unnormalized: relative
    to ``e^beta Z``, the sum of the terms' magnitudes)."""
    Z, grad, lap = sums
    if plan.normalized:
        v = grad / Z[:, None]
        div = None if lap is None else sign * (lap / Z - plan.beta * np.sum(v * v, axis=-1))
        return sign * v, div
    return sign * plan.scale * grad, None if lap is None else sign * plan.scale * lap


def fast_field(
    model: Any,
    points: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray | None,
    *,
    divergence: bool,
    tol: float = FIELD_TOL,
    nthreads: int = 0,
    direct: Any = None,
) -> tuple[np.ndarray, np.ndarray | None, FastSettings]:
    """The tangent field ``P_x F`` and its surface divergence at ``points`` (B, n, d) of
    ``sum_j w_j delta_{nodes_j}`` (nodes (B, m, d), weights (B, m) or ``None``: ``1/m``),
    by fast summation (module docstring, :func:`fast_sums`); the points whose estimate
    exceeds ``tol`` by the re-centred expansions of :mod:`meanfield.kernels.fastsum_local`
    over the tree of :mod:`meanfield.kernels.fastsum_tree` (the exponential profiles), and
    those these cannot vouch for by ``direct``; where the direct field costs less (at most 70
    points over ``tol`` in all, :func:`meanfield.kernels.fastsum_local.direct_is_cheaper`; a
    cap of few targets over few nodes, :data:`meanfield.kernels.fastsum_local.CAP_PAIRS_PER_POINT`),
    ``direct`` takes them. No validation (the callers validate; the
    model must pass :func:`fast_reason`).

    Args:
        divergence: also return ``div_S``.
        tol: relative accuracy per point (module docstring; default :data:`FIELD_TOL`).
        nthreads: threads of ducc0 (0: all).
        direct: ``direct(points_subset (1, k, d), b) -> (velocity, divergence or None)`` for
            batch item ``b``, the exact field used at the points whose estimate exceeds
            ``tol`` after the re-centred expansions; ``None``: no direct correction (every
            cap re-centred; the estimate of what is left is still reported).

    Returns:
        ``(velocity, divergence or None, settings)``.
    """
    B, n, d = points.shape
    res = fast_sums(model, points, nodes, weights, divergence=divergence, tol=tol,
                    nthreads=nthreads)
    vel, div = res.velocity, res.divergence
    worst, corrected, recentred = 0.0, 0, 0
    m = nodes.shape[1]
    for b in range(B):
        est = res.estimate[b]
        bad = np.nonzero(est > tol)[0]
        few = direct is not None and direct_is_cheaper(bad.size)
        if bad.size and not few and not PROFILES[res.plan.profile].signed:  # re-centred
            w = np.full(m, 1.0 / m) if weights is None else np.asarray(weights[b], dtype=float)
            loc = local_sums(res.plan, points[b][bad], nodes[b], w, laplacian=divergence,
                             tol=tol, nthreads=nthreads, angles=res.angles[b],  # type: ignore[index]
                             turned=res.turned_angles[b],  # type: ignore[index]
                             direct_terms=None if direct is None else m,
                             min_targets=1 if direct is None or np.all(w >= 0) else
                             LOCAL_MIN_TARGETS)
            ok = loc.estimate <= tol
            if np.any(ok):
                vb, db = _field_from_sums(res.plan, res.sign, loc.sums.take(np.nonzero(ok)[0]))
                vel[b, bad[ok]] = vb
                if div is not None:
                    div[b, bad[ok]] = db
                est[bad[ok]] = loc.estimate[ok]
                recentred += int(np.count_nonzero(ok))
                bad = bad[~ok]
        if direct is None:
            bad = np.array([], dtype=int)
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
    return vel, div, FastSettings(tol=tol, band_limit=res.plan.L, epsilon=res.epsilon,
                                  tail=res.plan.tail, error_estimate=worst, corrected=corrected,
                                  recentred=recentred,
                                  estimator=" + ".join(sorted({e.estimator for e in res.errors})))


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
    if (d not in (2, 3) or attention_registry.resolve(model.attention).energy is None
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
    "FIELD_TOL",
    "FIELD_METHODS",
    "PROFILES",
    "FastResult",
    "FastRoute",
    "FastSettings",
    "Profile",
    "choose_fast",
    "fast_route",
    "general_kinds",
    "node_angles",
    "zonal_kinds",
    "band_limit",
    "check_tol",
    "field_tol_of",
    "energy",
    "fast_field",
    "fast_reason",
    "fast_sums",
    "general_reason",
    "merge_settings",
    "use_fast",
    "zonal_reason",
    "zonal_sums",
]
