r"""Closed forms and exact reductions the project tests against (docs/equations.md sections
3 and 4), in one place.

.. autosummary::
   growth_rate
   gamma
   gamma_rhs
   transition_time
   mobius_mean
   mobius_path
   mobius_log_density
   mobius_theta
   mobius_log_density_at
   mobius_w_path
   singular_field
   singular_path
   hardmax_sets
   hardmax_field
   example_9_3_paths
   example_9_3_singular

* :func:`growth_rate`: the rate ``gamma_l`` of a perturbation ``eps Y_l`` of the uniform
  density on ``S^{d-1}`` (linear stability, section 3), for SA and USA, with sign and noise.
* :func:`gamma`, :func:`transition_time`: the common inner product ``gamma_beta(t)`` of ``n``
  orthogonal starts (Theorem 6.8, ODE (6.9) for SA, (6.10) for USA) and the time at which it
  reaches ``1 - delta`` (the phase-transition curve (6.12)).
* :func:`mobius_path`, :func:`mobius_log_density`, :func:`mobius_theta`, :func:`mobius_mean`:
  the exact ``beta = 0`` solution of section 4 on ``S^{d-1}``, the Möbius family
  ``rho_w = ((1 - |w|^2) / |x - w|^2)^{d-1} / |S^{d-1}|`` with ``w = omega e``, and the exact
  path of every point (docs/lagrangian.md section 9 derives the closed forms);
  :func:`mobius_log_density_at`, :func:`mobius_w_path`: the same family at any ``x`` for an
  off-axis ``w`` and its path ``w(t)`` (docs/equations.md section 8.6).
* :func:`singular_field`, :func:`singular_path`, :func:`hardmax_sets`, :func:`hardmax_field`,
  :func:`example_9_3_paths`, :func:`example_9_3_singular`: the singular dynamics (9.4), its
  hardmax limit (9.5)-(9.6) and the closed forms of Example 9.3 (docs/equations.md section 8.6).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special
from scipy.integrate import solve_ivp

from meanfield import attention as attention_registry


def _normalized(attention: str) -> bool:
    """Whether the kind ``attention`` normalises its rows (SA) rather than dividing by ``n``
    (USA). The formulas of this module hold for the kinds with the interaction energy
    ``E_beta`` (the kernel ``e^{beta <x, y>}``, docs/equations.md section 3), which the metric
    of their gradient flow tells apart; ``ValueError`` for another kind."""
    kind = attention_registry.resolve(attention)
    if kind.energy is None:
        names = tuple(k.name for k in attention_registry.kinds() if k.energy is not None)
        msg = (f"attention must be one of {names} (a kind with the interaction energy E_beta), "
               f"got {attention!r}")
        raise ValueError(msg)
    return kind.energy.metric == "attention"


def growth_rate(d: int, attention: str, beta: float, l: int | np.ndarray, sign: float = 1.0,
                noise: float = 0.0) -> float | np.ndarray:
    """``gamma_l`` of the uniform state on ``S^{d-1}`` (docs/equations.md section 3):

    USA ``l(l+d-2) Gamma(d/2) (2/beta)^{d/2-1} I_{l+d/2-1}(beta) / beta``;
    SA ``l(l+d-2) I_{l+d/2-1}(beta) / (beta I_{d/2-1}(beta))``; times ``sign``, minus
    ``noise l(l+d-2)``. Ratios of Bessel functions through ``ive`` (no overflow for SA; USA
    overflows only where ``e^beta`` does). ``l`` may be an array.
    """
    ell = np.asarray(l, dtype=float)
    nu = ell + d / 2 - 1
    lap = ell * (ell + d - 2)
    if beta == 0:  # the limit (I_nu(b) ~ (b/2)^nu / Gamma(nu + 1)): only l = 1 moves
        out = sign * np.where(ell == 1, (d - 1) / d, 0.0) - noise * lap
    else:
        if _normalized(attention):
            ratio = special.ive(nu, beta) / special.ive(d / 2 - 1, beta)
        else:
            ratio = math.gamma(d / 2) * (2 / beta) ** (d / 2 - 1) * special.iv(nu, beta)
        out = sign * lap * ratio / beta - noise * lap
    return float(out) if np.ndim(l) == 0 else out


def gamma_rhs(beta: float, n: int, attention: str) -> Callable[[float, np.ndarray], np.ndarray]:
    """The right-hand side of (6.9) (SA) or (6.10) (USA), written without overflow."""
    if _normalized(attention):  # (6.9), divided through by e^beta
        def rhs(t: float, g: np.ndarray) -> np.ndarray:
            e = np.exp(beta * (g - 1.0))
            return 2.0 * e * (1.0 - g) * ((n - 1) * g + 1.0) / (1.0 + (n - 1) * e)
    else:  # (6.10)
        def rhs(t: float, g: np.ndarray) -> np.ndarray:
            return (2.0 / n) * np.exp(beta * g) * (1.0 - g) * ((n - 1) * g + 1.0)
    return rhs


def gamma(beta: float, n: int, times: ArrayLike, attention: str = "softmax") -> np.ndarray:
    """``gamma_beta(t)``: the common inner product of ``n`` orthogonal starts (Theorem 6.8),
    ``gamma(0) = 0``; ``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-11), dense output."""
    t = np.asarray(times, dtype=float)
    if t.size == 0:
        return np.zeros(0)
    if t.max() <= 0:
        return np.zeros_like(t)
    sol = solve_ivp(gamma_rhs(float(beta), int(n), attention), (0.0, float(t.max())), [0.0],
                    method="DOP853", dense_output=True, rtol=1e-11, atol=1e-14)
    return np.clip(sol.sol(t)[0], 0.0, 1.0)


def transition_time(beta: float, n: int, delta: float, attention: str = "softmax",
                    t_max: float = 1e6) -> float:
    """The time at which ``gamma_beta`` reaches ``1 - delta``: the curve (6.12) at ``beta``;
    ``inf`` if not before ``t_max``."""
    rhs = gamma_rhs(float(beta), int(n), attention)

    def hit(t: float, g: np.ndarray) -> float:
        return g[0] - (1.0 - delta)

    hit.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(rhs, (0.0, t_max), [0.0], method="DOP853", events=hit, rtol=1e-11,
                    atol=1e-14)
    return float(sol.t_events[0][0]) if sol.t_events[0].size else math.inf


# -- the repulsive case: sharp configurations (Section 9.1, Theorem 9.2) --------------------

DESIGN_STRENGTHS: dict[str, str] = {
    "simplex": "n = d + 1: a spherical 2-design; n < d + 1: centred only (strength 1)",
    "cross-polytope": "n = 2d, the points +-e_i: a spherical 3-design",
    "icosahedron": "n = 12, d = 3: a spherical 5-design",
    "polygon": "d = 2, the regular n-gon: a spherical (n - 1)-design",
}
"""The known sharp configurations of docs/equations.md section 4 (repulsive case) and the
strength ``t`` of each as a spherical design (Definition 9.1 of the paper)."""


def sharp_configuration(kind: str, n: int, d: int) -> tuple[np.ndarray, int]:
    """The points of a known sharp configuration on ``S^{d-1}`` and its design strength ``t``.

    ``kind`` is a key of :data:`DESIGN_STRENGTHS`: ``"simplex"`` (``2 <= n <= d + 1``, inner
    products ``-1/(n-1)``), ``"cross-polytope"`` (``n = 2d``, inner products ``-1, 0``),
    ``"icosahedron"`` (``n = 12, d = 3``, inner products ``-1, +-1/sqrt(5)``), ``"polygon"``
    (``d = 2``, inner products ``cos(2 pi k/n)``). By Theorem 9.2 (Cohn–Kumar) these are the
    global minimisers of the repulsive energy ``H_beta`` at every ``beta > 0``.

    Raises:
        ValueError: an unknown ``kind``, or ``(n, d)`` outside its range.
    """
    if kind not in DESIGN_STRENGTHS:
        msg = f"kind must be one of {tuple(DESIGN_STRENGTHS)}, got {kind!r}"
        raise ValueError(msg)
    ok = {"simplex": 2 <= n <= d + 1, "cross-polytope": n == 2 * d and d >= 2,
          "icosahedron": (n, d) == (12, 3), "polygon": d == 2 and n >= 3}[kind]
    if not ok:
        msg = f"no {kind} with n = {n} points on S^{d - 1} (d = {d}): {DESIGN_STRENGTHS[kind]}"
        raise ValueError(msg)
    x = np.zeros((n, d))
    if kind == "simplex":  # e_i - mean in R^n, written in an orthonormal basis of the hyperplane
        c = np.eye(n) - 1.0 / n
        q = np.linalg.svd(c)[2][: n - 1]
        x[:, : n - 1] = c @ q.T
        strength = 2 if n == d + 1 else 1
    elif kind == "cross-polytope":
        x[:d] = np.eye(d)
        x[d:] = -np.eye(d)
        strength = 3
    elif kind == "icosahedron":
        phi = (1 + math.sqrt(5)) / 2
        rows = [(0.0, a, b * phi) for a in (-1, 1) for b in (-1, 1)]
        x[:] = [r[k:] + r[:k] for r in rows for k in range(3)]
        strength = 5
    else:
        a = 2 * np.pi * np.arange(n) / n
        x[:] = np.c_[np.cos(a), np.sin(a)]
        strength = n - 1
    return x / np.linalg.norm(x, axis=1, keepdims=True), strength


def zonal_polynomial(l: int, d: int, t: ArrayLike) -> np.ndarray:
    """``P_l(t) = C_l^alpha(t) / C_l^alpha(1)``, ``alpha = (d-2)/2`` (docs/equations.md section 3):
    the degree-``l`` zonal harmonic of ``S^{d-1}`` normalised to ``P_l(1) = 1``; on the circle
    (``d = 2``) the limit ``T_l(t) = cos(l arccos t)``."""
    t = np.asarray(t, dtype=float)
    if d == 2:
        return special.eval_chebyt(l, t)
    alpha = (d - 2) / 2
    return special.eval_gegenbauer(l, alpha, t) / special.eval_gegenbauer(l, alpha, 1.0)


def design_sums(x: ArrayLike, lmax: int) -> np.ndarray:
    """``S_l = (1/n^2) sum_{i,j} P_l(<x_i, x_j>)`` for ``l = 1..lmax`` (points ``x``, ``(n, d)``).

    By the addition theorem ``S_l = |S^{d-1}| / (n^2 N_l) sum_m |sum_i Y_lm(x_i)|^2 >= 0``
    (``N_l`` the dimension of the degree-``l`` harmonics), so ``S_l = 0`` for ``1 <= l <= t``
    exactly when the points are a spherical ``t``-design (Definition 9.1)."""
    x = np.asarray(x, dtype=float)
    g = np.clip(x @ x.T, -1.0, 1.0)
    return np.array([zonal_polynomial(l, x.shape[1], g).mean() for l in range(1, lmax + 1)])



# -- noise past its threshold: steady states and the bifurcation (Problem 7) ----------------


def zonal_quadrature(d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``s_j`` and weights ``w_j`` with ``sum_j w_j g(s_j) = int g(<x, e>) dA(x)`` on
    ``S^{d-1}``, exact for polynomials of degree ``<= 2n - 1``: Gauss–Chebyshev on the circle
    (``s = cos theta`` at the midpoints ``theta_j = (j + 1/2) pi / n``, ``w_j = 2 pi / n``),
    Gauss–Jacobi (:func:`meanfield.domains.zonal_sphere.gauss_jacobi`) for ``d >= 3``."""
    if d == 2:
        return np.cos((np.arange(n) + 0.5) * np.pi / n), np.full(n, 2 * np.pi / n)
    from meanfield.domains.zonal_sphere import gauss_jacobi

    return gauss_jacobi(d, n)


