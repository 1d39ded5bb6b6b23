"""meanfield.gaussian's exact statements: blow-up direction, noisy fixed point, spectra."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield import Model
from meanfield.gaussian import (
    blowup_limit,
    gaussian_rhs,
    interaction_matrix,
    linearised_spectrum,
    noisy_fixed_point,
)


def test_blowup_limit_of_the_worked_example() -> None:
    """docs/gaussian.md: d = 2, Sigma_0 = I, A = diag(a, -a): t* = 1/(2a) along e_1."""
    a = 0.7
    model = Model(1.0, Q=np.diag([a, -a]))
    t_star, u = blowup_limit(model, np.eye(2))
    assert t_star == pytest.approx(1 / (2 * a), rel=1e-14)
    np.testing.assert_allclose(u, [1.0, 0.0], atol=1e-14)
    assert blowup_limit(Model(1.0, Q=-np.eye(2)), np.eye(2))[0] == np.inf  # A + A^T < 0: none


def test_noisy_fixed_point_is_a_fixed_point(rng: np.random.Generator) -> None:
    q = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
    for model in (Model(2.0, Q=q, K=q, value=-1, noise=0.2), Model(2.0, Q=q, K=-q, noise=0.2)):
        s = noisy_fixed_point(model, 3)
        dm, dc = gaussian_rhs(model, np.zeros(3), s)
        np.testing.assert_allclose(dc, 0.0, atol=1e-13)
        assert np.all(np.linalg.eigvalsh(s) > 0)
        spec = linearised_spectrum(model, 3)
        assert spec["mean"].shape == (3,) and spec["cov"].shape == (6,) and np.all(spec["cov"] < 0)


def test_scalar_spectrum_by_hand() -> None:
    """d = 1, V = -1, A = beta: Sigma* = sqrt(sigma/beta), rates -(1 + sqrt(sigma beta)) and
    -4 sqrt(sigma beta)."""
    beta, sigma = 2.0, 0.5
    model = Model(beta, value=-1, noise=sigma)
    assert noisy_fixed_point(model, 1)[0, 0] == pytest.approx(np.sqrt(sigma / beta))
    spec = linearised_spectrum(model, 1)
    assert spec["mean"][0] == pytest.approx(-(1 + np.sqrt(sigma * beta)))
    assert spec["cov"][0] == pytest.approx(-4 * np.sqrt(sigma * beta))


@pytest.mark.parametrize(("model", "match"), [
    (Model(1.0, attention="l2", noise=0.1), "softmax"),
    (Model(1.0, V=np.diag([1.0, 2.0]), noise=0.1), "V = v I"),
    (Model(1.0, noise=0.1), "positive definite"),  # V = I, A = I: no fixed point
    (Model(1.0, value=-1), "noise > 0"),
])
def test_noisy_fixed_point_refuses(model: Model, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        noisy_fixed_point(model, 2)
    assert interaction_matrix(Model(3.0), 2)[0] == 1.0
