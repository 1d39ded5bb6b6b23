"""The circle's drift ``-d_theta(rho X)`` fused into four FFTs (docs/equations.md section 3, (3.4)).

.. autosummary::
   CircleDrift

The generic flow (:mod:`meanfield.spectral.flow`) asks its domain for one transform at a time, which
is clear but costs about 25 NumPy calls per evaluation: at ``N <= 1024``, where one FFT pair
takes 1–3 µs, that interpreter overhead dominated (benchmarks/bench_circle.py). Here the same drift
is one batched inverse FFT, two elementwise products, one forward FFT and one product:

1. the rows ``rho``, ``Z = z_mult c`` (SA) and ``G = s d_theta(grad_mult c)`` are written into
   the zero-padded input of one batched c2r plan on the 3/2-rule grid of ``M`` points;
2. ``X = G / Z`` (SA) or ``X = scale G`` (USA, ``scale`` folded into the row), flux ``rho X``;
3. one r2c plan, then ``-ik / M`` per coefficient.

FFTW plans and buffers are made once. The c2r plan preserves its input (pyFFTW's default),
so the zero padding is written once, not per call.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyfftw
from numpy.typing import ArrayLike

_PLAN = ("FFTW_ESTIMATE",)
"""Estimated plans: the same algorithm in every process (see ``circle._PLANNER_FLAGS``)."""


class CircleDrift:
    """``c -> -d_theta(rho X)`` in coefficients for ``X = s grad(phi) / m`` on the circle.

    ``phi`` has coefficients ``scale * grad_mult * c``; ``m = 1`` (Wasserstein, USA) or,
    with ``z_mult``, ``m = scale * Z`` with ``Z`` of coefficients ``z_mult * c`` (attention
    metric, SA), so that ``X = s grad(grad_mult c) / Z``.

    Attributes:
        evaluate: the drift, a function of the coefficients ``c`` (length ``N/2 + 1``)
            returning a new array.
    """

    def __init__(
        self,
        N: int,
        M: int,
        wavenumbers: np.ndarray,
        grad_mult: np.ndarray,
        scale: float,
        z_mult: np.ndarray | None,
        sign: float,
        threads: int = 1,
    ) -> None:
        K, H = N // 2 + 1, M // 2 + 1
        # row 0 is rho itself; the others are multipliers times c (complex: mixed
        # real-complex products are cast chunk by chunk)
        if z_mult is None:
            mults = [sign * scale * wavenumbers * grad_mult]
        else:
            mults = [np.asarray(z_mult, dtype=complex), sign * wavenumbers * grad_mult]
        rows = 1 + len(mults)
        spec = pyfftw.zeros_aligned((rows, H), dtype="complex128")
        real = pyfftw.empty_aligned((rows, M), dtype="float64")
        c2r = pyfftw.FFTW(spec, real, axes=(-1,), direction="FFTW_BACKWARD", flags=_PLAN,
                          threads=threads)
        spec[:] = 0.0  # planning may scribble on it; the padding stays zero from here on
        flux = pyfftw.empty_aligned(M, dtype="float64")
        flux_spec = pyfftw.empty_aligned(H, dtype="complex128")
        r2c = pyfftw.FFTW(flux, flux_spec, flags=(*_PLAN, "FFTW_DESTROY_INPUT"), threads=threads)
        self.X = np.empty(M) if z_mult is not None else real[1]
        """The velocity on the padded grid from the last evaluation."""
        self.evaluate = _fused(
            spec[:, :K], mults, c2r.execute, real, self.X, flux, r2c.execute, flux_spec[:K],
            -wavenumbers / M,
        )

    def max_speed(self) -> float:
        """``max |X|`` of the last evaluation (computed on demand: the solver needs it once
        per step, not once per stage)."""
        X = self.X
        return max(float(X.max()), -float(X.min()))


def _fused(
    spec: np.ndarray,
    mults: list[np.ndarray],
    c2r: Callable[[], None],
    real: np.ndarray,
    X: np.ndarray,
    flux: np.ndarray,
    r2c: Callable[[], None],
    flux_spec: np.ndarray,
    div_mult: np.ndarray,
) -> Callable[[np.ndarray], np.ndarray]:
    """The evaluation as a closure over its buffers, unrolled: at ``N = 256`` each NumPy
    call costs about half an FFT pair, so attribute lookups and loops matter. ``spec`` holds
    the rows' coefficients (``rho``, then ``mults[i] * c``) ahead of their zero padding."""
    mul, divide = np.multiply, np.divide
    rho_spec, shape = spec[0], spec[0].shape
    rho, row1 = real[0], real[1]
    if len(mults) == 2:  # SA: rows rho, Z, G
        z_mult, g_mult = mults
        z_spec, g_spec = spec[1], spec[2]
        grad = real[2]

        def drift(c: np.ndarray) -> np.ndarray:
            if getattr(c, "shape", None) != shape:  # a scalar would broadcast silently
                _bad_shape(c, shape)
            rho_spec[...] = c
            mul(z_mult, c, z_spec)
            mul(g_mult, c, g_spec)
            c2r()
            divide(grad, row1, X)  # X = s grad(grad_mult c) / Z
            mul(X, rho, flux)
            r2c()
            return flux_spec * div_mult

    else:  # USA: rows rho, X
        (g_mult,), g_spec = mults, spec[1]

        def drift(c: np.ndarray) -> np.ndarray:
            if getattr(c, "shape", None) != shape:
                _bad_shape(c, shape)
            rho_spec[...] = c
            mul(g_mult, c, g_spec)
            c2r()
            mul(row1, rho, flux)  # X = s scale grad(grad_mult c) is row 1 itself
            r2c()
            return flux_spec * div_mult

    return drift


def _bad_shape(c: ArrayLike, shape: tuple[int, ...]) -> None:
    msg = (f"expected {shape[0]} Fourier coefficients (k = 0..N/2) as an array, got shape "
           f"{np.shape(c)}")
    raise ValueError(msg)


__all__ = ["CircleDrift"]