def noise_threshold(d: int, attention: str, beta: float) -> float:
    """``sigma_c``: the uniform state of the noisy flow on ``S^{d-1}`` is stable iff ``sigma >
    sigma_c = gamma_1 / (d - 1)`` (``gamma_l`` of :func:`growth_rate` without noise; degree 1 is
    the last to turn stable since ``I_nu`` decreases in ``nu``). Circle: ``I_1(beta)/beta``
    (USA), ``I_1(beta)/(beta I_0(beta))`` (SA) (docs/equations.md section 8.4)."""
    return float(growth_rate(d, attention, beta, 1)) / (d - 1)


def _zonal_ratios(d: int, attention: str, beta: float, sigma: float, degree: int) -> np.ndarray:
    """``mu_l = sigma_l / sigma`` for ``l = 0..degree``: USA ``lambda_l / (|S| beta sigma)``; SA
    ``p nu_l``, ``p = 1/(beta sigma)``, ``nu_l = lambda_l / lambda_0``."""
    from meanfield.special import scaled_kernel_multipliers

    m = scaled_kernel_multipliers(np.arange(degree + 1), beta, d)
    if _normalized(attention):
        return m / m[0] / (beta * sigma)
    return m * math.exp(beta) / (beta * sigma)


def noisy_steady_state(d: int, attention: str, beta: float, sigma: float, start: ArrayLike, *,
                       degree: int = 48, nodes: int = 160, tol: float = 1e-13,
                       max_iter: int = 50) -> dict[str, Any]:
    """A zonal steady state of ``d_t rho + div(rho X[rho]) = sigma Lap rho`` by Newton's method
    on the coefficients ``a_l`` of ``rho = rho_unif (1 + sum_{l=1}^{L} a_l P_l(<x, e>))``
    (``P_l`` of :func:`zonal_polynomial`: Fourier cosine coefficients on the circle, Gegenbauer
    for ``d >= 3``).

    Zero flux (docs/equations.md section 8.4): USA ``rho ∝ exp((G_beta * rho)/sigma)``, SA
    ``rho ∝ (K_beta * rho)^{1/(beta sigma)}``; with ``K_beta * rho = rho_unif lambda_0 (1 +
    sum nu_l a_l P_l)`` both are ``rho ∝ e^{x}``, ``x = sum mu_l a_l P_l`` (USA) or
    ``x = p log(1 + sum nu_l a_l P_l)`` (SA). The map ``a -> b(a)``, ``b_l = N_l E_unif[P_l e^x] /
    E_unif[e^x]`` (``N_l = 1 / E_unif[P_l^2]``), is solved for ``a = b(a)`` with its exact
    Jacobian. Only attractive models (the uniform state is the only steady state otherwise).

    Args:
        start: initial ``a_1, a_2, ...`` (zero-padded to ``degree``); the uniform state ``0``
            is always a solution, so start on the branch (e.g. :func:`bifurcation_normal_form`).
        degree, nodes: truncation ``L`` and quadrature size; ``details`` report the tail.

    Returns:
        ``{"a": (L,), "s": nodes, "density": rho at the nodes, "iterations", "residual",
        "tail": max |a_l| over the last 4 degrees, "order": E_rho[<x, e>] = a_1 / d}``.

    Raises:
        RuntimeError: no convergence to ``tol`` in ``max_iter`` iterations (with the residual).
    """
    softmax = _normalized(attention)
    if not (beta > 0 and sigma > 0):
        msg = f"beta and sigma must be > 0, got beta={beta!r}, sigma={sigma!r}"
        raise ValueError(msg)
    s, w = zonal_quadrature(d, nodes)
    w = w / w.sum()  # E_unif
    ls = np.arange(1, degree + 1)
    table = np.array([zonal_polynomial(int(l), d, s) for l in ls])  # (L, nodes)
    norms = 1.0 / (table**2 @ w)  # N_l
    mu = _zonal_ratios(d, attention, beta, sigma, degree)[1:]
    p = 1.0 / (beta * sigma)
    a = np.zeros(degree)
    a0 = np.asarray(start, dtype=float).ravel()[:degree]
    a[: a0.size] = a0
    residual = math.inf

    def admissible(c: np.ndarray) -> bool:  # SA: K * rho > 0 at every node
        return not softmax or bool(np.all(1.0 + (mu / p * c) @ table > 0))

    if not admissible(a):
        msg = "the start has K * rho <= 0 somewhere (not the coefficients of a density)"
        raise ValueError(msg)
    for it in range(1, max_iter + 1):
        if softmax:
            psi = 1.0 + (mu / p * a) @ table  # 1 + sum nu_l a_l P_l
            x = p * np.log(psi)
            dx = (mu / p)[:, None] * table * (p / psi)[None, :]  # d x / d a_k
        else:
            x = (mu * a) @ table
            dx = mu[:, None] * table
        t = np.exp(x - x.max())
        t = t / (t @ w)
        b = norms * ((table * t) @ w)
        centred = dx - ((dx * t) @ w)[:, None]
        jac = norms[:, None] * ((table * t * w) @ centred.T)  # d b_l / d a_k
        f = a - b
        residual = float(np.max(np.abs(f)))
        if residual < tol:
            break
        step = np.linalg.solve(np.eye(degree) - jac, f)
        damping = 1.0
        while not admissible(a - damping * step):  # damped Newton: stay where K * rho > 0
            damping *= 0.5
            if damping < 1e-6:
                msg = f"Newton cannot stay in the admissible set (K * rho > 0) at iteration {it}"
                raise RuntimeError(msg)
        a = a - damping * step
    else:
        msg = f"Newton did not converge in {max_iter} iterations: residual {residual:.3g} (sigma={sigma!r})"
        raise RuntimeError(msg)
    return {"a": a, "s": s, "density": t, "iterations": it, "residual": residual,
            "tail": float(np.max(np.abs(a[-4:]))), "order": float(a[0] / d)}


