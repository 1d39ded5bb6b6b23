"""The node-set contract (meanfield.lagrangian.node_set): every registered symmetry reduction,
walked from ``REDUCTIONS`` through its examples, runs through ``solve_lagrangian`` and its
quadrature monitor by its own members; a reduction defined here, in a test, runs the same way
with no other edit (antipodal pairs on the circle, against the full nodes of both points)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import xarray as xr

from meanfield import Model, solve_lagrangian
from meanfield.lagrangian import nodes as node_sets
from meanfield.lagrangian.field import field_at
from meanfield.lagrangian.node_set import REDUCTIONS, NodeSet, ReducedNodes, reduction_of
from meanfield.lagrangian.quadrature import SphereQuadratureMonitor

EXAMPLES = [pytest.param(ex, id=f"{name}-{i}") for name, cls in sorted(REDUCTIONS.items())
            for i, ex in enumerate(cls.examples())]


def test_every_registered_reduction_gives_examples_of_its_own_class() -> None:
    assert {"rings", "subspace"} <= set(REDUCTIONS)
    for name, cls in REDUCTIONS.items():
        assert cls.reduction == name and reduction_of(name) is cls
        examples = cls.examples()
        assert examples and all(type(ex) is cls for ex in examples)
    with pytest.raises(ValueError, match=r"reduction 'spirals' is not registered; known: \["):
        reduction_of("spirals")


def test_plain_nodes_are_a_node_set_without_reduction() -> None:
    nodes = node_sets.circle(lambda th: np.exp(np.cos(th)), 16)
    assert isinstance(nodes, NodeSet) and not isinstance(nodes, ReducedNodes)
    assert nodes.reduction is None


@pytest.mark.parametrize("example", EXAMPLES)
def test_reduced_example_runs_through_the_solver_by_its_members(example: ReducedNodes) -> None:
    """Each example: a node set of weights summing to 1 and positions on the sphere; its
    engine's right-hand side is finite at the start; ``solve_lagrangian`` runs it to ``t =
    0.5`` (SA, ``beta = 1``) and returns its own Dataset with the mass kept; the monitor's
    terms have the shapes of its queries and nodes."""
    assert isinstance(example, NodeSet) and REDUCTIONS[example.reduction] is type(example)
    w = np.asarray(example.weights)
    assert np.all(w >= 0) and math.isclose(float(w.sum()), 1.0, rel_tol=1e-13)
    x = np.asarray(example.x)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    model = Model(beta=1.0)
    from meanfield import backend as bk

    rhs, y0, _ = example.engine(model, bk.get_backend("numpy", None, "float64"), 2**26)
    dy = np.asarray(rhs(np.asarray(y0)))
    assert dy.shape == np.shape(y0) and np.all(np.isfinite(dy))
    ds = solve_lagrangian(model, example, [0.0, 0.5])
    assert ds.attrs["successful"] == 1
    assert "log_jacobian" in ds and "weight" in ds
    monitor = SphereQuadratureMonitor(model, example, 0.5)
    if monitor.coordinates:
        K, vals = example.monitor_terms(model, np.asarray(y0), monitor.queries, monitor.weights, True)
        assert K.shape == (monitor.queries.size, w.size)
        assert vals.shape[:2] == K.shape and np.all(np.isfinite(vals))


# -- a reduction defined here: antipodal pairs on the circle ----------------------------------

def _antipodal_pairs() -> type[ReducedNodes]:
    """Define (and so register) the reduction of antipodal pairs; the caller removes it."""

    @dataclass(frozen=True, eq=False)
    class AntipodalPairs(ReducedNodes):
        """A measure on ``S^1`` symmetric under ``x -> -x`` as ``n`` pairs ``{x_j, -x_j}`` of mass
        ``w_j / 2`` each: under ``Q = K = V = I`` attention the field at ``-x`` is minus that at
        ``x`` for such a measure, so the flow keeps the symmetry and the state is the ``n`` angles
        ``phi_j`` and ``log J_j``."""

        phi: np.ndarray
        weights: np.ndarray
        log_density: np.ndarray
        d: int = 2
        describe: str = "antipodal pairs (a test)"

        reduction = "antipodal-test"

        @property
        def x(self) -> np.ndarray:
            return np.stack([np.cos(self.phi), np.sin(self.phi)], axis=1)

        def _full(self, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = np.stack([np.cos(phi), np.sin(phi)], axis=1)
            return np.concatenate([x, -x]), np.concatenate([self.weights, self.weights]) / 2

        def engine(self, model: Any, be: Any, memory_limit: int) -> tuple[Any, Any, Any]:
            def rhs(y: np.ndarray) -> np.ndarray:
                x, w = self._full(y[:, 0])
                res = field_at(model, x[: len(y)], x, w, method="direct")
                tangent = np.stack([-np.sin(y[:, 0]), np.cos(y[:, 0])], axis=1)
                return np.stack([np.sum(res.velocity * tangent, axis=1), res.divergence], axis=1)

            return rhs, np.stack([np.asarray(self.phi, dtype=float), np.zeros(len(self.phi))], axis=1), None

        def assemble(self, saved: list[tuple[float, np.ndarray]], model: Any) -> xr.Dataset:
            ys = np.stack([y for _, y in saved])
            return xr.Dataset({"phi": (("time", "node"), ys[:, :, 0]),
                               "log_jacobian": (("time", "node"), ys[:, :, 1]),
                               "weight": ("node", np.asarray(self.weights))},
                              coords={"time": [t for t, _ in saved]})

    return AntipodalPairs

def test_a_reduction_defined_in_a_test_runs_through_solve_lagrangian() -> None:
    """The class above registers itself, and ``solve_lagrangian`` runs it with no other edit:
    its angles and log-Jacobians agree with the full nodes of both points of every pair
    (the same ODE, dopri5 at ``rtol = 1e-10``: agreement to ``1e-7``, the tolerance's scale over
    ``t = 2``)."""
    AntipodalPairs = _antipodal_pairs()
    try:
        assert REDUCTIONS["antipodal-test"] is AntipodalPairs
        rng = np.random.default_rng(3)
        phi = np.sort(rng.uniform(0, np.pi, 12))
        w = rng.random(12)
        w /= w.sum()
        pairs = AntipodalPairs(phi, w, np.zeros(12))
        model = Model(beta=3.0)
        t = [0.0, 1.0, 2.0]
        ds = solve_lagrangian(model, pairs, t, rtol=1e-10, atol=1e-12)
        x, wf = pairs._full(phi)
        full = solve_lagrangian(model, node_sets.Nodes(x, wf, np.full(24, 1.0 / (2 * np.pi))), t,
                                rtol=1e-10, atol=1e-12)
        xf = full["x"].values[-1, :12]
        np.testing.assert_allclose(np.cos(ds["phi"].values[-1]), xf[:, 0], atol=1e-7)
        np.testing.assert_allclose(np.sin(ds["phi"].values[-1]), xf[:, 1], atol=1e-7)
        np.testing.assert_allclose(ds["log_jacobian"].values[-1],
                                   full["log_jacobian"].values[-1, :12], atol=1e-7)
        assert ds.attrs["settings"].count("antipodal pairs (a test)") == 1
    finally:
        REDUCTIONS.pop("antipodal-test", None)
