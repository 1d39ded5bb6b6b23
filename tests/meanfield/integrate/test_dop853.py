"""Dormand-Prince 8(5,3) in the engine: its order, its paired error estimate, scipy's DOP853."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.integrate._ivp import dop853_coefficients as scipy_dop853

from meanfield.integrate import (
    DOP853,
    ButcherTableau,
    ConstantStep,
    ErrorPair,
    PIController,
    RungeKutta,
    get_scheme,
    integrate,
)


def _tan_system(y: np.ndarray) -> np.ndarray:
    """``u' = 1 + u^2``, ``w' = -u w``: ``u = tan t``, ``w = cos t`` from ``(0, 1)``."""
    return np.array([1.0 + y[0] ** 2, -y[0] * y[1]])


def _end_state(scheme: str, n: int) -> np.ndarray:
    out: dict[int, np.ndarray] = {}
    integrate(RungeKutta(_tan_system, scheme), np.array([0.0, 1.0]), np.array([0.0, 1.0]),
              controller=ConstantStep(1.0 / n), output=lambda k, t, y, c: out.__setitem__(k, y.copy()))
    return out[1]


def _slope(hs: np.ndarray, errors: np.ndarray) -> float:
    return float(np.polyfit(np.log(hs), np.log(errors), 1)[0])


def test_dop853_is_the_registered_tableau_of_scipy() -> None:
    """The coefficients are scipy's (``dop853_coefficients``) to the last bit, the 13th stage
    ``f(y_new)`` is the FSAL row, and the tableau declares its two error estimates."""
    tab = get_scheme("dop853")
    assert tab is DOP853 and tab.fsal and tab.stages == 13
    np.testing.assert_array_equal(tab.a[:12, :12], scipy_dop853.A[:12, :12])
    np.testing.assert_array_equal(tab.b[:12], scipy_dop853.B)
    np.testing.assert_array_equal(tab.c, scipy_dop853.C[:13])
    np.testing.assert_array_equal(tab.b_error, scipy_dop853.E5)
    np.testing.assert_array_equal(tab.b_error_low, scipy_dop853.E3)
    assert (tab.order, tab.error_order, tab.error_order_low, tab.estimate_order) == (8, 5, 3, 7)


def test_the_low_estimate_is_of_third_order() -> None:
    """``b - b_error_low`` satisfies the bushy-tree conditions below order 3 and fails at 3
    (exact rationals in 17 digits: round-off 1e-14), as ``b - b_error`` does below 5
    (tests/meanfield/integrate/test_tableaus.py)."""
    low = DOP853.b - DOP853.b_error_low
    for k in range(3):
        assert float(np.sum(low * DOP853.c**k)) == pytest.approx(1 / (k + 1), abs=1e-14)
    assert abs(float(np.sum(low * DOP853.c**3)) - 1 / 4) > 1e-6


def test_dop853_converges_at_order_eight() -> None:
    """Fixed steps ``h = 1/n`` on the tan system to ``t = 1``: the global error is ``C h^8``.

    Measured errors 2e-8 (n = 4) to 3.3e-13 (n = 16), local slopes 7.8-8.1; round-off,
    ~n * 1e-16 <= 2e-15, is below 1% of the smallest error (a slope bias < 0.01), and the
    next term of the expansion, relative O(h), bends the fit by ~0.2 at these h: 8 +- 0.4.
    dopri5 under the same fit gives ~5 (its order), far outside."""
    ns = np.array([4, 6, 8, 12, 16])
    exact = np.array([np.tan(1.0), np.cos(1.0)])
    errors = np.array([np.abs(_end_state("dop853", n) - exact).max() for n in ns])
    assert _slope(1.0 / ns, errors) == pytest.approx(8.0, abs=0.4)
    errors5 = np.array([np.abs(_end_state("dopri5", n) - exact).max() for n in ns])
    assert _slope(1.0 / ns, errors5) < 6.0


def test_paired_error_estimate_has_the_controller_order() -> None:
    """One step of size ``h`` of a non-polynomial system (no elementary differential vanishes):
    the 5th-order estimate is ``O(h^6)``, the 3rd-order one ``O(h^4)``, and Hairer's
    combination ``E^2 / sqrt(E^2 + 0.01 E_low^2)`` is ``O(h^8)``, the ``h^(q+1)`` with
    ``q = estimate_order = 7`` that the PI controller's exponents assume.

    Measured local slopes for h = 0.1 ... 0.025: 5.7-5.9, 3.8-3.9 and 7.7-7.9, approaching
    6, 4 and 8 as the next term (relative O(h)) fades: each within 0.5."""
    def f(y: np.ndarray) -> np.ndarray:
        return np.array([np.exp(-y[0]) + np.sin(y[1]), np.cos(y[0] * y[1]) - y[1]])

    y0 = np.array([0.3, 0.7])
    stepper = RungeKutta(f, "dop853")
    unit = PIController(rtol=1.0, atol=1.0)  # scale 1 + |y| ~ 2: the norm of the raw errors
    hs = np.array([0.1, 0.05, 0.025])
    norms, highs, lows = [], [], []
    for h in hs:
        y1, err, _ = stepper.step(y0, h, stepper.init(y0))
        assert isinstance(err, ErrorPair)
        norms.append(unit.error_norm(err, y0, y1))
        highs.append(np.abs(err.error).max())
        lows.append(np.abs(err.low).max())
    assert _slope(hs, np.array(highs)) == pytest.approx(6.0, abs=0.5)
    assert _slope(hs, np.array(lows)) == pytest.approx(4.0, abs=0.5)
    assert _slope(hs, np.array(norms)) == pytest.approx(DOP853.estimate_order + 1, abs=0.5)


def test_paired_error_norm_is_scipys() -> None:
    """The combination against scipy's ``DOP853._estimate_error_norm`` written out: equal to
    round-off (1e-15 relative); zero errors give 0, a non-finite one inf (a rejection)."""
    rng = np.random.default_rng(0)
    y0, y1 = rng.normal(size=7), rng.normal(size=7)
    e5, e3 = 1e-9 * rng.normal(size=7), 1e-7 * rng.normal(size=7)
    ctrl = PIController(rtol=1e-6, atol=1e-9)
    scale = 1e-9 + 1e-6 * np.maximum(np.abs(y0), np.abs(y1))
    n5, n3 = np.linalg.norm(e5 / scale) ** 2, np.linalg.norm(e3 / scale) ** 2
    expected = n5 / np.sqrt((n5 + 0.01 * n3) * 7)  # scipy's, with h folded into e5 and e3
    assert ctrl.error_norm(ErrorPair(e5, e3), y0, y1) == pytest.approx(expected, rel=1e-15)
    assert ctrl.error_norm(ErrorPair(0 * e5, 0 * e3), y0, y1) == 0.0
    assert ctrl.error_norm(ErrorPair(e5, np.full(7, np.inf)), y0, y1) == np.inf


def test_adaptive_dop853_agrees_with_scipy() -> None:
    """The same ODE at rtol 1e-10 through the engine and scipy's DOP853 (same coefficients and
    error norm; the controllers differ): each is within its global error of the truth, ~ the
    number of steps (~20) times rtol times the flow's growth (< 3 here), so they agree to
    1e-8 relative; measured 1e-11."""
    times = np.linspace(0.0, 1.2, 7)
    out = np.empty((times.size, 2))
    sol = integrate(RungeKutta(_tan_system, "dop853"), np.array([0.0, 1.0]), times,
                    controller=PIController(rtol=1e-10, atol=1e-12),
                    output=lambda k, t, y, c: out.__setitem__(k, y))
    ref = solve_ivp(lambda _t, y: _tan_system(y), (0.0, 1.2), [0.0, 1.0], method="DOP853",
                    t_eval=times, rtol=1e-10, atol=1e-12).y.T
    assert sol.successful
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-8
    exact = np.stack([np.tan(times), np.cos(times)], axis=1)
    assert np.abs(out - exact).max() / np.abs(exact).max() < 1e-8


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"b_error_low": np.array([1.0, -1.0])}, "error_order_low > 0 exactly when"),
        ({"b_error_low": np.array([1.0, -1.0]), "error_order_low": 2}, "must be below"),
        ({"b_error_low": np.array([1.0, -0.5]), "error_order_low": 1}, "summing to 0"),
    ],
)
def test_inconsistent_low_estimates_are_refused(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ButcherTableau("bad", np.array([0.0, 1.0]), np.array([[0.0, 0.0], [1.0, 0.0]]),
                       np.array([0.5, 0.5]), np.array([0.5, -0.5]), 2, 2, "test", **kw)


def test_continuous_extension_is_of_order_seven_and_scipys() -> None:
    """``RungeKutta.interpolate`` inside one step of size ``h``: it meets both ends exactly,
    its error against the true solution (scipy at rtol 1e-14 stands for it) falls like
    ``h^8`` (order 7; measured ratios 295 and 256 per halving, 2^8 = 256: slope within 0.5),
    and on the same step it is scipy's ``Dop853DenseOutput`` to round-off (1e-14)."""
    def f(y: np.ndarray) -> np.ndarray:
        return np.array([np.exp(-y[0]) + np.sin(y[1]), np.cos(y[0] * y[1]) - y[1]])

    y0 = np.array([0.3, 0.7])
    thetas = np.linspace(0.0, 1.0, 9)
    hs = np.array([0.4, 0.2, 0.1])
    errors = []
    for h in hs:
        stepper = RungeKutta(f, "dop853")
        y1, _, _ = stepper.step(y0, h, stepper.init(y0))
        assert stepper.interpolates
        np.testing.assert_array_equal(stepper.interpolate(0.0), y0)
        np.testing.assert_array_equal(stepper.interpolate(1.0), y1)
        ref = solve_ivp(lambda _t, y: f(y), (0.0, h), y0, method="DOP853", rtol=1e-13,
                        atol=1e-15, dense_output=True).sol
        errors.append(max(np.abs(stepper.interpolate(th) - ref(th * h)).max() for th in thetas))
    assert _slope(hs, np.array(errors)) == pytest.approx(8.0, abs=0.5)
    import scipy.integrate

    scipy_step = scipy.integrate.DOP853(lambda _t, y: f(y), 0.0, y0, 1.0, first_step=0.2,
                                        rtol=1e-3, atol=1e-3)
    scipy_step.step()
    h = scipy_step.t - scipy_step.t_old
    stepper = RungeKutta(f, "dop853")
    stepper.step(y0, h, stepper.init(y0))
    dense = scipy_step.dense_output()
    for th in thetas:
        np.testing.assert_allclose(stepper.interpolate(th), dense(th * h), rtol=0, atol=1e-14)


