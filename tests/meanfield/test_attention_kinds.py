"""Each kind's mathematics on its registry entry (meanfield.attention, issue 24): a new kind is
one entry plus one kernel class, and runs through the particle system and the Lagrangian
solver with no other edit (docs/extending.md, "Adding an attention variant")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import particles
from meanfield import Model, attention, solve_lagrangian
from meanfield import backend as bk
from meanfield import nodes as node_sets
from meanfield.io import model_of
from meanfield.kernels import Kernel
from meanfield.lagrangian.rings import ring_kinds


def _scaled_exp(S: Any, parameters: Any) -> None:
    """``phi(S) = c e^S`` in place."""
    bk.exp_(S)
    S *= parameters["exp_scale"]


def _scaled_exp_derivative(W: Any, out: Any) -> None:
    """``phi' = phi``."""
    out[...] = W


def _toy_entry(**changes: Any) -> attention.AttentionKind:
    """``A_ij = c e^{beta <Q x_i, K x_j>} / n``: USA times ``c``, through the transform path
    (not the exponential one), with its own parameter ``exp_scale = c``."""
    kw: dict[str, Any] = {
        "name": "test_scaled_exp",
        "formula": "A_ij = c e^{beta <Q x_i, K x_j>} / n, c = exp_scale",
        "reference": "docs/extending.md (the worked example)",
        "solvers": frozenset({"particles", "lagrangian"}),
        "parameters": (attention.Parameter("exp_scale", 1.0, float, lambda c: c > 0, "> 0"),),
        "normalization": "count",
        "transform": attention.Transform(_scaled_exp, _scaled_exp_derivative,
                                         log=lambda S, p: S + np.log(p["exp_scale"])),
    }
    kw.update(changes)
    return attention.AttentionKind(**kw)


@pytest.fixture
def toy_kind() -> Iterator[attention.AttentionKind]:
    """The toy kind, registered for one test and taken out after (with the row kernel the
    particle system made for it: a kind of counted rows needs no class)."""
    entry = attention.register(_toy_entry())
    try:
        yield entry
    finally:
        Kernel.registry.pop("test_scaled_exp", None)
        attention.unregister("test_scaled_exp")


# Tolerance of the toy-kind runs: with c = 2 the toy run on t and the USA run on 2 t are the
# same discrete map in exact arithmetic (a Runge-Kutta step h on c f is the step c h on f; the
# adaptive controller's error estimates and step choices scale the same way), so they differ
# by round-off only: the weights c e^S against e^{S - M} e^M (a few eps each, relative), over
# at most a few hundred steps, on |x| = 1 and |log J| <= 6. 1e-12 bounds that with room
# (measured: 9e-16 on the particles, 3e-15 on the node positions, 9e-15 on log J).
TOL = 1e-12


