"""``meanfield validate``: run the validation suite and write the report.

With no arguments it runs the quick suite into ``meanfield-validation/`` and exits 0 only if
every check passes (a check that fails, raises, or whose module fails to import makes the
exit code 1). The output folder is checked before any check runs: a file, or a folder that
cannot be written, is refused (exit 2, naming ``--out``), and so is a folder that holds an
earlier run's records unless ``--resume`` (continue it) or ``--overwrite`` (replace them).
See ``docs/validation.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from meanfield.cli import FOLDER_KEY, options
from meanfield.cli.options import Option, Use

OPTIONS: dict[str, Option] = {
    "suite": Option("--suite", "quick (minutes) or full (larger sizes, more checks)", str,
                    "quick", choices=("quick", "full")),
    "only": Option("--only", "run only checks matching PATTERN: comma-separated whole names or "
                   "shell globs", str, metavar="PATTERN", shown="every check"),
    "list": Option("--list", "list the suite's checks and exit", None, False, flag_only=True),
}
"""The options only ``meanfield validate`` takes (they join
:data:`meanfield.cli.options.OPTIONS`)."""

TABLE: dict[str, Any] = {
    "suite": Use(), "only": None, "out": Use(default=Path("meanfield-validation"),
                                                help="output folder"),
    "seed": 0, "workers": 1, "scheduler": None, "resume": Use(
        help="skip the checks already finished in --out"),
    "list": Use(), "progress": True,
    "overwrite": Use(help="replace the records of an earlier run in --out (else a folder "
                          "holding them is refused before any work)"),
}
"""The options of ``meanfield validate`` in ``--help`` order: a default, or a :class:`Use`
(the options of :data:`OPTIONS` and the shared ones of :mod:`meanfield.cli.options`)."""

options.register_command("validate", TABLE, OPTIONS)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``validate`` and set ``func``."""
    p = options.add_parser(
        subparsers, "validate", func=run, description=__doc__.split("\n\n")[0],
        help="run the validation suite (particles vs PDE vs theory) and write a report")
    p.set_defaults(**{FOLDER_KEY: ("out",)})  # checked in run, after --list
    return p


def check_out(args: argparse.Namespace) -> Path:
    """The report folder ``--out``, checked before any work: not a file, writable, and not
    holding an earlier run's records or report unless ``--resume`` or ``--overwrite``."""
    from meanfield.io import check_folder

    out = check_folder(args.out, name="--out")
    earlier = [p for p in (out / "checks", out / "report.md", out / "report.html") if p.exists()]
    if earlier and not (args.resume or args.overwrite):
        msg = (f"--out: {out} holds an earlier run ({earlier[0].name}); pass --resume to "
               "continue it, or --overwrite to replace its records")
        raise ValueError(msg)
    return out


def run(args: argparse.Namespace) -> int:
    """Run the selected checks, write the report; the exit code of the runner."""
    from validation.report import write_report
    from validation.runner import exit_code, run_suite, status_of
    from validation.suites import BrokenModule, get_suite, select

    entries = select(get_suite(args.suite), args.only)
    if args.list:
        for e in entries:
            print(f"{e.name:28s} {'IMPORT ERROR' if isinstance(e, BrokenModule) else e.target}")
        return 1 if any(isinstance(e, BrokenModule) for e in entries) else 0
    out = check_out(args)
    t0 = time.perf_counter()
    interrupted = False
    results = []
    try:
        results = run_suite(entries, out_dir=out, seed=args.seed, suite=args.suite, workers=args.workers,
                            scheduler=args.scheduler, resume=args.resume, progress=args.progress)
    except KeyboardInterrupt:
        interrupted = True
    wall = time.perf_counter() - t0
    md, html = write_report(entries, out, suite=args.suite, seed=args.seed, wall_time=wall,
                            interrupted=interrupted)
    if interrupted:
        print(f"\ninterrupted: finished checks are saved in {out}; rerun with --resume to continue",
              file=sys.stderr)
        print(f"report: {md}", file=sys.stderr)
        return 130
    counts: dict[str, int] = {}
    for r in results:
        counts[status_of(r)] = counts.get(status_of(r), 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"\n{summary} in {wall:.1f} s; report: {md} and {html}")
    return exit_code(results)


__all__ = ["add_parser", "run"]
