"""Benchmark of subspace nodes (the k = 2 reduction, docs/lagrangian.md section 11) against
particles; a plain script:

    python benchmarks/bench_subspace.py [--particles N] [--dims D [D ...]] [--seed S]

The runs of the validation check ``lagrangian.subspace_particles``
(:func:`validation.checks.subspace.compare_with_particles`: two and three clusters in a plane
on ``S^{127}``, two clusters on ``S^{15}``, ``S^{63}``, ``S^{255}``, SA ``beta = 4``, to
``t = 2``) with ``N`` particles (default 20 000, in groups of four mirror images:
``validation.pairs.mirror_field``), for the cases of dimension ``--dims`` (default: all).
Prints the wall times, the Kolmogorov distances of ``p_1``, ``p_2`` at each output time, their
levels and the particles' shift from their nodes.
"""

from __future__ import annotations

import argparse
import json

from validation.checks.subspace import SIZES, compare_with_particles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=20_000)
    parser.add_argument("--dims", type=int, nargs="+", default=None, help="the cases of these dimensions")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cases = [c for c in SIZES["full"]["cases"] if args.dims is None or c["d"] in args.dims]
    if not cases:
        msg = f"--dims: no case of dimension {args.dims} (cases: {[c['d'] for c in SIZES['full']['cases']]})"
        raise SystemExit(msg)
    size = dict(SIZES["full"], particles=args.particles, cases=cases)
    comps, details, _, _ = compare_with_particles(size, args.seed)
    print(json.dumps(details, indent=1))
    print("all within level:", all(c.passed for c in comps))


if __name__ == "__main__":
    main()