def bifurcation_normal_form(d: int, attention: str, beta: float) -> dict[str, float]:
    """The pitchfork at ``sigma_c`` (:func:`noise_threshold`) to third order: near it the
    steady states have ``a_1^2 = (sigma_c - sigma) / (sigma_c (-K))`` (docs/equations.md 8.4).

    With the moments of the uniform measure ``m_2 = E[s^2] = 1/d``, ``m_4 = E[s^4] =
    3/(d(d+2))``, ``m_12 = E[s^2 P_2] = 2/(d(d+2))``, ``N_2 = (d+2)(d-1)/2``, and ``nu_l``,
    ``mu_l`` as in :func:`noisy_steady_state` at ``sigma_c`` (so ``mu_1 = 1``):

    * USA: ``K = d (m_12 mu_2 q + m_4/6 - m_2^2/2)``, ``q = N_2 m_12 / (2 (1 - mu_2))``;
    * SA (``p = 1/nu_1``): ``q = (N_2 m_12/2 - p nu_1^2 (d-1)/(2d)) / (1 - p nu_2)``,
      ``K = (nu_1^2 - 2 nu_2 q)/(d+2) + d m_12 p (nu_2 q - nu_1^2 (d-1)/(2d)) + d (m_4/6 - m_2^2/2)``.

    ``K < 0``: supercritical (a stable branch for ``sigma < sigma_c``, amplitude
    ``A (sigma_c - sigma)^{1/2}``, ``A = (sigma_c |K|)^{-1/2}``); ``K > 0``: subcritical (an
    unstable branch for ``sigma > sigma_c``, ``a_1 = A (sigma - sigma_c)^{1/2}``).
    Returns ``{"K", "A", "sigma_c", "q", "type"}`` (``type`` +1 super, -1 sub).
    """
    sc = noise_threshold(d, attention, beta)
    mu = _zonal_ratios(d, attention, beta, sc, 2)
    m2, m4, m12, n2 = 1.0 / d, 3.0 / (d * (d + 2)), 2.0 / (d * (d + 2)), (d + 2) * (d - 1) / 2
    if _normalized(attention):
        p = 1.0 / (beta * sc)
        nu1, nu2 = mu[1] / p, mu[2] / p
        q = (n2 * m12 / 2 - p * nu1**2 * (d - 1) / (2 * d)) / (1 - p * nu2)
        k = ((nu1**2 - 2 * nu2 * q) / (d + 2) + d * m12 * p * (nu2 * q - nu1**2 * (d - 1) / (2 * d))
             + d * (m4 / 6 - m2**2 / 2))
    else:
        q = n2 * m12 / (2 * (1 - mu[2]))
        k = d * (m12 * mu[2] * q + m4 / 6 - m2**2 / 2)
    return {"K": float(k), "A": float(1.0 / math.sqrt(sc * abs(k))), "sigma_c": sc, "q": float(q),
            "type": 1.0 if k < 0 else -1.0}




