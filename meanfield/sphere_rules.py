"""Product quadrature rules on the spheres ``S^{k-1}`` (Gauss–Jacobi in one coordinate times
the rule one dimension down): the angular parts of :func:`meanfield.nodes.zonal` and of the
``k = 3`` subspace nodes (:func:`meanfield.nodes_reduced.subspace`). They live with the
Gauss–Jacobi rule in :mod:`meanfield.domains.zonal_sphere`, whose node rule
(:meth:`~meanfield.domains.zonal_sphere.ZonalSphere.node_rule`) is built on them.

.. autosummary::
   sphere_rule
   sphere_rule_size
"""

from __future__ import annotations

from .domains.zonal_sphere import sphere_rule, sphere_rule_size

__all__ = ["sphere_rule", "sphere_rule_size"]
