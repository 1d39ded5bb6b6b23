"""Benchmark of the fast attention field (meanfield.kernels.fastsum) against the direct sum; run as a
plain script:

    python benchmarks/bench_fastsum.py [--quick] [--repeat R] [--direct-max N] [--json FILE]

(a) The table: one evaluation of the field of ``n`` tokens (softmax, ``beta = 4``, ``Q = K = V
    = I``, uniform random tokens, equal weights; ``meanfield.lagrangian.weighted_field``), the
    velocity alone and the velocity with its divergence, direct and fast, on ``S^1`` and
    ``S^2``, ``n`` from 10^3 to 10^6 (direct up to ``--direct-max``: it is ``O(n^2)``). The
    floor is the time of the nonuniform transforms the fast field calls, at its band limit and
    accuracy (``S^2``: one ``adjoint_synthesis_general`` and two (velocity) or three (with the
    divergence) ``synthesis_general``; ``S^1``: one type-1 and one or two type-2 NUFFTs); the
    ratio fast / floor says how much the rest costs and is robust to the machine's load.
(b) The crossover: the smallest ``n`` of a grid (powers of 2 from 16 to 4096) from which on
    the fast velocity beats the direct one at every larger ``n`` of the grid
    (``meanfield.kernels.fastsum.CROSSOVER`` is this, rounded up).
(c) General weights (``meanfield.kernels.fastsum_general``): the same field with ``Q = I + 0.3 G``,
    ``K = I``, ``V = G'`` (Gaussian, fixed seed; ``A = Q^T K`` anisotropic, so a Chebyshev
    expansion in ``|A y|``), direct and fast, with the points the error estimate sent back to
    the direct sum and the Chebyshev terms; and its crossover on the grid 512 ... 8192
    (``meanfield.kernels.fastsum.CROSSOVER_GENERAL``).

(d) Clustered measures (the states the dynamics produce), at the defaults
    (``particles.velocity``, ``method="fast"``, ``field_tol`` default): on ``S^2``, ``n`` =
    2·10^5 and 10^6, three clusters (width 0.05) with a uniform background of a fifth of the
    tokens, 10 tight clusters (width 1e-3), and those with a uniform thousandth, against
    uniform tokens of the same ``n``,
    softmax ``beta`` = 3.5, 10, 50: the ratio clustered / uniform (the points the global
    estimate cannot vouch for make it grow); and direct / fast at ``n = 65 536`` on the clustered sets
    (the direct sum is the floor there, measured once).

(e) Far from the mass (issue 31, item 2): the field and divergence at ``n`` nodes of which
    half, carrying ``1e-9`` of the mass, are uniform and half in 10 tight clusters
    (:func:`far_nodes`, a Lagrangian run past clustering), ``beta`` = 10, 30, against uniform
    nodes of the same ``n``; the nodes the global estimate cannot vouch for go to the
    re-centred expansions (:mod:`meanfield.kernels.fastsum_local`); their direct field alone
    (what recomputing them cost before) is the floor.

(f) Lone nodes (issue 31, item 2): ``n - 2048`` nodes in 10 tight clusters and 2048 isolated
    ones of weight ``1e-13`` (:func:`lone_nodes`), ``n`` = 5·10^4, 2·10^5, 10^6, ``beta`` = 10,
    30, against uniform nodes of the same ``n``: the isolated nodes go to the direct sum over
    their caps' cells (:mod:`meanfield.kernels.fastsum_tree`), whose cost does not grow with
    ``n``; their direct field over all nodes is the floor.

Times are the minimum over ``--repeat`` runs (wall clock; ducc0 with all hardware threads,
numpy's BLAS with its own). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any, Callable

import ducc0
import numpy as np

from meanfield import Model
from meanfield.kernels import fastsum
from meanfield.lagrangian.field import weighted_field

BETA = 4.0
FULL = {"sizes": [1000, 4096, 16384, 65536, 262144, 1048576], "direct_max": 16384,
        "crossover": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]}
QUICK = {"sizes": [1000], "direct_max": 1000, "crossover": [250, 1000]}
GENERAL_FULL = {"sizes": [1000, 4096, 16384, 65536], "crossover": [512, 1024, 2048, 4096, 8192]}
GENERAL_QUICK = {"sizes": [1000], "crossover": [1000]}


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return float(best)


def _tokens(n: int, d: int) -> np.ndarray:
    x = np.random.default_rng(n + d).normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def floor_time(x: np.ndarray, divergence: bool, repeat: int) -> float:
    """The nonuniform transforms the fast field calls (same band limit, accuracy, threads)."""
    n, d = x.shape
    L, _ = fastsum.band_limit(BETA, d, fastsum.DEFAULT_TOL)
    eps = max(fastsum.DEFAULT_TOL / 8, fastsum.NUFFT_EPS_MIN)
    w = np.full(n, 1.0 / n)
    if d == 3:
        loc = fastsum._sphere_angles(x)

        def run() -> None:
            alm = ducc0.sht.adjoint_synthesis_general(map=w[None], spin=0, lmax=L, loc=loc,
                                                      epsilon=eps, nthreads=0)
            ducc0.sht.synthesis_general(alm=alm, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=0)
            ducc0.sht.synthesis_general(alm=alm, spin=1, lmax=L, loc=loc, epsilon=eps, nthreads=0,
                                        mode="DERIV1")
            if divergence:
                ducc0.sht.synthesis_general(alm=alm, spin=0, lmax=L, loc=loc, epsilon=eps,
                                            nthreads=0)
    else:
        th = np.arctan2(x[:, 1], x[:, 0])[:, None]
        N = 2 * L + 2

        def run() -> None:
            c = ducc0.nufft.nu2u(points=w.astype(complex), coord=th, forward=True, epsilon=eps,
                                 nthreads=0, out=np.empty(N, complex), fft_order=True)
            plan = ducc0.nufft.plan(nu2u=False, coord=th, grid_shape=(N,), epsilon=eps,
                                    nthreads=0, fft_order=True)
            plan.u2nu(grid=c, forward=False)
            if divergence:
                plan.u2nu(grid=c, forward=False)

    return _best(run, repeat)


def field_time(x: np.ndarray, method: str, divergence: bool, repeat: int,
               model: Model | None = None) -> float:
    model = Model(beta=BETA) if model is None else model
    w = np.full(len(x), 1.0 / len(x))
    return _best(lambda: weighted_field(model, x, w, divergence=divergence, method=method), repeat)


def table(sizes: list[int], direct_max: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for d in (2, 3):
        for n in sizes:
            x = _tokens(n, d)
            row: dict[str, Any] = {"sphere": f"S^{d - 1}", "n": n}
            for div, tag in ((False, "v"), (True, "v+div")):
                row[f"fast {tag}"] = field_time(x, "fast", div, repeat)
                row[f"floor {tag}"] = floor_time(x, div, repeat)
                row[f"direct {tag}"] = (field_time(x, "direct", div, 1 if n > 4096 else repeat)
                                        if n <= direct_max else None)
            rows.append(row)
            _print_row("  ", row)
    return rows


def _print_row(prefix: str, row: dict[str, Any]) -> None:
    print(prefix + "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                             for k, v in row.items()), flush=True)


def crossover(grid: list[int], repeat: int,
              model_of: Callable[[int], Model] | None = None) -> dict[str, Any]:
    """The crossover of (b); ``model_of(d)``: another model (default softmax, ``Q = K = V =
    I``)."""
    out: dict[str, Any] = {}
    for d in (2, 3):
        model = None if model_of is None else model_of(d)
        wins = []
        for n in grid:
            x = _tokens(n, d)
            t_fast = field_time(x, "fast", False, repeat, model)
            t_direct = field_time(x, "direct", False, repeat, model)
            wins.append(t_fast < t_direct)
            print(f"  crossover S^{d - 1} n={n}: fast {t_fast:.3g} s, direct {t_direct:.3g} s",
                  flush=True)
        first = None
        for i in range(len(grid) - 1, -1, -1):  # the last run of wins up to the largest n
            if not wins[i]:
                break
            first = grid[i]
        out[f"S^{d - 1}"] = first
    return out


def general_model(d: int) -> Model:
    """Softmax, ``beta = 4``, ``Q = I + 0.3 G``, ``K = I``, ``V = G'`` (fixed seed)."""
    rng = np.random.default_rng(100 + d)
    return Model(beta=BETA, Q=np.eye(d) + 0.3 * rng.normal(size=(d, d)), V=rng.normal(size=(d, d)))


