"""``particles.simulate`` on the torch backend (CPU here; CUDA where torch sees one) against
the NumPy backend: every attention variant, every integrator, float32, the options' errors
and the command-line flags."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")


from meanfield import Model  # noqa: E402
from meanfield.cli import main  # noqa: E402
from particles import simulate  # noqa: E402

AGREE = 1e-12
"""numpy vs torch in float64, relative to ``max |x|``. Both backends do the same float64
operations in another summation order (BLAS vs torch's matmul, the tiled softmax vs
``scaled_dot_product_attention``), ~1e-15 per velocity evaluation; a run adds one such error
per stage and the flow amplifies a perturbation by at most ``e^{L t}``. Here ``L t <= 2``
(``beta <= 2``, matrices near the identity, ``t <= 0.4``) and at most ~100 stages: ``<= 1e-15
* 100 * e^2 ~ 1e-12`` (measured: a few 1e-16 to 1e-15)."""

EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One intra-op thread: tiny tensors on a busy 2-core machine otherwise spend their time
    in thread hand-offs (10x slower); the numbers do not depend on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sphere(unit):
    """``sphere(batch, n, d, seed=0)``: ``batch x n`` tokens on ``S^{d-1}`` (normalised
    Gaussians)."""
    def draw(batch: int, n: int, d: int, seed: int = 0) -> np.ndarray:
        return unit(np.random.default_rng(seed).standard_normal((batch, n, d)))
    return draw


def _feedforward(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(5)
    return 0.5 * g.standard_normal((d, 4)), g.standard_normal((4, d)), g.standard_normal(4)


VARIANTS = ("softmax-QKV", "unnormalized", "multi-head", "l2", "sigmoid", "sinkhorn", "causal",
            "feedforward-tanh")


@pytest.fixture(scope="module")
def variants(random_matrices) -> dict[str, Model]:
    """The models of :data:`VARIANTS`, in ``d = 3``."""
    models = _variants(3, random_matrices)
    assert tuple(models) == VARIANTS  # every variant is parametrized, under its name
    return models


def _variants(d: int, random_matrices) -> dict[str, Model]:
    Q, K, V = random_matrices(d, 1)
    heads = [random_matrices(d, 2, 0.3), random_matrices(d, 3, 0.3)]
    return {
        "softmax-QKV": Model(1.5, Q=Q, K=K, V=V),
        "unnormalized": Model(1.0, attention="unnormalized"),
        "multi-head": Model(1.0, heads=heads),
        "l2": Model(1.5, attention="l2", Q=Q, K=K),
        "sigmoid": Model(2.0, attention="sigmoid", sigmoid_bias=-0.5),
        "sinkhorn": Model(1.0, attention="sinkhorn"),
        "causal": Model(2.0, causal=True, V=V),
        "feedforward-tanh": Model(1.0, feedforward=_feedforward(d), activation="tanh"),
    }

METHODS_XYZ = {"rk4": 0.05, "dopri5": None, "post_ln": 0.1, "euler_maruyama": 0.02}


def _run(model: Model, x0: Any, t: np.ndarray, method: str, **kw: Any) -> xr.Dataset:
    if method == "euler_maruyama":
        model = dataclasses.replace(model, noise=0.05)
    return simulate(model, x0, t, method=method, dt=METHODS_XYZ.get(method, 0.05),
                    rtol=1e-8, atol=1e-10, rng=7, **kw)


def _rel(a: xr.Dataset, b: xr.Dataset, var: str = "x") -> float:
    return float(np.max(np.abs(a[var].values - b[var].values)) / np.max(np.abs(a[var].values)))


@pytest.mark.parametrize("method", list(METHODS_XYZ))
@pytest.mark.parametrize("variant", VARIANTS)
def test_numpy_and_torch_agree(variant: str, method: str, sphere, variants) -> None:
    """Every attention variant under every integrator of the tokens (angles: below): the
    trajectories at every output time agree to :data:`AGREE`, the energy and dissipation too
    (computed on the host from those states: the same bound); the noise of Euler–Maruyama is
    drawn on the host, so both backends see the same increments (else they would differ by
    O(sqrt(sigma t)), not round-off)."""
    model = variants[variant]
    t = np.array([0.0, 0.1, 0.2])
    x0 = sphere(2, 8, 3)
    a = _run(model, x0, t, method)
    b = _run(model, x0, t, method, backend="torch")
    assert a.x.shape == b.x.shape == (3, 2, 8, 3)
    assert _rel(a, b) <= AGREE
    for var in ("energy", "dissipation"):
        if variant == "sinkhorn" and var == "dissipation":
            continue  # no energy structure: NaN on both (checked equal below)
        np.testing.assert_allclose(b[var].values, a[var].values, rtol=AGREE, atol=AGREE,
                                   equal_nan=True)
    assert a.attrs["num_steps"] == b.attrs["num_steps"]  # same step sequence (dopri5 too)
    assert json.loads(b.attrs["settings"])["backend"] == "torch cpu float64"
    assert json.loads(a.attrs["settings"])["backend"] == "numpy float64"


@pytest.mark.parametrize("model", [Model(2.0), Model(1.0, attention="unnormalized", value=-1),
                                   Model(2.0, causal=True)], ids=["SA", "USA-repulsive", "causal"])
def test_angles_agree(model: Model, sphere) -> None:
    """The circle in angles (7.1): the angle velocity runs on torch too."""
    t = np.array([0.0, 0.2, 0.4])
    x0 = sphere(2, 10, 2, seed=4)
    a = simulate(model, x0, t, method="angles", dt=0.05)
    b = simulate(model, x0, t, method="angles", dt=0.05, backend="torch")
    assert _rel(a, b) <= AGREE and _rel(a, b, "theta") <= AGREE
    np.testing.assert_allclose(b.energy.values, a.energy.values, rtol=AGREE)


def test_euclidean_agrees(random_matrices) -> None:
    """Tokens in R^d (no projection, (9.1)) with general Q, K, V."""
    Q, K, V = random_matrices(2, 8)
    model = Model(1.0, Q=Q, K=K, V=V)
    x0 = np.random.default_rng(2).standard_normal((10, 2))
    t = np.array([0.0, 0.2, 0.4])
    a = simulate(model, x0, t, geometry="euclidean", dt=0.05)
    b = simulate(model, x0, t, geometry="euclidean", dt=0.05, backend="torch")
    assert _rel(a, b) <= AGREE


def test_a_tensor_input_gives_the_same_dataset(sphere) -> None:
    """A torch tensor ``x0`` runs on torch (its device and dtype) and returns the Dataset a
    NumPy ``x0`` does: same variables, dims, coordinates, host float64, same attrs except
    the backend in ``settings`` and the wall time; values to :data:`AGREE`."""
    model = Model(2.0)
    t = np.linspace(0.0, 0.3, 4)
    x0 = sphere(1, 12, 3, seed=3)[0]
    xt = torch.tensor(x0)
    a = simulate(model, x0, t)
    b = simulate(model, xt, t)
    c = simulate(model, x0, t, backend="torch")
    assert torch.equal(xt, torch.tensor(x0))  # the input is not touched
    assert isinstance(b.x.values, np.ndarray) and b.x.dtype == np.float64
    assert json.loads(b.attrs["settings"])["backend"] == "torch cpu float64"
    xr.testing.assert_identical(b.drop_attrs(), c.drop_attrs())
    xr.testing.assert_allclose(a.drop_attrs(), b.drop_attrs(), rtol=AGREE, atol=AGREE)
    assert set(a.attrs) == set(b.attrs)
    skip = {"settings", "wall_time_s", "created"}
    np.testing.assert_equal({k: v for k, v in a.attrs.items() if k not in skip},
                            {k: v for k, v in b.attrs.items() if k not in skip})  # NaN == NaN
    sa, sb = json.loads(a.attrs["settings"]), json.loads(b.attrs["settings"])
    assert sa.pop("backend") == "numpy float64" and sb.pop("backend") == "torch cpu float64"
    assert sa == sb
    # a float32 tensor runs in float32 (dtype from the tensor)
    f = simulate(model, xt.float(), t)
    assert json.loads(f.attrs["settings"])["backend"] == "torch cpu float32"


@pytest.mark.parametrize("method", ["rk4", "dopri5", "euler_maruyama", "angles"])
def test_float32_runs(method: str, sphere) -> None:
    """``dtype="float32"`` runs the whole state in float32, on NumPy and on torch. Each step
    rounds the state and the velocity to float32: a relative error of a few ``eps32`` per step
    (the velocity is a sum of ``n`` terms: ``n eps32`` at worst), carried along by the flow
    with a factor ``<= e^{L t} <= e^2`` here; over ``N`` steps at most ``N n eps32 e^2``
    (``N = 8``, ``n = 8``: 4e-5). The errors are also at least ~``eps32`` (one rounding of
    ``x0`` already is): a float64 run in disguise would agree to 1e-15."""
    d = 2 if method == "angles" else 3
    model = Model(2.0, noise=0.05 if method == "euler_maruyama" else 0.0)
    t = np.array([0.0, 0.2, 0.4])
    x0 = sphere(2, 8, d, seed=6)
    kw: dict[str, Any] = {"method": method, "dt": 0.05, "rng": 7, "rtol": 1e-6, "atol": 1e-8}
    ref = simulate(model, x0, t, **kw)
    steps = max(ref.attrs["num_steps"], 8)
    tol = steps * 8 * EPS32 * np.exp(2.0)
    runs = {name: simulate(model, x0, t, dtype="float32", backend=name, **kw)
            for name in ("numpy", "torch")}
    for name, r in runs.items():
        assert json.loads(r.attrs["settings"])["backend"].endswith("float32")
        if method == "dopri5":  # its own step sequence at float32 error estimates: + rtol
            assert _rel(ref, r) <= tol + 10 * kw["rtol"], name
        else:
            assert EPS32 / 100 < _rel(ref, r) <= tol, name
    assert _rel(runs["numpy"], runs["torch"]) <= tol + (10 * kw["rtol"] if method == "dopri5" else 0)


def test_bad_options_name_the_field(sphere) -> None:
    model = Model(1.0)
    x0 = sphere(1, 4, 3)[0]
    t = [0.0, 0.1]
    with pytest.raises(ValueError, match="backend"):
        simulate(model, x0, t, backend="jax")
    with pytest.raises(ValueError, match="dtype"):
        simulate(model, x0, t, dtype="float16")
    with pytest.raises(ValueError, match="dtype"):
        simulate(model, torch.tensor(x0, dtype=torch.float16), t)
    with pytest.raises(ValueError, match="device"):
        simulate(model, x0, t, device="cuda")  # numpy runs on the CPU
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            simulate(model, x0, t, backend="torch", device="cuda")
    with pytest.raises(ValueError, match="dop853.*backend"):
        simulate(model, x0, t, method="dop853", backend="torch")
    with pytest.raises(ValueError, match="dop853.*float64"):
        simulate(model, x0, t, method="dop853", dtype="float32")
    with pytest.raises(ValueError, match="x0"):  # checked on a host copy
        simulate(model, torch.tensor(2.0 * x0), t)
    # float32 tokens are on the sphere to float32 round-off (accepted), not to 1e-3
    simulate(model, torch.tensor(x0, dtype=torch.float32), t, observables=False)
    with pytest.raises(ValueError, match="x0.*sphere"):
        simulate(model, torch.tensor(1.001 * x0, dtype=torch.float32), t)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_cuda_agrees() -> None:  # pragma: no cover - no GPU in CI
    model = Model(2.0)
    t = np.array([0.0, 0.2, 0.4])
    x0 = sphere(2, 16, 3)
    a = simulate(model, x0, t, dt=0.05)
    b = simulate(model, torch.tensor(x0, device="cuda"), t, dt=0.05)
    assert json.loads(b.attrs["settings"])["backend"].startswith("torch cuda")
    assert _rel(a, b) <= AGREE


def test_cli_backend_flags(tmp_path: Path, capsys: Any, sphere) -> None:
    """``--backend torch --dtype float32`` reach simulate (recorded in the file); a CUDA
    device for NumPy exits 2 naming the option."""
    common = ["particles", "--n", "6", "--d", "3", "--t-max", "0.2", "--times", "3",
              "--seed", "2", "--dt", "0.05", "--no-progress", "--no-observables"]
    assert main([*common, "--out", str(tmp_path / "a.nc")]) == 0
    assert main([*common, "--backend", "torch", "--dtype", "float32",
                 "--out", str(tmp_path / "b.nc")]) == 0
    a = xr.load_dataset(tmp_path / "a.nc", engine="h5netcdf")
    b = xr.load_dataset(tmp_path / "b.nc", engine="h5netcdf")
    assert json.loads(b.attrs["settings"])["backend"] == "torch cpu float32"
    assert json.loads(a.attrs["settings"])["backend"] == "numpy float64"
    assert EPS32 / 100 < _rel(a, b) <= 4 * 6 * EPS32 * np.exp(2.0)  # as test_float32_runs
    assert main([*common, "--device", "cuda", "--out", str(tmp_path / "c.nc")]) == 2
    assert "device" in capsys.readouterr().err
    assert not (tmp_path / "c.nc").exists()
