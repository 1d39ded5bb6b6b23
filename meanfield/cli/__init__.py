"""The ``meanfield`` command line.

Each subcommand lives in its own module of this package with a function
``add_parser(subparsers)`` that registers it and sets ``func`` (taking the parsed args and
returning an exit code). This module is the one leaf that may import ``meanfield``,
``particles`` and ``validation`` together.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

# Subcommand modules, in the order ``meanfield --help`` lists them.
SUBCOMMANDS = (
    "validate",
    "solve",
    "plot",
    "convergence",
    "particles",
    "phase_diagram",
    "metastability",
    "gaussian",
    "tokens",
)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Mean-field dynamics of Transformers: PDE solvers, particles, validation.",
    )
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # subcommand not built yet
            raise
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"meanfield: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
