"""Product quadrature rules on the spheres ``S^{k-1}`` (Gauss–Jacobi in one coordinate times
the rule one dimension down): the angular parts of :func:`meanfield.nodes.zonal` and of the
``k = 3`` subspace nodes (:func:`meanfield.nodes_reduced.subspace`).

.. autosummary::
   sphere_rule
   sphere_rule_size
"""

from __future__ import annotations

import numpy as np

from .checks import count
from .domains.zonal_sphere import gauss_jacobi
from .special import sphere_area


def sphere_rule(k: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """A product rule on ``S^{k-1}`` exact for polynomials of degree ``<= degree``: points
    ``(n, k)`` and weights summing to ``|S^{k-1}|``.

    ``k = 2``: the trapezoid rule on ``degree + 1`` angles. ``k >= 3``: ``ceil((degree+1)/2)``
    Gauss–Jacobi nodes in the last coordinate ``s`` (weight ``(1-s^2)^{(k-3)/2}``) times the
    rule on ``S^{k-2}`` scaled by ``sqrt(1 - s^2)`` (a polynomial of degree ``p`` in ``x``,
    averaged over ``S^{k-2}``, is a polynomial of degree ``<= p`` in ``s``).
    """
    k = count(k, "k", 2)
    degree = count(degree, "degree", 0)
    if k == 2:
        m = degree + 1
        th = 2 * np.pi * np.arange(m) / m
        return np.stack([np.cos(th), np.sin(th)], axis=-1), np.full(m, 2 * np.pi / m)
    s, ws = gauss_jacobi(k, (degree + 2) // 2)
    u, wu = sphere_rule(k - 1, degree)
    r = np.sqrt(np.maximum(1.0 - s * s, 0.0))
    pts = np.concatenate([r[:, None, None] * u[None, :, :],
                          np.broadcast_to(s[:, None, None], (s.size, u.shape[0], 1))], axis=-1)
    w = ws[:, None] * wu[None, :] / sphere_area(k - 1)
    return pts.reshape(-1, k), w.reshape(-1)


def sphere_rule_size(k: int, degree: int) -> int:
    """The number of points of ``sphere_rule(k, degree)``, without building it (an exact
    integer: ``degree + 1`` for ``k = 2``, times ``(degree + 2) // 2`` per dimension above)."""
    k = count(k, "k", 2)
    degree = count(degree, "degree", 0)
    return (degree + 1) * ((degree + 2) // 2) ** (k - 2)


__all__ = ["sphere_rule", "sphere_rule_size"]