def general_table(sizes: list[int], direct_max: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for d in (2, 3):
        model = general_model(d)
        for n in sizes:
            x = _tokens(n, d)
            row: dict[str, Any] = {"sphere": f"S^{d - 1}", "n": n}
            for div, tag in ((False, "v"), (True, "v+div")):
                row[f"fast {tag}"] = field_time(x, "fast", div, repeat, model)
                row[f"direct {tag}"] = (field_time(x, "direct", div, 1 if n > 4096 else repeat,
                                                   model) if n <= direct_max else None)
            res = weighted_field(model, x, np.full(n, 1.0 / n), method="fast").fast
            row["corrected"] = res.corrected  # type: ignore[union-attr]
            row["chebyshev"] = res.chebyshev  # type: ignore[union-attr]
            rows.append(row)
            _print_row("  general ", row)
    return rows


def general_markdown(rows: list[dict[str, Any]], cross: dict[str, int | None]) -> str:
    lines = ["| sphere | n | direct v (s) | fast v (s) | direct v+div (s) | fast v+div (s) | "
             "corrected | Chebyshev terms |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['sphere']} | {r['n']} | {_fmt(r['direct v'])} | {_fmt(r['fast v'])} | "
                     f"{_fmt(r['direct v+div'])} | {_fmt(r['fast v+div'])} | {r['corrected']} | "
                     f"{r['chebyshev']} |")
    lines.append("")
    lines.append("General-weights crossover (fast velocity beats direct from this n on): "
                 + ", ".join(f"{k}: {v}" for k, v in cross.items()))
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.3g}"