def _check_omega(omega: ArrayLike) -> np.ndarray:
    w = np.asarray(omega, dtype=float)
    if not np.all((w >= 0) & (w < 1)):
        msg = f"omega must lie in [0, 1) (the Möbius parameter |w|), got {omega!r}"
        raise ValueError(msg)
    return w


def mobius_mean(omega: ArrayLike, d: int) -> np.ndarray:
    """``m(omega) = <int x rho_w dA, e>`` of the Möbius density with ``w = omega e`` on
    ``S^{d-1}`` (docs/equations.md section 4):
    ``m = (d - 1)/d z 2F1(1/2, 1; d/2 + 1; z^2)``, ``z = 2 omega / (1 + omega^2)``
    (docs/lagrangian.md section 9; ``m = omega`` at ``d = 2``)."""
    w = _check_omega(omega)
    return _mobius_mean_q((1 - w) / (1 + w), d)


_Q_SMALL = 1e-4  # below it 1 - m = 2q^2/(1+q^2) (d-1)/(d-3) + O(q^4): O(q^4) < 1e-16


def _mobius_mean_q(q: np.ndarray, d: int) -> np.ndarray:
    """``m`` in terms of ``q = (1 - omega)/(1 + omega)``. Near collapse (``q < 1e-4``,
    ``d >= 6``) ``1 - m = (1 - z) E[(1 - u)/(1 + z u)]`` with ``1 - z = 2 q^2/(1 + q^2)`` and
    ``E[(1 - u)/(1 + u)] = (d - 1)/(d - 3)`` (``u`` the axis coordinate of a uniform point),
    the remainder ``O((1 - z)^2)``; scipy's ``hyp2f1`` is NaN at ``z = 1`` for large ``d``."""
    q = np.asarray(q, dtype=float)
    z = (1 - q * q) / (1 + q * q)  # 2 omega / (1 + omega^2)
    out = (d - 1) / d * z * special.hyp2f1(0.5, 1.0, d / 2 + 1, z * z)
    if d >= 6:
        out = np.where(q < _Q_SMALL, 1 - 2 * q * q / (1 + q * q) * (d - 1) / (d - 3), out)
    return out


