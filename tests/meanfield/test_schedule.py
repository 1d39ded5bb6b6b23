"""meanfield.schedule: a piecewise-constant schedule of models (layers with their own weights),
run piece by piece by particles.simulate and solve_gaussian."""

from __future__ import annotations

import json

import numpy as np
import pytest

import particles
from meanfield import Model, solve_gaussian
from meanfield.gaussian import BlowUpError, layered_covariance
from meanfield.integrate import check_result_attrs
from meanfield.schedule import Schedule

M1 = Model(beta=1.0)
M2 = Model(beta=0.5, Q=np.diag([1.0, 2.0, 0.5]))


def _tokens(n: int = 8, d: int = 3) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_schedule_validates_its_pieces() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Schedule([])
    with pytest.raises(ValueError, match="strictly increasing"):
        Schedule([(0.0, M1), (0.0, M2)])
    with pytest.raises(ValueError, match="meanfield.Model"):
        Schedule([(0.0, "softmax")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="finite"):
        Schedule([(float("nan"), M1)])
    with pytest.raises(ValueError, match="one dimension"):
        Schedule([(0.0, Model(1.0, Q=np.eye(2))), (1.0, Model(1.0, Q=np.eye(3)))])
    s = Schedule([(0.0, M1), (1.0, M2)])
    assert s.model_at(0.99) == M1 and s.model_at(1.0) == M2
    with pytest.raises(ValueError, match="before the schedule"):
        s.model_at(-0.1)
    assert Schedule.from_state(s.to_json()) == s


def test_pieces_cut_at_the_switches_only_inside_the_run() -> None:
    s = Schedule([(0.0, M1), (0.7, M2), (5.0, M1)])
    pieces = s.pieces([0.0, 0.5, 1.0, 2.0])
    assert [p[0] for p in pieces] == [M1, M2]
    np.testing.assert_array_equal(pieces[0][1], [0.0, 0.5, 0.7])
    np.testing.assert_array_equal(pieces[1][1], [0.7, 1.0, 2.0])
    with pytest.raises(ValueError, match="before the schedule"):
        s.pieces([-1.0, 0.0])


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_particles_schedule_equals_the_composition_bitwise(method: str) -> None:
    """Same steps (cut at the switch in both) -> the same floating-point operations."""
    x0 = _tokens()
    s = Schedule([(0.0, M1), (0.7, M2)])
    t = np.linspace(0.0, 2.0, 5)  # 0.7 is not an output time
    ds = particles.simulate(s, x0, t, method=method, dt=0.05)
    a = particles.simulate(M1, x0, [0.0, 0.5, 0.7], method=method, dt=0.05)
    b = particles.simulate(M2, a["x"].values[-1], [0.7, 1.0, 1.5, 2.0], method=method, dt=0.05)
    np.testing.assert_array_equal(ds["time"].values, t)
    np.testing.assert_array_equal(ds["x"].values[:2], a["x"].values[:2])
    np.testing.assert_array_equal(ds["x"].values[2:], b["x"].values[1:])
    assert ds.attrs["model"] == s.to_json() and ds.attrs["successful"] == 1
    for key in ("num_steps", "num_accepted", "num_evaluations"):  # summed over the pieces
        assert ds.attrs[key] == a.attrs[key] + b.attrs[key]
    check_result_attrs(ds.attrs)  # the joined attrs, made again by the schema
    # and the switch matters: one model throughout is another run
    one = particles.simulate(M1, x0, t, method=method, dt=0.05)
    assert np.abs(one["x"].values[-1] - ds["x"].values[-1]).max() > 1e-3


def test_particles_schedule_noise_continues_one_generator() -> None:
    x0 = _tokens()
    n1, n2 = M1.replace(noise=0.1), M2.replace(noise=0.1)
    s = Schedule([(0.0, n1), (0.5, n2)])
    ds = particles.simulate(s, x0, [0.0, 1.0], method="euler_maruyama", dt=0.05, rng=3)
    gen = np.random.default_rng(3)
    a = particles.simulate(n1, x0, [0.0, 0.5], method="euler_maruyama", dt=0.05, rng=gen)
    b = particles.simulate(n2, a["x"].values[-1], [0.5, 1.0], method="euler_maruyama", dt=0.05,
                           rng=gen)
    np.testing.assert_array_equal(ds["x"].values[-1], b["x"].values[-1])


def test_gaussian_schedule_follows_the_closed_form_layer_by_layer() -> None:
    s = Schedule([(0.0, M1), (0.7, M2)])
    cov0 = 0.1 * np.eye(3)
    t = np.linspace(0.0, 2.0, 5)
    ds = solve_gaussian(s, np.zeros(3), cov0, t, rtol=1e-12, atol=1e-14)
    exact = layered_covariance(s, cov0, t)
    # rtol = 1e-12 per step over ~20 steps, Sigma grows by < 3 here: 1e-9 is a wide margin
    assert np.abs(ds["cov"].values - exact).max() / np.abs(exact).max() < 1e-9
    # a wrong start (the second layer from Sigma_0, not from Sigma(0.7)) is far off
    wrong = layered_covariance(Schedule([(0.0, M2)]), cov0, [0.0, 1.3])[-1]
    assert np.abs(wrong - exact[-1]).max() / np.abs(exact[-1]).max() > 1e-2


def test_gaussian_schedule_blowup_keeps_the_joined_partial_result() -> None:
    s = Schedule([(0.0, M1), (0.7, Model(beta=5.0))])
    with pytest.raises(BlowUpError) as err:
        solve_gaussian(s, np.zeros(3), 0.1 * np.eye(3), np.linspace(0.0, 2.0, 5))
    partial = err.value.dataset
    assert partial is err.value.partial
    assert partial["time"].values[0] == 0.0 and partial["time"].values[1] == 0.5
    assert partial.attrs["successful"] == 0 and partial.attrs["model"] == s.to_json()
    assert partial["time"].values[-1] == 1.5  # the output times reached
    # Sigma^{-1} = 10 - 2 * 0.7 = 8.6 at the switch, then falls at rate 2 beta = 10: t* = 1.56;
    # the solver stops where the eigenvalue reaches 1e10, 1/(10 * 1e10) = 1e-11 before t*
    assert err.value.time == pytest.approx(0.7 + 8.6 / 10.0, rel=1e-8)
    ds = solve_gaussian(s, np.zeros(3), 0.1 * np.eye(3), np.linspace(0.0, 2.0, 5), throw=False)
    assert ds.attrs["successful"] == 0 and ds["time"].values[-1] < 2.0


def test_lagrangian_schedule_equals_the_composition() -> None:
    from meanfield import nodes as mn
    from meanfield import solve_lagrangian

    nodes = mn.circle(lambda th: (1 + 0.5 * np.cos(th) + 0.2 * np.sin(2 * th)) / (2 * np.pi), 32)
    m1, m2 = Model(beta=1.0), Model(beta=3.0, Q=np.diag([1.0, 2.0]))
    s = Schedule([(0.0, m1), (0.7, m2)])
    ds = solve_lagrangian(s, nodes, [0.0, 0.5, 1.0, 2.0], scheme="rk4", dt=0.05)
    a = solve_lagrangian(m1, nodes, [0.0, 0.5, 0.7], scheme="rk4", dt=0.05)
    handed = mn.Nodes(a["x"].values[-1], a["weight"].values, a["density"].values[-1])
    b = solve_lagrangian(m2, handed, [0.7, 1.0, 2.0], scheme="rk4", dt=0.05)
    np.testing.assert_array_equal(ds["time"].values, [0.0, 0.5, 1.0, 2.0])
    np.testing.assert_array_equal(ds["x"].values[-1], b["x"].values[-1])
    np.testing.assert_array_equal(ds["density"].values[-1], b["density"].values[-1])
    # log J carried across the switch: log J_1(0.7) + log J_2 (one addition: bitwise)
    np.testing.assert_array_equal(ds["log_jacobian"].values[-1],
                                  b["log_jacobian"].values[-1] + a["log_jacobian"].values[-1])
    # and the density is rho_0 / J over the whole run, to round-off (exp and log: a few eps)
    rel = np.exp(np.log(nodes.density) - ds["log_jacobian"].values[-1]) / ds["density"].values[-1]
    assert np.abs(rel - 1.0).max() < 1e-13
    with pytest.raises(ValueError, match="noise"):
        solve_lagrangian(Schedule([(0.0, m1), (1.0, m1.replace(noise=0.1))]), nodes, [0.0, 2.0])


def test_spectral_schedule_equals_the_composition_on_the_finest_grid() -> None:
    from meanfield import Circle, solve

    m1, m2 = Model(beta=1.0), Model(beta=4.0)
    s = Schedule([(0.0, m1), (0.7, m2)])

    def rho(th: np.ndarray) -> np.ndarray:
        return (1 + 0.3 * np.cos(th) + 0.1 * np.sin(3 * th)) / (2 * np.pi)

    ds = solve(s, Circle(32), rho, [0.0, 1.0, 2.0, 3.0])
    a = solve(m1, Circle(32), rho, [0.0, 0.7])
    b = solve(m2, Circle(int(a["resolution"].values[-1])), a["density"].values[-1],
              [0.7, 1.0, 2.0, 3.0], max_resolution=256)
    res = ds["resolution"].values
    assert res[0] == 32 and res[-1] > res[0]  # refined inside the pieces: joined on one grid
    assert ds["density"].shape == (4, res[-1])
    np.testing.assert_array_equal(ds["density"].values[-1], b["density"].values[-1])
    assert ds.attrs["successful"] == 1 and ds.attrs["model"] == s.to_json()
    with pytest.raises(ValueError, match="continue_lagrangian"):
        solve(s, Circle(32), rho, [0.0, 1.0], continue_lagrangian=True)


def test_the_result_records_the_schedule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from meanfield.io import model_of, read_netcdf, write_netcdf

    s = Schedule([(0.0, M1), (0.5, M2)])
    ds = particles.simulate(s, _tokens(), [0.0, 1.0])
    write_netcdf(ds, tmp_path / "run.nc")
    assert model_of(read_netcdf(tmp_path / "run.nc")) == s
    assert model_of(particles.simulate(M1, _tokens(), [0.0, 1.0])) == M1


def test_particles_schedule_keeps_the_precision_of_x0() -> None:
    """dtype="float32": every piece runs in float32, the tokens handed over in float32."""
    x0 = _tokens().astype(np.float32)
    s = Schedule([(0.0, M1), (0.5, M2)])
    ds = particles.simulate(s, x0, [0.0, 1.0], method="rk4", dt=0.05, dtype="float32")
    a = particles.simulate(M1, x0, [0.0, 0.5], method="rk4", dt=0.05, dtype="float32")
    b = particles.simulate(M2, a["x"].values[-1].astype(np.float32), [0.5, 1.0], method="rk4",
                           dt=0.05, dtype="float32")
    assert "float32" in json.loads(ds.attrs["settings"])["backend"]
    np.testing.assert_array_equal(ds["x"].values[-1], b["x"].values[-1])


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_no_step_crosses_a_switch(method: str) -> None:
    """After the switch the model has V = 0 (no motion): the tokens at t = 1 are those at the
    switch, whatever the step (0.3 does not divide 0.5), which no step across it could give."""
    x0 = _tokens()
    still = Model(beta=1.0, V=np.zeros((3, 3)))
    ds = particles.simulate(Schedule([(0.0, M1), (0.5, still)]), x0, [0.0, 1.0], method=method,
                            dt=0.3)
    ref = particles.simulate(M1, x0, [0.0, 0.5], method=method, dt=0.3)
    # the steps after the switch only renormalise unit vectors: a few eps (2.2e-16) each
    np.testing.assert_allclose(ds["x"].values[-1], ref["x"].values[-1], rtol=0, atol=1e-14)
    one = particles.simulate(M1, x0, [0.0, 1.0], method=method, dt=0.3)  # the motion is O(0.1)
    assert np.abs(one["x"].values[-1] - ref["x"].values[-1]).max() > 1e-2


def test_a_warning_of_every_piece_is_said_once() -> None:
    """Each piece's monitors warn once per run; a schedule of six layers would say the same
    thing six times (the token study's step near its bound, say): said once, with the count."""
    import warnings

    from meanfield.schedule import _once_per_schedule

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with _once_per_schedule():
            for k in range(3):
                warnings.warn(f"near the stability bound in layer {k}", UserWarning, stacklevel=1)
            warnings.warn("another kind", RuntimeWarning, stacklevel=1)
    said = [str(w.message) for w in record]
    assert said == ["near the stability bound in layer 0 (2 more such warning(s) in later pieces "
                    "of the schedule)", "another kind"]
