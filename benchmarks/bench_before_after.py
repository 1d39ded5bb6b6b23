"""The benchmark ratios of docs/ for two source trees, before and after, in one run.

    python benchmarks/bench_before_after.py [--before 7b3e256|PATH] [--after PATH]
        [--repeats 3] [--quick] [--benches circle sphere lagrangian phase] [--out FILE.json]

Each ratio is a time over a floor measured in the same process, by the tree's own benchmark
code (``benchmarks/`` of that tree, importing that tree's ``meanfield``):

* ``circle``: ``bench_circle.main``: one ``flow.rhs`` (SA, USA) over one real FFT pair of the
  padded size (docs/circle.md, "Speed");
* ``sphere``: ``bench_sphere.main``: one ``flow.rhs`` (SA, USA) over one scalar transform pair
  (docs/sphere.md, "Speed");
* ``lagrangian``: ``bench_lagrangian.ratios``: one velocity + divergence evaluation
  (``weighted_field``) over one particle velocity evaluation, as the script runs it (``method``
  ``"auto"``: fast summation on ``S^2`` at these ``n``), and both sides with
  ``method="direct"`` (the comparison docs/lagrangian.md states);
* ``phase``: one phase-diagram cell (``bench_engine.cell``: ``phase_cell``, n = 32, RK4
  dt = 0.3, t in [0, 30]) over the authors' explicit Euler scheme in NumPy on the same starts
  (``authors_scheme.euler_cell``), process CPU time summed over ``beta_subset(k)`` of Figure
  3's betas (docs/sweeps.md section 4 gives the two per-beta CPU times).

Every measurement runs in a fresh subprocess with ``PYTHONPATH=<tree>:<tree>/benchmarks``;
the subprocesses alternate between the trees, the order swapped every repeat (ABBA...), so
that a drift of the machine's load affects both alike. Printed: the ratio stated in docs/ (read
from the after tree's docs), and per tree the median and the range [min-max] over
``--repeats`` runs, and after/before of the medians. ``--before`` is a directory or a git
revision of the after tree (extracted with ``git archive`` into a temporary directory).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
BENCHES = ("circle", "sphere", "lagrangian", "phase")
FULL: dict[str, dict[str, Any]] = {
    "circle": {"N": [256, 1024], "repeat": 7, "rounds": 3},
    "sphere": {"lmax": [63, 127, 255], "repeat": 20, "rounds": 3},
    "lagrangian": {"n": 4096, "repeat": 7, "repeat_direct": 5},
    "phase": {"d": [2, 128], "betas": 3, "realizations": 256, "rounds": 1},
}
"""Sizes of a full run: rows of the docs' tables that a 2-core machine measures in seconds
(from N = 4096 on, the circle's floor takes longer to plan with FFTW_PATIENT than its timings
take; the sphere's lmax = 511 takes a minute)."""
QUICK: dict[str, dict[str, Any]] = {
    "circle": {"N": [256], "repeat": 2, "rounds": 1},
    "sphere": {"lmax": [31], "repeat": 2, "rounds": 1},
    "lagrangian": {"n": 512, "repeat": 2, "repeat_direct": 2},
    "phase": {"d": [2], "betas": 1, "realizations": 16, "rounds": 1},
}
"""Sizes of a smoke run (``--quick``)."""


# ---------------------------------------------------------------- in the subprocess (one tree)

def _call_main(main: Callable[[], None], argv: list[str]) -> str:
    """Run a benchmark script's ``main()`` with ``argv``; return what it printed."""
    saved, sys.argv = sys.argv, ["bench", *argv]
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            main()
    finally:
        sys.argv = saved
    return printed.getvalue()


def _row(time_s: float, floor_s: float) -> dict[str, float]:
    return {"time_s": time_s, "floor_s": floor_s, "ratio": time_s / floor_s}


def _circle(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``bench_circle.main``'s rows: rhs time over one FFT pair, per ``N`` and attention."""
    import bench_circle

    text = _call_main(bench_circle.main, ["--N", *map(str, p["N"]), "--repeat", str(p["repeat"]),
                                          "--rounds", str(p["rounds"])])
    names = {"softmax": "SA", "unnormalized": "USA"}
    out = {}
    for line in text.splitlines()[1:]:
        n, _, att, fft_us, rhs_us, _ = line.split()
        out[f"circle {names[att]} N={n}"] = _row(float(rhs_us) * 1e-6, float(fft_us) * 1e-6)
    return out


def _sphere(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``bench_sphere.main``'s table: rhs time over one transform pair, per ``lmax``."""
    import bench_sphere

    text = _call_main(bench_sphere.main, ["--lmax", *map(str, p["lmax"]),
                                          "--repeat", str(p["repeat"]), "--rounds", str(p["rounds"])])
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|\n ").split("|")]
        if not cells[0].isdigit():
            continue
        floor = float(cells[3]) * 1e-3
        out[f"sphere SA lmax={cells[0]}"] = _row(float(cells[4]) * 1e-3, floor)
        out[f"sphere USA lmax={cells[0]}"] = _row(float(cells[6]) * 1e-3, floor)
    return out


def _lagrangian(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``bench_lagrangian.ratios`` as the script runs it, and the same with ``method="direct"``
    on both sides."""
    import bench_lagrangian as bl
    import numpy as np

    n = p["n"]
    with contextlib.redirect_stdout(io.StringIO()):
        (r,) = bl.ratios([n], 3, p["repeat"])
    out = {f"lagrangian sphere n={n} (auto)": _row(r["field_s"], r["particles_s"]),
           f"lagrangian R^d n={n} (auto)": _row(r["euclidean_s"], r["particles_s"])}
    model = bl.Model(beta=1.0)
    x = bl.particles.sample_sphere(n, 3, 0)  # the nodes and weights of bl.ratios
    w = np.random.default_rng(1).random(n) + 0.5
    w /= w.sum()
    t = bl._best({
        "particles": lambda: bl.particles.velocity(model, x, check=False, method="direct"),
        "field": lambda: bl.weighted_field(model, x, w, method="direct"),
        "euclidean": lambda: bl.weighted_field(model, x, w, geometry="euclidean", method="direct"),
    }, p["repeat_direct"])
    out[f"lagrangian sphere n={n} (direct)"] = _row(t["field"], t["particles"])
    out[f"lagrangian R^d n={n} (direct)"] = _row(t["euclidean"], t["particles"])
    return out


def _phase(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    """CPU time of ``bench_engine.cell`` (the tree's ``phase_cell``) over the authors' Euler
    scheme (``authors_scheme.euler_cell``), same starts, summed over ``beta_subset(k)``; the
    two interleaved, best of ``rounds`` per beta."""
    import authors_scheme
    import bench_engine
    import numpy as np

    out = {}
    R = p["realizations"]
    for d in p["d"]:
        ours = euler = 0.0
        for beta in authors_scheme.beta_subset(p["betas"]):
            best = [np.inf, np.inf]
            for _ in range(p["rounds"]):
                s, _ = bench_engine.timed(lambda: bench_engine.cell(bench_engine.after, beta, d, R))
                best[0] = min(best[0], s)
                s, _ = bench_engine.timed(lambda: authors_scheme.euler_cell(
                    beta, np.random.default_rng(12345), d=d, realizations=R, step=0.1))
                best[1] = min(best[1], s)
            ours += best[0]
            euler += best[1]
        out[f"phase d={d} ours/Euler"] = _row(ours, euler)
    return out


WORKERS: dict[str, Callable[[dict[str, Any]], dict[str, dict[str, float]]]] = {
    "circle": _circle, "sphere": _sphere, "lagrangian": _lagrangian, "phase": _phase}


def worker(bench: str, params: dict[str, Any], tree: Path) -> dict[str, Any]:
    """Measure ``bench`` with ``params`` in this process, whose ``meanfield`` must be ``tree``'s."""
    import meanfield

    where = Path(meanfield.__file__).resolve()
    if tree not in where.parents:
        raise ValueError(f"tree: meanfield imported from {where}, not from {tree} "
                         "(run with PYTHONPATH=<tree>)")
    return {"meanfield": str(where), "rows": WORKERS[bench](params)}


# ---------------------------------------------------------------- the driving process

def _float(pattern: str, text: str) -> list[float] | None:
    m = re.search(pattern, text, flags=re.MULTILINE)
    return None if m is None else [float(g) for g in m.groups()]


def _table_rows(pattern: str, text: str) -> dict[str, list[float]]:
    return {m.group(1): [float(g) for g in m.groups()[1:]]
            for m in re.finditer(pattern, text, flags=re.MULTILINE)}


def doc_ratios(tree: Path) -> dict[str, float]:
    """The ratios that ``tree``'s docs/ state, keyed as the measured rows: docs/circle.md's and
    docs/sphere.md's speed tables, docs/lagrangian.md's sentence on the field's cost (its
    direct comparison), docs/sweeps.md section 4's row of ours over the authors' scheme in
    NumPy (CPU time per beta on the same starts). A statement not found is left out (and so
    shows as missing)."""
    docs = tree / "docs"
    out: dict[str, float] = {}
    num = r"([\d.]+)"
    circle = (docs / "circle.md").read_text()
    for n, (sa, usa) in _table_rows(rf"^\| (\d+) \| \d+ \| [\d.]+ \| [\d.]+ \| {num} \| [\d.]+ \| "
                                    rf"{num} \|$", circle).items():
        out[f"circle SA N={n}"], out[f"circle USA N={n}"] = sa, usa
    sphere = (docs / "sphere.md").read_text()
    for lmax, (sa, usa) in _table_rows(rf"^\| (\d+) \| \d+x\d+ \| \d+x\d+ \| [\d.]+ \| [\d.]+ \| "
                                       rf"{num} \| [\d.]+ \| {num} \|", sphere).items():
        out[f"sphere SA lmax={lmax}"], out[f"sphere USA lmax={lmax}"] = sa, usa
    lag = " ".join((docs / "lagrangian.md").read_text().split())
    found = _float(rf"Measured \(`benchmarks/bench_lagrangian.py`.*?`n = (\d+)`.*? takes {num} times "
                   rf"one particle velocity evaluation on the sphere, {num} times in `R\^d`", lag)
    if found is not None:
        out[f"lagrangian sphere n={int(found[0])} (direct)"] = found[1]
        out[f"lagrangian R^d n={int(found[0])} (direct)"] = found[2]
    sweeps = (docs / "sweeps.md").read_text()
    phase = _float(rf"^\| ours over the authors' scheme in NumPy, CPU time per β on the same starts "
                   rf"\(see below\) \| {num} \| {num} \|$", sweeps)
    if phase is not None:
        out["phase d=2 ours/Euler"], out["phase d=128 ours/Euler"] = phase
    return out


def materialise(before: str, after: Path, scratch: Path) -> Path:
    """``before`` as a directory: itself if it is one, else the git revision ``before`` of the
    repository ``after``, extracted into ``scratch``."""
    if Path(before).is_dir():
        return Path(before).resolve()
    tar = subprocess.run(["git", "-C", str(after), "archive", "--format=tar", before],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(scratch, filter="data")
    return scratch


def run_one(tree: Path, bench: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One measurement in a fresh interpreter that imports ``tree``'s packages and benchmarks
    (``-P``: this script's own folder is not put on the path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        subprocess.run([sys.executable, "-P", str(HERE), "--worker", bench, "--tree", str(tree),
                        "--params", json.dumps(params), "--result", result.name],
                       check=True, cwd=tree, env=env, timeout=timeout)
        return json.loads(Path(result.name).read_text())


def summarise(runs: dict[str, list[dict[str, Any]]], docs: dict[str, float]) -> list[dict[str, Any]]:
    """Per row: the doc's ratio, each tree's samples, median and range, after/before."""
    rows = []
    for key in runs["after"][0]["rows"]:
        row: dict[str, Any] = {"row": key, "doc": docs.get(key)}
        for side in ("before", "after"):
            samples = [r["rows"][key]["ratio"] for r in runs[side] if key in r["rows"]]
            row[side] = {"ratios": samples, "median": statistics.median(samples) if samples else None,
                         "min": min(samples, default=None), "max": max(samples, default=None)}
        b, a = row["before"]["median"], row["after"]["median"]
        row["after_over_before"] = a / b if a is not None and b else None
        rows.append(row)
    return rows


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of :func:`summarise`'s rows."""
    lines = ["| ratio | doc | before: median [min–max] | after: median [min–max] | after/before |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        cells = [f"{_fmt(r[s]['median'])} [{_fmt(r[s]['min'])}–{_fmt(r[s]['max'])}]"
                 for s in ("before", "after")]
        lines.append(f"| {r['row']} | {_fmt(r['doc'])} | {cells[0]} | {cells[1]} | "
                     f"{_fmt(r['after_over_before'], '.3f')} |")
    return "\n".join(lines)


def measure_repeat(trees: dict[str, Path], benches: Sequence[str],
                   sizes: dict[str, dict[str, Any]], rep: int, timeout: float,
                   runs: dict[str, list[dict[str, Any]]]) -> None:
    """Repeat ``rep``: every bench once per tree, appended to ``runs``; the trees' order
    alternates between repeats (ABBA...)."""
    order = ("before", "after") if rep % 2 == 0 else ("after", "before")
    for bench in benches:
        for side in order:
            t0 = time.perf_counter()
            res = run_one(trees[side], bench, sizes[bench], timeout)
            res.update(bench=bench, repeat=rep, wall_s=time.perf_counter() - t0,
                       load=os.getloadavg()[0])
            runs[side].append(res)
            print(f"  repeat {rep + 1} {bench:>10} {side:>6}: {res['wall_s']:.1f} s, "
                  f"load {res['load']:.1f}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", default="7b3e256", help="a directory or a git revision of --after")
    p.add_argument("--after", default=str(HERE.parents[1]), help="a directory (default: this tree)")
    p.add_argument("--repeats", type=int, default=3, help="subprocesses per tree and bench")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--benches", nargs="+", choices=BENCHES, default=list(BENCHES))
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per subprocess")
    p.add_argument("--out", help="write the results (JSON) here")
    args = p.parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {args.repeats}")
    after = Path(args.after).resolve()
    sizes = QUICK if args.quick else FULL
    docs = doc_ratios(after)
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    result = {"before": args.before, "after": str(after), "quick": args.quick,
              "sizes": {b: sizes[b] for b in args.benches}, "load_start": os.getloadavg()[0]}
    # a timeout's SIGTERM unwinds too, so that the extracted tree is removed
    handler = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = Path(tempfile.mkdtemp(prefix="bench_before_"))
    try:
        trees = {"before": materialise(args.before, after, scratch), "after": after}
        for rep in range(args.repeats):
            measure_repeat(trees, args.benches, sizes, rep, args.timeout, runs)
            rows = [r for bench in args.benches for r in summarise(
                {s: [x for x in runs[s] if x["bench"] == bench] for s in runs}, docs)]
            result.update(repeats=rep + 1, load_end=os.getloadavg()[0], rows=rows, runs=runs)
            if args.out:  # after every repeat: a run cut short keeps what it measured
                Path(args.out).write_text(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        signal.signal(signal.SIGTERM, handler)
    print(table(result["rows"]))
    return result


def _worker_main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", choices=BENCHES, required=True)
    p.add_argument("--tree", required=True)
    p.add_argument("--params", required=True)
    p.add_argument("--result", required=True)
    a = p.parse_args()
    res = worker(a.worker, json.loads(a.params), Path(a.tree).resolve())
    Path(a.result).write_text(json.dumps(res))


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker_main()
    else:
        main()
