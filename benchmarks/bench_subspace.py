"""Benchmark of subspace nodes (the k = 2 reduction, docs/lagrangian.md section 11) against
particles at the issue's size; a plain script:

    python benchmarks/bench_subspace.py [--particles N] [--radial R] [--angular A]

The runs of the validation check ``lagrangian.subspace_particles``
(:func:`validation.checks.subspace.compare_with_particles`: two and three clusters in a plane
on ``S^{127}``, SA ``beta = 4``, to ``t = 2``) with ``N`` particles (default 20 000, the
issue's size: ``O(N^2 d)`` per evaluation, hours on 2 shared cores, minutes on a GPU). Prints
the wall times, the Kolmogorov distances of ``p_1``, ``p_2`` at each output time and their
level ``K / sqrt(N/2) + max_j w_j``.
"""

from __future__ import annotations

import argparse
import json

from validation.checks.subspace import SIZES, compare_with_particles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=20_000)
    parser.add_argument("--radial", type=int, default=int(SIZES["full"]["radial"]))
    parser.add_argument("--angular", type=int, default=int(SIZES["full"]["angular"]))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    size = dict(SIZES["full"], particles=args.particles, radial=args.radial, angular=args.angular)
    comps, details, _, _ = compare_with_particles(size, args.seed)
    print(json.dumps(details, indent=1))
    print("all within level:", all(c.passed for c in comps))


if __name__ == "__main__":
    main()
