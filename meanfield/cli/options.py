"""Every command-line option of ``meanfield``, declared once, validated on the way in.

:data:`OPTIONS` holds each option (flag, type, help, default, check, old spellings);
:data:`COMMANDS` says which options each subcommand takes, in the order ``--help`` lists
them, with the defaults and choices that differ between commands. The core declares the
options of its own commands (``solve``, ``plot``, ``gaussian``, ``convergence``) and those
that several commands share (the model, time, output, ...); a package declares the table of
each of its commands and the options only that command takes in the command's module, and
registers them with :func:`register_command` when the module is imported (``meanfield
particles``: :mod:`particles.cli`). A command builds its parser with :func:`add_options`;
a bad value raises ``ValueError`` naming the option as the user typed it (``--t-max must be
> 0, got 0``) before anything is computed. Old spellings (``--t-end``, ``--num``, ``--N``,
...) are accepted as hidden aliases for one release, with a note on stderr. ``--help`` shows
the default of every option.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from meanfield import attention as attention_registry

REQUIRED_KEY = "_meanfield_required"
"""Namespace attribute listing ``(dest, flag)`` of the options a command requires."""

GROUP = "meanfield.commands"
"""Entry-point group of the subcommands: ``name = "package.module"`` (:mod:`meanfield.cli`)."""

TYPED_KEY = "_meanfield_typed"
"""Namespace attribute mapping each option given to the spelling typed (see :func:`typed`)."""


@dataclass(frozen=True)
class Option:
    """One command-line option.

    ``check(value)`` returns ``True`` for a valid value; ``need`` says the constraint in
    words for the error message (``"must be > 0"``). ``flag_only``: a flag without a value
    (``--causal``); ``switch``: a pair ``--x/--no-x``. ``aliases`` are old spellings, accepted
    but hidden from ``--help``. ``shown`` is how ``--help`` reads a default of ``None``.
    ``writes``: the option names a file the command writes, ``"file"`` or ``"figure"`` (whose
    extension must also name a format), checked before any work (:mod:`meanfield.cli`).
    """

    flag: str
    help: str
    type: Callable[[str], Any] | None = str
    default: Any = None
    check: Callable[[Any], bool] | None = None
    need: str = ""
    aliases: tuple[str, ...] = ()
    choices: tuple[Any, ...] | None = None
    nargs: str | None = None
    flag_only: bool = False
    switch: bool = False
    required: bool = False
    metavar: str | None = None
    shown: str | None = None
    writes: str | None = None

    def validate(self, value: Any, typed: str | None = None) -> Any:
        """Return ``value`` if valid, else raise ``ValueError`` naming ``typed`` (or the flag)."""
        name = typed or self.flag
        values = value if isinstance(value, list) and self.nargs else [value]
        for v in values:
            if v is None:
                continue
            if self.choices is not None and v not in self.choices:
                msg = f"{name} must be one of {', '.join(map(str, self.choices))}, got {v!r}"
                raise ValueError(msg)
            if self.check is not None and not self.check(v):
                msg = f"{name} {self.need}, got {v!r}"
                raise ValueError(msg)
        return value


# -- parsers of text and checks of values -----------------------------------------------------


def _json_array(text: str) -> np.ndarray:
    try:
        return np.array(json.loads(text), dtype=float)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        msg = f"expected a JSON number array such as [[1,0],[0,1]], got {text!r} ({exc})"
        raise argparse.ArgumentTypeError(msg) from None


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        msg = f"expected comma-separated numbers such as 1e-6,1e-7,1e-8, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _modes(text: str) -> dict[int, float]:
    out = {}
    try:
        for part in text.split(","):
            k, a = part.split(":")
            out[int(k)] = float(a)
    except ValueError:
        msg = f"expected modes as k:amplitude pairs such as 1:0.05,3:0.02, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return out


def _attention(text: str) -> str:
    """An attention kind's canonical name (aliases and case as :mod:`meanfield.attention`
    allows: ``SA`` is ``softmax``); an unknown name is left for the choices to refuse."""
    try:
        return attention_registry.resolve(text).name
    except ValueError:
        return text


def attention_kinds(*solvers: str) -> Callable[[], tuple[str, ...]]:
    """The attention kinds some of ``solvers`` support, read from the registry when a parser
    is built."""
    return lambda: tuple(dict.fromkeys(k for s in solvers for k in attention_registry.names(s)))


def _domains() -> tuple[str, ...]:
    """The ``--domain`` choices, read from the domain registry when a parser is built."""
    from meanfield.domains import command_line_domains

    return command_line_domains()


def _init(text: str) -> str:
    """An initial condition's name; ``vonmises`` is the old spelling of ``von-mises``."""
    return {"vonmises": "von-mises"}.get(text, text)


