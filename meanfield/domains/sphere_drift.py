r"""The sphere's drift ``-div(rho X)`` with shared stages (docs/equations.md section 3, (3.4)).

.. autosummary::
   SphereDrift
   SphereGrid

A spherical-harmonic transform is a Legendre stage (``a_lm -> L_m(theta_j)``, ducc0's
``alm2leg``/``leg2alm``) and a Fourier stage along each ring. The generic flow composes
``synthesize_padded``, ``gradient_padded`` and ``divergence_padded``; here the stages of one
evaluation are shared and batched:

* Legendre stages (ducc0), three forward and two adjoint, written straight into (and read
  straight from) the zero-padded spectra of the ring FFTs: ``rho``; ``Z = z_mult c``;
  ``R (grad_mult c)``, the coefficients of ``sin(theta) d_theta phi`` (degree ``lmax + 1``,
  see :mod:`meanfield.domains.sphere`). ``d_phi`` is ``i m`` on the Legendre rows, so for SA,
  where ``grad_mult`` is a multiple of ``z_mult`` on ``l >= 1``, the ``d_phi`` row is the
  ``Z`` row times ``i m`` (no Legendre stage of its own); USA transforms ``i m grad_mult c``.
* Fourier stages: one batched ``ducc0.fft.c2r`` over all rows and rings, one ``r2c`` for the
  two flux components, into work arrays kept between calls (2x faster than the Fourier
  stage of ducc0's two-stage SHTs, ``leg2map``/``map2leg``, which go ring by ring).
* Every per-ring factor (``sqrt(4 pi)`` of ``B_lm``, ``1/sin theta`` of the gradient, the
  quadrature weight and ``1/sin theta`` of the weak divergence, the sign) is one factor
  ``f_j`` applied to the ``rho`` row in Legendre space, where rows are a third the size of
  grid rows.

Then ``flux = (f rho / Z) (sin d_theta phi, d_phi phi)`` (SA) or ``f rho (...)`` (USA) on the
grid: two elementwise calls. The divergence is ``R^T e - i m h`` with ``e``, ``h`` the adjoint
Legendre stages of the two flux components.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Protocol

import ducc0
import numpy as np

_SQRT4PI = math.sqrt(4.0 * math.pi)


class SphereGrid(Protocol):
    """What :class:`SphereDrift` reads of a :class:`~meanfield.domains.sphere.Sphere`: its
    band limit, padded grid and Legendre layout (declared here, not imported, since
    ``sphere.py`` imports this module)."""

    lmax: int
    nalm: int
    nthreads: int
    ntheta_padded: int
    nphi_padded: int

    @property
    def degrees(self) -> np.ndarray: ...
    @property
    def orders(self) -> np.ndarray: ...
    @property
    def padded_grid(self) -> tuple[np.ndarray, np.ndarray]: ...
    @property
    def padded_ring_weights(self) -> np.ndarray: ...
    @property
    def theta_derivative(self) -> tuple[Any, Any, np.ndarray]:
        """``(R, R^T, mstart)`` (:class:`~meanfield.domains.sphere.ThetaDerivative`)."""
        ...

    def coefficients(self, c: np.ndarray) -> np.ndarray: ...


class SphereDrift:
    """``c -> -div(rho X)`` in coefficients on a :class:`~meanfield.domains.sphere.Sphere`.

    ``X = s scale grad(grad_mult c)`` when ``z_mult`` is ``None`` (USA), else
    ``X = s grad(grad_mult c) / (z_mult c)`` (SA); see :meth:`Domain.fused_drift`.

    It reads only the sphere's public interface: ``lmax``, ``nalm``, ``nthreads``, the padded
    grid (``ntheta_padded``, ``nphi_padded``, ``padded_grid``, ``padded_ring_weights``),
    ``degrees``, ``orders``, ``theta_derivative`` and ``coefficients``.

    Attributes:
        evaluate: the drift, a function of the coefficients ``c`` returning a new array.
    """

    def __init__(
        self,
        sphere: SphereGrid,  # a Sphere: its lmax, grid and SHT
        grad_mult: np.ndarray,
        scale: float,
        z_mult: np.ndarray | None,
        sign: float,
    ) -> None:
        S = sphere
        L, n, nphi, nthreads = S.lmax, S.ntheta_padded, S.nphi_padded, S.nthreads
        H = nphi // 2 + 1
        theta = S.padded_grid[0]
        sin = np.sin(theta)
        R, RT, mstart = S.theta_derivative
        im_m = 1j * np.arange(L + 1)
        degrees_pos = S.degrees > 0
        softmax = z_mult is not None
        shared = False
        if z_mult is not None:  # softmax
            # d_phi shares Z's Legendre stage when grad_mult = alpha z_mult on l >= 1
            # (the l = 0 entry has m = 0, which d_phi annihilates)
            zpos, gpos = z_mult[degrees_pos], grad_mult[degrees_pos]
            k = int(np.argmax(np.abs(zpos))) if zpos.size else 0
            alpha = float(gpos[k] / zpos[k]) if zpos.size and zpos[k] != 0 else 0.0
            shared = bool(np.allclose(gpos, alpha * zpos, rtol=1e-13, atol=0.0))
        # ring factor of the rho row: sqrt(4pi) [B_lm] * (sqrt(4pi)/sin) [gradient] *
        # w/(sqrt(4pi) sin) [weak divergence] * s, and for USA scale * sqrt(4pi) as Z's
        # sqrt(4pi) does not cancel: f = s w / sin^2 (SA), s scale sqrt(4pi) w / sin^2 (USA)
        w = S.padded_ring_weights
        f_ring = sign * w / sin**2 * (1.0 if softmax else scale * _SQRT4PI)
        rows = 4 if softmax else 3
        spec = np.zeros((rows, n, H), dtype=complex)  # the padding m > lmax stays zero
        real = np.empty((rows, n, nphi))
        flux = np.empty((2, n, nphi))
        flux_spec = np.empty((2, n, H), dtype=complex)
        c2r_fft, r2c_fft = ducc0.fft.c2r, ducc0.fft.r2c

        def c2r() -> None:  # unnormalised, as ducc0's leg2map
            c2r_fft(spec, axes=(-1,), lastsize=nphi, forward=False, inorm=0, out=real,
                    nthreads=nthreads)

        def r2c() -> None:
            r2c_fft(flux, axes=(-1,), forward=True, inorm=0, out=flux_spec, nthreads=nthreads)

        leg = spec[:, :, : L + 1]  # Legendre rows, views into the FFT input
        flux_leg = flux_spec[:, :, : L + 1]

        self._real = real
        self._softmax = softmax
        self._speed_factor = (1.0 / sin if softmax else abs(scale) * _SQRT4PI / sin)[:, None]
        self._grad_rows = real[2:4] if softmax else real[1:3]

        alm2leg, leg2alm = ducc0.sht.alm2leg, ducc0.sht.leg2alm
        mval = np.arange(L + 1, dtype=np.uintp)
        f_col = f_ring[:, None]
        im_all = 1j * S.orders
        mul, divide = np.multiply, np.divide
        rho_leg = leg[0:1]
        # complex multipliers: real-times-complex products are cast chunk by chunk
        g_mult_c = np.asarray(grad_mult, dtype=complex)
        if z_mult is not None:  # softmax; drift reads z_mult_c, z_leg (and dphi if shared)
            z_mult_c = np.asarray(z_mult, dtype=complex)
            z_leg, gt_leg, gp_leg = leg[1:2], leg[2:3], leg[3:4]
            R_grad = (R * alpha).tocsr() if shared else R
            if shared:
                dphi = alpha * im_m
        else:
            gt_leg, gp_leg = leg[1:2], leg[2:3]
        rho_row = real[0]
        grad_rows = self._grad_rows
        # work arrays for coefficients, kept between calls (fresh ones cost page faults)
        zc = np.empty(S.nalm, dtype=complex)
        gc = np.empty(S.nalm, dtype=complex)
        e = np.empty((1, R.shape[0]), dtype=complex)
        h = np.empty((1, S.nalm), dtype=complex)

        def legendre(alm: np.ndarray, out: np.ndarray, lmax: int = L, **kw: Any) -> None:
            alm2leg(alm=alm.reshape(1, -1), lmax=lmax, theta=theta, spin=0, nthreads=nthreads,
                    leg=out, **kw)

        def drift(c: np.ndarray) -> np.ndarray:
            c = S.coefficients(c)  # shape check, contiguous complex
            legendre(c, rho_leg)
            mul(rho_leg, f_col, rho_leg)
            if softmax:
                mul(z_mult_c, c, zc)
                legendre(zc, z_leg)
            if shared:
                mul(z_leg, dphi, gp_leg)
                gc_theta = R_grad @ zc
            else:
                mul(g_mult_c, c, gc)
                gc_theta = R @ gc
                mul(gc, im_all, gc)
                legendre(gc, gp_leg)
            legendre(gc_theta, gt_leg, L + 1, mval=mval, mstart=mstart)
            c2r()
            if softmax:
                divide(rho_row, real[1], rho_row)  # f rho / Z, in place: rho is done with
            mul(grad_rows, rho_row, flux)
            r2c()
            leg2alm(leg=flux_leg[0:1], lmax=L + 1, theta=theta, spin=0, mval=mval,
                    mstart=mstart, nthreads=nthreads, alm=e)
            leg2alm(leg=flux_leg[1:2], lmax=L, theta=theta, spin=0, nthreads=nthreads, alm=h)
            out = RT @ e[0]
            mul(h[0], im_all, h[0])
            out -= h[0]
            return out

        self.evaluate: Callable[[np.ndarray], np.ndarray] = drift

    def max_speed(self) -> float:
        """``max |X|`` (componentwise) of the last evaluation, from the rows it kept."""
        g = np.max(np.abs(self._grad_rows), axis=0) * self._speed_factor
        if self._softmax:
            g /= np.abs(self._real[1])
        return float(g.max())


__all__ = ["SphereDrift", "SphereGrid"]
