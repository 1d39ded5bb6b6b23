"""Cost of one right-hand-side evaluation on the circle, in FFT pairs (target: at most 6).

For N from 256 to 65536: time(flow.rhs) / time(one real FFT pair of the padded size M)
(``flow.rhs`` of a noiseless model is the drift ``-d_theta(rho X)`` that each solver stage
evaluates),
both measured in this run (best of several repeats). The floor's plans are made with
FFTW_PATIENT, the fastest pair FFTW finds (planning takes a minute at the largest sizes).
Target: <= 6.

    python benchmarks/bench_circle.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
import pyfftw

import meanfield as mf
from meanfield.spectral.initial import von_mises


def best(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7, help="timings per round (best kept)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds of floor, SA and USA (best kept): a transient "
                         "load on the shared machine then spoils one round, not the figure")
    ap.add_argument("--N", type=int, nargs="*", default=[256, 1024, 4096, 16384, 65536])
    args = ap.parse_args()
    print(f"{'N':>6} {'M':>6} {'attention':>12} {'FFT pair (us)':>14} {'rhs (us)':>10} {'ratio':>6}")
    for N in args.N:
        d = mf.Circle(N)
        c = d.forward(von_mises(d, [0.3, 2.0], [2.0, 3.0]))
        a = pyfftw.empty_aligned(d.M, dtype="float64")
        b = pyfftw.empty_aligned(d.M // 2 + 1, dtype="complex128")
        a[:] = np.random.default_rng(0).random(d.M)
        fwd = pyfftw.FFTW(a, b, flags=("FFTW_PATIENT",))
        bwd = pyfftw.FFTW(b, a, direction="FFTW_BACKWARD", flags=("FFTW_PATIENT", "FFTW_DESTROY_INPUT"))

        def pair() -> None:
            fwd.execute()
            bwd.execute()

        number = max(1, int(2e5 / N))
        flows = {att: mf.make_flow(mf.Model(4.0, attention=att), d)
                 for att in ("softmax", "unnormalized")}
        t_fft = np.inf
        t_rhs = dict.fromkeys(flows, np.inf)
        for _ in range(args.rounds):
            t_fft = min(t_fft, best(pair, number, args.repeat))
            for att, flow in flows.items():
                t_rhs[att] = min(t_rhs[att], best(lambda: flow.rhs(c), number, args.repeat))
        for att, t in t_rhs.items():
            print(f"{N:>6} {d.M:>6} {att:>12} {t_fft * 1e6:>14.2f} {t * 1e6:>10.2f} "
                  f"{t / t_fft:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
