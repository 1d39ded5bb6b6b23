r"""The geometry of the unit sphere ``S^{d-1}``, apart from any basis on it.

.. autosummary::
   SphereGeometry

What a domain needs from the space it discretises, as functions of the degree ``l`` of a
spherical harmonic (docs/equations.md section 3):

* the area ``|S^{d-1}| = 2 pi^{d/2} / Gamma(d/2)``;
* the spectrum of the Laplace–Beltrami operator, ``Laplacian Y_l = -l (l + d - 2) Y_l``;
* the Funk–Hecke multipliers of the kernel ``K_beta(t) = e^{beta t}``,
  ``(K_beta * Y_l)(x) = lambda_l Y_l(x)`` with
  ``lambda_l = (2 pi)^{d/2} beta^{1 - d/2} I_{l + d/2 - 1}(beta)``, stored as ``lambda_l e^{-beta}``
  (see :mod:`meanfield.special`), and the energy factor of the constant mode.

A basis (:class:`~meanfield.domains.base.Domain`) supplies the degree of each coefficient;
the geometry turns degrees into eigenvalues and multipliers. Circle, Sphere and ZonalSphere
are three bases on ``SphereGeometry(2)``, ``SphereGeometry(3)`` and ``SphereGeometry(d)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from meanfield.special import (
    constant_mode_energy_factor,
    kernel_multipliers_over_beta,
    log_sphere_area,
    scaled_kernel_multipliers,
    sphere_area,
)


def _flush(mult: np.ndarray) -> np.ndarray:
    """Set multipliers below ``1e-100`` of the largest to zero: they are far below
    round-off, and as subnormal numbers they would slow every product by orders of magnitude."""
    top = float(np.max(np.abs(mult))) if mult.size else 0.0
    return np.where(np.abs(mult) < 1e-100 * top, 0.0, mult)


@dataclass(frozen=True)
class SphereGeometry:
    """The unit sphere ``S^{d-1} in R^d`` (``d >= 2``): area, Laplacian spectrum and the
    Funk–Hecke multipliers of ``K_beta``, as functions of the harmonic degree ``l``.

    Args:
        d: ambient dimension (an integer ``>= 2``; ``d = 2`` is the circle).
    """

    d: int
    """Ambient dimension: the space is ``S^{d-1} in R^d``."""

    def __post_init__(self) -> None:
        d = self.d
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
            msg = f"d must be an integer >= 2, got d={d!r}"
            raise ValueError(msg)
        object.__setattr__(self, "d", int(d))

    @cached_property
    def log_area(self) -> float:
        """``log |S^{d-1}|``."""
        return log_sphere_area(self.d)

    @cached_property
    def area(self) -> float:
        """``|S^{d-1}| = 2 pi^{d/2} / Gamma(d/2)``."""
        return sphere_area(self.d)

    def laplacian_eigenvalues(self, degrees: np.ndarray) -> np.ndarray:
        """``-l (l + d - 2)``: the Laplace–Beltrami eigenvalue of each degree ``l``."""
        l = np.asarray(degrees, dtype=float)
        return -l * (l + self.d - 2.0)

    def scaled_kernel_multipliers(self, degrees: np.ndarray, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta}`` of ``K_beta`` per degree (docs/equations.md section 3);
        values below ``1e-100`` of the largest are flushed to zero."""
        return _flush(self.area * scaled_kernel_multipliers(degrees, beta, self.d))

    def kernel_multipliers_over_beta(self, degrees: np.ndarray, beta: float) -> np.ndarray:
        """``lambda_l e^{-beta} / beta`` per degree (0 for ``l = 0``; the ``beta -> 0`` limit
        is ``|S^{d-1}|/d`` at ``l = 1``): the multiplier of the potential ``G_beta * rho``."""
        return _flush(self.area * kernel_multipliers_over_beta(degrees, beta, self.d))

    def constant_mode_energy_factor(self, beta: float) -> float:
        """``(lambda_0 / |S^{d-1}| - 1) / beta``: the energy of the constant mode per unit
        mass squared, for ``W(t) = (e^{beta t} - 1)/beta``, without cancellation."""
        return constant_mode_energy_factor(beta, self.d)


__all__ = ["SphereGeometry"]
