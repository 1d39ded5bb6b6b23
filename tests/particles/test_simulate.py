"""simulate: exact reductions (Theorem 6.8), energy laws, integrator orders, sphere
constraint, the Gaussian reduction in R^d (docs/equations.md section 4), result format, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.integrate import solve_ivp

import particles
from meanfield import Model


def _gamma_ode(kind: str, n: int, beta: float):  # type: ignore[no-untyped-def]
    """(6.9) for SA, (6.10) for USA: the common inner product of an orthogonal start."""
    if kind == "softmax":
        return lambda _t, g: (
            2 * np.exp(beta * g) * (1 - g) * ((n - 1) * g + 1)
            / (np.exp(beta) + (n - 1) * np.exp(beta * g))
        )
    return lambda _t, g: (2 / n) * np.exp(beta * g) * (1 - g) * ((n - 1) * g + 1)


def _off_diagonal(x: np.ndarray) -> np.ndarray:
    G = np.einsum("...id,...jd->...ij", x, x)
    i, j = np.triu_indices(x.shape[-2], 1)
    return G[..., i, j]


@pytest.mark.parametrize(
    ("kind", "n", "beta"),
    [
        ("softmax", 4, 0.5),
        ("softmax", 8, 2.0),
        ("softmax", 16, 5.0),
        ("unnormalized", 4, 0.5),
        ("unnormalized", 8, 1.0),
        ("unnormalized", 6, 2.0),
    ],
)
def test_orthogonal_start_follows_theorem_6_8(kind: str, n: int, beta: float) -> None:
    # every pairwise inner product equals gamma(t) of (6.9)/(6.10). Reference: DOP853 at
    # rtol 1e-13. RK4 with dt = 0.005: global error C dt^4; measured 1e-11..2e-8 at
    # dt = 0.01 for these (n, beta), 16x less at dt = 0.005 (order 4), so rel 1e-8 holds
    # with margin; a wrong field gives O(1) errors
    t = np.linspace(0.0, 3.0, 7)
    ref = solve_ivp(_gamma_ode(kind, n, beta), (0, 3), [0.0], t_eval=t, rtol=1e-13,
                    atol=1e-15, method="DOP853").y[0]
    ds = particles.simulate(Model(beta=beta, attention=kind), particles.orthogonal(n, n + 2, 1),
                            t, dt=0.005, observables=False)
    g = _off_diagonal(ds.x.values)
    np.testing.assert_allclose(g[1:], np.broadcast_to(ref[1:, None], g[1:].shape), rtol=1e-8)
    assert np.max(np.abs(g[0])) < 1e-14


@pytest.mark.parametrize("kind", ["softmax", "unnormalized"])
@pytest.mark.parametrize("n", [2, 5])
def test_orthogonal_start_beta_zero_closed_form(kind: str, n: int) -> None:
    # beta = 0: gamma(t) = (e^{2t} - 1)/(e^{2t} + n - 1) (tanh t for n = 2), for SA and USA;
    # RK4 at dt = 0.005 on a rate-2 exponential: global error ~ (2 dt)^4 t / 120 ~ 1e-11
    t = np.linspace(0.0, 2.0, 5)
    ds = particles.simulate(Model(beta=0.0, attention=kind), particles.orthogonal(n, n, 2), t,
                            dt=0.005, observables=False)
    want = np.expm1(2 * t) / (np.exp(2 * t) + n - 1)
    g = _off_diagonal(ds.x.values)
    np.testing.assert_allclose(g[1:], np.broadcast_to(want[1:, None], g[1:].shape), rtol=1e-9)
    if n == 2:
        np.testing.assert_allclose(g[1:, 0], np.tanh(t[1:]), rtol=1e-9)


@pytest.mark.parametrize("kind", ["softmax", "unnormalized"])
@pytest.mark.parametrize("value", [1, -1])
def test_energy_monotone(kind: str, value: int) -> None:
    # docs/equations.md section 2: E never decreases along SA and USA with V = I, never increases for
    # V = -I. Steps may change E by round-off only in the wrong direction: allow 1e-13 E
    x0 = particles.sample_sphere(24, 3, 3, batch=2)
    t = np.linspace(0.0, 4.0, 41)
    ds = particles.simulate(Model(beta=3.0, attention=kind, value=value), x0, t, dt=0.02)
    dE = value * np.diff(ds.energy.values, axis=0)
    assert np.all(dE >= -1e-13 * np.abs(ds.energy.values).max())
    assert np.all(value * ds.dissipation.values >= 0)
    assert np.max(np.abs(dE)) > 1e-3  # it does move


def test_energy_monotone_weighted_metric(random_matrices) -> None:
    # (3.12): SA with Q^T K = V symmetric ascends E of the kernel <Q x, K y>
    R = random_matrices(3, seed=4)[0]
    ds = particles.simulate(Model(beta=2.0, Q=R, K=R, V=R.T @ R),
                            particles.sample_sphere(20, 3, 4), np.linspace(0, 2, 21), dt=0.02)
    assert np.all(np.diff(ds.energy.values) >= -1e-13 * np.abs(ds.energy.values).max())


@pytest.mark.parametrize("kind", ["softmax", "unnormalized"])
def test_energy_change_is_integrated_dissipation(kind: str) -> None:
    # E(T) - E(0) = int_0^T dE/dt dt (docs/equations.md section 2 identities, integrated): Simpson on
    # 201 points (h = 0.01) errs by ~ h^4 max|E''''| T / 180 ~ 1e-10 relative, RK4 at
    # dt = 0.005 by ~ 1e-10; required rel 1e-6
    x0 = particles.sample_sphere(16, 3, 5)
    t = np.linspace(0.0, 2.0, 201)
    ds = particles.simulate(Model(beta=2.0, attention=kind), x0, t, dt=0.005)
    D = ds.dissipation.values
    h = t[1] - t[0]
    simpson = h / 3 * (D[0] + D[-1] + 4 * D[1:-1:2].sum() + 2 * D[2:-1:2].sum())
    dE = ds.energy.values[-1] - ds.energy.values[0]
    assert simpson == pytest.approx(dE, rel=1e-6)


@pytest.mark.parametrize("method", ["rk4", "dopri5", "dop853", "post_ln", "angles"])
def test_tokens_stay_on_the_sphere(method: str) -> None:
    # projection after each step: |x_i| = 1 to round-off (required 1e-12), over 300 steps
    x0 = particles.sample_sphere(12, 2, 6)
    t = np.linspace(0.0, 3.0, 7)
    ds = particles.simulate(Model(beta=4.0), x0, t, method=method,
                            dt=0.5 if method == "post_ln" else None, rtol=1e-8, atol=1e-10)
    assert np.max(np.abs(np.linalg.norm(ds.x.values, axis=-1) - 1)) < 1e-12


def test_methods_agree_with_reference() -> None:
    # dopri5 (rtol 1e-10), rk4 (dt 0.005: error ~ 1e-10) and the angle form against DOP853
    # at rtol 1e-12, on the circle at beta = 4 up to t = 3; tolerances 1e-8 leave 100x for
    # the accumulated local errors
    x0 = particles.sample_sphere(10, 2, 7)
    t = np.linspace(0.0, 3.0, 4)
    model = Model(beta=4.0)
    ref = particles.simulate(model, x0, t, method="dop853", rtol=1e-12, atol=1e-14,
                             observables=False).x.values
    for method, kw in [("dopri5", {"rtol": 1e-10, "atol": 1e-12}), ("rk4", {"dt": 0.005}),
                       ("angles", {"dt": 0.005})]:
        got = particles.simulate(model, x0, t, method=method, observables=False, **kw)
        np.testing.assert_allclose(got.x.values, ref, atol=1e-8, err_msg=method)


def test_rk4_converges_with_order_4(random_matrices) -> None:
    # log-log slope of the error at t = 1 against dt in {0.2, 0.1, 0.05}, reference DOP853
    x0 = particles.sample_sphere(8, 3, 8)
    model = Model(beta=3.0, Q=random_matrices(3, 9)[0])
    ref = particles.simulate(model, x0, [0, 1], method="dop853", rtol=1e-13, atol=1e-15,
                             observables=False).x.values[-1]
    dts = np.array([0.2, 0.1, 0.05])
    err = [np.abs(particles.simulate(model, x0, [0, 1], dt=dt, observables=False).x.values[-1]
                  - ref).max() for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(err), 1)[0]
    assert 3.6 < slope < 4.6


def test_post_ln_layers_converge_to_the_flow_with_order_1() -> None:
    # x <- normalize(x + h attn(x)) is a first-order (projected Euler) scheme for the ODE:
    # error at t = 1 halves with h (slope in [0.8, 1.2])
    x0 = particles.sample_sphere(8, 3, 10)
    model = Model(beta=2.0)
    ref = particles.simulate(model, x0, [0, 1], method="dop853", rtol=1e-12, atol=1e-14,
                             observables=False).x.values[-1]
    hs = np.array([0.1, 0.05, 0.025])
    err = [np.abs(particles.simulate(model, x0, [0, 1], method="post_ln", dt=h,
                                     observables=False).x.values[-1] - ref).max() for h in hs]
    slope = np.polyfit(np.log(hs), np.log(err), 1)[0]
    assert 0.8 < slope < 1.2


def test_post_ln_is_the_layer_map() -> None:
    # one layer by hand
    x0 = particles.sample_sphere(5, 3, 11)
    model = Model(beta=1.0)
    ds = particles.simulate(model, x0, [0.0, 0.25], method="post_ln", dt=0.25)
    y = x0 + 0.25 * particles.attention(model, x0)
    np.testing.assert_allclose(ds.x.values[-1], y / np.linalg.norm(y, axis=-1, keepdims=True),
                               atol=1e-15)
    with pytest.raises(ValueError, match="whole number of layers"):
        particles.simulate(model, x0, [0.0, 0.3], method="post_ln", dt=0.25)


def test_simulate_is_permutation_equivariant_and_causal_is_not() -> None:
    x0 = particles.sample_sphere(10, 3, 12)
    perm = np.random.default_rng(12).permutation(10)
    t = [0.0, 1.0]
    for causal in (False, True):
        model = Model(beta=2.0, causal=causal)
        a = particles.simulate(model, x0, t, observables=False).x.values[-1]
        b = particles.simulate(model, x0[perm], t, observables=False).x.values[-1]
        gap = np.abs(b - a[perm]).max()
        if causal:
            assert gap > 1e-2
            # the first token sees only itself: it does not move
            np.testing.assert_allclose(a[0], x0[0], atol=1e-15)
        else:
            assert gap < 1e-13


def test_batch_equals_separate_runs() -> None:
    x0 = particles.sample_sphere(6, 3, 13, batch=3)
    t = [0.0, 0.5, 1.0]
    ds = particles.simulate(Model(beta=2.0), x0, t)
    assert ds.x.dims == ("time", "batch", "token", "dim")
    assert ds.energy.dims == ("time", "batch")
    for b in range(3):
        one = particles.simulate(Model(beta=2.0), x0[b], t)
        np.testing.assert_allclose(ds.x.values[:, b], one.x.values, atol=1e-15)
        np.testing.assert_allclose(ds.energy.values[:, b], one.energy.values, rtol=1e-13)


@pytest.mark.long
def test_gaussian_start_follows_the_moment_ode() -> None:
    # docs/equations.md section 4: in R^d with softmax, N(m, S) stays Gaussian with
    # m' = V (I + S A) m, S' = V S A S + S A^T S V^T, A = beta K^T Q.
    # 8 000 tokens. The ODE starts from the *empirical* moments of the sample, which
    # removes the pushforward of the initial sampling error; what remains comes from the
    # non-Gaussian sampling fluctuations of the empirical measure (third and fourth
    # moments), O(n^{-1/2}) times t |A| |V|. Scale: sigma_m = sqrt(S_kk(T)/n) and
    # sigma_S = sqrt((S_kk S_ll + S_kl^2)/n), the sampling std of the moments at time T.
    # Over 30 seeds at n = 2000 the errors had rms <= 0.3 sigma (max 0.72 sigma), so a
    # tolerance of 3 sigma has 10x margin (n-independent in sigma units). One RK4 step of
    # 0.5 (fourth order, rate |V (I + S A)| ~ 1.3): against dt = 0.01 it errs by 3e-4 on
    # the mean and 1e-5 on the covariance (measured at n = 2000), < 3 sigma / 25. The
    # moments move by > 10 sigma over [0, T] at n = 20 000, so > 6 sigma at n = 8 000: a
    # wrong field fails.
    Q = np.eye(2)
    K = np.array([[0.5, 0.2], [-0.1, 0.3]])
    V = np.array([[1.0, 0.3], [-0.2, 0.8]])
    beta, T, n = 1.0, 0.5, 8000
    A = beta * K.T @ Q
    x0 = particles.sample_gaussian([0.5, -0.3], [[0.5, 0.1], [0.1, 0.3]], n, 14)
    m0, S0 = particles.mean_covariance(x0)

    def ode(_t: float, y: np.ndarray) -> np.ndarray:
        m, S = y[:2], y[2:].reshape(2, 2)
        return np.concatenate([V @ (np.eye(2) + S @ A) @ m,
                               (V @ S @ A @ S + S @ A.T @ S @ V.T).ravel()])

    yT = solve_ivp(ode, (0, T), np.concatenate([m0, S0.ravel()]), rtol=1e-12,
                   atol=1e-14).y[:, -1]
    mT, ST = yT[:2], yT[2:].reshape(2, 2)
    ds = particles.simulate(Model(beta=beta, Q=Q, K=K, V=V), x0, [0.0, T],
                            geometry="euclidean", dt=T, observables=False)
    m, S = particles.mean_covariance(ds.x.values[-1])
    sig_m = np.sqrt(np.diag(ST) / n)
    sig_S = np.sqrt((np.outer(np.diag(ST), np.diag(ST)) + ST**2) / n)
    assert np.all(np.abs(m - mT) < 3 * sig_m)
    assert np.all(np.abs(S - ST) < 3 * sig_S)
    assert np.max(np.abs(mT - m0) / sig_m) > 10 and np.max(np.abs(ST - S0) / sig_S) > 10


def test_noise_needs_euler_maruyama_and_is_reproducible() -> None:
    model = Model(beta=1.0, noise=0.05)
    x0 = particles.sample_sphere(6, 3, 15)
    with pytest.raises(ValueError, match="euler_maruyama"):
        particles.simulate(model, x0, [0, 1])
    a = particles.simulate(model, x0, [0, 0.1], method="euler_maruyama", dt=0.01, rng=3)
    b = particles.simulate(model, x0, [0, 0.1], method="euler_maruyama", dt=0.01, rng=3)
    np.testing.assert_array_equal(a.x.values, b.x.values)
    assert np.max(np.abs(np.linalg.norm(a.x.values, axis=-1) - 1)) < 1e-12
    assert json.loads(a.attrs["settings"])["seed"] == 3


def test_noise_gives_spherical_brownian_motion_decay() -> None:
    # beta = 0 USA, noise sigma, n tokens: the drift P^perp(mean) is O(|mean|) ~ n^{-1/2};
    # with a single token the drift vanishes exactly (P^perp x = 0) and <x(t), x(0)> has mean
    # e^{-(d-1) sigma t} (spherical Brownian motion). 4000 independent systems, d = 3,
    # sigma t = 0.5: std of the mean ~ sqrt(1/3 / 4000) ~ 0.01; Euler-Maruyama weak error
    # O(dt) ~ 1e-3; tolerance 0.04 (4 sigma)
    model = Model(beta=0.0, attention="unnormalized", noise=0.5)
    x0 = np.tile([1.0, 0.0, 0.0], (4000, 1, 1))
    ds = particles.simulate(model, x0, [0.0, 1.0], method="euler_maruyama", dt=0.01, rng=4,
                            observables=False)
    c = ds.x.values[-1, :, 0, 0].mean()
    assert abs(c - np.exp(-2 * 0.5)) < 0.04


def test_result_attrs_are_netcdf_safe_and_round_trip(tmp_path: Path) -> None:
    model = Model(beta=2.0, attention="l2", Q=np.eye(3))
    x0 = particles.sample_sphere(5, 3, 16)
    ds = particles.simulate(model, x0, [0.0, 0.5], method="dopri5")
    for key, val in ds.attrs.items():
        assert isinstance(val, (str, int, float)), key
    assert Model.from_state(ds.attrs["model"]) == model
    settings = json.loads(ds.attrs["settings"])
    assert settings["method"] == "dopri5" and ds.attrs["rtol"] == 1e-9
    path = tmp_path / "run.nc"
    ds.to_netcdf(path, engine="h5netcdf")
    back = xr.load_dataset(path, engine="h5netcdf")
    np.testing.assert_array_equal(back.x.values, ds.x.values)
    assert back.attrs["model"] == ds.attrs["model"]


def test_extra_settings_are_recorded_and_cannot_change_the_runs_own() -> None:
    """``settings=`` adds entries to ``attrs["settings"]`` through the schema; an entry the
    run records itself is refused before the run (``seed`` only where the run has none: a
    Generator ``rng``)."""
    from meanfield.integrate import check_result_attrs

    x0 = particles.sample_sphere(3, 2, 0)
    ds = particles.simulate(Model(beta=1.0), x0, [0.0, 0.1], rng=np.random.default_rng(5),
                            settings={"seed": 5, "init": "sphere"})
    check_result_attrs(ds.attrs)
    settings = json.loads(ds.attrs["settings"])
    assert settings["seed"] == 5 and settings["init"] == "sphere" and settings["method"] == "rk4"
    with pytest.raises(ValueError, match="settings.*'method'"):
        particles.simulate(Model(beta=1.0), x0, [0.0, 0.1], settings={"method": "euler"})
    with pytest.raises(ValueError, match="settings.*'seed'"):
        particles.simulate(Model(beta=1.0), x0, [0.0, 0.1], rng=3, settings={"seed": 4})
    with pytest.raises(ValueError, match="settings must be a mapping"):
        particles.simulate(Model(beta=1.0), x0, [0.0, 0.1], settings=[("init", "x")])


def test_simulate_angles() -> None:
    th0 = np.random.default_rng(17).uniform(0, 2 * np.pi, (2, 9))
    model = Model(beta=4.0)
    ds = particles.simulate_angles(model, th0, [0.0, 1.0], dt=0.01)
    assert ds.theta.dims == ("time", "batch", "token")
    cart = particles.simulate(model, particles.from_angles(th0), [0.0, 1.0], dt=0.01)
    np.testing.assert_allclose(ds.x.values, cart.x.values, atol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"x0": 2 * np.eye(3)}, "not on the unit sphere"),
        ({"x0": np.full((2, 3), np.nan)}, "non-finite"),
        ({"x0": np.zeros((0, 3))}, "n=0 tokens"),
        ({"x0": np.zeros((2, 0, 3))}, "n=0 tokens"),
        ({"x0": np.eye(4)}, r"3 x 3 but tokens live in R\^4"),
        ({"t": [1.0, 0.5]}, "strictly increasing"),
        ({"t": []}, "non-empty"),
        ({"t": [0.0, np.inf]}, "non-finite"),
        ({"dt": 0.0}, "dt must be finite and > 0"),
        ({"dt": -1.0}, "dt must be finite and > 0"),
        ({"method": "euler"}, "method must be one of"),
        ({"geometry": "torus"}, "geometry must be one of"),
        ({"method": "angles"}, "d = 2"),
        ({"memory_limit": 0}, "memory_limit must be >= 1"),
    ],
)
def test_bad_input(kwargs: dict, match: str) -> None:
    args = {"x0": np.eye(3), "t": [0.0, 0.1]}
    args.update(kwargs)
    x0, t = args.pop("x0"), args.pop("t")
    with pytest.raises(ValueError, match=match):
        particles.simulate(Model(beta=1.0, Q=np.eye(3)), x0, t, **args)


def test_normalize_on_request() -> None:
    x0 = 2.0 * particles.sample_sphere(4, 3, 18)
    ds = particles.simulate(Model(beta=1.0), x0, [0.0, 0.1], normalize=True)
    np.testing.assert_allclose(ds.x.values[0], x0 / 2, atol=1e-15)
    with pytest.raises(ValueError, match="zero token"):
        particles.simulate(Model(beta=1.0), np.zeros((2, 3)), [0, 1], normalize=True)
