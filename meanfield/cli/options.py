"""Every command-line option of ``meanfield``, declared once, validated on the way in.

:data:`OPTIONS` holds each option (flag, type, help, default, check, old spellings);
:data:`COMMANDS` says which options each subcommand takes, in the order ``--help`` lists
them, with the defaults and choices that differ between commands. A command builds its
parser with :func:`add_options`; a bad value raises ``ValueError`` naming the option as the
user typed it (``--t-max must be > 0, got 0``) before anything is computed. Old spellings
(``--t-end``, ``--num``, ``--N``, ...) are accepted as hidden aliases for one release, with
a note on stderr. ``--help`` shows the default of every option.
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

TYPED_KEY = "_meanfield_typed"
"""Namespace attribute mapping each option given to the spelling typed (see :func:`typed`)."""


@dataclass(frozen=True)
class Option:
    """One command-line option.

    ``check(value)`` returns ``True`` for a valid value; ``need`` says the constraint in
    words for the error message (``"must be > 0"``). ``flag_only``: a flag without a value
    (``--causal``); ``switch``: a pair ``--x/--no-x``. ``aliases`` are old spellings, accepted
    but hidden from ``--help``. ``shown`` is how ``--help`` reads a default of ``None``.
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


def _kinds(*solvers: str) -> Callable[[], tuple[str, ...]]:
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


def _int(text: str) -> int:
    """An integer; ``1.5`` is refused (``int(float(text))`` would truncate it silently)."""
    try:
        return int(text)
    except ValueError:
        msg = f"expected an integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        msg = f"expected a number, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _finite(lo: float, *, strict: bool) -> Callable[[float], bool]:
    return lambda v: math.isfinite(v) and (v > lo if strict else v >= lo)


_POSITIVE = _finite(0.0, strict=True)
_NONNEGATIVE = _finite(0.0, strict=False)

# -- the table --------------------------------------------------------------------------------

