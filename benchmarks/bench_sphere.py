"""Cost of one right-hand side on the sphere, in units of one scalar transform pair.

Run as a plain script (``python benchmarks/bench_sphere.py [--lmax 63 127 255 511]``).
For each ``lmax`` it times, single-threaded and taking the best of several repeats:

* the floor: one scalar synthesis plus one analysis on the working Gauss–Legendre grid
  (``Sphere.backward`` + ``Sphere.forward``);
* one evaluation of ``meanfield.spectral.flow.make_flow(model, Sphere(lmax)).rhs(c)`` for SA
  (softmax) and USA (unnormalized) attention;

and prints the ratio rhs / floor (target: at most 5). The flow evaluates its drift
with ``meanfield.domains.sphere_drift.SphereDrift``. One more column:

* ``SA composed``: the same SA drift composed from the domain's transforms
  (``synthesize_padded``, ``synthesize_with_gradient_padded``, ``divergence_padded``), as the
  flow did before ``SphereDrift``; it also checks the fused result;

The floor is the faster of the pair through ``Sphere.backward``/``forward`` and through raw
ducc0 calls into preallocated arrays. Every figure is the best over ``--rounds``
interleaved rounds of ``--repeat`` calls (process CPU time, one thread).

The zonal domain's rhs (``d = 64``, ``degree = lmax``) is timed alongside.
"""

from __future__ import annotations

import argparse
import time

import ducc0
import numpy as np

from meanfield.domains.sphere import Sphere
from meanfield.domains.zonal_sphere import ZonalSphere
from meanfield.model import Model
from meanfield.spectral.flow import make_flow


def best_time(fn, repeat: int, budget: float = 2.0) -> float:
    """Best CPU time of ``fn()`` over ``repeat`` calls (fewer if they exceed ``budget`` s).

    Process CPU time rather than wall time: everything runs on one thread, and CPU time is
    less disturbed by other jobs sharing the machine (cache sharing still shows)."""
    fn()  # warm-up: plans, caches
    best, spent = np.inf, 0.0
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        dt = time.process_time() - t0
        best, spent = min(best, dt), spent + dt
        if spent > budget:
            break
    return best


def start(S: Sphere) -> np.ndarray:
    """A smooth, non-trivial density: two von Mises–Fisher bumps."""
    x = S.points
    rho = np.exp(2.0 * (x[..., 2] - 1)) + 0.5 * np.exp(1.5 * (x[..., 0] - 1))
    return S.forward(rho / S.integrate(rho))


def composed_sa_rhs(S: Sphere, beta: float):
    """SA drift ``-div(rho grad(K*rho) / (beta K*rho))`` from the domain's transforms."""
    kernel = S.scaled_kernel_multipliers(beta)
    rho_buf = np.empty(S.padded_weights.shape)
    z_buf = np.empty_like(rho_buf)
    g_buf = np.empty((2,) + rho_buf.shape)

    def rhs(c: np.ndarray) -> np.ndarray:
        rho = S.synthesize_padded(c, out=rho_buf)
        z, grad = S.synthesize_with_gradient_padded(kernel * c, out=(z_buf, g_buf))
        np.multiply(rho, 1.0 / beta, out=rho)
        np.divide(rho, z, out=rho)
        np.multiply(grad, rho, out=grad)
        out = S.divergence_padded(grad)
        out *= -1.0
        return out

    return rhs


def strict_floor(S: Sphere, c: np.ndarray, repeat: int) -> float:
    alm = np.ascontiguousarray(c).reshape(1, -1) * np.sqrt(4 * np.pi)
    m = np.empty((1, S.ntheta, S.nphi))
    a = np.empty_like(alm)
    w = ducc0.sht.get_gridweights("GL", S.ntheta) / S.nphi

    def pair() -> None:
        ducc0.sht.synthesis_2d(alm=alm, spin=0, lmax=S.lmax, geometry="GL", ntheta=S.ntheta,
                               nphi=S.nphi, map=m)
        ducc0.sht.adjoint_synthesis_2d(map=m, spin=0, lmax=S.lmax, geometry="GL", alm=a,
                                       ringfactor=w)

    return best_time(pair, repeat)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lmax", type=int, nargs="*", default=[63, 127, 255, 511])
    p.add_argument("--repeat", type=int, default=20, help="calls per round (best kept)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    p.add_argument("--beta", type=float, default=4.0)
    args = p.parse_args()
    print("| lmax | grid | padded grid | floor (ms) | SA rhs (ms) | SA / floor | USA rhs (ms) "
          "| USA / floor | SA composed / floor | zonal d=64 rhs (ms) |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for L in args.lmax:
        S = Sphere(L)
        c = start(S)
        f = S.backward(c)
        sa = make_flow(Model(args.beta, attention="softmax"), S)
        usa = make_flow(Model(args.beta, attention="unnormalized"), S)
        composed = composed_sa_rhs(S, args.beta)
        assert np.allclose(composed(c), sa.drift(c), rtol=1e-9, atol=1e-12 * np.abs(sa.drift(c)).max())
        Z = ZonalSphere(64, L)
        cz = Z.forward(np.exp(0.5 * np.sqrt(64) * Z.grid))
        zflow = make_flow(Model(args.beta), Z)
        jobs = {
            "floor": lambda: (S.backward(c), S.forward(f)),
            "strict": None,
            "sa": lambda: sa.rhs(c),
            "usa": lambda: usa.rhs(c),
            "composed": lambda: composed(c),
            "zonal": lambda: zflow.rhs(cz),
        }
        best = dict.fromkeys(jobs, np.inf)
        for _ in range(args.rounds):
            for name, fn in jobs.items():
                t = strict_floor(S, c, args.repeat) if fn is None else best_time(fn, args.repeat)
                best[name] = min(best[name], t)
        floor = min(best["floor"], best["strict"])  # the fastest pair we could measure
        row = [
            f"{L}", f"{S.ntheta}x{S.nphi}", f"{S.ntheta_padded}x{S.nphi_padded}",
            f"{1e3 * floor:.2f}",
            f"{1e3 * best['sa']:.2f}", f"{best['sa'] / floor:.2f}",
            f"{1e3 * best['usa']:.2f}", f"{best['usa'] / floor:.2f}",
            f"{best['composed'] / floor:.2f}", f"{1e3 * best['zonal']:.3f}",
        ]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
