"""Plug-ins own their tables: a package registers the solvers it provides
(:func:`meanfield.attention.register_solver`) and the options of its commands
(:func:`meanfield.cli.options.register_command`); the core's tables list only the core."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from types import SimpleNamespace
from typing import Any

import pytest

import meanfield.cli as cli
from meanfield import attention
from meanfield.cli import build_parser, main, options
from meanfield.cli.options import Option, Use

CORE_SOLVERS = {"spectral", "gaussian", "lagrangian"}
CORE_COMMANDS = {"solve", "plot", "gaussian", "convergence"}


# -- the core alone ---------------------------------------------------------------------------


def test_core_tables_name_only_the_core() -> None:
    # in a fresh process that imports only meanfield: the registries hold the core's entries
    code = """if True:
        import json, sys
        import meanfield, meanfield.cli
        from meanfield import attention
        from meanfield.cli import options
        print(json.dumps({
            "solvers": dict(attention.SOLVERS), "commands": sorted(options.COMMANDS),
            "options": {k: o.help for k, o in options.OPTIONS.items()},
            "loaded": sorted(m for m in sys.modules
                             if m.split(".")[0] in ("particles", "validation")),
        }))
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["loaded"] == []
    assert set(got["solvers"]) == CORE_SOLVERS
    assert set(got["commands"]) == CORE_COMMANDS
    for text in [*got["solvers"].values(), *got["options"].values()]:
        assert "particles." not in text and "validation." not in text, text
    # the core's options: those a core command takes, or those several commands share (an
    # option that one other command takes lives in that command's module)
    build_parser()  # here, every command registered
    for name in got["options"]:
        users = {c for c, table in options.COMMANDS.items() if name in table}
        assert users & CORE_COMMANDS or len(users) >= 2, (name, users)


def test_every_solver_a_kind_names_is_registered() -> None:
    # the built-in kinds name solvers of packages imported after them; with those packages
    # imported, every name resolves (a misspelt one would be left over here)
    import particles  # noqa: F401  (registers particles, angles, ensemble)
    import validation  # noqa: F401  (registers phase_diagram)

    for kind in attention.kinds():
        named = set(kind.solvers) | {s for s, _ in kind.reasons}
        assert named <= set(attention.SOLVERS), (kind.name, named - set(attention.SOLVERS))
    assert set(attention.SOLVERS) == CORE_SOLVERS | {"particles", "angles", "ensemble",
                                                      "phase_diagram"}
    # listed by section of docs/equations.md: the finite-n system first
    assert list(attention.SOLVERS)[:3] == ["particles", "angles", "ensemble"]


def test_a_misspelt_solver_fails_loudly() -> None:
    import particles  # noqa: F401

    for ask in (lambda: attention.require("softmax", "partciles"),
                lambda: attention.kinds("partciles"),
                lambda: attention.resolve("l2").supports("partciles")):
        with pytest.raises(ValueError, match=r"unknown solver 'partciles' \(no package has "
                           r"registered it\); registered: .*'particles'"):
            ask()


# -- a toy plug-in, registered from the test --------------------------------------------------


@pytest.fixture
def toy_solver() -> Iterator[attention.Solver]:
    """A kind that names a solver before the solver is registered, then the solver."""
    kind = attention.register(attention.AttentionKind(
        name="test_toy", formula="A_ij = 1/n", reference="none (test)",
        solvers=frozenset({"toy_solver", "particles"})))
    try:
        with pytest.raises(ValueError, match="unknown solver 'toy_solver'"):
            attention.kinds("toy_solver")  # named by a kind, but no package registered it yet
        assert attention.require(kind, "toy_solver") is kind  # the kind declares it
        solver = attention.register_solver("toy_solver", "tests: the toy entry", section=2)
        try:
            yield solver
        finally:
            attention.unregister_solver("toy_solver")
    finally:
        attention.unregister("test_toy")


def test_a_toy_solver_is_in_the_errors_of_require(toy_solver: attention.Solver) -> None:
    import particles  # noqa: F401

    assert attention.names("toy_solver") == ("test_toy",)
    assert attention.SOLVERS["toy_solver"] == "tests: the toy entry"
    with pytest.raises(ValueError) as info:
        attention.require("softmax", "toy_solver")
    assert ("attention='softmax' is not supported by 'toy_solver' (tests: the toy entry)"
            in str(info.value))
    assert "'toy_solver' supports ('test_toy',)" in str(info.value)
    with pytest.raises(ValueError) as info:
        attention.require("test_toy", "gaussian")
    supporters = str(info.value).split("solvers that support it: ")[1]
    # the supporters with their entry points, in SOLVERS order (section 2 by registration)
    assert supporters.startswith("'particles' (particles.simulate, particles.velocity); "
                                 "'toy_solver' (tests: the toy entry); 'gaussian' supports")
    attention.unregister_solver("toy_solver")
    try:
        with pytest.raises(ValueError, match="'toy_solver' \\(not registered: no imported "
                           "package provides it\\)"):
            attention.require("test_toy", "gaussian")
    finally:
        attention.register_solver(**vars(toy_solver))


