"""Fourier series on the circle ``S^1`` (pyFFTW).

.. autosummary::
   Circle

Grid ``theta_j = 2 pi j / N``; coefficients ``c_k``, ``k = 0..N/2``, of
``f(theta) = sum_{|k| < N/2} c_k e^{i k theta}`` (``c_{-k} = conj(c_k)``; the Nyquist
coefficient is kept at zero so that derivatives stay real). Products are formed on a grid of
``M >= 3N/2`` points (the 3/2 rule), which removes all aliasing of quadratic terms.
FFTW plans are made once per domain and reused; they are estimated, not measured, so that
results are bitwise the same in every process.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, Callable

import ducc0
import numpy as np
import pyfftw

from meanfield.domains.base import Domain, NodeRule
from meanfield.domains.circle_drift import CircleDrift
from meanfield.domains.geometry import SphereGeometry

_PLANNER_FLAGS = ("FFTW_ESTIMATE", "FFTW_DESTROY_INPUT")
"""FFTW plans by estimate, not measurement: a measured plan depends on timings, so two
processes may pick different algorithms and round differently (1e-14 apart, and a step-size
controller can turn that into one step more); estimated plans are the same in every process,
so a solve is bitwise repeatable (tests/meanfield/spectral/test_repeatable.py)."""


class _RealFFT:
    """A pair of FFTW plans (r2c, c2r) of one size, on aligned buffers made once."""

    def __init__(self, n: int, threads: int = 1) -> None:
        self.n = n
        self.real = pyfftw.empty_aligned(n, dtype="float64")
        self.spec = pyfftw.empty_aligned(n // 2 + 1, dtype="complex128")
        self.r2c = pyfftw.FFTW(self.real, self.spec, flags=_PLANNER_FLAGS, threads=threads)
        self.c2r = pyfftw.FFTW(
            self.spec, self.real, direction="FFTW_BACKWARD", flags=_PLANNER_FLAGS, threads=threads
        )

    def analysis(self, f: np.ndarray, keep: int) -> np.ndarray:
        """``rfft(f)[:keep] / n`` (a new array)."""
        self.real[:] = f
        self.r2c.execute()
        out = self.spec[:keep] * (1.0 / self.n)
        return out

    def synthesis(self, c: np.ndarray) -> np.ndarray:
        """``sum c_k e^{ik theta}`` on ``n`` points (zero-padded; a view of the buffer)."""
        m = c.shape[-1]
        self.spec[:m] = c
        self.spec[m:] = 0.0
        self.c2r.execute()
        return self.real


def _fast_size(n: int) -> int:
    m = pyfftw.next_fast_len(n)
    return m + (m % 2)


class Circle(Domain):
    """Fourier spectral domain on ``S^1`` with ``N`` grid points (``N`` even, ``N >= 8``).

    Args:
        N: number of grid points (even, at least 8).
        threads: FFTW threads.

    Attributes:
        grid: the angles ``theta_j = 2 pi j / N``.
    """

    name = "circle"
    dims = ("theta",)
    low_modes = (1, 2, 3, 4)
    geometry = SphereGeometry(2)

    def __init__(self, N: int, threads: int = 1) -> None:
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)):
            msg = f"N must be an integer, got {N!r}"
            raise ValueError(msg)
        if N < 8 or N % 2:
            msg = f"N must be an even integer >= 8, got N={N}"
            raise ValueError(msg)
        if int(threads) < 1:
            msg = f"threads must be >= 1, got {threads!r}"
            raise ValueError(msg)
        self.N = int(N)
        self.threads = int(threads)
        self.M = _fast_size(math.ceil(3 * self.N / 2))

    # -- description ---------------------------------------------------------------------

    @property
    def resolution(self) -> int:
        return self.N

    def with_resolution(self, resolution: int) -> Circle:
        return Circle(resolution, threads=self.threads)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "N": self.N, "threads": self.threads}

    @cached_property
    def grid(self) -> np.ndarray:
        return 2 * np.pi * np.arange(self.N) / self.N

    @property
    def coords(self) -> dict[str, np.ndarray]:
        return {"theta": self.grid}

    @cached_property
    def points(self) -> np.ndarray:
        return np.stack([np.cos(self.grid), np.sin(self.grid)], axis=-1)

    @cached_property
    def weights(self) -> np.ndarray:
        return np.full(self.N, 2 * np.pi / self.N)

    @cached_property
    def padded_weights(self) -> np.ndarray:
        return np.full(self.M, 2 * np.pi / self.M)

    @cached_property
    def padded_grid(self) -> np.ndarray:
        return 2 * np.pi * np.arange(self.M) / self.M

    @cached_property
    def degrees(self) -> np.ndarray:
        return np.arange(self.N // 2 + 1, dtype=float)

    @cached_property
    def wavenumbers(self) -> np.ndarray:
        """``i k`` with the Nyquist entry zero (the derivative's multiplier)."""
        ik = 1j * self.degrees
        ik[-1] = 0.0
        return ik

    @cached_property
    def parseval_weights(self) -> np.ndarray:
        w = np.full(self.N // 2 + 1, 4 * np.pi)
        w[0] = w[-1] = 2 * np.pi
        return w

    @property
    def point_count(self) -> int:
        return self.N

    def node_rule(self) -> NodeRule:
        """The trapezoid rule on the ``N`` grid angles (:func:`meanfield.lagrangian.nodes.circle`)."""
        return self.grid_node_rule(f"circle: trapezoid, N={self.N}")

    @classmethod
    def from_options(cls, resolution: int, d: int) -> Circle:
        """``Circle(resolution)`` (``d`` is 2)."""
        return cls(resolution)

    @classmethod
    def examples(cls) -> tuple[Circle, ...]:
        return (cls(8), cls(64))

    @property
    def min_spacing(self) -> float:
        return 2 * np.pi / self.N

    # -- transforms ----------------------------------------------------------------------

    @cached_property
    def _fft(self) -> _RealFFT:
        return _RealFFT(self.N, self.threads)

    @cached_property
    def _fft_padded(self) -> _RealFFT:
        return _RealFFT(self.M, self.threads)

    def forward(self, f: np.ndarray) -> np.ndarray:
        f = np.asarray(f, dtype=float)
        if f.shape != (self.N,):
            msg = f"expected values on the {self.N}-point grid, got shape {f.shape}"
            raise ValueError(msg)
        c = self._fft.analysis(f, self.N // 2 + 1)
        c[-1] = 0.0
        return c

    def backward(self, c: np.ndarray) -> np.ndarray:
        if np.shape(c) != (self.N // 2 + 1,):
            msg = f"expected {self.N // 2 + 1} Fourier coefficients (k = 0..N/2), got shape {np.shape(c)}"
            raise ValueError(msg)
        return self._fft.synthesis(c).copy()

    def synthesize_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        vals = self._fft_padded.synthesis(c)
        if out is None:
            return vals.copy()
        np.copyto(out, vals)
        return out

    def gradient_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        vals = self._fft_padded.synthesis(self.wavenumbers * c)
        if out is None:
            return vals.copy()[None, :]
        np.copyto(out[0], vals)
        return out

    def divergence_padded(self, flux: np.ndarray) -> np.ndarray:
        c = self._fft_padded.analysis(flux[0], self.N // 2 + 1)
        c *= self.wavenumbers
        return c

    @staticmethod
    def dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return u[0] * v[0]

    def fused_drift(
        self, grad_mult: np.ndarray, scale: float, z_mult: np.ndarray | None, sign: float
    ) -> CircleDrift:
        """The drift in four FFTs (:class:`~meanfield.domains.circle_drift.CircleDrift`)."""
        return CircleDrift(self.N, self.M, self.wavenumbers, grad_mult, scale, z_mult, sign,
                           threads=self.threads)

    def prolong(self, c: np.ndarray, coarse: Domain) -> np.ndarray:
        if not isinstance(coarse, Circle):
            msg = f"cannot prolong from {coarse!r} to {self!r}"
            raise ValueError(msg)
        out = np.zeros(self.N // 2 + 1, dtype=complex)
        m = min(c.shape[-1], out.shape[-1])
        out[:m] = c[:m]
        out[-1] = 0.0
        return out

    def real_mode(self, key: Any) -> np.ndarray:
        """``cos(k theta)`` for ``key = k >= 0``, ``sin(|k| theta)`` for ``key = k < 0``."""
        k = int(key)
        if abs(k) >= self.N // 2:
            msg = f"mode k={k} is not resolved by N={self.N} (need |k| < N/2)"
            raise ValueError(msg)
        return np.cos(k * self.grid) if k >= 0 else np.sin(-k * self.grid)

    def zonal_multipliers(self, kernel: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``lambda_k = int_0^{2pi} W(cos theta) e^{-ik theta} d theta`` (trapezoid, exact
        for trigonometric polynomials; 8x oversampled)."""
        nf = max(8 * self.N, 1024)
        th = 2 * np.pi * np.arange(nf) / nf
        w = np.asarray(kernel(np.cos(th)), dtype=float)
        lam = 2 * np.pi * np.fft.rfft(w).real / nf
        return lam[: self.N // 2 + 1]

    # -- particles -----------------------------------------------------------------------

    @staticmethod
    def angles(x: np.ndarray) -> np.ndarray:
        """Angles of points given as (n, 2) Cartesian coordinates or already as angles (n,)."""
        x = np.asarray(x, dtype=float)
        if x.ndim == 2 and x.shape[-1] == 2:
            return np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        if x.ndim == 1:
            return np.mod(x, 2 * np.pi)
        msg = f"points on the circle must have shape (n, 2) or (n,), got {x.shape}"
        raise ValueError(msg)

    _NUFFT_EPS = 1e-13  # ducc0.nufft accuracy (relative to the sum of |coefficients|)

    def _full_spectrum(self, c: np.ndarray) -> np.ndarray:
        """Hermitian completion ``c_{-k} = conj(c_k)`` in FFT order (Nyquist zero)."""
        h = self.N // 2
        full = np.zeros(self.N, dtype=complex)
        full[:h] = c[:h]
        full[h + 1 :] = np.conj(c[1:h][::-1])
        return full

    def evaluate(self, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """``sum_k c_k e^{ik theta}`` at arbitrary angles (ducc0 type-2 NUFFT)."""
        theta = np.mod(np.asarray(theta, dtype=float), 2 * np.pi)
        vals = ducc0.nufft.u2nu(grid=self._full_spectrum(c), coord=theta.reshape(-1, 1),
                                forward=False, epsilon=self._NUFFT_EPS, fft_order=True)
        return vals.real.reshape(theta.shape)

    def values_at(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of ``sum c_k e^{ik theta}`` at points ``x`` (n, 2) or angles (n,)
        (:meth:`evaluate`, a NUFFT accurate to ``1e-13 sum |c_k|``)."""
        return self.evaluate(c, self.angles(x))

    def project(self, x: np.ndarray) -> np.ndarray:
        """``c_k = (1/(2 pi n)) sum_i e^{-i k theta_i}`` (empirical Fourier coefficients,
        ducc0 type-1 NUFFT)."""
        th = self.angles(x)
        n = th.size
        if n < 1:
            msg = "project needs at least one point"
            raise ValueError(msg)
        full = ducc0.nufft.nu2u(points=np.ones(n, dtype=complex), coord=th.reshape(-1, 1),
                                forward=True, epsilon=self._NUFFT_EPS, out=np.empty(self.N, complex),
                                fft_order=True)
        c = full[: self.N // 2 + 1] / (2 * np.pi * n)
        c[-1] = 0.0
        return c

    def cdf(self, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """``F(theta) = int_0^theta rho`` from coefficients (exact for the truncated series):
        ``c_0 theta + P(theta) - P(0)`` with ``P`` the series of ``c_k / (ik)``."""
        theta = np.asarray(theta, dtype=float)
        k = self.degrees
        p = np.zeros_like(c)
        p[1:-1] = c[1:-1] / (1j * k[1:-1])
        p0 = 2 * float(np.sum(p[1:-1].real))
        return np.real(c[0]) * theta + self.evaluate(p, theta) - p0

    def inverse_cdf(self, c: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Angles ``theta`` with ``F(theta) = u * mass`` (Newton from an interpolated start)."""
        u = np.asarray(u, dtype=float)
        mass = 2 * np.pi * np.real(c[0])
        fine = 2 * np.pi * np.arange(16 * self.N + 1) / (16 * self.N)
        F = np.maximum.accumulate(self.cdf(c, fine) / mass)
        th = np.interp(u, F, fine)
        for _ in range(4):
            res = self.cdf(c, th) / mass - u
            dens = self.evaluate(c, th) / mass
            th = np.clip(th - res / np.maximum(dens, 1e-12), 0.0, 2 * np.pi)
        return th

    def sample(self, rho: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. angles from ``rho`` by inverting its spectral CDF; (n, 2) points."""
        th = self.inverse_cdf(self.forward(rho), rng.random(int(n)))
        return np.stack([np.cos(th), np.sin(th)], axis=-1)

    def quantiles(self, rho: np.ndarray, n: int) -> np.ndarray:
        """Deterministic points ``F^{-1}((i + 1/2)/n)``, ``i = 0..n-1``; (n, 2) points."""
        c = self.forward(rho)
        u = (np.arange(int(n)) + 0.5) / n
        th = self.inverse_cdf(c, u)
        return np.stack([np.cos(th), np.sin(th)], axis=-1)


__all__ = ["Circle"]