def mobius_path(omega0: float, d: int, times: ArrayLike) -> np.ndarray:
    """``log q(t)``, ``q = (1 - omega)/(1 + omega)``, of the ``beta = 0`` Möbius solution
    started at ``omega0``: ``d log q/dt = -m(omega)`` (from ``w' = (1 + |w|^2) m/2 - <w, m> w``,
    docs/equations.md section 4), ``omega = (1 - q)/(1 + q)``. ``log q`` keeps ``1 - omega``
    to relative precision through collapse. ``solve_ivp`` (DOP853, rtol 1e-13, atol 1e-13)."""
    _check_omega(omega0)
    t = np.asarray(times, dtype=float)
    lq0 = math.log((1 - omega0) / (1 + omega0))

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        return np.array([-float(_mobius_mean_q(np.exp(y[0]), d))])

    if t.size == 0 or t.max() <= 0:
        return np.full(t.shape, lq0)
    sol = solve_ivp(rhs, (0.0, float(t.max())), [lq0], method="DOP853", dense_output=True,
                    rtol=1e-13, atol=1e-13)
    return np.where(t <= 0, lq0, sol.sol(np.maximum(t, 0.0))[0])


def mobius_log_density(theta: ArrayLike, log_q: ArrayLike, d: int) -> np.ndarray:
    """``log rho_w`` per unit surface measure at polar angle ``theta`` (``s = cos theta``),
    ``w = omega e``, ``q = (1 - omega)/(1 + omega) = exp(log_q)``: with ``1 - s = 2
    sin^2(theta/2)``, ``|x - w|^2 = (1 - omega)^2 + 2 omega (1 - s)``, so
    ``log rho = (d - 1) log((1 - omega^2) / |x - w|^2) - log |S^{d-1}|`` without cancellation."""
    from meanfield.special import log_sphere_area

    th = np.asarray(theta, dtype=float)
    q = np.exp(np.asarray(log_q, dtype=float))
    one_m = 2 * q / (1 + q)  # 1 - omega
    omega = (1 - q) / (1 + q)
    dist2 = one_m ** 2 + 4 * omega * np.sin(th / 2) ** 2
    return (d - 1) * (np.log(one_m * (2 - one_m)) - np.log(dist2)) - log_sphere_area(d)