def markdown(rows: list[dict[str, Any]], cross: dict[str, int | None]) -> str:
    lines = ["| sphere | n | direct v (s) | fast v (s) | fast/floor v | direct v+div (s) | "
             "fast v+div (s) | fast/floor v+div | direct/fast v+div |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        speed = (None if r["direct v+div"] is None else r["direct v+div"] / r["fast v+div"])
        lines.append(
            f"| {r['sphere']} | {r['n']} | {_fmt(r['direct v'])} | {_fmt(r['fast v'])} | "
            f"{r['fast v'] / r['floor v']:.2f} | {_fmt(r['direct v+div'])} | "
            f"{_fmt(r['fast v+div'])} | {r['fast v+div'] / r['floor v+div']:.2f} | "
            f"{_fmt(speed)} |")
    lines.append("")
    lines.append("Crossover (smallest n of the grid from which on the fast velocity beats the "
                 "direct one): "
                 + ", ".join(f"{k}: {v}" for k, v in cross.items()))
    return "\n".join(lines)


CLUSTERED_FULL = {"sizes": [200_000, 1_000_000], "betas": [3.5, 10.0, 50.0], "direct_n": 65_536}
CLUSTERED_QUICK = {"sizes": [20_000], "betas": [10.0], "direct_n": 4096}


def clustered_tokens(kind: str, n: int) -> np.ndarray:
    """``n`` tokens on ``S^2``: ``uniform``, ``background`` (three clusters of width 0.05 and a
    uniform fifth), ``tight`` (10 clusters of width 1e-3) or ``sparse`` (10 clusters of width
    1e-3 and a uniform thousandth: tokens that see almost no mass, which the global expansion
    cannot vouch for at large ``beta``); fixed seeds."""
    rng = np.random.default_rng(n)
    if kind == "uniform":
        return _tokens(n, 3)
    count, width = (3, 0.05) if kind == "background" else (10, 1e-3)
    centres = rng.normal(size=(count, 3))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    m = {"background": n - n // 5, "sparse": n - n // 1000}.get(kind, n)
    x = centres[rng.integers(0, count, m)] + width * rng.normal(size=(m, 3))
    if m < n:
        x = np.concatenate([x, rng.normal(size=(n - m, 3))])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered_table(conf: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    """Section (d) of the module docstring: rows of ``(n, beta, kind)`` with the fast time,
    the ratio to uniform, the points recomputed directly; and direct / fast at ``direct_n``."""
    from particles import velocity

    rows = []
    for n in conf["sizes"]:
        for beta in conf["betas"]:
            model = Model(beta=beta)
            times = {}
            for kind in ("uniform", "background", "tight", "sparse"):
                x = clustered_tokens(kind, n)
                times[kind] = _best(lambda: velocity(model, x, method="fast"), repeat)
                st = fastsum.fast_field(model, x[None], x[None], None, divergence=False)[2]
                row = {"n": n, "beta": beta, "set": kind, "fast v": times[kind],
                       "clustered / uniform": times[kind] / times["uniform"],
                       "estimate": st.error_estimate, "recentred": st.recentred,
                       "global over tol": int(np.count_nonzero(fastsum.fast_sums(
                           model, x[None], x[None], None, divergence=False).estimate
                           > fastsum.FIELD_TOL))}
                rows.append(row)
                _print_row("  clustered ", row)
    n = conf["direct_n"]
    for kind in ("background", "tight", "sparse"):
        x = clustered_tokens(kind, n)
        model = Model(beta=10.0)
        t_fast = _best(lambda: velocity(model, x, method="fast"), repeat)
        t_direct = _best(lambda: velocity(model, x, method="direct"), 1)
        row = {"n": n, "beta": 10.0, "set": kind, "fast v": t_fast, "direct v": t_direct,
               "direct / fast": t_direct / t_fast}
        rows.append(row)
        _print_row("  clustered ", row)
    return rows


def clustered_markdown(rows: list[dict[str, Any]]) -> str:
    out = ["", "Clustered (S^2, softmax velocity at the defaults)", "",
           "| n | beta | set | fast v (s) | clustered / uniform | direct v (s) | direct / fast |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['beta']:g} | {r['set']} | {r['fast v']:.3g} | "
                   f"{_fmt(r.get('clustered / uniform'))} | {_fmt(r.get('direct v'))} | "
                   f"{_fmt(r.get('direct / fast'))} |")
    return "\n".join(out)


FAR_FULL = {"sizes": [50_000, 200_000], "betas": [10.0, 30.0]}
FAR_QUICK = {"sizes": [20_000], "betas": [10.0]}


def far_nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` nodes on ``S^2`` as a Lagrangian run past clustering has them: half in 10 tight
    clusters (width 1e-3) carrying mass ``1 - 1e-9``, half uniform carrying ``1e-9`` (the
    quadrature nodes where ``rho ~ 0``); fixed seed."""
    rng = np.random.default_rng(n + 1)
    centres = rng.normal(size=(10, 3))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    h = n // 2
    x = np.concatenate([centres[rng.integers(0, 10, h)] + 1e-3 * rng.normal(size=(h, 3)),
                        rng.normal(size=(n - h, 3))])
    w = np.concatenate([np.full(h, (1 - 1e-9) / h), np.full(n - h, 1e-9 / (n - h))])
    return x / np.linalg.norm(x, axis=1, keepdims=True), w


LONE = 2048
"""Isolated nodes of :func:`lone_nodes`: enough that, from ``n = 10^6`` on, the re-centred sums
cost less than the direct field at those over the tolerance
(:func:`meanfield.kernels.fastsum_local.direct_is_cheaper`)."""
LONE_FULL = {"sizes": [50_000, 200_000, 1_000_000], "betas": [10.0, 30.0]}
LONE_QUICK = {"sizes": [20_000], "betas": [30.0]}


def lone_nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` nodes on ``S^2``: ``n - LONE`` in 10 tight clusters (width 1e-3) of equal weights and
    :data:`LONE` isolated ones of weight ``1e-13`` each (nodes a Lagrangian run left between clusters,
    or tokens of negligible weight); fixed seed."""
    rng = np.random.default_rng(n + 2)
    centres = rng.normal(size=(10, 3))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    h = n - LONE
    x = np.concatenate([centres[rng.integers(0, 10, h)] + 1e-3 * rng.normal(size=(h, 3)),
                        rng.normal(size=(LONE, 3))])
    w = np.concatenate([np.full(h, (1 - LONE * 1e-13) / h), np.full(LONE, 1e-13)])
    return x / np.linalg.norm(x, axis=1, keepdims=True), w


def far_table(conf: dict[str, Any], repeat: int,
              nodes: Callable[[int], tuple[np.ndarray, np.ndarray]] = far_nodes,
              label: str = "far") -> list[dict[str, Any]]:
    """Sections (e) and (f) of the module docstring: the field and divergence of ``nodes``
    (:func:`far_nodes`, :func:`lone_nodes`) at the nodes (``weighted_field``, fast, the
    defaults) against the same on uniform nodes of equal weights (the floor), with the points
    re-centred and recomputed directly; and the direct field at the re-centred points alone
    (what their recomputation cost before)."""
    from meanfield.lagrangian import field_at, weighted_field

    rows = []
    for n in conf["sizes"]:
        for beta in conf["betas"]:
            model = Model(beta=beta)
            xu = _tokens(n, 3)
            wu = np.full(n, 1.0 / n)
            t_uniform = _best(lambda: weighted_field(model, xu, wu, method="fast"), repeat)
            x, w = nodes(n)
            t_far = _best(lambda: weighted_field(model, x, w, method="fast"), repeat)
            res = fastsum.fast_sums(model, x[None], x[None], w[None], divergence=True)
            bad = np.nonzero(res.estimate[0] > fastsum.FIELD_TOL)[0]
            st = weighted_field(model, x, w, method="fast").fast
            t_direct = (_best(lambda: field_at(model, x[bad], x, w, method="direct"), 1)
                        if bad.size else 0.0)
            row = {"n": n, "beta": beta, "far field": t_far, "uniform": t_uniform,
                   "far / uniform": t_far / t_uniform, "global over tol": int(bad.size),
                   "recentred": st.recentred, "corrected": st.corrected,
                   "direct at those": t_direct,
                   "direct at those / far field": t_direct / t_far}
            rows.append(row)
            _print_row(f"  {label} ", row)
    return rows


def far_markdown(rows: list[dict[str, Any]],
                 title: str = "Far from the mass") -> str:
    out = ["", f"{title} (S^2, softmax field and divergence at the nodes, defaults)", "",
           "| n | beta | far field (s) | far / uniform | over tol | re-centred | direct | "
           "direct at those (s) | direct at those / far field |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['beta']:g} | {r['far field']:.3g} | {r['far / uniform']:.3g} | "
                   f"{r['global over tol']} | {r['recentred']} | {r['corrected']} | "
                   f"{r['direct at those']:.3g} | {_fmt(r['direct at those / far field'])} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--direct-max", type=int, default=None,
                   help="largest n for the direct sum (default 16384; 1000 with --quick)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)
    conf = QUICK if args.quick else FULL
    direct_max = conf["direct_max"] if args.direct_max is None else args.direct_max
    print(f"# bench_fastsum: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, ducc0 {ducc0.__version__}, beta = {BETA}", flush=True)
    rows = table(conf["sizes"], direct_max, args.repeat)  # type: ignore[arg-type]
    cross = crossover(conf["crossover"], args.repeat)  # type: ignore[arg-type]
    print(markdown(rows, cross))
    gconf = GENERAL_QUICK if args.quick else GENERAL_FULL
    grows = general_table(gconf["sizes"], direct_max, args.repeat)  # type: ignore[arg-type]
    gcross = crossover(gconf["crossover"], args.repeat, general_model)
    print(general_markdown(grows, gcross))
    crows = clustered_table(CLUSTERED_QUICK if args.quick else CLUSTERED_FULL, args.repeat)
    print(clustered_markdown(crows))
    frows = far_table(FAR_QUICK if args.quick else FAR_FULL, args.repeat)
    print(far_markdown(frows))
    lrows = far_table(LONE_QUICK if args.quick else LONE_FULL, args.repeat, lone_nodes, "lone")
    print(far_markdown(lrows, "Lone nodes between tight clusters"))
    result = {"rows": rows, "crossover": cross, "beta": BETA,
              "general": {"rows": grows, "crossover": gcross}, "clustered": crows,
              "far": frows, "lone": lrows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return result


if __name__ == "__main__":
    main()