def integer(text: str) -> int:
    """An integer; ``1.5`` is refused (``int(float(text))`` would truncate it silently)."""
    try:
        return int(text)
    except ValueError:
        msg = f"expected an integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def number(text: str) -> float:
    """A number (``inf`` and ``nan`` parse; the option's check refuses them where it must)."""
    try:
        return float(text)
    except ValueError:
        msg = f"expected a number, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _finite(lo: float, *, strict: bool) -> Callable[[float], bool]:
    return lambda v: math.isfinite(v) and (v > lo if strict else v >= lo)


POSITIVE = _finite(0.0, strict=True)
"""The check of an option that must be finite and > 0."""
NONNEGATIVE = _finite(0.0, strict=False)
"""The check of an option that must be finite and >= 0."""

# -- the table --------------------------------------------------------------------------------

OPTIONS: dict[str, Option] = {
    # the model (docs/equations.md sections 2 and 3)
    "beta": Option("--beta", "inverse temperature beta", number, 4.0, NONNEGATIVE,
                   "must be finite and >= 0", metavar="BETA"),
    "attention": Option("--attention", "attention kind", _attention, "softmax"),
    "value": Option("--value", "+1 attractive (V = I), -1 repulsive (V = -I)", integer, 1,
                    choices=(1, -1)),
    "noise": Option("--noise", "sigma of sigma*Laplacian", number, 0.0, NONNEGATIVE,
                    "must be finite and >= 0"),
    "model": Option("--model", "JSON file of a Model (overrides the model options)", Path,
                    shown="none"),
    "Q": Option("--Q", "Q as a JSON matrix", _json_array, shown="identity"),
    "K": Option("--K", "K as a JSON matrix", _json_array, shown="identity"),
    "V": Option("--V", "V as a JSON matrix", _json_array, shown="identity"),
    "heads": Option("--heads", "JSON list of [Q, K, V] triples (multi-head)", str,
                    shown="one head"),
    # the domain
    "domain": Option("--domain", "spectral domain", str, "circle"),  # choices: the registry's
    "resolution": Option("--resolution", "grid size (circle: N; sphere: lmax; zonal: degree)",
                         integer, 128, lambda v: v >= 1, "must be >= 1", aliases=("--N",)),
    "d": Option("--d", "dimension d (tokens in R^d; the zonal domain is S^{d-1})", integer, 8,
                lambda v: v >= 1, "must be >= 1"),
    "max_resolution": Option("--max-resolution", "largest resolution the refinement may reach",
                             integer, None, lambda v: v >= 1, "must be >= 1",
                             shown="8 x --resolution"),
    # time
    "t_max": Option("--t-max", "final time", number, 4.0, POSITIVE, "must be finite and > 0",
                    aliases=("--t-end",)),
    "times": Option("--times", "number of output times, evenly spaced in [0, t-max]", integer, 51,
                    lambda v: v >= 2, "must be >= 2", aliases=("--num",)),
    "rtol": Option("--rtol", "relative tolerance of the time stepper", number, 1e-8, POSITIVE,
                   "must be finite and > 0"),
    "atol": Option("--atol", "absolute tolerance of the time stepper", number, 1e-12,
                   NONNEGATIVE, "must be finite and >= 0"),
    "dt": Option("--dt", "time step (largest step of adaptive methods)", number, None,
                 POSITIVE, "must be finite and > 0", shown="per method"),
    "form": Option("--form", "continuity form, or gradient-flow form", str, "continuity",
                   choices=("continuity", "gradient")),
    # initial data
    "init": Option("--init", "initial condition", _init, "modes", aliases=("--initial",)),
    "kappa": Option("--kappa", "von Mises(-Fisher) concentration", number, 1.0, NONNEGATIVE,
                    "must be finite and >= 0"),
    "r": Option("--r", "wrapped Cauchy radius", number, 0.5, lambda v: 0 <= v < 1,
                "must lie in [0, 1)"),
    "modes": Option("--modes", "uniform + modes, as k:amplitude pairs", _modes, {1: 0.05},
                    shown="1:0.05"),
    "rho0": Option("--rho0", ".npy grid values or NetCDF result (overrides --init)", Path,
                   shown="none"),
    "mean": Option("--mean", "initial mean, JSON vector", _json_array, required=True),
    "cov": Option("--cov", "initial covariance, JSON matrix", _json_array, required=True),
    # particles
    "n": Option("--n", "tokens per system", integer, 32, lambda v: v >= 1, "must be >= 1"),
    "geometry": Option("--geometry", "tokens on the sphere, or in R^d", str, "sphere",
                       choices=("sphere", "euclidean")),
    "field_method": Option(
        "--field-method", "how the attention field is summed: direct (the O(n^2) sum, the "
        "reference), fast (fast summation on S^1/S^2, meanfield.kernels.fastsum; refused where it does "
        "not apply), auto (fast where it applies and pays, direct otherwise); the choice made "
        "is recorded in the output's settings", str, "auto", choices=("auto", "direct", "fast")),
    # studies
    "levels": Option("--levels", "number of resolutions R 2^j", integer, 4, lambda v: v >= 2,
                     "must be >= 2"),
    "tolerances": Option("--tolerances", "rtol values of the tolerance study (empty: skip)",
                         _floats, [1e-6, 1e-7, 1e-8, 1e-9], shown="1e-6,1e-7,1e-8,1e-9"),
    "tail_tol": Option("--tail-tol", "resolution monitor threshold", number, 1e-10, POSITIVE,
                       "must be finite and > 0"),
    "delta": Option("--delta", "tokens i, j are together when <x_i, x_j> >= 1 - delta", number,
                    1e-3, lambda v: 0 < v < 1, "must lie in (0, 1)"),
    "realizations": Option("--realizations", "random starts (per cell, or per beta)", integer,
                           1024, lambda v: v >= 1, "must be >= 1", aliases=("--seeds",)),
    # randomness, parallelism, resuming
    "seed": Option("--seed", "root seed of every random draw", integer, 0, lambda v: v >= 0,
                   "must be >= 0"),
    "workers": Option("--workers", "processes of a Dask LocalCluster (1: no cluster)", integer, 1,
                      lambda v: v >= 1, "must be >= 1"),
    "scheduler": Option("--scheduler", "address of an existing Dask scheduler "
                        "(tcp://host:8786)", str, metavar="ADDRESS", shown="none"),
    "resume": Option("--resume", "skip the work already saved by an interrupted run", None,
                     False, flag_only=True),
    "on_failure": Option(
        "--on-failure", "what a cell whose integration did not succeed (non-finite states, a "
        "step beyond the stability bound) does: 'stop' ends the command with its reason (the "
        "finished cells written to --out, exit 1); 'record' goes on, the failed cells are NaN, "
        "left out of every statistic, counted in num_rejected and listed in "
        "settings['failed_cells'], and the file is written with successful = 0 and exit code 1 "
        "(the file as a whole is not the result asked for: a script must not take it for one)",
        str, "stop", choices=("stop", "record")),
    # array backend (meanfield.backend, docs/backends.md)
    "backend": Option("--backend", "array library: numpy, or torch (pip install "
                      "'meanfield[torch]')", str, "numpy", choices=("numpy", "torch")),
    "device": Option("--device", "torch device, e.g. cpu, cuda:1, or cuda (sweeps: one GPU per "
                     "Dask worker) (with --backend torch)",
                     str, shown="cpu"),
    "dtype": Option("--dtype", "floating-point precision of the state", str, "float64",
                    choices=("float64", "float32")),
    # output
    "out": Option("--out", "file to write", Path, shown="no file written", writes="file"),
    "plot": Option("--plot", "also draw the result to this PNG", Path, shown="no figure",
                   writes="figure"),
    "at": Option("--at", "times to draw (sphere maps; nearest output times)", number,
                 aliases=("--times",), nargs="*", shown="a few, evenly spaced"),
    "progress": Option("--progress", "show a progress bar", None, True, switch=True),
    "overwrite": Option("--overwrite", "replace output files that exist (else they are refused "
                        "before any work)", None, False, flag_only=True),
}