def mobius_theta(theta0: ArrayLike, log_q0: float, log_q: ArrayLike) -> np.ndarray:
    """The exact path of a point at ``beta = 0`` in the Möbius family: ``tan(theta/2) =
    tan(theta0/2) q / q0`` (the flow maps one Möbius density onto another by the Möbius map of
    the axis, docs/lagrangian.md section 9)."""
    th0 = np.asarray(theta0, dtype=float)
    ratio = np.exp(np.asarray(log_q, dtype=float) - log_q0)
    return 2 * np.arctan(np.tan(th0 / 2) * ratio)


__all__ = [
    "DESIGN_STRENGTHS",
    "EXAMPLE_9_3_START",
    "example_9_3_paths",
    "example_9_3_singular",
    "hardmax_field",
    "hardmax_sets",
    "bifurcation_normal_form",
    "design_sums",
    "gamma",
    "gamma_rhs",
    "growth_rate",
    "mobius_log_density",
    "mobius_log_density_at",
    "mobius_mean",
    "mobius_path",
    "mobius_theta",
    "mobius_w_path",
    "noise_threshold",
    "noisy_steady_state",
    "sharp_configuration",
    "singular_field",
    "singular_path",
    "transition_time",
    "zonal_polynomial",
    "zonal_quadrature",
]


