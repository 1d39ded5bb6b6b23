"""``meanfield validate``: run the validation suite and write the report.

With no arguments it runs the quick suite into ``meanfield-validation/`` and exits 0 only if
every check passes (a check that fails, raises, or whose module fails to import makes the
exit code 1). See ``docs/validation.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "suite": "quick",
    "only": None,
    "out": Path("meanfield-validation"),
    "seed": 0,
    "workers": 1,
    "scheduler": None,
    "resume": False,
}
"""Command-line defaults, in one place."""


def _workers(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        msg = f"--workers must be a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if k < 1:
        msg = f"--workers must be >= 1, got {k}"
        raise argparse.ArgumentTypeError(msg)
    return k


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``validate`` and set ``func``."""
    p = subparsers.add_parser(
        "validate",
        help="run the validation suite (particles vs PDE vs theory) and write a report",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--suite", choices=("quick", "full"), default=DEFAULTS["suite"],
                   help="quick (default, minutes) or full (larger sizes, more checks)")
    p.add_argument("--only", metavar="PATTERN", default=DEFAULTS["only"],
                   help="run only checks matching PATTERN: comma-separated whole names or shell globs")
    p.add_argument("--out", type=Path, default=DEFAULTS["out"], help="output folder (default meanfield-validation/)")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed of every random draw (default 0)")
    p.add_argument("--workers", type=_workers, default=DEFAULTS["workers"],
                   help="run checks in parallel on a Dask LocalCluster with K processes (default 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=DEFAULTS["scheduler"],
                   help="address of an existing Dask scheduler (tcp://host:8786)")
    p.add_argument("--resume", action="store_true", help="skip checks already finished in --out")
    p.add_argument("--list", action="store_true", help="list the suite's checks and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from validation.report import write_report
    from validation.runner import exit_code, run_suite, status_of
    from validation.suites import BrokenModule, get_suite, select

    entries = select(get_suite(args.suite), args.only)
    if args.list:
        for e in entries:
            print(f"{e.name:28s} {'IMPORT ERROR' if isinstance(e, BrokenModule) else e.target}")
        return 1 if any(isinstance(e, BrokenModule) for e in entries) else 0
    out = Path(args.out)
    t0 = time.perf_counter()
    interrupted = False
    results = []
    try:
        results = run_suite(entries, out_dir=out, seed=args.seed, suite=args.suite, workers=args.workers,
                            scheduler=args.scheduler, resume=args.resume, progress=not args.no_progress)
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
