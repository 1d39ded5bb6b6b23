r"""The contract of the node sets :func:`meanfield.solve_lagrangian` runs (docs/lagrangian.md).

.. autosummary::
   NodeSet
   ReducedNodes
   REDUCTIONS

Every node set is a :class:`NodeSet`: weights summing to 1, a ``geometry``, optional
``labels``, how it was made (``describe``), representative positions ``x`` (``(n, d)``) for the
measure checks. Plain nodes (:class:`meanfield.lagrangian.nodes.Nodes`) carry the full state
``[x | log J]``; a *symmetry reduction* (:class:`ReducedNodes`: rings, ``k = 1``, and subspace
spheres, ``k = 2, 3``, docs/lagrangian.md sections 8 and 11) carries its own state and says,
as members, everything the solver and the quadrature monitor ask of it: the right-hand side
of its state (:meth:`ReducedNodes.engine`), the Dataset of a run (:meth:`ReducedNodes.assemble`),
the rule's coordinates and the pulled-back integrand the monitor checks
(:meth:`ReducedNodes.monitor_slices`, :meth:`ReducedNodes.monitor_terms`), and, where a
spectral state hands over to it, its nodes from a Dataset (:meth:`ReducedNodes.from_spectral`).
A subclass that names its :attr:`ReducedNodes.reduction` joins :data:`REDUCTIONS`; a new
reduction is that one class.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, ClassVar

import numpy as np

REDUCTIONS: dict[str, type[ReducedNodes]] = {}
"""The symmetry reductions by name (:attr:`ReducedNodes.reduction`), filled as their classes
are defined (``"rings"``, ``"subspace"``)."""

Slices = list[tuple[str, list[tuple[np.ndarray, np.ndarray]], float]]
"""The quadrature monitor's coordinates of a rule (:class:`meanfield.lagrangian.quadrature.
SphereQuadratureMonitor`): per coordinate its kind (``"interval"``, ``"circle"``), its slices
``(node indices, orthonormal basis)`` (stacked where they have as many degrees) and the
extrapolation factor of its null rule."""


class NodeSet:
    """What every node set of :func:`meanfield.solve_lagrangian` has: ``weights`` (``n``,
    summing to 1), ``geometry`` (``"sphere"`` or ``"euclidean"``), ``labels`` (or ``None``),
    ``describe``, and positions ``x`` (``(n, d)``). :attr:`reduction` is ``None`` for plain
    nodes."""

    reduction: ClassVar[str | None] = None
    """The symmetry reduction's name, or ``None``: the full state ``[x | log J]``."""
    describe: str = ""
    """How the nodes were made (for a result's ``attrs``)."""
    geometry: str
    labels: np.ndarray | None
    weights: np.ndarray


class ReducedNodes(NodeSet, abc.ABC):
    """A symmetry-reduced node set (module docstring): its own state and the members the solver
    and the quadrature monitor call. Defining a subclass with a class attribute
    ``reduction = "name"`` registers it in :data:`REDUCTIONS`."""

    unit: ClassVar[str] = "nodes"
    """What the monitor's messages call the nodes (``"rings"``)."""
    monitor_cost: ClassVar[int] = 1
    """A monitor check's cost in field evaluations (the monitor's budget counts it)."""
    query_all: ClassVar[bool] = False
    """Whether the monitor queries every node (else a spread subset of
    :data:`meanfield.lagrangian.quadrature.SPHERE_QUERIES`)."""
    geometry = "sphere"
    labels = None
    d: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("reduction")
        if name is not None:
            if not isinstance(name, str) or not name:
                msg = f"{cls.__name__}.reduction must be a non-empty string, got {name!r}"
                raise ValueError(msg)
            REDUCTIONS[name] = cls

    @abc.abstractmethod
    def engine(self, model: Any, be: Any, memory_limit: int) -> tuple[Callable[[Any], Any], Any, Any]:
        """``(rhs, y0, project)``: the right-hand side of the state (``rhs(y) -> dy/dt``), its
        value at the start and the projection after each step (``None``: none), for
        :func:`meanfield.solve_lagrangian`'s engine; ``ValueError`` naming why the reduction
        does not hold for ``model``."""

    @abc.abstractmethod
    def assemble(self, saved: list[tuple[float, np.ndarray]], model: Any) -> Any:
        """The ``xarray.Dataset`` of a run from its saved ``(t, state)`` pairs."""

    def monitor_slices(self, weights: np.ndarray) -> Slices:
        """The rule's coordinates for the quadrature monitor (:data:`Slices`); empty: the
        nodes are not monitored."""
        return []

    def monitor_terms(self, model: Any, y: np.ndarray, queries: np.ndarray,
                      weights: np.ndarray, sa: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(K, vals)`` of the state ``y`` for the monitor: the kernel rows ``K`` (queries,
        nodes) scaled per row, and the field's integrand ``vals`` (queries, nodes,
        components), centred on the tilted mean where ``sa`` (docs/lagrangian.md section
        10). Asked only where :meth:`monitor_slices` is not empty."""
        msg = f"{type(self).__name__}: a reduction with monitor slices gives its monitor terms"
        raise NotImplementedError(msg)

    @classmethod
    def examples(cls) -> tuple[ReducedNodes, ...]:
        """Small instances the contract test runs (tests/meanfield/lagrangian/test_node_sets.py);
        ``ValueError`` naming the reduction where a class gives none, so that a registered
        reduction without examples fails the test."""
        msg = f"reduction {cls.reduction!r} gives no examples (ReducedNodes.examples)"
        raise ValueError(msg)

    @classmethod
    def from_spectral(cls, spectral: Any, time: float) -> ReducedNodes:
        """The nodes of the density of a :func:`meanfield.solve` Dataset at the saved ``time``
        (a hand-over, :mod:`meanfield.lagrangian.continuation`); ``ValueError`` where the
        reduction does not start from a spectral state."""
        msg = (f"reduction {cls.reduction!r}: {cls.__name__} does not start from a spectral "
               "Dataset (no from_spectral)")
        raise ValueError(msg)


def reduction_of(name: str) -> type[ReducedNodes]:
    """The registered reduction ``name``, else ``ValueError`` naming the known ones."""
    if name not in REDUCTIONS:
        msg = f"reduction {name!r} is not registered; known: {sorted(REDUCTIONS)}"
        raise ValueError(msg)
    return REDUCTIONS[name]


__all__ = ["REDUCTIONS", "NodeSet", "ReducedNodes", "Slices", "reduction_of"]