def test_register_solver_refuses_a_clash_and_bad_fields(toy_solver: attention.Solver) -> None:
    assert attention.register_solver("toy_solver", "tests: the toy entry", section=2) == toy_solver
    with pytest.raises(ValueError, match="'toy_solver' is already registered"):
        attention.register_solver("toy_solver", "another entry", section=2)
    with pytest.raises(ValueError, match="section must be an int >= 1, got 0"):
        attention.register_solver("toy_other", "x", section=0)
    with pytest.raises(ValueError, match="lower-case strings, got 'Toy'"):
        attention.register_solver("Toy", "x", section=2)
    with pytest.raises(ValueError, match="unknown solver 'toy_other'"):
        attention.unregister_solver("toy_other")


def _run_toy(args: argparse.Namespace) -> int:
    print(f"toy: sigma={args.sigma} t_max={args.t_max} attention={args.attention}")
    return 0


TOY_OPTIONS = {"sigma": Option("--sigma", "the toy's own number", options.number, 1.0,
                               options.NONNEGATIVE, "must be finite and >= 0")}
TOY_TABLE: dict[str, Any] = {
    "sigma": None, "t_max": 2.0,
    "attention": Use(choices=options.attention_kinds("toy_solver")), "seed": 0,
}
TOY_COMMAND = SimpleNamespace(add_parser=lambda sub: options.add_parser(
    sub, "toy", func=_run_toy, help="a toy command", description="A toy command of a test."))
"""What a command module of another package holds: ``add_parser(subparsers)``."""


@pytest.fixture
def toy_command(toy_solver, monkeypatch) -> Iterator[None]:
    """The toy command, found through its entry point, with its options registered."""
    options.register_command("toy", TOY_TABLE, TOY_OPTIONS)
    real = cli.command_entry_points()
    toy = EntryPoint(name="toy", value=f"{__name__}:TOY_COMMAND", group=cli.GROUP)
    monkeypatch.setattr(cli, "entry_points", lambda group: [*real, toy])
    try:
        yield
    finally:
        assert options.unregister_command("toy") == TOY_TABLE
    assert "sigma" not in options.OPTIONS


def test_a_toy_command_is_in_the_parser(toy_command, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["toy", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "the toy's own number (default: 1.0)" in text
    assert "--t-max" in text and "(default: 2.0)" in text  # a shared option, its default here
    assert options.option_for("toy", "attention").choices == ("test_toy",)
    assert main(["toy", "--sigma", "0.5", "--attention", "test_toy"]) == 0
    assert "toy: sigma=0.5 t_max=2.0 attention=test_toy" in capsys.readouterr().out
    assert main(["toy", "--sigma", "-1"]) == 2
    assert "--sigma must be finite and >= 0, got -1.0" in capsys.readouterr().err
    assert main(["toy", "--attention", "softmax"]) == 2  # the toy solver's kinds only
    assert "--attention must be one of test_toy, got 'softmax'" in capsys.readouterr().err


def test_register_command_refuses_clashes(toy_command) -> None:
    options.register_command("toy", TOY_TABLE, TOY_OPTIONS)  # the same tables again: nothing
    with pytest.raises(ValueError, match="'toy' is already registered with other options"):
        options.register_command("toy", {**TOY_TABLE, "seed": 1}, TOY_OPTIONS)
    beta = Option("--beta", "another beta", options.number)
    with pytest.raises(ValueError, match="own option 'beta2' \\(--beta\\) clashes with the "
                       "registered option 'beta'"):
        options.register_command("toy2", {"beta2": None}, {"beta2": beta})
    with pytest.raises(ValueError, match="names options that are not registered: \\['gamma'\\]"):
        options.register_command("toy2", {"gamma": 1.0})
    assert "toy2" not in options.COMMANDS
    with pytest.raises(ValueError, match="'solve' was not registered with register_command"):
        options.unregister_command("solve")
    with pytest.raises(ValueError, match="command 'nope' has no registered options"):
        options.option_for("nope", "beta")