OPTIONS: dict[str, Option] = {
    # the model (docs/equations.md sections 2 and 3)
    "beta": Option("--beta", "inverse temperature beta", _float, 4.0, _NONNEGATIVE,
                   "must be finite and >= 0", metavar="BETA"),
    "attention": Option("--attention", "attention kind", _attention, "softmax"),
    "value": Option("--value", "+1 attractive (V = I), -1 repulsive (V = -I)", _int, 1,
                    choices=(1, -1)),
    "noise": Option("--noise", "sigma of sigma*Laplacian", _float, 0.0, _NONNEGATIVE,
                    "must be finite and >= 0"),
    "causal": Option("--causal", "causal mask (token i attends to j <= i)", None, False,
                     flag_only=True),
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
                         _int, 128, lambda v: v >= 1, "must be >= 1", aliases=("--N",)),
    "d": Option("--d", "dimension d (tokens in R^d; the zonal domain is S^{d-1})", _int, 8,
                lambda v: v >= 1, "must be >= 1"),
    "max_resolution": Option("--max-resolution", "largest resolution the refinement may reach",
                             _int, None, lambda v: v >= 1, "must be >= 1",
                             shown="8 x --resolution"),
    # time
    "t_max": Option("--t-max", "final time", _float, 4.0, _POSITIVE, "must be finite and > 0",
                    aliases=("--t-end",)),
    "times": Option("--times", "number of output times, evenly spaced in [0, t-max]", _int, 51,
                    lambda v: v >= 2, "must be >= 2", aliases=("--num",)),
    "rtol": Option("--rtol", "relative tolerance of the time stepper", _float, 1e-8, _POSITIVE,
                   "must be finite and > 0"),
    "atol": Option("--atol", "absolute tolerance of the time stepper", _float, 1e-12,
                   _NONNEGATIVE, "must be finite and >= 0"),
    "dt": Option("--dt", "time step (largest step of adaptive methods)", _float, None,
                 _POSITIVE, "must be finite and > 0", shown="per method"),
    "form": Option("--form", "continuity form, or gradient-flow form", str, "continuity",
                   choices=("continuity", "gradient")),
    # initial data
    "init": Option("--init", "initial condition", _init, "modes", aliases=("--initial",)),
    "kappa": Option("--kappa", "von Mises(-Fisher) concentration", _float, 1.0, _NONNEGATIVE,
                    "must be finite and >= 0"),
    "r": Option("--r", "wrapped Cauchy radius", _float, 0.5, lambda v: 0 <= v < 1,
                "must lie in [0, 1)"),
    "modes": Option("--modes", "uniform + modes, as k:amplitude pairs", _modes, {1: 0.05},
                    shown="1:0.05"),
    "rho0": Option("--rho0", ".npy grid values or NetCDF result (overrides --init)", Path,
                   shown="none"),
    "mean": Option("--mean", "initial mean, JSON vector", _json_array, required=True),
    "cov": Option("--cov", "initial covariance, JSON matrix", _json_array, required=True),
    # particles
    "n": Option("--n", "tokens per system", _int, 32, lambda v: v >= 1, "must be >= 1"),
    "batch": Option("--batch", "independent systems (0: a single system, no batch axis)", _int,
                    0, lambda v: v >= 0, "must be >= 0"),
    "geometry": Option("--geometry", "tokens on the sphere, or in R^d", str, "sphere",
                       choices=("sphere", "euclidean")),
    "method": Option("--method", "time integrator", str, "rk4"),
    "memory_limit_mb": Option("--memory-limit-mb", "bound on the n x n attention tiles, in MiB",
                              _float, 256.0, _POSITIVE, "must be finite and > 0"),
    "field_method": Option(
        "--field-method", "how the attention field is summed: direct (the O(n^2) sum, the "
        "reference), fast (fast summation on S^1/S^2, meanfield.kernels.fastsum; refused where it does "
        "not apply), auto (fast where it applies and pays, direct otherwise); the choice made "
        "is recorded in the output's settings", str, "auto", choices=("auto", "direct", "fast")),
    "no_observables": Option("--no-observables",
                             "skip energy and dissipation (saves two n^2 passes per output)",
                             None, False, flag_only=True),
    # studies
    "levels": Option("--levels", "number of resolutions R 2^j", _int, 4, lambda v: v >= 2,
                     "must be >= 2"),
    "tolerances": Option("--tolerances", "rtol values of the tolerance study (empty: skip)",
                         _floats, [1e-6, 1e-7, 1e-8, 1e-9], shown="1e-6,1e-7,1e-8,1e-9"),
    "tail_tol": Option("--tail-tol", "resolution monitor threshold", _float, 1e-10, _POSITIVE,
                       "must be finite and > 0"),
    "beta_min": Option("--beta-min", "smallest beta", _float, 0.1, _NONNEGATIVE,
                       "must be finite and >= 0"),
    "beta_max": Option("--beta-max", "largest beta", _float, 9.0, _NONNEGATIVE,
                       "must be finite and >= 0"),
    "betas": Option("--betas", "number of beta values", _int, 90, lambda v: v >= 1,
                    "must be >= 1"),
    "delta": Option("--delta", "tokens i, j are together when <x_i, x_j> >= 1 - delta", _float,
                    1e-3, lambda v: 0 < v < 1, "must lie in (0, 1)"),
    "realizations": Option("--realizations", "random starts (per cell, or per beta)", _int,
                           1024, lambda v: v >= 1, "must be >= 1", aliases=("--seeds",)),
    "qk": Option("--qk", "law of Q^T K, drawn per realisation (Figure 5)", str, "identity",
                 choices=("identity", "ginibre", "goe")),
    "v": Option("--v", "law of V; 'qk' sets V = Q^T K", str, "identity",
                choices=("identity", "ginibre", "goe", "qk")),
    "pde": Option("--pde", "also count the peaks of the PDE density", None, False,
                  flag_only=True),
    "pde_times": Option("--pde-times", "number of PDE output times", _int, 61,
                        lambda v: v >= 2, "must be >= 2"),
    # the validation suite
    "suite": Option("--suite", "quick (minutes) or full (larger sizes, more checks)", str,
                    "quick", choices=("quick", "full")),
    "only": Option("--only", "run only checks matching PATTERN: comma-separated whole names or "
                   "shell globs", str, metavar="PATTERN", shown="every check"),
    "list": Option("--list", "list the suite's checks and exit", None, False, flag_only=True),
    # randomness, parallelism, resuming
    "seed": Option("--seed", "root seed of every random draw", _int, 0, lambda v: v >= 0,
                   "must be >= 0"),
    "workers": Option("--workers", "processes of a Dask LocalCluster (1: no cluster)", _int, 1,
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
    "store": Option("--store", "directory for the per-cell files", Path,
                    shown="OUT with suffix .cells"),
    "keep_cells": Option("--keep-cells", "keep the per-cell files after success", None, False,
                         flag_only=True),
    # array backend (meanfield.backend, docs/backends.md)
    "backend": Option("--backend", "array library: numpy, or torch (pip install "
                      "'meanfield[torch]')", str, "numpy", choices=("numpy", "torch")),
    "device": Option("--device", "torch device, e.g. cpu, cuda:1, or cuda (sweeps: one GPU per "
                     "Dask worker) (with --backend torch)",
                     str, shown="cpu"),
    "dtype": Option("--dtype", "floating-point precision of the state", str, "float64",
                    choices=("float64", "float32")),
    # the token study of a trained model (meanfield tokens, docs/real_model.md)
    "text": Option("--text", "a UTF-8 text file; passages are its paragraphs (blank-line "
                   "separated)", Path, metavar="FILE", shown="none"),
    "corpus": Option("--corpus", "the builtin public-domain passages", str,
                     choices=("builtin",), shown="builtin, unless --text"),
    "bins": Option("--bins", "histogram bins on [-1, 1]", _int, 40, lambda v: v >= 1,
                   "must be >= 1"),
    "dynamics_passages": Option("--dynamics-passages", "run the dynamics on the first N "
                                "passages (0: none)", _int, None, lambda v: v >= 0,
                                "must be >= 0", metavar="N", shown="all"),
    "no_fit": Option("--no-fit", "skip the toy-model beta fit", None, False, flag_only=True),
    "passage": Option("--passage", "the passage shown in the per-layer histograms", _int, 0,
                      lambda v: v >= 0, "must be >= 0"),
    # output
    "out": Option("--out", "file to write", Path, shown="no file written"),
    "plot": Option("--plot", "also draw the result to this PNG", Path, shown="no figure"),
    "plot_clusters": Option("--plot-clusters", "PNG of the cluster counts and dwell times",
                            Path, shown="no figure"),
    "at": Option("--at", "times to draw (sphere maps; nearest output times)", _float,
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


def _at_least_2(v: int) -> bool:
    return v >= 2


_PAIRS = Use(default=32, check=_at_least_2, need="must be >= 2 (clusters are pairs of tokens)")
"""``--n`` of the studies that count pairs of tokens."""

COMMANDS: dict[str, dict[str, Any]] = {
    "solve": {
        "beta": 4.0, "attention": Use(choices=_kinds("spectral", "lagrangian"),
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
        "beta": 1.0, "attention": Use(choices=_kinds("spectral")), "value": 1,
        "noise": 0.0, "init": Use(default="von-mises", choices=("von-mises", "wrapped-cauchy", "modes")),
        "kappa": 1.0, "r": 0.5, "modes": _NONE, "rho0": None, "t_max": 1.0, "times": 5,
        "levels": 4, "rtol": Use(default=1e-10, help="time tolerance of the resolution study"),
        "atol": 1e-14, "tolerances": _NONE, "tail_tol": 1e-10,
        "out": Use(help="NetCDF file for the study"), "overwrite": False,
    },
    "gaussian": {
        "model": None, "beta": 1.0, "attention": Use(choices=_kinds("gaussian")),
        "value": Use(default=1, help="sign folded into V"), "noise": 0.0, "Q": None, "K": None,
        "V": None, "heads": None, "mean": _NONE, "cov": _NONE,
        "t_max": Use(required=True), "times": 101, "rtol": 1e-10, "atol": 1e-12,
        "out": Use(help="NetCDF file to write"),
        "plot": Use(help="PNG: ellipses for d = 2, eigenvalues otherwise"), "overwrite": False,
    },
    "particles": {
        "n": 32, "d": 2, "batch": 0, "beta": 4.0, "attention": Use(choices=_kinds("particles")),
        "value": 1,
        "causal": False, "noise": Use(default=0.0, help="sigma (needs --method euler_maruyama)"),
        "geometry": "sphere",
        "init": Use(default="sphere", choices=("sphere", "orthogonal", "gaussian"),
                    help="uniform on the sphere, orthogonal (d >= n), or standard Gaussian"),
        "t_max": 30.0, "times": 301, "seed": 0, "method": _NONE,
        "dt": Use(help="step of fixed-step methods"), "rtol": 1e-9, "atol": 1e-12,
        "memory_limit_mb": 256.0, "field_method": "auto", "no_observables": False,
        "out": Path("particles.nc"),
        "plot": Use(help="PNG of the trajectories (circle: angle vs time; S^2: paths)"),
        "overwrite": False, "progress": True, "backend": "numpy", "device": None,
        "dtype": "float64",
    },
    "validate": {
        "suite": "quick", "only": None, "out": Use(default=Path("meanfield-validation"),
                                                    help="output folder"),
        "seed": 0, "workers": 1, "scheduler": None, "resume": Use(
            help="skip the checks already finished in --out"),
        "list": False, "progress": True,
        "overwrite": Use(help="replace the records of an earlier run in --out (else a folder "
                              "holding them is refused before any work)"),
    },
    "phase-diagram": {
        "n": _PAIRS, "d": Use(default=[2], nargs="+", check=_at_least_2, need="must be >= 2",
                              help="dimension(s) d of S^{d-1} (several give a d axis)"),
        "beta_min": 0.1, "beta_max": 9.0, "betas": 90, "t_max": 30.0, "times": 200,
        "delta": 1e-3, "realizations": Use(default=1024, help="random starts per cell"),
        "attention": Use(choices=_kinds("phase_diagram")), "qk": "identity",
        "v": "identity", "dt": Use(default=0.3, help="largest RK4 step"), "seed": 0,
        "workers": 1, "scheduler": None, "on_failure": "stop", "store": None,
        "resume": Use(help="skip the cells already in the store (after an interruption); "
                           "an --out file left by the interrupted run (successful = 0) is "
                           "replaced"),
        "keep_cells": False, "progress": True,
        "out": Use(required=True, help="NetCDF file to write"),
        "plot": Use(help="PNG heat map with the curve (6.12)"), "overwrite": False,
        "backend": "numpy", "device": None, "dtype": "float64",
    },
    "metastability": {
        "beta": Use(default=[4.0, 9.0], nargs="+", help="inverse temperatures"), "n": _PAIRS,
        "realizations": Use(default=256, help="random starts per beta"), "t_max": 30.0,
        "times": 301, "delta": 1e-3, "attention": Use(choices=_kinds("ensemble")),
        "dt": Use(default=0.1, help="largest RK4 step"), "seed": 0, "workers": 1,
        "scheduler": None, "on_failure": "stop", "pde": False,
        "resolution": Use(default=256, help="starting grid size N of the PDE"),
        "pde_times": 61, "progress": True,
        "out": Use(required=True, help="NetCDF file to write"),
        "plot": Use(help="PNG of the angles against time (Figure 4)"),
        "plot_clusters": None, "overwrite": False,
        "backend": "numpy", "device": None, "dtype": "float64",
    },
    "tokens": {  # the study's defaults are validation.tokens.DEFAULTS (a test keeps them equal)
        "text": None, "corpus": None, "out": Use(default=Path("meanfield-tokens"),
                                                 help="output folder"),
        "bins": 40, "delta": Use(default=0.1, check=lambda v: 0 < v <= 2,
                                 need="must lie in (0, 2]",
                                 help="cluster threshold: pairs with <y_i, y_j> >= 1 - delta "
                                      "are linked"),
        "dt": Use(default=0.25, check=lambda v: math.isfinite(v) and 0 < v <= 1,
                  need="must lie in (0, 1]",
                  help="RK4 step of the dynamics (one layer = one unit of time)"),
        "dynamics_passages": None, "no_fit": False, "passage": 0, "progress": True,
        "overwrite": Use(help="replace the files of an earlier study in --out (else they are "
                              "refused before any work)"),
    },
}
"""Per command, its options in ``--help`` order: a default, or a :class:`Use`."""


def option_for(command: str, name: str, **change: Any) -> Option:
    """The :class:`Option` ``name`` as ``command`` uses it (its default, choices, help)."""
    opt = OPTIONS[name]
    use = COMMANDS.get(command, {}).get(name, _NONE)
    if not isinstance(use, Use):
        use = Use(default=use)
    fields = {k: getattr(use, k) for k in ("choices", "nargs", "required", "help", "shown",
                                           "check", "need") if getattr(use, k) is not None}
    if use.default is not None:
        fields["default"] = use.default
        fields.setdefault("shown", None)  # the command's own default is shown as it is
    fields.update(change)
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


def add_option(parser: argparse.ArgumentParser, command: str, name: str, **change: Any) -> None:
    """Add option ``name`` of :data:`OPTIONS` to ``parser`` as ``command`` uses it."""
    opt = option_for(command, name, **change)
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


def add_options(parser: argparse.ArgumentParser, command: str,
                changes: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Add every option of ``command`` in :data:`COMMANDS`; ``changes[name]`` overrides fields
    of one (choices only the owning package knows, such as the particle integrators)."""
    changes = changes or {}
    unknown = set(changes) - set(COMMANDS[command])
    if unknown:
        msg = f"changes name options that {command!r} does not take: {sorted(unknown)}"
        raise ValueError(msg)
    for name in COMMANDS[command]:
        add_option(parser, command, name, **changes.get(name, {}))


def check_required(args: argparse.Namespace) -> None:
    """Raise ``ValueError`` naming each required option that was not given."""
    missing = [flag for dest, flag in getattr(args, REQUIRED_KEY, ()) if getattr(args, dest, None)
               is None]
    if missing:
        msg = f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required"
        raise ValueError(msg)


def add_parser(subparsers: Any, command: str, *, help: str, description: str,  # noqa: A002
               func: Callable[[argparse.Namespace], int],
               changes: Mapping[str, Mapping[str, Any]] | None = None) -> argparse.ArgumentParser:
    """A subparser for ``command`` with its options of :data:`COMMANDS` and ``func`` set."""
    p = subparsers.add_parser(command, help=help, description=description)
    add_options(p, command, changes)
    p.set_defaults(func=func)
    return p


__all__ = ["COMMANDS", "OPTIONS", "Option", "Use", "add_option", "add_options", "add_parser",
           "check_required", "option_for", "typed"]