def mobius_log_density_at(x: ArrayLike, w: ArrayLike) -> np.ndarray:
    """``log rho_w(x)`` per unit surface measure of the Möbius density
    ``rho_w(x) = ((1 - |w|^2)/|x - w|^2)^{d-1} / |S^{d-1}|`` at points ``x`` (``(..., d)``, on
    ``S^{d-1}``) for any ``w`` (``(d,)``, ``|w| < 1``, off-axis allowed); docs/equations.md
    section 4. ``|x - w|^2 = (1 - |w|)^2 + 2 |w| (1 - <x, w/|w|>)`` avoids cancellation."""
    from meanfield.special import log_sphere_area

    wv = np.asarray(w, dtype=float)
    pts = np.asarray(x, dtype=float)
    if wv.ndim != 1 or pts.shape[-1] != wv.size:
        msg = f"w must be a vector of length d = x.shape[-1] = {pts.shape[-1]}, got shape {wv.shape}"
        raise ValueError(msg)
    d = wv.size
    om = float(np.linalg.norm(wv))
    _check_omega(om)
    e = wv / om if om > 0 else np.eye(d)[-1]
    cos = np.clip(pts @ e, -1.0, 1.0)
    dist2 = (1 - om) ** 2 + 2 * om * (1 - cos)
    return (d - 1) * (math.log((1 - om) * (1 + om)) - np.log(dist2)) - log_sphere_area(d)


def mobius_w_path(w0: ArrayLike, times: ArrayLike) -> np.ndarray:
    """``w(t)``, shape ``(len(times), d)``, of the ``beta = 0`` Möbius solution started at ``w0``
    (docs/equations.md section 4): ``m`` is parallel to ``w``, so the direction ``w0/|w0|``
    is kept and ``|w(t)| = (1 - q)/(1 + q)``, ``log q`` from :func:`mobius_path`."""
    wv = np.asarray(w0, dtype=float)
    om0 = float(np.linalg.norm(wv))
    _check_omega(om0)
    t = np.asarray(times, dtype=float)
    if om0 == 0.0:  # the uniform measure is stationary
        return np.zeros((t.size, wv.size))
    q = np.exp(mobius_path(om0, wv.size, t))
    return ((1 - q) / (1 + q))[:, None] * (wv / om0)[None, :]


# -- the singular dynamics (9.4) and its hardmax limit (9.5)-(9.6), Section 9.3 -------------

EXAMPLE_9_3_START = np.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
"""``z_1(0) = (1, 1)``, ``z_2(0) = (-1, 1)``, ``z_3(0) = (0, 0)`` of Example 9.3 (``d = 2``,
``n = 3``, ``Q = K = V = I``)."""