@dataclass(frozen=True)
class Use:
    """What a command changes of an :class:`Option`: its default, choices (or a function
    that gives them when the parser is built), ``nargs``, help, and a stricter ``check`` with
    its ``need`` (``--n`` of a study of pairs must be >= 2), so that every bad value is refused
    in one wording, the option's, before any work."""

    default: Any = None
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None
    nargs: str | None = None
    required: bool | None = None
    help: str | None = None
    shown: str | None = None
    check: Callable[[Any], bool] | None = None
    need: str | None = None


_NONE = Use()


COMMANDS: dict[str, dict[str, Any]] = {
    "solve": {
        "beta": 4.0, "attention": Use(choices=attention_kinds("spectral", "lagrangian"),
                                      help="attention kind (lagrangian: every kind)"),
        "value": 1, "noise": 0.0, "resolution": 128, "d": 8,
        "geometry": Use(help="lagrangian only: sphere (layer norm) or euclidean (R^d)"),
        "max_resolution": None, "t_max": 4.0,
        "times": 51, "rtol": 1e-8, "atol": 1e-12, "form": "continuity",
        "init": Use(default="modes", choices=("modes", "von-mises", "uniform"),
                    help="modes: uniform + 0.01 cos(k x), k = 1..4 (or l = 1..4); "
                         "von-mises: two von Mises(-Fisher) bumps; uniform"),
        "out": Path("solution.nc"), "plot": None, "overwrite": False, "progress": True,
        "backend": Use(help="lagrangian only: array library (numpy, or torch)"),
        "device": _NONE, "dtype": Use(help="lagrangian only: precision of the state"),
        "field_method": Use(help="lagrangian only: how the field is summed: direct (the O(n^2) "
                                 "sum, the reference), fast (fast summation on S^1/S^2; refused "
                                 "where it does not apply), auto (fast where it applies and "
                                 "pays); the choice made is settings['field_method'] of the file"),
    },
    "plot": {
        "out": Use(shown="FILE with suffix .png",
                   help="image to write, in the format of its extension (.png, .jpg, .pdf, .svg, ...)"),
        "at": None,
        "overwrite": False,
    },
    "convergence": {
        "domain": Use(default="circle", choices=_domains),
        "resolution": Use(default=32, help="coarsest N / lmax / degree"), "d": 8,
        "beta": 1.0, "attention": Use(choices=attention_kinds("spectral")), "value": 1,
        "noise": 0.0, "init": Use(default="von-mises", choices=("von-mises", "wrapped-cauchy", "modes")),
        "kappa": 1.0, "r": 0.5, "modes": _NONE, "rho0": None, "t_max": 1.0, "times": 5,
        "levels": 4, "rtol": Use(default=1e-10, help="time tolerance of the resolution study"),
        "atol": 1e-14, "tolerances": _NONE, "tail_tol": 1e-10,
        "out": Use(help="NetCDF file for the study"), "overwrite": False,
    },
    "gaussian": {
        "model": None, "beta": 1.0, "attention": Use(choices=attention_kinds("gaussian")),
        "value": Use(default=1, help="sign folded into V"), "noise": 0.0, "Q": None, "K": None,
        "V": None, "heads": None, "mean": _NONE, "cov": _NONE,
        "t_max": Use(required=True), "times": 101, "rtol": 1e-10, "atol": 1e-12,
        "out": Use(help="NetCDF file to write"),
        "plot": Use(help="PNG: ellipses for d = 2, eigenvalues otherwise"), "overwrite": False,
    },
}
"""Per command, its options in ``--help`` order: a default, or a :class:`Use`. The core's
commands are listed here; a package registers the tables of its own commands with
:func:`register_command` (``meanfield particles``: :mod:`particles.cli`)."""

