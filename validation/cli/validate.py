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

from meanfield.cli import options


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``validate`` and set ``func``."""
    return options.add_parser(
        subparsers, "validate", func=run, description=__doc__.split("\n\n")[0],
        help="run the validation suite (particles vs PDE vs theory) and write a report")


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
    out = Path(args.out)
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
