r"""Spherical harmonics on ``S^2`` (ducc0.sht), for the mean-field PDE of docs/equations.md section 3.

.. autosummary::
   Sphere

Coefficients ``c_lm`` (``0 <= m <= l <= lmax``, ducc0/healpy order ``m``-major) of a real
function

.. math::  f = \sum_{l} c_{l0} B_{l0} + 2\,\mathrm{Re} \sum_{l, m>0} c_{lm} B_{lm},
           \qquad B_{lm} = \sqrt{4\pi}\, Y_{lm},

with ``Y_lm`` the orthonormal harmonics of ducc0 (Condon–Shortley phase). The factor
``sqrt(4 pi)`` makes ``B_00 = 1``, so ``c_00`` is the mean of ``f`` (the base class's
``mass = c_00 |S^2|``) and the ``m = 0`` column agrees with :class:`ZonalSphere` at ``d = 3``.
Parseval: ``int f g dA = sum_lm w_m Re(c_lm conj(d_lm))`` with ``w_0 = 4 pi``, ``w_m = 8 pi``.

Grids are Gauss–Legendre in colatitude (``lmax + 1`` rings, exact analysis) times an
equispaced longitude grid. Products are formed on the 3/2-rule grid (``ntheta >= (3 lmax +
2)/2``, ``nphi >= 3 lmax + 1``): there the quadrature integrates ``rho * grad(phi) . grad(Y)``
exactly, so quadratic terms are free of aliasing. Gradients are spin-1 syntheses (ducc0 mode
``DERIV1``: ``(d_theta f, d_phi f / sin theta)``); the divergence is minus its adjoint
(``int Y div F = -int grad Y . F``), a weighted spin-1 adjoint synthesis.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, Callable, NamedTuple

import ducc0
import numpy as np

from meanfield.arguments import count
from meanfield.domains.base import Domain, NodeRule
from meanfield.domains.geometry import SphereGeometry
from meanfield.domains.sphere_drift import SphereDrift

_SQRT4PI = math.sqrt(4.0 * math.pi)
_EPS_GENERAL = 1e-12  # NUFFT accuracy of ducc0's synthesis_general (double precision floor 2e-13)


def _even_good_size(n: int) -> int:
    """Smallest even FFT-friendly size ``>= n``."""
    m = ducc0.fft.good_size(int(n), True)
    while m % 2:
        m = ducc0.fft.good_size(m + 1, True)
    return m


def _legendre_table(x: np.ndarray, lmax: int) -> np.ndarray:
    """``sqrt(2l+1) P_l(x)`` for ``l = 0..lmax``, shape ``x.shape + (lmax+1,)``."""
    out = np.empty(np.shape(x) + (lmax + 1,))
    p0, p1 = np.ones_like(x), np.asarray(x, dtype=float)
    out[..., 0] = p0
    if lmax >= 1:
        out[..., 1] = p1
    for l in range(1, lmax):
        p0, p1 = p1, ((2 * l + 1) * x * p1 - l * p0) / (l + 1)
        out[..., l + 1] = p1
    return out * np.sqrt(2 * np.arange(lmax + 1) + 1.0)


class ThetaDerivative(NamedTuple):
    """The sparse map ``R`` from the coefficients ``c`` of ``f`` (degree ``<= lmax``) to those
    of ``sin(theta) d_theta f`` (degree ``<= lmax + 1``), with its transpose.

    ``sin d_theta Y_lm = l A_{l+1,m} Y_{l+1,m} - (l+1) A_lm Y_{l-1,m}``,
    ``A_lm = sqrt((l^2 - m^2)/(4 l^2 - 1))``. Rows are in ducc0's ``m``-major order for
    ``lmax + 1`` and orders ``m <= lmax``, starting at ``mstart[m]`` (ducc0's ``mstart``).
    """

    R: Any
    """``scipy.sparse`` CSR matrix, shape ``(n_out, nalm)`` (complex entries)."""
    RT: Any
    """Its transpose (CSR): the adjoint, used by the weak divergence."""
    mstart: np.ndarray
    """Start of each order ``m`` in the degree-``lmax + 1`` layout (``uintp``)."""


class Sphere(Domain):
    """Spherical-harmonic domain on ``S^2`` up to degree ``lmax`` (docs/equations.md section 3).

    Args:
        lmax: largest degree kept (``>= 3``).
        nthreads: threads for ducc0 (``>= 1``).

    Attributes:
        grid: ``(colatitude, longitude)``: the Gauss–Legendre colatitudes (ascending) and
            the longitudes ``2 pi j / nphi``.
    """

    name = "sphere"
    dims = ("colatitude", "longitude")
    low_modes = ((1, 0), (2, 1), (3, -2), (4, 3))
    geometry = SphereGeometry(3)

    def __init__(self, lmax: int, nthreads: int = 1) -> None:
        self.lmax = count(lmax, "lmax", 3)
        self.nthreads = count(nthreads, "nthreads", 1)
        L = self.lmax
        self.ntheta = L + 1
        self.nphi = _even_good_size(2 * L + 2)
        self.ntheta_padded = (3 * L + 3) // 2  # >= (3L + 2)/2: 2n - 1 >= 3L
        self.nphi_padded = _even_good_size(3 * L + 1)
        self.nalm = (L + 1) * (L + 2) // 2

    # -- description ---------------------------------------------------------------------

    @property
    def resolution(self) -> int:
        return self.lmax

    def with_resolution(self, resolution: int) -> Sphere:
        return Sphere(resolution, nthreads=self.nthreads)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "lmax": self.lmax, "nthreads": self.nthreads}

    def index(self, l: int, m: int) -> int:
        """Position of ``c_lm`` (``0 <= m <= l <= lmax``) in a coefficient array."""
        l, m = int(l), int(m)
        if not 0 <= m <= l <= self.lmax:
            msg = f"(l, m) = ({l}, {m}) is not a stored mode (need 0 <= m <= l <= {self.lmax})"
            raise ValueError(msg)
        return m * (2 * self.lmax + 1 - m) // 2 + l

    @cached_property
    def orders(self) -> np.ndarray:
        """Order ``m`` of each stored coefficient."""
        L = self.lmax
        return np.concatenate([np.full(L + 1 - m, m, dtype=float) for m in range(L + 1)])

    @cached_property
    def degrees(self) -> np.ndarray:
        L = self.lmax
        return np.concatenate([np.arange(m, L + 1, dtype=float) for m in range(L + 1)])

    @cached_property
    def parseval_weights(self) -> np.ndarray:
        return np.where(self.orders == 0, 4 * np.pi, 8 * np.pi)

    @staticmethod
    def _rings(ntheta: int) -> np.ndarray:
        return ducc0.misc.GL_thetas(ntheta)  # from the north pole down, as ducc0.sht uses them

    @staticmethod
    def _ring_weights(ntheta: int, nphi: int) -> np.ndarray:
        return ducc0.sht.get_gridweights("GL", ntheta) / nphi

    @cached_property
    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        return self._rings(self.ntheta), 2 * np.pi * np.arange(self.nphi) / self.nphi

    @property
    def coords(self) -> dict[str, np.ndarray]:
        theta, phi = self.grid
        return {"colatitude": theta, "longitude": phi}

    @cached_property
    def points(self) -> np.ndarray:
        theta, phi = self.grid
        st = np.sin(theta)[:, None]
        z = np.broadcast_to(np.cos(theta)[:, None], (theta.size, phi.size))
        return np.stack([st * np.cos(phi), st * np.sin(phi), z], axis=-1)

    @cached_property
    def ring_weights(self) -> np.ndarray:
        """Quadrature weight of each node on each ring of the grid (Gauss–Legendre weight
        divided by ``nphi``): ``weights`` is this column repeated along longitude."""
        return self._ring_weights(self.ntheta, self.nphi)

    @cached_property
    def padded_ring_weights(self) -> np.ndarray:
        """:attr:`ring_weights` of the 3/2-rule grid (one per ring of ``padded_grid``)."""
        return self._ring_weights(self.ntheta_padded, self.nphi_padded)

    @cached_property
    def weights(self) -> np.ndarray:
        return np.repeat(self.ring_weights[:, None], self.nphi, axis=1)

    @cached_property
    def padded_weights(self) -> np.ndarray:
        return np.repeat(self.padded_ring_weights[:, None], self.nphi_padded, axis=1)

    @cached_property
    def padded_grid(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.nphi_padded
        return self._rings(self.ntheta_padded), 2 * np.pi * np.arange(n) / n

    @property
    def point_count(self) -> int:
        return self.ntheta * self.nphi

    def node_rule(self) -> NodeRule:
        """Gauss–Legendre x trapezoid: the grid (:func:`meanfield.lagrangian.nodes.sphere`)."""
        return self.grid_node_rule(f"sphere: Gauss-Legendre x trapezoid, lmax={self.lmax}, "
                                   f"{self.ntheta} x {self.nphi}")

    @classmethod
    def from_options(cls, resolution: int, d: int) -> Sphere:
        """``Sphere(resolution)`` (``d`` is 3)."""
        return cls(resolution)

    @classmethod
    def examples(cls) -> tuple[Sphere, ...]:
        return (cls(3), cls(16))

    @property
    def min_spacing(self) -> float:
        """``pi / (lmax + 1)``: the resolution of a degree-``lmax`` band limit.

        The longitude spacing near the poles is smaller, but a spectral method on the sphere
        has an isotropic resolution, and its explicit step is bounded by ``|X| lmax``.
        """
        return math.pi / (self.lmax + 1)

    # -- transforms ----------------------------------------------------------------------

    def coefficients(self, c: np.ndarray) -> np.ndarray:
        """``c`` as a C-contiguous complex array of shape ``(nalm,)`` (no copy when it is
        one already); another shape raises ``ValueError``."""
        c = np.asarray(c)
        if c.shape != (self.nalm,):
            msg = f"expected {self.nalm} coefficients for lmax={self.lmax}, got shape {c.shape}"
            raise ValueError(msg)
        return np.ascontiguousarray(c, dtype=complex)

    def _alm(self, c: np.ndarray) -> np.ndarray:
        return self.coefficients(c).reshape(1, -1)

    def _scale(self, ntheta: int) -> np.ndarray:
        """``sqrt(4 pi)`` per ring (``B_lm = sqrt(4 pi) Y_lm``), cached per ring count."""
        cache = self.__dict__.setdefault("_scale_cache", {})
        if ntheta not in cache:
            cache[ntheta] = np.full(ntheta, _SQRT4PI)
        return cache[ntheta]

    @cached_property
    def _adjoint_factor(self) -> np.ndarray:
        return self.ring_weights / _SQRT4PI

    def _synth(self, c: np.ndarray, ntheta: int, nphi: int, mode: str = "STANDARD") -> np.ndarray:
        spin = 1 if mode == "DERIV1" else 0
        return ducc0.sht.synthesis_2d(
            alm=self._alm(c), spin=spin, lmax=self.lmax, geometry="GL", ntheta=ntheta,
            nphi=nphi, nthreads=self.nthreads, mode=mode,
            ringfactor=self._scale(ntheta),
        )

    def _adjoint(self, f: np.ndarray, factor: np.ndarray, mode: str = "STANDARD") -> np.ndarray:
        """Quadrature (``factor`` = ring weights / sqrt(4 pi)) then adjoint synthesis."""
        spin = 1 if mode == "DERIV1" else 0
        alm = ducc0.sht.adjoint_synthesis_2d(
            map=f, spin=spin, lmax=self.lmax, geometry="GL", nthreads=self.nthreads,
            mode=mode, ringfactor=factor,
        )
        return alm[0]

    def forward(self, f: np.ndarray) -> np.ndarray:
        f = np.asarray(f, dtype=float)
        if f.shape != (self.ntheta, self.nphi):
            msg = f"expected values on the {self.ntheta} x {self.nphi} grid, got shape {f.shape}"
            raise ValueError(msg)
        return self._adjoint(np.ascontiguousarray(f)[None], self._adjoint_factor)

    def backward(self, c: np.ndarray) -> np.ndarray:
        return self._synth(c, self.ntheta, self.nphi)[0]

    # -- dealiased calculus (the solver's hot path) ----------------------------------------
    #
    # Scalar transforms only (a spin-1 transform costs ~3 scalar ones in ducc0). With ``R``
    # the sparse map from ``c`` to the coefficients of ``sin(theta) d_theta f`` (degree
    # ``lmax + 1``; ``sin d_theta Y_lm = l A_{l+1,m} Y_{l+1,m} - (l+1) A_lm Y_{l-1,m}``,
    # ``A_lm = sqrt((l^2 - m^2)/(4 l^2 - 1))``):
    #   grad f = (synth(R c), synth(i m c)) / sin(theta)   [one Legendre pass per component]
    #   div F  = -R^T adj(F_theta / sin) + i m adj(F_phi / sin)
    # The divergence is the weak form ``int Y div F = -int grad Y . F``; the quadrature sees
    # the same integrand at every node as with spin-1 transforms, so it is as exact. Work
    # arrays are kept between calls (fresh multi-MB arrays cost page faults).

    @cached_property
    def theta_derivative(self) -> ThetaDerivative:
        """``(R, R^T, mstart)``: ``R`` from degree ``lmax`` to ``lmax + 1`` (``m <= lmax``),
        the coefficients of ``sin(theta) d_theta f`` (see :class:`ThetaDerivative`)."""
        from scipy.sparse import csr_matrix

        L, L1 = self.lmax, self.lmax + 1
        m_all = np.arange(L + 1)
        mstart = (m_all * (L1 + 1) - m_all * (m_all - 1) // 2 - m_all).astype(np.uintp)
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        for m in range(L + 1):
            l = np.arange(m, L + 1)
            src = self.index(m, m) + (l - m)
            a_up = np.sqrt(((l + 1.0) ** 2 - m**2) / (4 * (l + 1.0) ** 2 - 1))  # A_{l+1,m}
            rows.append(mstart[m] + l + 1)
            cols.append(src)
            vals.append(l * a_up)
            down = l > m
            a_here = np.sqrt((l[down] ** 2 - m**2) / (4.0 * l[down] ** 2 - 1))  # A_{l,m}
            rows.append(mstart[m] + l[down] - 1)
            cols.append(src[down])
            vals.append(-(l[down] + 1.0) * a_here)
        n_out = int(mstart[-1]) + L1 + 1
        # complex entries: a real matrix times a complex vector would be cast on every call
        R = csr_matrix(
            (np.concatenate(vals).astype(complex),
             (np.concatenate(rows).astype(np.int64), np.concatenate(cols))),
            shape=(n_out, self.nalm),
        )
        return ThetaDerivative(R, R.T.tocsr(), mstart)

    @cached_property
    def _work(self) -> dict[str, Any]:
        """Geometry of the padded grid for ducc0's two-stage transforms, and work buffers."""
        n, nphi, L = self.ntheta_padded, self.nphi_padded, self.lmax
        theta = self.padded_grid[0]
        sin = np.sin(theta)
        return {
            "theta": theta,
            "nphi": np.full(n, nphi, dtype=np.uintp),
            "phi0": np.zeros(n),
            "ringstart": (np.arange(n) * nphi).astype(np.uintp),
            "scale": np.full(n, _SQRT4PI),
            "grad_factor": _SQRT4PI / sin,
            "div_factor": self.padded_ring_weights / (_SQRT4PI * sin),
            "im_m": 1j * np.arange(L + 1),
            "im": 1j * self.orders,
            "mval": np.arange(L + 1, dtype=np.uintp),
            "leg": np.empty((2, n, L + 1), dtype=complex),
            "leg_div": np.empty((2, n, L + 1), dtype=complex),
        }

    def _legendre(self, alm: np.ndarray, leg: np.ndarray, theta_part: bool = False) -> None:
        """Legendre stage of a scalar synthesis on the padded rings, into ``leg`` (1, n, m)."""
        w = self._work
        if theta_part:
            R, _, mstart = self.theta_derivative
            ducc0.sht.alm2leg(
                alm=np.asarray(R @ alm, dtype=complex).reshape(1, -1), lmax=self.lmax + 1,
                theta=w["theta"], spin=0, mval=w["mval"], mstart=mstart, nthreads=self.nthreads,
                leg=leg,
            )
        else:
            ducc0.sht.alm2leg(alm=alm.reshape(1, -1), lmax=self.lmax, theta=w["theta"], spin=0,
                              nthreads=self.nthreads, leg=leg)

    def _fourier(self, leg: np.ndarray, factor: np.ndarray, out: np.ndarray) -> np.ndarray:
        """FFT stage: ``leg`` (k, n, m) to maps ``out`` (k, n, nphi), rings times ``factor``."""
        w = self._work
        ducc0.sht.leg2map(leg=leg, nphi=w["nphi"], phi0=w["phi0"], ringstart=w["ringstart"],
                          ringfactor=factor, nthreads=self.nthreads, map=out.reshape(leg.shape[0], -1))
        return out

    def _padded_out(self, out: np.ndarray | None, ncomp: int) -> np.ndarray:
        shape = (ncomp, self.ntheta_padded, self.nphi_padded)
        if out is None:
            return np.empty(shape)
        out = out.reshape(shape)
        if out.dtype != np.float64 or not out.flags["C_CONTIGUOUS"]:
            msg = f"out must be a C-contiguous float64 array of shape {shape}"
            raise ValueError(msg)
        return out

    def synthesize_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Values of ``sum c B`` on the 3/2-rule grid (into ``out`` when given)."""
        res = self._padded_out(out, 1)
        ducc0.sht.synthesis_2d(
            alm=self._alm(c), spin=0, lmax=self.lmax, geometry="GL", ntheta=self.ntheta_padded,
            nphi=self.nphi_padded, nthreads=self.nthreads, ringfactor=self._work["scale"], map=res,
        )
        return res[0]

    def gradient_padded(self, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``(d_theta f, d_phi f / sin theta)``: components on the unit vectors
        ``e_theta, e_phi`` of the 3/2-rule grid (into ``out`` when given)."""
        alm = self._alm(c)[0]
        leg = self._work["leg"]
        self._legendre(alm, leg[1:])
        leg[1] *= self._work["im_m"]
        self._legendre(alm, leg[:1], theta_part=True)
        return self._fourier(leg, self._work["grad_factor"], self._padded_out(out, 2))

    def synthesize_with_gradient_padded(
        self, c: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(f, grad f)`` on the 3/2-rule grid, sharing the Legendre stage of ``f`` and
        ``d_phi f`` (SA needs ``Z`` and ``grad Z``); into the pair ``out`` when given."""
        f_out, g_out = (None, None) if out is None else out
        alm = self._alm(c)[0]
        leg = self._work["leg"]
        self._legendre(alm, leg[1:])
        f = self._fourier(leg[1:], self._work["scale"], self._padded_out(f_out, 1))[0]
        leg[1] *= self._work["im_m"]
        self._legendre(alm, leg[:1], theta_part=True)
        return f, self._fourier(leg, self._work["grad_factor"], self._padded_out(g_out, 2))

    def divergence_padded(self, flux: np.ndarray) -> np.ndarray:
        shape = (2, self.ntheta_padded, self.nphi_padded)
        if np.shape(flux) != shape:
            msg = f"expected a tangent field of shape {shape}, got {np.shape(flux)}"
            raise ValueError(msg)
        w = self._work
        _, RT, mstart = self.theta_derivative
        leg = w["leg_div"]
        ducc0.sht.map2leg(
            map=np.ascontiguousarray(flux, dtype=float).reshape(2, -1), nphi=w["nphi"],
            phi0=w["phi0"], ringstart=w["ringstart"], ringfactor=w["div_factor"], mmax=self.lmax,
            nthreads=self.nthreads, leg=leg,
        )
        e = ducc0.sht.leg2alm(leg=leg[:1], lmax=self.lmax + 1, theta=w["theta"], spin=0,
                              mval=w["mval"], mstart=mstart, nthreads=self.nthreads)[0]
        h = ducc0.sht.leg2alm(leg=leg[1:], lmax=self.lmax, theta=w["theta"], spin=0,
                              nthreads=self.nthreads)[0]
        out = w["im"] * h
        out -= RT @ e
        return out

    def fused_drift(
        self, grad_mult: np.ndarray, scale: float, z_mult: np.ndarray | None, sign: float
    ) -> SphereDrift:
        """The drift with shared Legendre and batched FFTW ring stages
        (:class:`~meanfield.domains.sphere_drift.SphereDrift`)."""
        return SphereDrift(self, grad_mult, scale, z_mult, sign)

    def gradient(self, c: np.ndarray) -> np.ndarray:
        """``(d_theta f, d_phi f / sin theta)`` on the working grid."""
        return self._synth(c, self.ntheta, self.nphi, mode="DERIV1")

    def prolong(self, c: np.ndarray, coarse: Domain) -> np.ndarray:
        """Coefficients of ``coarse`` (any ``lmax``) on this domain: zero-padded, or
        truncated when ``coarse`` is finer."""
        if not isinstance(coarse, Sphere):
            msg = f"cannot prolong from {coarse!r} to {self!r}"
            raise ValueError(msg)
        c = np.asarray(c)
        out = np.zeros(self.nalm, dtype=complex)
        lk = min(self.lmax, coarse.lmax)
        for m in range(lk + 1):
            src = coarse.index(m, m)
            dst = self.index(m, m)
            out[dst : dst + lk + 1 - m] = c[src : src + lk + 1 - m]
        return out

    def rotate(self, c: np.ndarray, psi: float, theta: float, phi: float) -> np.ndarray:
        """Coefficients of ``f o R^{-1}`` for the active rotation ``R`` with Euler angles
        ``(psi, theta, phi)`` (z-y-z, ducc0.sht.rotate_alm)."""
        alm = ducc0.sht.rotate_alm(
            np.ascontiguousarray(self._alm(c)[0]), self.lmax, psi, theta, phi, self.nthreads
        )
        return alm

    # -- named functions -----------------------------------------------------------------

    def real_mode_coefficients(self, key: Any) -> np.ndarray:
        """Coefficients of :meth:`real_mode`."""
        try:
            l, m = (int(k) for k in key)
        except (TypeError, ValueError):
            msg = f"a sphere mode is named by (l, m), got {key!r}"
            raise ValueError(msg) from None
        if not 0 <= abs(m) <= l <= self.lmax:
            msg = f"mode (l, m) = ({l}, {m}) is not resolved (need |m| <= l <= lmax={self.lmax})"
            raise ValueError(msg)
        c = np.zeros(self.nalm, dtype=complex)
        i = self.index(l, abs(m))
        c[i] = 1.0 if m == 0 else (1.0 if m > 0 else -1j) / math.sqrt(2.0)
        return c

    def real_mode(self, key: Any) -> np.ndarray:
        """The real harmonic ``(l, m)`` on the grid, with mean square 1 over the sphere:
        ``B_l0`` for ``m = 0``; ``sqrt(2) Re B_lm`` (``~ cos m phi``) for ``m > 0``;
        ``sqrt(2) Im B_l|m|`` (``~ sin |m| phi``) for ``m < 0``."""
        return self.backward(self.real_mode_coefficients(key))

    def zonal_multipliers(self, kernel: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``lambda_l = 2 pi int_{-1}^1 W(t) P_l(t) dt`` (Funk–Hecke, docs/equations.md section 3), per
        coefficient, by Gauss–Legendre quadrature (ducc0's nodes and weights) on
        ``4 (lmax + 1) + 1024`` nodes; the error is absolute, ~1e-15 lambda_0."""
        n = 4 * (self.lmax + 1) + 1024
        t, w = np.cos(ducc0.misc.GL_thetas(n)), ducc0.misc.GL_weights(n, 1) / (2 * np.pi)
        vals = np.asarray(kernel(t), dtype=float)
        table = _legendre_table(t, self.lmax) / np.sqrt(2 * np.arange(self.lmax + 1) + 1.0)
        lam = 2 * np.pi * (w * vals) @ table
        return lam[self.degrees.astype(int)]

    def polar_angle_density(self, c: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Density of the colatitude ``theta`` (the angle from the north pole ``e_z``) under
        the density ``c``: ``p(theta) = sin(theta) int rho(theta, phi) d phi
        = 2 pi sin(theta) sum_l Re(c_l0) sqrt(2l + 1) P_l(cos theta)`` (only ``m = 0``
        survives the longitude integral); it integrates to the mass over ``[0, pi]``."""
        theta = np.asarray(theta, dtype=float)
        c0 = np.real(np.asarray(c)[: self.lmax + 1])  # c_l0 = c[index(l, 0)] = c[l]
        return 2 * np.pi * np.sin(theta) * (_legendre_table(np.cos(theta), self.lmax) @ c0)

    # -- particles -----------------------------------------------------------------------

    @staticmethod
    def angles(x: np.ndarray) -> np.ndarray:
        """``(colatitude, longitude)`` pairs, shape (n, 2), of points given as (n, 3)."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != 3:
            msg = f"points on S^2 must have shape (n, 3), got {x.shape}"
            raise ValueError(msg)
        r = np.linalg.norm(x, axis=1)
        if np.any(r == 0) or not np.all(np.isfinite(r)):
            msg = "points on S^2 must be finite and nonzero"
            raise ValueError(msg)
        theta = np.arccos(np.clip(x[:, 2] / r, -1.0, 1.0))
        phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        return np.stack([theta, phi], axis=-1)

    def values_at(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of ``sum c B`` at points ``x`` (n, 3): :meth:`evaluate`."""
        return self.evaluate(c, x)

    def evaluate(self, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values of ``sum c B`` at points ``x`` (n, 3) (ducc0 NUFFT, accuracy 1e-12)."""
        loc = self.angles(x)
        out = ducc0.sht.synthesis_general(
            alm=self._alm(c), spin=0, lmax=self.lmax, loc=loc, epsilon=_EPS_GENERAL,
            nthreads=self.nthreads,
        )
        return out[0] * _SQRT4PI

    def project(self, x: np.ndarray) -> np.ndarray:
        """``c_lm = (1/n) sum_i conj(B_lm(x_i)) / (4 pi)``: the coefficients of the empirical
        measure (docs/equations.md section 6), by ducc0's adjoint NUFFT synthesis."""
        loc = self.angles(x)
        n = loc.shape[0]
        alm = ducc0.sht.adjoint_synthesis_general(
            map=np.full((1, n), 1.0 / (n * _SQRT4PI)), spin=0, lmax=self.lmax, loc=loc,
            epsilon=_EPS_GENERAL, nthreads=self.nthreads,
        )
        return alm[0]

    def sample(self, rho: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. points (n, 3) from ``rho`` (negative values clipped to 0).

        Rejection sampling from the uniform law under ``M = 1.1 max rho`` (the maximum taken
        on a 2x finer grid); should a proposal exceed ``M``, ``M`` grows and sampling
        restarts, so the accepted points follow ``rho`` exactly.
        """
        n = count(n, "n", 0)
        c = self.forward(rho)
        if self.mass(c) <= 0:
            msg = "cannot sample from a density of non-positive mass"
            raise ValueError(msg)
        fine = self._synth(c, 2 * self.ntheta, 2 * self.nphi)[0]
        bound = 1.1 * float(fine.max())
        mean = max(float(np.real(c[0])), 1e-300)
        out: list[np.ndarray] = []
        have = 0
        while have < n:
            batch = int(min(4_000_000, 1.2 * (n - have) * bound / mean + 64))
            z = rng.uniform(-1.0, 1.0, batch)
            phi = rng.uniform(0.0, 2 * np.pi, batch)
            r = np.sqrt(np.maximum(1.0 - z * z, 0.0))
            x = np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=-1)
            val = self.evaluate(c, x)
            if val.max() > bound:
                bound = 1.2 * float(val.max())
                out, have = [], 0
                continue
            keep = x[rng.uniform(0.0, bound, batch) < val]
            out.append(keep)
            have += keep.shape[0]
        return np.concatenate(out)[:n] if out else np.empty((0, 3))


__all__ = ["Sphere", "ThetaDerivative"]