_OWN: dict[str, tuple[str, ...]] = {}
"""The options of :data:`OPTIONS` that :func:`register_command` added for one command."""


def register_command(command: str, table: Mapping[str, Any],
                     own: Mapping[str, Option] | None = None) -> None:
    """Register the options of ``command``, a command of another package.

    ``table`` is its :data:`COMMANDS` entry (option names in ``--help`` order, each with the
    command's default or a :class:`Use`): names of :data:`OPTIONS` (the shared ones, such as
    the model's) or of ``own``, the options only this command takes, which join
    :data:`OPTIONS`. ``ValueError`` if the command is registered with another table, if an
    own option takes a name or a flag of another option, or if ``table`` names an option
    that neither holds. Registering the same tables again does nothing.
    """
    own = dict(own or {})
    if not isinstance(command, str) or not command:
        msg = f"register_command command must be a non-empty string, got {command!r}"
        raise ValueError(msg)
    if command in COMMANDS:
        if COMMANDS[command] == dict(table) and all(OPTIONS.get(k) is o for k, o in own.items()):
            return
        msg = f"command {command!r} is already registered with other options"
        raise ValueError(msg)
    _check_own(command, own)
    unknown = sorted(set(table) - set(OPTIONS) - set(own))
    if unknown:
        msg = f"command {command!r} names options that are not registered: {unknown}"
        raise ValueError(msg)
    OPTIONS.update(own)
    _OWN[command] = tuple(own)
    COMMANDS[command] = dict(table)