def test_dense_outputs_use_the_extension() -> None:
    """``integrate(dense=True)`` with dop853: the steps ignore the 41 output times (as many
    steps as for 2) and the interpolated outputs keep the accuracy of the steps, tan and cos
    to 1e-8 at rtol 1e-10 (measured 1.2e-10; cubic Hermite at the same 20 steps: 1.6e-5).
    A scheme without an extension falls back to Hermite; interpolate refuses there."""
    times = np.linspace(0.0, 1.2, 41)

    def run(scheme: str, grid: np.ndarray) -> tuple[np.ndarray, int]:
        out = np.empty((grid.size, 2))
        sol = integrate(RungeKutta(_tan_system, scheme), np.array([0.0, 1.0]), grid,
                        controller=PIController(rtol=1e-10, atol=1e-12), dense=True,
                        output=lambda k, t, y, c: out.__setitem__(k, y))
        return out, sol.num_accepted

    out, steps = run("dop853", times)
    assert steps == run("dop853", times[[0, -1]])[1]
    exact = np.stack([np.tan(times), np.cos(times)], axis=1)
    assert np.abs(out - exact).max() / np.abs(exact).max() < 1e-8
    stepper = RungeKutta(_tan_system, "dopri5")
    assert not stepper.interpolates
    with pytest.raises(ValueError, match="no continuous extension"):
        stepper.interpolate(0.5)


def test_inconsistent_extensions_are_refused() -> None:
    """An extension whose rows do not sum to its nodes, of the wrong width, or on a scheme
    that is not FSAL (the extension needs F(y_1) as the last stage) is refused."""
    from dataclasses import replace

    from meanfield.integrate import RK4, ContinuousExtension

    ext = DOP853.dense
    assert ext is not None
    with pytest.raises(ValueError, match="must sum to its c"):
        ContinuousExtension(ext.c + 0.1, ext.a.copy(), ext.d.copy(), "bad")
    with pytest.raises(ValueError, match="same width"):
        ContinuousExtension(ext.c.copy(), ext.a.copy(), ext.d[:, :-1].copy(), "bad")
    with pytest.raises(ValueError, match="needs an FSAL scheme"):
        replace(RK4, name="rk4-dense", dense=ext)
