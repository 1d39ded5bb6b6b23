"""Steppers: one step of an explicit scheme, written against a right-hand side.

.. autosummary::
   RungeKutta
   EulerMaruyama

A stepper has ``init(y) -> stage`` (the first stage ``F(y)``, reused across a rejected step
and, for FSAL schemes, taken from the last stage), ``step(y, h, stage) -> (y_new, error,
stage_new)`` (``error`` is ``None`` without an embedded pair, an :class:`ErrorPair` for a
scheme with two estimates; ``stage_new`` is ``None`` when it must be recomputed at the
projected state), ``project(y)`` (applied by the loop to every
accepted state), and counts its right-hand side ``evaluations``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from meanfield import backend as bk
from meanfield.integrate.controllers import ErrorPair
from meanfield.integrate.tableaus import ButcherTableau, get_scheme

Rhs = Callable[[np.ndarray], np.ndarray]


def _identity(y: np.ndarray) -> np.ndarray:
    return y


class RungeKutta:
    """An explicit Runge–Kutta step for ``y' = L y + N(y)``, ``L`` diagonal (or absent).

    With ``linear`` (an array of the diagonal of ``L``, e.g. ``sigma`` times the Laplacian
    eigenvalues) the scheme is applied in Lawson (integrating-factor) form: stage ``i`` is
    ``E(c_i) y + h sum_j a_ij E(c_i - c_j) k_j`` with ``E(x) = exp(L x h)``, so the linear part
    is exact. ``project`` maps each accepted state back onto the constraint set (the sphere).

    Args:
        f: the (nonlinear part of the) right-hand side ``N``.
        scheme: a registered scheme name or a :class:`ButcherTableau`.
        linear: diagonal of ``L`` (broadcast against ``y``), or ``None``.
        project: map applied to accepted states (default: none).
    """

    def __init__(self, f: Rhs, scheme: str | ButcherTableau = "dopri5", *,
                 linear: np.ndarray | None = None, project: Rhs | None = None) -> None:
        self.f = f
        self.tableau = get_scheme(scheme)
        self.linear = linear if linear is not None and np.any(linear) else None
        self.project = project if project is not None else _identity
        self.projects = project is not None
        self.evaluations = 0
        self._last: tuple[np.ndarray, np.ndarray, float, list[np.ndarray]] | None = None
        self._dense: list[np.ndarray] | None = None

    @property
    def name(self) -> str:
        return self.tableau.name

    @property
    def adaptive(self) -> bool:
        return self.tableau.adaptive

    @property
    def error_order(self) -> int:
        """The order of the error estimate for the step-size control
        (:attr:`ButcherTableau.estimate_order`)."""
        return self.tableau.estimate_order

    @property
    def interpolates(self) -> bool:
        """Whether :meth:`interpolate` gives the scheme's own dense output (a tableau with a
        :class:`ContinuousExtension`, no linear part)."""
        return self.tableau.dense is not None and self.linear is None

    def rhs(self, y: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        return self.f(y)

    def interpolate(self, theta: float) -> np.ndarray:
        """The state at ``t + theta h`` in the last step taken, ``0 <= theta <= 1``, from the
        tableau's continuous extension (:class:`ContinuousExtension`: its extra stages are
        evaluated once a step, at the first call)."""
        if self._last is None or not self.interpolates:
            msg = f"scheme {self.name!r} has no continuous extension, or no step was taken"
            raise ValueError(msg)
        if self._dense is None:
            self._dense = self._extension_terms()
        out: Any = 0.0
        for j in reversed(range(len(self._dense))):  # theta (r_0 + (1 - theta) (r_1 + ...))
            out = (out + self._dense[j]) * (theta if j % 2 == 0 else 1.0 - theta)
        return self._last[0] + out

    def _extension_terms(self) -> list[np.ndarray]:
        """``r_0, r_1, ...`` of :class:`ContinuousExtension` for the last step."""
        assert self._last is not None and self.tableau.dense is not None
        y, new, h, ks = self._last
        ext = self.tableau.dense
        ks = list(ks)
        scratch = bk.namespace(y).empty_like(y)
        for i in range(len(ext.c)):
            ks.append(self.rhs(_combine(y, ks, h * ext.a[i, : len(ks)], scratch)))
        dy = new - y
        terms = [dy, h * ks[0] - dy, 2.0 * dy - h * (ks[self.tableau.stages - 1] + ks[0])]
        return terms + [_combine(None, ks, h * row, scratch) for row in ext.d]

    def init(self, y: np.ndarray) -> np.ndarray:
        return self.rhs(y)

    def _E(self, x: float, h: float, cache: dict[float, Any]) -> Any:
        if self.linear is None or x == 0.0:
            return 1.0
        if x not in cache:
            cache[x] = np.exp(self.linear * (x * h))
        return cache[x]

    def step(self, y: np.ndarray, h: float, k1: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray | ErrorPair | None, np.ndarray | None]:
        tab = self.tableau
        if self.linear is None:
            return self._step_plain(y, h, k1)
        cache: dict[float, Any] = {}
        ks = [k1]
        s = tab.stages
        new = None
        for i in range(1, s):
            ci = tab.c[i]
            u = self._E(ci, h, cache) * y
            for j in range(i):
                a = tab.a[i, j]
                if a:
                    u = u + (h * a) * (self._E(ci - tab.c[j], h, cache) * ks[j])
            if tab.fsal and i == s - 1:
                new = u
            ks.append(self.rhs(u))
        if new is None:
            new = self._E(1.0, h, cache) * y
            for j in range(s):
                if tab.b[j]:
                    new = new + (h * tab.b[j]) * (self._E(1.0 - tab.c[j], h, cache) * ks[j])
        def weighted(weights: np.ndarray) -> np.ndarray:
            out: Any = 0.0
            for j in range(s):
                if weights[j]:
                    out = out + (h * weights[j]) * (self._E(1.0 - tab.c[j], h, cache) * ks[j])
            return out

        return new, _error(tab, weighted), (ks[-1] if tab.fsal and not self.projects else None)

    def _step_plain(self, y: np.ndarray, h: float, k1: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray | ErrorPair | None, np.ndarray | None]:
        """No linear part: each stage sum is one new array accumulated in place."""
        tab = self.tableau
        self._last = self._dense = None  # the previous step's stages are not kept through this one
        ks = [k1]
        s = tab.stages
        scratch = bk.namespace(y).empty_like(y)
        u = y
        for i in range(1, s):
            u = _combine(y, ks, h * tab.a[i, :i], scratch)
            ks.append(self.rhs(u))
        if tab.fsal:  # the last stage's argument is the new state
            new = u
        else:
            new = _combine(y, ks, h * tab.b, scratch)
        err = _error(tab, lambda weights: _combine(None, ks, h * weights, scratch))
        if tab.dense is not None:  # for interpolate(), once the step is accepted
            self._last, self._dense = (y, new, h, ks), None
        return new, err, (ks[-1] if tab.fsal and not self.projects else None)


def _error(tab: ButcherTableau, weighted: Callable[[np.ndarray], Any]
           ) -> np.ndarray | ErrorPair | None:
    """The step's error estimate ``h sum_j b_error_j k_j`` (``weighted(b_error)``), ``None``
    without an embedded solution, and with a second estimate (``b_error_low``) the pair of
    both, which the controller combines (:meth:`PIController.error_norm`)."""
    if tab.b_error is None:
        return None
    err = weighted(tab.b_error)
    if tab.b_error_low is None:
        return err
    return ErrorPair(err, weighted(tab.b_error_low))


def _combine(y: np.ndarray | None, ks: list[np.ndarray], coefs: np.ndarray,
             scratch: np.ndarray) -> np.ndarray:
    """``y + sum_j coefs[j] ks[j]`` (``y`` may be ``None``) as one new array, the products
    formed in ``scratch``: two passes per nonzero coefficient, no other temporaries (NumPy or
    torch, :mod:`meanfield.backend`)."""
    out: np.ndarray | None = None
    multiply = np.multiply if isinstance(scratch, np.ndarray) else bk.multiply  # once, not per k
    for c, k in zip(coefs, ks):
        if not c:
            continue
        if out is None:
            out = k * float(c)  # a Python float keeps a float32 state float32 (NEP 50)
        else:
            multiply(k, float(c), out=scratch)
            out += scratch
    if out is None:
        return bk.namespace(ks[0]).zeros_like(ks[0]) if y is None else y * 1.0
    if y is not None:
        out += y
    return out


class EulerMaruyama:
    """``y <- y + h F(y) + sqrt(2 sigma h) xi`` (weak order 1), ``xi`` standard normal.

    On the sphere (``sphere=True``) the noise is projected onto the tangent space and the
    state renormalised, which supplies the Itô drift ``-(d-1) sigma x`` of spherical Brownian
    motion (docs/equations.md section 3: the generator ``sigma Laplacian``).

    The state may be a NumPy array or a torch tensor (:mod:`meanfield.backend`); ``xi`` is
    always drawn from the NumPy ``rng`` on the host (in float64) and moved to the state's
    backend, dtype and device, so that every backend sees the same noise for a given seed."""

    adaptive = False
    error_order = 0
    name = "euler_maruyama"

    def __init__(self, f: Rhs, sigma: float, rng: np.random.Generator, *, sphere: bool) -> None:
        self.f = f
        self.sigma = float(sigma)
        self.rng = rng
        self.sphere = sphere
        self.evaluations = 0

    def project(self, y: np.ndarray) -> np.ndarray:
        if not self.sphere:
            return y
        return y / bk.namespace(y).sqrt(bk.rows_dot(y, y))[..., None]

    def init(self, y: np.ndarray) -> None:
        return None

    def step(self, y: np.ndarray, h: float, stage: Any) -> tuple[np.ndarray, None, None]:
        self.evaluations += 1
        xi = bk.like(y, self.rng.standard_normal(tuple(y.shape)) * math.sqrt(2.0 * self.sigma * h))
        if self.sphere:
            xi = xi - bk.rows_dot(y, xi)[..., None] * y
        return y + h * self.f(y) + xi, None, None


__all__ = ["EulerMaruyama", "RungeKutta"]