def _check_own(command: str, own: Mapping[str, Option]) -> None:
    """The own options of ``command`` take no name, flag or old spelling already taken."""
    taken = {f: n for n, o in OPTIONS.items() for f in (o.flag, *o.aliases)}
    for name, opt in own.items():
        if not isinstance(opt, Option):
            msg = f"command {command!r}: own option {name!r} must be an Option, got {opt!r}"
            raise ValueError(msg)
        clash = [f for f in (opt.flag, *opt.aliases) if f in taken]
        if name in OPTIONS or clash:
            other = OPTIONS[name].flag if name in OPTIONS else taken[clash[0]]
            msg = (f"command {command!r}: own option {name!r} ({opt.flag}) clashes with the "
                   f"registered option {other!r}")
            raise ValueError(msg)
        taken.update((f, name) for f in (opt.flag, *opt.aliases))


def unregister_command(command: str) -> dict[str, Any]:
    """Remove the table of ``command`` (registered with :func:`register_command`) and its own
    options; return the table."""
    if command not in _OWN:
        msg = f"command {command!r} was not registered with register_command"
        raise ValueError(msg)
    for name in _OWN.pop(command):
        del OPTIONS[name]
    return COMMANDS.pop(command)


def command_table(command: str) -> Mapping[str, Any]:
    """The options of ``command`` (:data:`COMMANDS`); the table of another package's command
    is registered when its module is imported, which this does through its entry point (group
    :data:`GROUP`) if it has not been."""
    if command not in COMMANDS:
        from importlib.metadata import entry_points

        for ep in entry_points(group=GROUP):
            if ep.name == command:
                ep.load()
                break
    if command not in COMMANDS:
        msg = f"command {command!r} has no registered options; registered: {sorted(COMMANDS)}"
        raise ValueError(msg)
    return COMMANDS[command]


def option_for(command: str, name: str) -> Option:
    """The :class:`Option` ``name`` as ``command`` uses it (its default, choices, help)."""
    opt = OPTIONS[name]
    use = command_table(command).get(name, _NONE)
    if not isinstance(use, Use):
        use = Use(default=use)
    fields = {k: getattr(use, k) for k in ("choices", "nargs", "required", "help", "shown",
                                           "check", "need") if getattr(use, k) is not None}
    if use.default is not None:
        fields["default"] = use.default
        fields.setdefault("shown", None)  # the command's own default is shown as it is
    if callable(fields.get("choices")):
        fields["choices"] = tuple(fields["choices"]())
    if name == "attention" and "help" not in fields:  # the aliases of the kinds offered only
        offered = fields.get("choices") or opt.choices or attention_registry.names()
        said = [f"{k} = {a.upper()}" for k in offered
                for a in attention_registry.resolve(k).aliases]
        fields["help"] = opt.help + (f" ({', '.join(said)})" if said else "")
    if fields.get("required"):
        fields["default"] = None  # so that check_required sees it missing
    return replace(opt, **fields)


