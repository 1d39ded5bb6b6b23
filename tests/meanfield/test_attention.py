"""The attention registry (meanfield.attention): contents, aliases, errors, and every solver
asking it before it starts (docs/equations.md section 2 for the kinds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

import meanfield
import particles
from meanfield import Circle, Model, attention, make_flow, solve, solve_gaussian
from meanfield.kernels import Kernel, RowKernel, Softmax
from validation.phase_diagram import ATTENTIONS, gamma, usa_step

BUILTIN = {
    # name: (aliases, parameters, solvers)
    "softmax": (("sa",), (), {"particles", "angles", "spectral", "gaussian", "phase_diagram",
                              "ensemble", "lagrangian"}),
    "unnormalized": (("usa",), (), {"particles", "angles", "spectral", "phase_diagram",
                                    "ensemble", "lagrangian"}),
    "l2": ((), (), {"particles", "gaussian", "lagrangian"}),
    "sigmoid": ((), ("sigmoid_bias",), {"particles", "lagrangian"}),
    "sinkhorn": ((), ("sinkhorn_iterations", "sinkhorn_tol"), {"particles", "gaussian",
                                                                "lagrangian"}),
}


@pytest.fixture
def new_kind() -> Iterator[attention.AttentionKind]:
    """A kind that only the particle system declares (and that has no kernel here)."""
    kind = attention.register(attention.AttentionKind(
        name="test_cosine", aliases=("tcos",), formula="A_ij = <x_i, x_j> / n",
        reference="none (test)", solvers=frozenset({"particles"})))
    try:
        yield kind
    finally:
        attention.unregister("test_cosine")


# -- contents -------------------------------------------------------------------------------


def test_builtin_contents() -> None:
    assert attention.names() == tuple(BUILTIN)
    for name, (aliases, params, solvers) in BUILTIN.items():
        kind = attention.resolve(name)
        names = tuple(p.name for p in kind.parameters)
        assert (kind.aliases, names, set(kind.solvers)) == (aliases, params, solvers)
        assert kind.reference.startswith("docs/")
        assert kind.formula


def test_parameters_are_model_keywords() -> None:
    """Each kind's parameters are Model keywords: the model stores them (defaults filled in),
    reads them as attributes, and its state round-trips them."""
    for kind in attention.kinds():
        model = Model(1.0, attention=kind.name)
        assert dict(model.parameters) == {p.name: p.default for p in kind.parameters}
        for p in kind.parameters:
            assert getattr(model, p.name) == p.default
            assert Model.from_state(model.to_json()) == model


def test_names_by_solver() -> None:
    assert attention.names("spectral") == ("softmax", "unnormalized")
    assert attention.names("gaussian") == ("softmax", "l2", "sinkhorn")
    assert attention.names("particles") == tuple(BUILTIN)
    assert attention.names(solver="phase_diagram") == ("softmax", "unnormalized")
    assert attention.names("lagrangian") == ("softmax", "unnormalized", "l2", "sigmoid",
                                           "sinkhorn")
    with pytest.raises(ValueError, match="unknown solver.*'characteristics'"):
        attention.names("characteristics")


def test_derived_tuples_match_the_registry() -> None:
    assert meanfield.ATTENTION_KINDS == attention.names()
    assert meanfield.gaussian.GAUSSIAN_KINDS == attention.names("gaussian")
    assert ATTENTIONS == attention.names("phase_diagram")


def test_entries_are_frozen_and_checked() -> None:
    kind = attention.resolve("softmax")
    with pytest.raises(dataclasses.FrozenInstanceError):
        kind.name = "x"  # type: ignore[misc]
    # a solver name is checked when it is asked about (a kind may name a solver of a package
    # imported later): an entry naming an unregistered one is built, and asking about it fails
    pde = attention.AttentionKind(name="x", formula="", reference="", solvers=frozenset({"pde"}))
    assert pde.supports("pde") and not pde.supports("particles")
    with pytest.raises(ValueError, match="unknown solver 'pdf' .*registered: .*'particles'"):
        pde.supports("pdf")
    with pytest.raises(ValueError, match="lower-case strings, got 'PDE'"):
        attention.AttentionKind(name="x", formula="", reference="", solvers=frozenset({"PDE"}))
    with pytest.raises(ValueError, match="collection of solver names, got the string"):
        attention.AttentionKind(name="x", formula="", reference="", solvers="particles")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lower-case"):
        attention.AttentionKind(name="X", formula="", reference="", solvers=frozenset())
    with pytest.raises(ValueError, match="reasons against solvers it supports"):
        attention.AttentionKind(name="x", formula="", reference="", solvers=frozenset({"gaussian"}),
                                reasons=(("gaussian", "no"),))


# -- names and aliases ----------------------------------------------------------------------


@pytest.mark.parametrize(("given", "name"), [
    ("softmax", "softmax"), ("SOFTMAX", "softmax"), ("SA", "softmax"), ("sa", "softmax"),
    ("usa", "unnormalized"), ("USA", "unnormalized"), ("L2", "l2"), ("Sinkhorn", "sinkhorn"),
])
def test_resolve_ignores_case_and_takes_aliases(given: str, name: str) -> None:
    assert attention.resolve(given).name == name
    assert Model(1.0, attention=given).attention == name


@pytest.mark.parametrize("bad", ["cosine", " softmax", "", None, 3])
def test_unknown_kind_lists_known_names(bad: object) -> None:
    with pytest.raises(ValueError, match="attention must be one of") as info:
        attention.resolve(bad)  # type: ignore[arg-type]
    for name in attention.names():
        assert repr(name) in str(info.value)
    assert "'sa' = 'softmax'" in str(info.value)
    with pytest.raises(ValueError, match="attention must be one of"):
        Model(1.0, attention=bad)  # type: ignore[arg-type]


def test_register_and_unregister(new_kind: attention.AttentionKind) -> None:
    assert attention.resolve("TCOS") is new_kind
    assert "test_cosine" in attention.names("particles")
    assert "test_cosine" not in attention.names("gaussian")
    assert Model(1.0, attention="tcos").attention == "test_cosine"
    with pytest.raises(ValueError, match="already registered"):
        attention.register(dataclasses.replace(new_kind, name="other", aliases=("sa",)))
    assert "other" not in attention.names()


def test_unregister_removes_aliases() -> None:
    attention.register(attention.AttentionKind(
        name="test_gone", aliases=("tg",), formula="", reference="", solvers=frozenset()))
    attention.unregister("tg")
    for name in ("test_gone", "tg"):
        with pytest.raises(ValueError, match="attention must be one of"):
            attention.resolve(name)


# -- require --------------------------------------------------------------------------------


def test_require_returns_the_entry() -> None:
    assert attention.require("SA", "spectral") is attention.resolve("softmax")
    with pytest.raises(ValueError, match="unknown solver"):
        attention.require("softmax", "pde")


def test_require_names_the_supporting_solvers_and_the_reason() -> None:
    with pytest.raises(ValueError) as info:
        attention.require("sigmoid", "gaussian")
    msg = str(info.value)
    assert "attention='sigmoid' is not supported by 'gaussian'" in msg
    assert "no Gaussian reduction" in msg  # the entry's reason
    assert "solvers that support it: 'particles'" in msg
    supporters, kinds = msg.split("solvers that support it: ")[1].split("; 'gaussian' supports ")
    for other in ("'spectral'", "'angles'", "'phase_diagram'", "'gaussian'"):
        assert other not in supporters
    assert kinds == str(attention.names("gaussian"))


def test_require_without_any_supporting_solver() -> None:
    attention.register(attention.AttentionKind(
        name="test_none", formula="", reference="", solvers=frozenset()))
    try:
        with pytest.raises(ValueError, match="no solver supports it yet"):
            attention.require("test_none", "particles")
    finally:
        attention.unregister("test_none")


# -- every solver asks the registry ---------------------------------------------------------


def _gaussian(model: Model) -> None:
    solve_gaussian(model, np.zeros(2), np.eye(2), [0.0, 0.1])


@pytest.mark.parametrize("kind", ["unnormalized", "sigmoid"])
def test_solve_gaussian_refuses_unsupported_kinds(kind: str) -> None:
    with pytest.raises(ValueError, match=rf"attention='{kind}' is not supported by 'gaussian'"
                       r".*no Gaussian reduction.*solvers that support it: 'particles'"):
        _gaussian(Model(1.0, attention=kind))


def test_solve_gaussian_refuses_a_new_kind_with_value_error(new_kind) -> None:
    # the bug this registry fixes: a kind unknown to gaussian.py raised KeyError
    with pytest.raises(ValueError, match="'test_cosine' is not supported by 'gaussian'.*"
                       "solvers that support it: 'particles'"):
        _gaussian(Model(1.0, attention="test_cosine"))


@pytest.mark.parametrize("kind", ["l2", "sigmoid", "sinkhorn"])
def test_spectral_solvers_refuse_unsupported_kinds(kind: str) -> None:
    model, domain = Model(1.0, attention=kind), Circle(16)
    for call in (lambda: make_flow(model, domain), lambda: solve(model, domain, np.ones(16), [0, 1])):
        with pytest.raises(ValueError, match=f"attention='{kind}' is not supported by 'spectral'"
                           ) as info:
            call()
        supporters = str(info.value).split("solvers that support it: ")[1]
        supporters = supporters.split("; 'spectral' supports ")[0]
        for solver in attention.SOLVERS:
            assert (f"'{solver}'" in supporters) == (solver in attention.resolve(kind).solvers)


@pytest.mark.parametrize("kind", ["l2", "sigmoid", "sinkhorn"])
def test_phase_diagram_refuses_unsupported_kinds(kind: str) -> None:
    with pytest.raises(ValueError, match=f"attention='{kind}' is not supported by "
                       "'phase_diagram'.*solvers that support it: 'particles'"):
        gamma(1.0, 4, [0.0, 1.0], attention=kind)
    with pytest.raises(ValueError, match="'phase_diagram'"):
        usa_step(0.1, 1.0, kind)


def test_phase_diagram_takes_aliases() -> None:
    np.testing.assert_array_equal(gamma(1.0, 4, [0.5], attention="USA"),
                                  gamma(1.0, 4, [0.5], attention="unnormalized"))


def test_angle_form_refuses_unsupported_kinds() -> None:
    with pytest.raises(ValueError, match="not supported by 'angles'.*'particles'"):
        particles.angle_velocity(Model(1.0, attention="l2"), np.zeros(3))


def test_particles_refuse_a_kind_without_particle_support() -> None:
    attention.register(attention.AttentionKind(
        name="test_gauss_only", formula="", reference="", solvers=frozenset({"gaussian"})))
    try:
        with pytest.raises(ValueError, match="not supported by 'particles'.*"
                           "solvers that support it: 'gaussian'"):
            particles.velocity(Model(1.0, attention="test_gauss_only"), np.eye(3)[None])
    finally:
        attention.unregister("test_gauss_only")


# -- particles' kernels implement the registry ----------------------------------------------


def test_every_particle_kind_has_a_kernel_and_vice_versa() -> None:
    assert set(particles.registered_kernels()) == set(attention.names("particles"))
    for name in attention.names("particles"):
        assert particles.get_kernel(name).name == name
    assert particles.get_kernel("SA") is Softmax


def test_a_row_wise_kind_without_a_class_gets_the_row_kernel(new_kind) -> None:
    """A kind whose rows are normalised by their sum needs no kernel class: ``get_kernel``
    gives it the generic row kernel under its name, once."""
    cls = particles.get_kernel("tcos")
    assert cls.name == "test_cosine" and issubclass(cls, RowKernel)
    assert particles.get_kernel("test_cosine") is cls
    Kernel.registry.pop("test_cosine", None)


def test_a_kind_without_its_kernel_is_reported() -> None:
    attention.register(attention.AttentionKind(
        name="test_doubly", formula="", reference="", solvers=frozenset({"particles"}),
        normalization="doubly"))
    try:
        with pytest.raises(ValueError, match="no kernel is registered for it and its "
                                             "normalization='doubly'.*name = 'test_doubly'"):
            particles.get_kernel("test_doubly")
    finally:
        attention.unregister("test_doubly")


def test_a_kernel_needs_a_registry_entry() -> None:
    with pytest.raises(ValueError, match="attention must be one of"):
        type("Stray", (Softmax,), {"name": "test_stray"})
    with pytest.raises(ValueError, match="canonical name 'softmax'.*alias 'sa'"):
        type("Stray", (Softmax,), {"name": "sa"})
    attention.register(attention.AttentionKind(
        name="test_gauss_only", formula="", reference="", solvers=frozenset({"gaussian"})))
    try:
        with pytest.raises(ValueError, match="not supported by 'particles'"):
            type("Stray", (Softmax,), {"name": "test_gauss_only"})
    finally:
        attention.unregister("test_gauss_only")
    assert set(Kernel.registry) <= set(attention.names("particles"))
    assert Kernel.registry["softmax"] is Softmax


def test_a_new_kind_is_one_entry(new_kind) -> None:
    # docs/extending.md: a registry entry makes a working particle kind (its rows normalised
    # by their sum: the generic row kernel, the arithmetic of softmax); a class of its own
    # still takes precedence
    try:
        x = np.eye(3)[None]
        got = particles.velocity(Model(2.0, attention="tcos"), x)
        want = particles.velocity(Model(2.0, attention="softmax"), x)
        np.testing.assert_array_equal(got, want)  # the same entry fields: identical arithmetic
        Kernel.registry.pop("test_cosine", None)

        class Cosine(Softmax):
            name = "test_cosine"

        assert particles.get_kernel("test_cosine") is Cosine
    finally:
        Kernel.registry.pop("test_cosine", None)
