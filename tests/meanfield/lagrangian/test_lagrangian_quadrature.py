"""The quadrature monitor of Lagrangian runs in ``R^d`` (issue 22, item 4): a Gaussian start
near its covariance blow-up ends with a stop and a reason, never a wrong mean reported as
success; the converged case stays silent (docs/lagrangian.md section 10)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import meanfield
from meanfield import nodes, solve_gaussian
from meanfield.integrate import StopReason
from meanfield.lagrangian import LagrangianError, solve_lagrangian
from meanfield.lagrangian.quadrature import (
    STOP_GROWTH,
    WARN_GROWTH,
    QuadratureMonitor,
    effective_sample_size,
    outer_layer,
    tail_share,
)

M0 = np.array([0.3, -0.2, 0.1])
C0 = 0.25 * np.eye(3)


def _model() -> meanfield.Model:
    """Softmax in ``R^3`` with random ``Q, K, V`` (seed 19): the Gaussian closed form of
    ``N(M0, C0)`` blows up at ``t* = 1.74`` (``solve_gaussian``'s ``BlowUpError``)."""
    rng = np.random.default_rng(19)
    Q, K, V = (rng.standard_normal((3, 3)) / np.sqrt(3) for _ in range(3))
    return meanfield.Model(beta=1.0, Q=Q, K=K, V=V)


def _mean_error(ds: object) -> float:
    """Relative error of the nodes' weighted mean at the last time against the closed form."""
    t = float(ds["time"].values[-1])  # type: ignore[index]
    exact = solve_gaussian(_model(), M0, C0, [0.0, t], rtol=1e-12, atol=1e-14)["mean"].values[-1]
    mean = ds["weight"].values @ ds["x"].values[-1]  # type: ignore[index]
    return float(np.linalg.norm(mean - exact) / np.linalg.norm(exact))


def test_blowup_case_stops_with_a_reason_not_a_wrong_mean() -> None:
    """Run to ``t = 1.72`` (99% of ``t*``) with ``4^3`` nodes: without the monitor the run
    reports success with the mean 41% off (measured); it now stops near ``t = 1.56`` with
    :attr:`StopReason.UNRESOLVED_NODES`, keeping the results up to there (mean 6.5% off there,
    measured; the warning came at ``t = 1.19``, where it was below 1%: measured 0.36% at
    ``t = 1.08``, 1.0% at ``t = 1.29``)."""
    model, start, t = _model(), nodes.gaussian(M0, C0, 4), np.linspace(0.0, 1.72, 5)
    with pytest.warns(UserWarning, match="outer nodes of the rule"):
        ds = solve_lagrangian(model, start, t, throw=False)
    assert ds.attrs["successful"] == 0
    assert ds.attrs["stop_reason"].startswith(StopReason.UNRESOLVED_NODES.value)
    assert f"limit {STOP_GROWTH:g}" in ds.attrs["stop_reason"]
    assert float(ds.attrs["t_reached"]) < 1.6
    # what is kept is no blown-up number: the mean within 10% (measured 6.5e-2) where the
    # run ended, against 41% at t = 1.72
    assert _mean_error(ds) < 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(LagrangianError) as info:
            solve_lagrangian(model, start, t)
    assert info.value.reason is StopReason.UNRESOLVED_NODES
    assert "at t = " in str(info.value) and "solve_gaussian" in str(info.value)
    assert info.value.dataset.attrs["successful"] == 0


def test_converged_case_is_silent() -> None:
    """Away from the blow-up (``t = 0.75``, 43% of ``t*``) with ``6^3`` nodes: no warning,
    success, and the mean within 1e-4 of the closed form (measured 2.4e-5: the rule.s own
    error, which falls geometrically with the nodes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ds = solve_lagrangian(_model(), nodes.gaussian(M0, C0, 6), np.linspace(0.0, 0.75, 4))
    assert ds.attrs["successful"] == 1
    assert _mean_error(ds) < 1e-4


def test_amplification_is_one_without_tilt_and_thresholds_decide() -> None:
    """``beta = 0``: no tilt, the outer layer carries exactly its own mass (``A = 1`` to
    round-off, 1e-12 for sums of 216 terms); with the model, ``A`` at the start lies between 1
    and 2 (measured 1.43); a monitor whose limit is just below the measured growth stops, one
    just above stays silent."""
    start = nodes.gaussian(M0, C0, 6)
    x0 = np.asarray(start.x)
    flat = QuadratureMonitor(meanfield.Model(beta=0.0), x0, start.weights, 3, 1.0)
    assert flat.amplification(x0) == pytest.approx(1.0, abs=1e-12)
    mon = QuadratureMonitor(_model(), x0, start.weights, 3, 1.0)
    A = mon.amplification(x0)
    assert 1.0 < A < 2.0 and mon.reference == A
    # later nodes: the start's cloud stretched by 1.3 about its mean (a spreading law), on
    # which the growth G = A / A(t_0) is measured; thresholds just below and above it decide
    mean = np.asarray(start.weights) @ x0
    x = mean + 1.3 * (x0 - mean)
    G = mon.amplification(x) / A
    assert 1.0 < G < WARN_GROWTH  # measured 1.5: a spread of 1.3 is no failure yet
    y = np.concatenate([x, np.zeros((x.shape[0], 1))], axis=1)
    silent = QuadratureMonitor(_model(), x0, start.weights, 3, 1.0, warn=1.01 * G, stop=1.02 * G)
    silent.check(1.0, y, None, None)
    assert silent.worst == (pytest.approx(G), 1.0)
    stopping = QuadratureMonitor(_model(), x0, start.weights, 3, 1.0, warn=0.98 * G, stop=0.99 * G)
    with pytest.raises(meanfield.integrate.Stop) as info:
        stopping.check(1.0, y, None, None)
    assert info.value.reason is StopReason.UNRESOLVED_NODES


def test_outer_layer_and_shares() -> None:
    """The outer layer holds at most its mass, the least weights; shares lie in [0, 1]; the
    effective sample size of the untilted rule is ``(sum w)^2 / sum w^2`` (round-off)."""
    start = nodes.gaussian(M0, C0, 6)
    w = np.asarray(start.weights)
    layer = outer_layer(w, 1e-3)
    assert 0 < w[layer].sum() <= 1e-3 and w[layer].max() <= np.delete(w, layer).min()
    s = tail_share(_model(), np.asarray(start.x), w, layer)
    assert np.all((s >= 0) & (s <= 1))
    ess = effective_sample_size(meanfield.Model(beta=0.0), np.asarray(start.x), w)
    assert np.allclose(ess, w.sum() ** 2 / np.sum(w * w), rtol=1e-12)