def test_toy_kind_runs_through_particles_and_the_lagrangian_solver(toy_kind) -> None:
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=(32, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    t = np.linspace(0.0, 1.0, 6)
    toy = Model(2.0, attention="test_scaled_exp", exp_scale=2.0)
    usa = Model(2.0, attention="unnormalized")
    v_toy, v_usa = (particles.velocity(m, x0[None])[0] for m in (toy, usa))
    assert np.max(np.abs(v_usa)) > 0.1  # the check below is not 0 = 0
    np.testing.assert_allclose(v_toy, 2.0 * v_usa, rtol=0, atol=TOL)

    a = particles.simulate(toy, x0, t, dt=0.01)
    b = particles.simulate(usa, x0, 2 * t, dt=0.02)
    assert np.max(np.abs(b.x.values[-1] - x0)) > 0.1  # the tokens moved
    np.testing.assert_allclose(a.x.values, b.x.values, rtol=0, atol=TOL)

    start = node_sets.circle(lambda th: 1 + 0.4 * np.cos(th) + 0.2 * np.sin(2 * th), 64)
    a = solve_lagrangian(toy, start, t)
    b = solve_lagrangian(usa, start, 2 * t)
    np.testing.assert_allclose(a.x.values, b.x.values, rtol=0, atol=TOL)
    # log J = int div X dt: the divergence takes the transform's derivative phi' = phi
    scale = float(np.max(np.abs(b.log_jacobian.values)))
    assert scale > 1.0
    np.testing.assert_allclose(a.log_jacobian.values, b.log_jacobian.values, rtol=0,
                               atol=TOL * scale)
    assert "energy" in b and "energy" not in a  # the toy entry declares no energy
    again = model_of(a)  # its parameter is in the result's attrs
    assert isinstance(again, Model) and again == toy and again.exp_scale == 2.0


def test_toy_kind_parameters_are_validated_by_the_kind(toy_kind) -> None:
    assert Model(1.0, attention="test_scaled_exp").parameters == {"exp_scale": 1.0}
    with pytest.raises(ValueError, match="exp_scale must be > 0, got -1"):
        Model(1.0, attention="test_scaled_exp", exp_scale=-1)
    with pytest.raises(ValueError, match="exp_scale must be > 0, got -1"):
        Model(1.0, attention="softmax", exp_scale=-1)  # validated even where it is dropped
    assert Model(1.0, attention="softmax", exp_scale=3.0).parameters == {}
    with pytest.raises(ValueError, match="unknown attention parameter 'exp_scal'"):
        Model(1.0, attention="test_scaled_exp", exp_scal=3.0)
    with pytest.raises(AttributeError, match="sigmoid_bias"):
        Model(1.0, attention="test_scaled_exp").sigmoid_bias  # noqa: B018


def test_a_lagrangian_kind_needs_the_derivative_of_its_transform() -> None:
    """Refused when the entry is made, not given sigmoid's derivative at run time."""
    transform = attention.Transform(_scaled_exp)
    with pytest.raises(ValueError, match="declares 'lagrangian' but its transform has no "
                       "derivative"):
        _toy_entry(transform=transform)
    _toy_entry(transform=transform, solvers=frozenset({"particles"}))  # particles need no phi'


def test_entry_checks_its_mathematics() -> None:
    with pytest.raises(ValueError, match="normalization must be one of .* got 'columns'"):
        _toy_entry(normalization="columns")
    with pytest.raises(ValueError, match="metric must be one of"):
        attention.Energy("fisher", "")
    with pytest.raises(ValueError, match="distinct names"):
        _toy_entry(parameters=(attention.Parameter("a", 1.0), attention.Parameter("a", 2.0)))


def test_builtin_mathematics() -> None:
    """What each built-in entry says, and what the solvers derive from it."""
    table = {  # name: (normalization, exponential, energy metric, Gaussian field, row-bounded)
        "softmax": ("rows", True, "attention", True, True),
        "unnormalized": ("count", True, "wasserstein", False, False),
        "l2": ("rows", True, None, True, True),
        "sigmoid": ("count", False, None, False, True),
        "sinkhorn": ("doubly", True, None, True, True),
    }
    for name, (norm, exponential, metric, gaussian, bounded) in table.items():
        kind = attention.resolve(name)
        assert (kind.normalization, kind.exponential, kind.row_bounded) == (norm, exponential,
                                                                            bounded)
        assert (None if kind.energy is None else kind.energy.metric) == metric
        assert (kind.gaussian is not None) == gaussian == kind.supports("gaussian")
        assert (kind.causal_degenerate is not None) == (norm == "doubly")
        assert kind.unshifted == (name == "unnormalized")
    # the ring nodes' kinds, read off the registry: the exponential ones with a per-row sum
    assert set(ring_kinds()) == {"softmax", "unnormalized", "l2"}


def test_sigmoid_transform_and_its_derivative() -> None:
    """sigmoid(S + b), sigmoid' = sigmoid (1 - sigmoid) against a central difference (error
    h^2 |sigmoid'''| / 6 < 1e-11 at h = 1e-5, plus round-off eps / h ~ 1e-11)."""
    transform = attention.resolve("sigmoid").transform
    assert transform is not None and transform.derivative is not None
    params = {"sigmoid_bias": 0.3}
    S = np.linspace(-6.0, 6.0, 25)
    W = S.copy()
    transform.apply(W, params)
    np.testing.assert_allclose(W, 1.0 / (1.0 + np.exp(-(S + 0.3))), rtol=1e-15)
    h = 1e-5
    up, down = S + h, S - h
    transform.apply(up, params)
    transform.apply(down, params)
    out = np.empty_like(W)
    transform.derivative(W, out)
    np.testing.assert_allclose(out, (up - down) / (2 * h), rtol=0, atol=5e-11)
    # log W has an absolute error of a few eps (W's relative error, then log's own)
    np.testing.assert_allclose(transform.log_weight(S, params), np.log(W), rtol=0, atol=1e-14)
