"""The fast path's eligibility comes from the attention registry (meanfield.kernels.fastsum
.fast_route): a kind registered with an exponential weight or a transform naming a profile
gets the fast field without an edit to fastsum; one whose transform names none stays direct,
with a reason; the route is decided once per call."""

from __future__ import annotations

import numpy as np
import pytest

import particles
from meanfield import Model, attention
from meanfield.kernels import Kernel, Softmax, fastsum
from meanfield.kernels import interaction as interaction_module


@pytest.fixture
def copied_softmax():
    """A kind ``test_fast_softmax``: softmax's entry under another name, with a particle
    kernel of its own (a subclass of Softmax), removed afterwards."""
    entry = attention.resolve("softmax")
    kind = attention.register(attention.AttentionKind(
        name="test_fast_softmax", formula=entry.formula, reference=entry.reference,
        solvers=frozenset({"particles"}), normalization="rows"))

    class Copied(Softmax):
        name = "test_fast_softmax"

    try:
        yield kind
    finally:
        Kernel.registry.pop("test_fast_softmax", None)
        attention.unregister("test_fast_softmax")


def test_a_registered_exponential_kind_takes_both_paths(copied_softmax, point_set) -> None:
    assert "test_fast_softmax" in fastsum.zonal_kinds()
    assert "test_fast_softmax" in fastsum.general_kinds()
    model = Model(beta=4.0, attention="test_fast_softmax")
    route = fastsum.fast_route(model, 3)
    assert route == fastsum.FastRoute("zonal", None, True)
    x = point_set("clusters", 3000, 3, np.random.default_rng(2))
    fast = particles.velocity(model, x, method="fast")
    ref = particles.velocity(Model(beta=4.0), x, method="direct")
    assert np.max(np.linalg.norm(fast - ref, axis=-1)) <= fastsum.FIELD_TOL
    general = Model(beta=4.0, attention="test_fast_softmax", Q=np.diag([1.0, 1.2, 0.9]))
    assert fastsum.fast_route(general, 3).path == "general"


def test_a_transform_without_a_profile_stays_direct() -> None:
    sig = attention.resolve("sigmoid")
    kind = attention.register(attention.AttentionKind(
        name="test_no_profile", formula="sigmoid without a fast profile",
        reference="docs/equations.md section 2", solvers=frozenset({"particles"}),
        normalization="count", transform=attention.Transform(
            sig.transform.apply, sig.transform.derivative, sig.transform.log, bound=1.0)))
    try:
        assert kind.fast_profile is None
        assert "test_no_profile" not in fastsum.zonal_kinds() + fastsum.general_kinds()
        route = fastsum.fast_route(Model(beta=2.0, attention="test_no_profile"), 3)
        assert route.path is None and "test_no_profile" in str(route.reason)
        with pytest.raises(ValueError, match="does not apply.*test_no_profile"):
            fastsum.choose_fast("fast", Model(beta=2.0, attention="test_no_profile"), 3,
                                "sphere", 10, 10)
    finally:
        attention.unregister("test_no_profile")


def test_the_route_is_decided_once_per_velocity_call(monkeypatch, point_set) -> None:
    """``particles.velocity(method="auto")`` asks the route once: ``fast_field_at`` takes the
    caller's (before, ``zonal_reason`` was asked four times per call)."""
    calls = []
    real = fastsum.zonal_reason

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fastsum, "zonal_reason", counted)
    x = point_set("uniform", 2000, 3, np.random.default_rng(4))
    particles.velocity(Model(beta=4.0), x, method="auto")
    assert len(calls) == 1
    assert interaction_module.fast_field_at.__kwdefaults__["route"] is None


@pytest.mark.parametrize(("name", "path", "auto"), [
    ("softmax", "zonal", True), ("unnormalized", "zonal", True), ("l2", "zonal", True),
    ("sigmoid", "zonal", False), ("sinkhorn", "general", False)])
def test_builtin_kinds_route_from_their_entries(name: str, path: str, auto: bool) -> None:
    """The built-in kinds' routes at ``Q = K = V = I`` on ``S^2`` (sinkhorn: doubly
    stochastic, not a zonal sum; sigmoid: no crossover measured, ``fast`` only)."""
    assert fastsum.fast_route(Model(beta=2.0, attention=name), 3) == (path, None, auto)
