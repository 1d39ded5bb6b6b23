"""Node-count tables of the Lagrangian solver against its references (issue 12, must show).

* circle, SA (beta = 9, t = 3) and USA (beta = 2, t = 1.25), start ``CIRCLE_RHO0``: max
  relative error of the density at the nodes against ``meanfield.solve``, N = 16 ... 256;
* S^2, SA (beta = 2) and USA (beta = 1), t = 1, start ``SPHERE_RHO0``: the same against
  ``meanfield.Sphere``, lmax = 4 ... 14;
* R^2 and R^3: Gauss–Hermite nodes against ``solve_gaussian`` (mean, covariance, density),
  per_dim = 4 ... 20 (R^2), 4 ... 10 (R^3), every variant of ``solve_gaussian``;
* particles: ``sqrt(n)`` x RMS kernel distance to the Lagrangian solution (flat under the
  ``n^{-1/2}`` law) and the fitted slope, every variant (full-suite sizes).

    python benchmarks/bench_lagrangian_convergence.py [--only circle,sphere,gaussian,particles]

Minutes on 2 cores (the particle table is the longest). The computations are those of
``validation.checks.lagrangian_references`` (reference runs) with the cases of
``validation.checks.lagrangian``.
"""

from __future__ import annotations

import argparse
import time

from meanfield import Model
from validation.checks import lagrangian as lc
from validation.checks import lagrangian_references as lr


def circle() -> None:
    print("\n# circle: max relative error at the nodes vs meanfield.solve")
    for key, case in lc.CIRCLE_CASES.items():
        model = Model(beta=case["beta"], attention=case["attention"])
        res = lr.circle_vs_spectral(model, case["t"], (16, 32, 48, 64, 96, 128, 256))
        print(f"\n{key}: beta = {case['beta']:g}, t = {case['t']:g} (spectral resolution "
              f"{res['spectral_resolution']})\n{'N':>5} {'error':>10} {'wall (s)':>9}")
        for n, e, w in zip(res["N"], res["error"], res["lagrangian_s"]):
            print(f"{n:>5} {e:>10.2e} {w:>9.2f}")


def sphere() -> None:
    print("\n# S^2: max relative error at the nodes vs meanfield.Sphere")
    for att, (beta, t) in lc.SPHERE_CASES.items():
        res = lr.sphere_vs_spectral(Model(beta=beta, attention=att), t, (4, 6, 8, 10, 12, 14))
        print(f"\n{att}: beta = {beta:g}, t = {t:g}\n{'lmax':>5} {'nodes':>6} {'error':>10} {'wall (s)':>9}")
        for L, n, e, w in zip(res["lmax"], res["nodes"], res["error"], res["lagrangian_s"]):
            print(f"{L:>5} {n:>6} {e:>10.2e} {w:>9.2f}")


def gaussian() -> None:
    print(f"\n# R^d: Gauss-Hermite nodes vs solve_gaussian at t = {lr.GAUSSIAN_T}")
    for d, sizes in ((2, (4, 8, 12, 16, 20)), (3, (4, 6, 8, 10))):
        for name, model in lr.gaussian_models(d).items():
            # the weighted Sinkhorn iterates at every evaluation: slow at 1000 nodes
            per_dims = sizes[:3] if name == "sinkhorn" and d == 3 else sizes
            print(f"\nd = {d}, {name}\n{'per_dim':>7} {'nodes':>6} {'mean':>9} {'cov':>9} "
                  f"{'sup dens':>9} {'pointwise':>9} {'wall (s)':>9}")
            for p in per_dims:
                r = lr.gaussian_vs_ode(model, d, p)
                print(f"{p:>7} {r['nodes']:>6} {r['mean']:>9.1e} {r['cov']:>9.1e} {r['sup_density']:>9.1e} "
                      f"{r['pointwise_density']:>9.1e} {r['wall_s']:>9.2f}")


def particles() -> None:
    print(f"\n# particles: sqrt(n) x RMS kernel distance to the Lagrangian solution at t = {lr.PARTICLE_T}")
    for name in lc.PARTICLE_CHECKS:
        sizes = lc.PARTICLE_SUITES["sinkhorn" if name == "sinkhorn" else "full"]
        start = time.perf_counter()
        res = lr.particle_rate(name, lr.particle_variants()[name], sizes=sizes["n"],
                               replicas=sizes["replicas"], seed=0)
        f = res["fit"]
        table = "  ".join(f"{n}: {v:.3f}" for n, v in res["sqrt_n_rms"].items())
        print(f"{name:>13}: slope {f['slope']:.3f} [{f['lo']:.3f}, {f['hi']:.3f}]  {table}  "
              f"({time.perf_counter() - start:.0f} s)")


TABLES = {"circle": circle, "sphere": sphere, "gaussian": gaussian, "particles": particles}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(TABLES), help=f"comma-separated subset of {', '.join(TABLES)}")
    args = ap.parse_args()
    for name in args.only.split(","):
        TABLES[name.strip()]()


if __name__ == "__main__":
    main()
