"""The ``meanfield`` command line, assembled from the packages that own the commands.

Each subcommand is a module with ``add_parser(subparsers)``, which registers it and sets
``func`` (parsed args -> exit code). The modules are found through the entry-point group
:data:`GROUP` (``[project.entry-points."meanfield.commands"]`` in ``pyproject.toml``), so the
core names its own commands (``solve``, ``plot``, ``gaussian``, ``convergence``) and knows
nothing of ``particles`` or ``validation``, which register theirs. A command whose module
cannot be imported stays in ``meanfield --help``, marked broken, and running it says why.

Exit codes: 0 success, 1 a run that ended early or failed (an
:class:`meanfield.integrate.IntegrationError`: a sweep's failed cell, an ensemble, a Gaussian
blow-up, an unresolved run), 2 bad input (a ``ValueError``, a missing file), 130 interrupted.
Anticipated errors print one line, the reason; ``--debug`` shows the traceback before it, and
the exit code stays the same. The partial result an interrupt or a failure carries
(``.dataset``) is written to the command's ``--out`` file, if it has one and the command did
not already, and the line says so ("partial results written to OUT").
"""

from __future__ import annotations

import argparse
import sys
import traceback
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Sequence

from meanfield.cli.options import GROUP, OPTIONS, check_required
from meanfield.integrate import IntegrationError


def command_entry_points() -> list[EntryPoint]:
    """The registered subcommands, one per name, sorted by name."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return [found[name] for name in sorted(found)]


def _broken(sub: Any, name: str, value: str, exc: BaseException) -> None:
    """Register ``name`` as a command that reports why its module failed to import."""
    reason = f"{type(exc).__name__}: {exc}"
    p = sub.add_parser(name, help=f"BROKEN: cannot import {value} ({reason})", add_help=True,
                       description=f"This command is unavailable: importing {value} failed.")

    def run(args: argparse.Namespace) -> int:
        if getattr(args, "debug", False):
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        print(f"meanfield {name}: error: the command's module {value} failed to import "
              f"({reason}); reinstall the package, or run with --debug for the traceback",
              file=sys.stderr)
        return 1

    p.set_defaults(func=run, _broken=True)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    from meanfield import __version__

    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Mean-field dynamics of Transformers: PDE solvers, particles, validation.",
    )
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (default: one line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    eps = command_entry_points()
    if not eps:
        parser.epilog = (f"No commands are registered (entry-point group {GROUP!r} is empty): "
                         "install the package, e.g. pip install -e .")
    for ep in eps:
        try:
            module = ep.load()
            module.add_parser(sub)
        except Exception as exc:  # noqa: BLE001 (reported as a broken command, never dropped)
            if ep.name in sub.choices:  # add_parser failed half-way
                del sub.choices[ep.name]
                sub._choices_actions = [a for a in sub._choices_actions if a.dest != ep.name]
            _broken(sub, ep.name, ep.value, exc)
    for p in sub.choices.values():  # --debug also after the command: meanfield solve --debug
        if "--debug" in p._option_string_actions:
            continue
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback of an error (default: one line)")
    return parser


def _fail(command: str, text: str, code: int, exc: BaseException | None = None) -> int:
    """Print the one-line error (after the traceback of ``exc`` when given: ``--debug``) and
    return ``code``: the exit code is the same with and without ``--debug``."""
    if exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    print(f"meanfield{' ' + command if command else ''}: error: {text}", file=sys.stderr)
    return code


FOLDER_KEY = "_meanfield_folder_outputs"
"""Namespace attribute listing the output options of a command that name folders (checked by
the command itself, with :func:`meanfield.io.check_folder`, after what needs no output)."""


def _check_outputs(args: argparse.Namespace) -> None:
    """Every command that writes files declares ``--overwrite``: its outputs are checked before
    any computation (``meanfield.io.check_writable``: not a folder, not under a file, writable,
    not already there unless ``--overwrite``, or ``--resume`` of the run whose partial result
    it is)."""
    from meanfield.io import check_writable, figure_format

    if "overwrite" not in vars(args):
        return
    folders = getattr(args, FOLDER_KEY, ())
    for dest, opt in OPTIONS.items():  # those that name files (Option.writes)
        value = vars(args).get(dest) if opt.writes else None
        if isinstance(value, Path) and opt.writes == "figure":
            figure_format(value, opt.flag)  # a format matplotlib writes, named by the extension
        if isinstance(value, Path) and dest not in folders:
            again = dest == "out" and bool(vars(args).get("resume")) and _partial(value)
            check_writable(value, overwrite=args.overwrite or again, name=opt.flag)


def _partial(path: Path) -> bool:
    """``path`` is the partial result of an interrupted or failed run (a NetCDF file whose
    ``successful`` is 0), which ``--resume`` continues and replaces; never a finished one."""
    if not path.is_file():
        return False
    import xarray as xr

    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:  # the attributes only
            attrs = dict(ds.attrs)
    except Exception:  # noqa: BLE001 (not a result file: not ours to replace)
        return False
    return "successful" in attrs and not int(attrs["successful"])


def _keep(args: argparse.Namespace | None, exc: BaseException) -> str:
    """Write the partial Dataset ``exc`` carries (``.dataset``) to the command's ``--out``
    file and return the words that say so; ``""`` when there is none, when ``--out`` is a
    folder or not given, or when the raiser has dealt with the file already
    (``exc.handled_out``: the command or :func:`meanfield.integrate.finish` wrote it)."""
    from meanfield.integrate import IntegrationError, Interrupted

    ds = getattr(exc, "dataset", None)
    out = vars(args).get("out") if args is not None else None
    handled = exc.handled_out if isinstance(exc, (IntegrationError, Interrupted)) else None
    import xarray as xr

    if (not isinstance(ds, xr.Dataset) or not isinstance(out, Path)
            or "out" in getattr(args, FOLDER_KEY, ()) or handled == str(out)):
        return ""
    from meanfield.io import write_netcdf

    try:
        write_netcdf(ds, out)
    except OSError as err:  # the reason stays the run's; the file's failure is added
        return f"; the partial results could not be written to {out} ({err})"
    return f"; partial results written to {out}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``meanfield ARGV``; return the exit code (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    parser = build_parser()
    command = next((a for a in argv if not a.startswith("-")), "")
    args: argparse.Namespace | None = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "_broken", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        command = args.command or ""
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        check_required(args)
        _check_outputs(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        said = str(exc).strip()  # meanfield.integrate.Interrupted says what was kept
        said = (f"interrupted: {said}" if said else "interrupted") + _keep(args, exc)
        return _fail(command, said, 130, exc if debug else None)
    except IntegrationError as exc:  # a run that ended early: its reason, what was kept
        return _fail(command, f"{exc}{_keep(args, exc)}", 1, exc if debug else None)
    except ValueError as exc:
        return _fail(command, str(exc), 2, exc if debug else None)
    except FileNotFoundError as exc:
        return _fail(command, f"no such file: {exc.filename or exc}", 2, exc if debug else None)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(command, f"{exc.strerror or exc}{where}", 1, exc if debug else None)


if __name__ == "__main__":
    sys.exit(main())