def singular_field(z: ArrayLike, beta: float) -> np.ndarray:
    """The right-hand side of (9.4) with ``Q = K = V = I``: ``z_i' = sum_j P_ij (z_j - z_i)``,
    ``P_ij = e^{beta <z_i, z_j>} / Z_{beta,i}`` (docs/equations.md section 8.6); the weights
    through a row-wise max shift, finite for any ``beta``."""
    zz = np.asarray(z, dtype=float)
    a = beta * (zz @ zz.T)
    p = np.exp(a - a.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p @ zz - zz


def singular_path(z0: ArrayLike, beta: float, times: ArrayLike) -> np.ndarray:
    """Solution of (9.4) (``Q = K = V = I``) at ``times``, shape ``(len(times), n, d)``:
    ``solve_ivp`` (DOP853, rtol 1e-12, atol 1e-14); the field's weights change on the time
    scale ``1/beta``, which the adaptive step resolves."""
    z = np.asarray(z0, dtype=float)
    t = np.asarray(times, dtype=float)
    if not beta >= 0 or not math.isfinite(beta):
        msg = f"beta must be finite and >= 0, got {beta!r}"
        raise ValueError(msg)
    shape = z.shape

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        return singular_field(y.reshape(shape), beta).ravel()

    sol = solve_ivp(rhs, (float(t[0]), float(t[-1])), z.ravel(), method="DOP853", t_eval=t,
                    rtol=1e-12, atol=1e-14)
    if not sol.success:
        msg = f"(9.4) at beta={beta:g}: solve_ivp failed ({sol.message})"
        raise RuntimeError(msg)
    return sol.y.T.reshape((t.size, *shape))


def hardmax_sets(z: ArrayLike, tie_tol: float = 1e-12) -> list[np.ndarray]:
    """The active sets ``C_i`` of (9.6) (``Q = K = I``): the ``j`` with ``<z_i, z_j>`` within
    ``tie_tol * max(1, |z_i| max_k |z_k|)`` of the row maximum (round-off in the inner
    products, not a tie of the exact configuration, is what the tolerance absorbs)."""
    zz = np.asarray(z, dtype=float)
    g = zz @ zz.T
    norms = np.linalg.norm(zz, axis=1)
    scale = tie_tol * np.maximum(1.0, norms[:, None] * norms.max())
    return [np.flatnonzero(g[i] >= g[i].max() - scale[i, 0]) for i in range(len(zz))]


def hardmax_field(z: ArrayLike, tie_tol: float = 1e-12) -> np.ndarray:
    """The right-hand side of (9.5): ``z_i' = |C_i|^{-1} sum_{j in C_i} (z_j - z_i)`` with the
    active sets of (9.6) (:func:`hardmax_sets`), ``Q = K = V = I``."""
    zz = np.asarray(z, dtype=float)
    return np.stack([zz[c].mean(axis=0) - zz[i] for i, c in enumerate(hardmax_sets(zz, tie_tol))])


def example_9_3_paths(times: ArrayLike) -> dict[str, np.ndarray]:
    """The three solutions of (9.5)-(9.6) of Example 9.3, shape ``(len(times), 3, 2)`` each:
    ``z_1, z_2`` fixed, ``z_3(t) = (1 - e^{-t}) c`` towards ``c = z_1`` (``"z1"``),
    ``c = z_2`` (``"z2"``) or the midpoint ``c = (z_1 + z_2)/2 = (0, 1)`` (``"midpoint"``,
    the ``beta -> infinity`` limit of (9.4))."""
    t = np.asarray(times, dtype=float)
    out = {}
    for name, c in (("midpoint", (0.0, 1.0)), ("z1", (1.0, 1.0)), ("z2", (-1.0, 1.0))):
        z = np.broadcast_to(EXAMPLE_9_3_START, (t.size, 3, 2)).copy()
        z[:, 2] = (1 - np.exp(-t))[:, None] * np.asarray(c)[None, :]
        out[name] = z
    return out


def example_9_3_singular(beta: float, times: ArrayLike) -> np.ndarray:
    """(9.4) from the start of Example 9.3, shape ``(len(times), 3, 2)``, on its invariant
    mirror-symmetric set ``z_1 = (a, b)``, ``z_2 = (-a, b)``, ``z_3 = (0, y)`` (the map
    ``x_1 -> -x_1`` with ``z_1 <-> z_2`` fixes the start and commutes with (9.4)). The reduction
    is needed, not a convenience: off that set the antisymmetric mode grows at rate ``~ beta``
    once ``z_3`` nears ``(0, 1)`` (the ties of (9.6) turn into a choice between ``z_1`` and
    ``z_2``), so round-off of the full system picks a side at moderate ``beta``."""
    if not beta >= 0 or not math.isfinite(beta):
        msg = f"beta must be finite and >= 0, got {beta!r}"
        raise ValueError(msg)
    t = np.asarray(times, dtype=float)

    def build(y: np.ndarray) -> np.ndarray:
        return np.array([[y[0], y[1]], [-y[0], y[1]], [0.0, y[2]]])

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        f = singular_field(build(y), beta)
        return np.array([f[0, 0], f[0, 1], f[2, 1]])

    sol = solve_ivp(rhs, (0.0, float(t[-1])), [1.0, 1.0, 0.0], method="DOP853", t_eval=t,
                    rtol=1e-12, atol=1e-14)
    if not sol.success:
        msg = f"(9.4) at beta={beta:g}: solve_ivp failed ({sol.message})"
        raise RuntimeError(msg)
    return np.stack([build(y) for y in sol.y.T])