def _shown(opt: Option) -> str:
    if opt.required:
        return "required"
    if opt.default is None:
        return opt.shown or "none"
    if opt.shown is not None:
        return opt.shown
    if isinstance(opt.default, list):
        return " ".join(map(str, opt.default))
    if opt.switch:
        return opt.flag if opt.default else "--no-" + opt.flag[2:]
    return str(opt.default)


class _Store(argparse.Action):
    """Store a value after :meth:`Option.validate`; note an old spelling on stderr."""

    def __init__(self, *args: Any, option: Option, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.option = option

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string in self.option.aliases:
            print(f"meanfield: note: {option_string} is now spelled {self.option.flag}; the old "
                  "spelling goes in the next release", file=sys.stderr)
        setattr(namespace, self.dest, self.option.validate(values, option_string))
        if option_string is not None:
            spelled = dict(getattr(namespace, TYPED_KEY, None) or {})
            spelled[self.dest] = option_string
            setattr(namespace, TYPED_KEY, spelled)


def typed(args: argparse.Namespace, name: str) -> str:
    """Option ``name`` as the user typed it (an old spelling such as ``--times`` for
    ``--at``), else its flag: the words of a message about its value."""
    return (getattr(args, TYPED_KEY, None) or {}).get(name) or OPTIONS[name].flag


def add_option(parser: argparse.ArgumentParser, command: str, name: str) -> None:
    """Add option ``name`` of :data:`OPTIONS` to ``parser`` as ``command`` uses it."""
    opt = option_for(command, name)
    text = f"{opt.help} ({'required' if opt.required else 'default: ' + _shown(opt)})"
    if opt.switch:
        parser.add_argument(opt.flag, dest=name, action=argparse.BooleanOptionalAction,
                            default=opt.default, help=text)
        return
    if opt.flag_only:
        parser.add_argument(opt.flag, dest=name, action="store_true", default=False,
                            help=f"{opt.help} (default: off)")
        return
    common: dict[str, Any] = {"dest": name, "action": _Store, "option": opt, "type": opt.type}
    if opt.nargs is not None:
        common["nargs"] = opt.nargs
    metavar = opt.metavar or ("{" + ",".join(map(str, opt.choices)) + "}" if opt.choices else None)
    parser.add_argument(opt.flag, default=opt.default, help=text, metavar=metavar, **common)
    for alias in opt.aliases:
        parser.add_argument(alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **common)
    if opt.required:
        required = list(parser.get_default(REQUIRED_KEY) or ())
        parser.set_defaults(**{REQUIRED_KEY: (*required, (name, opt.flag))})


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Add every option of ``command`` in :data:`COMMANDS` (a plug-in's choices live on its own
    options, such as the particle integrators)."""
    for name in command_table(command):
        add_option(parser, command, name)


def check_required(args: argparse.Namespace) -> None:
    """Raise ``ValueError`` naming each required option that was not given."""
    missing = [flag for dest, flag in getattr(args, REQUIRED_KEY, ()) if getattr(args, dest, None)
               is None]
    if missing:
        msg = f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required"
        raise ValueError(msg)


def add_parser(subparsers: Any, command: str, *, help: str, description: str,  # noqa: A002
               func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A subparser for ``command`` with its options of :data:`COMMANDS` and ``func`` set."""
    p = subparsers.add_parser(command, help=help, description=description)
    add_options(p, command)
    p.set_defaults(func=func)
    return p


__all__ = ["COMMANDS", "GROUP", "NONNEGATIVE", "OPTIONS", "POSITIVE", "Option", "Use", "add_option",
           "add_options", "add_parser", "attention_kinds", "check_required", "command_table",
           "integer", "number", "option_for", "register_command", "typed", "unregister_command"]
