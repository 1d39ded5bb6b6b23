"""Check: the phase transition of clustering follows the curve (6.12) in high dimension.

.. autosummary::
   check_phase_transition
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from validation.records import CheckResult, Comparison
from validation.suites import check

_SIZES = {
    # d = 1024 costs what d = 32 does (rotation invariance, see validation.phase_diagram)
    "quick": dict(n=32, d=1024, betas=[0.5, 1.0, 2.0, 3.0, 4.0, 5.0], t_max=10.0, times=101,
                  realizations=256),
    "full": dict(n=32, d=1024, betas=list(np.linspace(0.25, 5.0, 20)), t_max=10.0,
                 times=201, realizations=1024),
}


@check("phase.transition_curve", suites=("full",))
def check_phase_transition(*, seed: int, out_dir: Path, suite: str) -> CheckResult:
    """First time ``t_half(beta)`` at which ``P(<x_1, x_2> >= 1 - delta) >= 1/2``, against
    ``t*(beta)`` with ``gamma_beta(t*) = 1 - delta`` (curve (6.12), ODE (6.9)), ``beta <= 5``.

    Tolerance: for ``d -> inf`` the inner products concentrate at ``gamma_beta(t)``
    (Theorem 6.9), so the median crossing time tends to ``t*``. Measured on a time grid of
    step ``Δt`` the first grid time with ``P >= 1/2`` lies within ``Δt`` of the median crossing;
    sampling moves it inside ``[t_lo, t_hi]``, the first times at which the upper and lower
    Wilson bounds reach 1/2 (level ``1 - 0.01/len(betas)``, Bonferroni over the ``beta``
    values, so a correct code fails by chance with probability below 1%). The check passes
    when every ``t*`` lies in ``[t_lo - Δt, t_hi + Δt]``. At ``d = 1024`` the finite-``d``
    bias moves the median by less than ``Δt = 0.1`` (measured: at most 0.08). This is a
    measured, not a derived, allowance: Theorem 6.9 bounds the bias of the inner products by
    ``2 c(beta)^{nt} sqrt(log d / d)``, ``c(beta) = e^{10 max(1, beta)}``, with probability
    ``1 - 2 n^2 d^{-1/64}``, which says nothing at ``n = 32``, ``d = 1024``
    (docs/equations.md section 4).
    """
    from validation.phase_diagram import phase_diagram
    from validation.plots_phase import plot_phase_diagram

    name = "phase.transition_curve"
    quantity = "first t with P(<x_1(t), x_2(t)> >= 1 - delta) >= 1/2, beta <= 5"
    if suite not in _SIZES:
        msg = f"suite must be one of {tuple(_SIZES)}, got {suite!r}"
        raise ValueError(msg)
    size: dict[str, Any] = dict(_SIZES[suite])
    level = 1.0 - 0.01 / len(size["betas"])
    ds = phase_diagram(**size, delta=1e-3, attention="softmax", seed=seed, workers=1,
                       confidence=level, progress=False)
    t = ds["time"].values
    step = float(t[1] - t[0])
    star = ds["transition_time"].values
    lo = np.nan_to_num(ds["t_half_lower"].values, nan=math.inf)
    hi = np.nan_to_num(ds["t_half_upper"].values, nan=math.inf)
    excess = np.maximum(np.maximum(lo - step - star, star - hi - step), 0.0)
    comparisons = tuple(Comparison(f"beta = {b:g}: t*(beta) within a grid step of the interval of t_half",
                                   th, ts, kind="ci", low=lo_b - step, high=hi_b + step)
                        for b, th, ts, lo_b, hi_b in zip(ds["beta"].values, ds["t_half"].values, star, lo,
                                                         hi))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data_path = out_dir / "phase_transition.nc"
    tmp = out_dir / ".phase_transition.nc.tmp"
    ds.to_netcdf(tmp, engine="h5netcdf")
    tmp.replace(data_path)
    figure = out_dir / "phase_transition.png"
    plot_phase_diagram(ds, figure)  # returns the Figure; the report links the file
    return CheckResult(
        name=name, quantity=quantity, comparisons=comparisons,
        description=(f"t*(beta) of (6.12); tolerance: grid step {step:g} + Wilson interval at level "
                     f"{level:.4f} (z = {norm.ppf(0.5 + level / 2):.2f})"),
        details={"n": size["n"], "d": size["d"], "realizations": size["realizations"],
                 "t_half_lower": lo.tolist(), "t_half_upper": hi.tolist(),
                 "max_excess": float(excess.max()), "data": str(data_path)},
        data=ds, figure=str(figure))


__all__ = ["check_phase_transition"]
