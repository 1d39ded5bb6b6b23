"""Step-size controllers: pure adaptation, first-step guess, limits, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield.integrate import ConstantStep, PIController, rms_norm


def test_adapt_is_pure_and_deterministic():
    ctl = PIController(rtol=1e-6, atol=1e-9)
    state = 0.5
    a = ctl.adapt(0.3, 0.1, 4, state)
    b = ctl.adapt(0.3, 0.1, 4, state)
    assert a == b and state == 0.5
    accept, dt, new_state = a
    # PI formula of the docstring: safety e^{-0.7/k} e_prev^{0.4/k}, k = 5
    assert accept and new_state == 0.3
    assert dt == pytest.approx(0.1 * 0.9 * 0.3 ** (-0.7 / 5) * 0.5 ** (0.4 / 5), rel=1e-15)


def test_rejection_shrinks_and_keeps_the_state():
    ctl = PIController(rtol=1e-6, atol=1e-9)
    accept, dt, state = ctl.adapt(50.0, 0.1, 4, 0.7)
    assert not accept and state == 0.7
    assert dt == pytest.approx(0.1 * max(0.2, 0.9 * 50.0 ** (-1 / 5)), rel=1e-15)
    accept, dt, state = ctl.adapt(math.nan, 0.1, 4, 0.7)
    assert not accept and dt == pytest.approx(0.1 * ctl.factormin) and state == 0.7


def test_factor_and_step_limits():
    ctl = PIController(rtol=1e-6, atol=1e-9, factormax=3.0, dtmax=0.25, dtmin=0.01)
    assert ctl.adapt(0.0, 0.1, 4, 1.0)[1] == pytest.approx(0.25)  # factormax 3 -> 0.3 -> dtmax
    assert ctl.adapt(1e-12, 0.01, 4, 1.0)[1] == pytest.approx(0.03)
    assert ctl.adapt(1e9, 0.02, 4, 1.0)[1] == pytest.approx(0.01)  # dtmin


def test_first_step_guess_is_hairer_norsett_wanner():
    ctl = PIController(rtol=1e-3, atol=1e-6)
    y0 = np.array([1.0, 2.0])
    f0 = np.array([10.0, -4.0])
    scale = 1e-6 + 1e-3 * np.abs(y0)
    dt, state = ctl.init(y0, f0, 5.0, 4)
    assert dt == pytest.approx(0.01 * rms_norm(y0 / scale) / rms_norm(f0 / scale), rel=1e-14)
    assert state == 1.0
    dt, _ = ctl.init(np.zeros(2), np.zeros(2), 5.0, 4)  # nothing to scale by: tiny step
    assert dt == pytest.approx(5e-6)


@pytest.mark.parametrize(("kw", "match"), [
    (dict(rtol=-1.0, atol=1e-9), "rtol must be"),
    (dict(rtol=1e-6, atol=math.inf), "atol must be"),
    (dict(rtol=0.0, atol=0.0), "cannot both be 0"),
    (dict(rtol=1e-6, atol=1e-9, safety=1.5), "safety"),
])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        PIController(**kw)
    with pytest.raises(ValueError, match="dt must be finite and > 0"):
        ConstantStep(0.0)


def test_constant_step_always_accepts():
    ctl = ConstantStep(0.05)
    assert ctl.init(np.ones(2), np.ones(2), 1.0, 4) == (0.05, 1.0)
    assert ctl.adapt(1e6, 0.05, 4, 1.0) == (True, 0.05, 1.0)


def test_rms_norm_survives_huge_entries():
    assert rms_norm(np.array([1e200, 1e200])) == pytest.approx(1e200)
    assert rms_norm(np.zeros(3)) == 0.0
