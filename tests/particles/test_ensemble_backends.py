"""particles.ensemble and the studies built on it (validation.phase_diagram,
validation.metastability) on the torch backend: the same numbers as NumPy in float64, float32
within its round-off, the backend recorded, bad options named, the command-line flags.

Torch runs on its CPU build here (the test command installs it); a GPU changes only where
the arithmetic runs, not the operations.

Round-off argument for the float64 tolerances (used throughout): both backends perform the
same operations in the same order, except inside the batched matrix products, where the
BLAS of NumPy and torch's own kernels may add the ``n + m + 1 <= 20`` terms of a dot product
in another order. Each entry then differs by at most ``(n + m + 1) u |terms| ~ 20 * 1.1e-16
~ 2e-15`` (``u`` the unit round-off, terms of size <= 1), the exponentials multiply relative
differences by ``beta * |exponent| <= 2 beta <= 10``, and the velocity, of size <= 2, differs
by ``<~ 1e-13``. Along a run these differences are carried by the linearised flow, which
contracts as the tokens cluster and grows by at most ``e^{L t}`` with ``L ~ 2 beta`` at the
start; for ``beta t <= 4`` and ``<= 30`` RK4 steps the states stay within ``1e-12``
(measured: about 1e-15).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")

from meanfield.cli import main  # noqa: E402
from particles.ensemble import ensemble_states, ensemble_velocity, simulate_ensemble  # noqa: E402
from validation.metastability import cluster_counts, trajectories  # noqa: E402
from validation.phase_diagram import phase_diagram, sample_matrices, sample_tokens  # noqa: E402

FLOAT64 = 1e-12
"""numpy vs torch, float64: see the module docstring."""

U32 = float(np.finfo(np.float32).eps) / 2
FLOAT32 = 1e-4
"""float32 vs float64 states: every RK4 step commits a relative round-off of about
``(n + m + 2) u32 ~ 12 * 6e-8 ~ 7e-7`` (sums of ``n + m + 1`` terms, one exponential, one
division); over the ``<= 17`` steps below, on a flow that contracts as the tokens cluster,
that is ``<~ 1.2e-5``; the bound leaves a factor 8 for the exponentials (``beta <= 2``)."""


def _matrices(rng, r, m):
    return sample_matrices(rng, r, m, "ginibre", "goe")


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("general", [False, True])
def test_velocity_numpy_and_torch_agree(attention, general):
    rng = np.random.default_rng(0)
    x = sample_tokens(rng, 5, 8, 4)
    bilinear, value = _matrices(rng, 5, 4) if general else (None, None)
    softmax = attention == "softmax"
    v, w = ensemble_velocity(x, 3.0, softmax, bilinear, value)
    tx = torch.as_tensor(x)
    tb = None if bilinear is None else torch.as_tensor(bilinear)
    tv = None if value is None else torch.as_tensor(value)
    vt, wt = ensemble_velocity(tx, 3.0, softmax, tb, tv)
    assert isinstance(vt, torch.Tensor) and vt.dtype == torch.float64
    assert np.abs(v).max() > 0.1  # not a trivially small field
    np.testing.assert_allclose(vt.numpy(), v, rtol=0, atol=FLOAT64)
    np.testing.assert_allclose(wt.numpy(), w, rtol=FLOAT64, atol=0)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("case", ["identity", "matrices", "freeze"])
def test_states_numpy_and_torch_agree(attention, case):
    rng = np.random.default_rng(1)
    x0 = sample_tokens(rng, 48, 8, 2 if case == "freeze" else 3)
    beta = 2.0 if attention == "softmax" else 1.0
    t = np.linspace(0, 2.0, 9)
    kw: dict = {"attention": attention, "dt": 0.1}
    if case == "matrices":
        kw["bilinear"], kw["value"] = _matrices(rng, 48, 3)
    if case == "freeze":
        kw["freeze_above"] = 1 - 1e-3
        t = np.linspace(0, 15.0, 16)  # long enough for most realisations to freeze
        kw["dt"] = 0.3
    ref = ensemble_states(x0, beta, t, **kw)
    out = ensemble_states(x0, beta, t, backend="torch", **kw)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=0, atol=FLOAT64)
    if case == "freeze":
        gram = ref[-1] @ ref[-1].swapaxes(-1, -2)
        assert (gram.min(axis=(1, 2)) >= 1 - 1e-3).mean() > 0.25  # the freezing path ran


def test_a_torch_start_runs_on_torch_and_the_output_is_host_numpy():
    x0 = sample_tokens(np.random.default_rng(2), 4, 6, 3)
    seen: list = []
    sol = simulate_ensemble(torch.as_tensor(x0), 1.5, [0.0, 0.5, 1.0],
                            lambda k, t, x: seen.append((type(x), x.dtype, x.copy())))
    assert isinstance(sol.y, torch.Tensor)  # the state stayed on torch for the whole run
    assert all(tp is np.ndarray and dt == np.float64 for tp, dt, _ in seen)
    np.testing.assert_allclose(np.array([s for *_, s in seen]),
                               ensemble_states(x0, 1.5, [0.0, 0.5, 1.0]), atol=FLOAT64)
    x0t = torch.as_tensor(x0).clone()
    ensemble_states(x0t, 1.5, [0.0, 1.0], freeze_above=0.5)
    np.testing.assert_array_equal(x0t.numpy(), x0)  # the start is not written to


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_float32_within_its_round_off(backend):
    x0 = sample_tokens(np.random.default_rng(3), 32, 8, 3)
    t = np.linspace(0, 5.0, 11)
    ref = ensemble_states(x0, 2.0, t)
    out = ensemble_states(x0, 2.0, t, backend=backend, dtype="float32")
    assert out.dtype == np.float32
    err = np.abs(out - ref).max()
    # a float64 run would be off by ~1e-15, far below U32 / 100: float32 did run, within its bound
    assert U32 / 100 < err <= FLOAT32, err


def test_phase_diagram_same_probabilities_on_numpy_and_torch(tmp_path):
    kw = dict(n=8, d=2, betas=[1.0, 4.0], t_max=4.0, times=5, realizations=64, progress=False)
    ref = phase_diagram(**kw)
    out = phase_diagram(**kw, backend="torch")
    # the indicators <x_1, x_2> >= 1 - delta differ only if an inner product lies within
    # ~1e-12 (module docstring) of the threshold: never, for these 64 x 2 x 7 values
    np.testing.assert_array_equal(out["probability"].values, ref["probability"].values)
    np.testing.assert_array_equal(out["pair_probability"].values, ref["pair_probability"].values)
    np.testing.assert_allclose(out["mean_inner_product"].values, ref["mean_inner_product"].values,
                               atol=FLOAT64)
    assert 0 < ref["probability"].values[:, -1].max() and ref["probability"].values.min() < 1
    settings = json.loads(out.attrs["settings"])
    assert (settings["backend"], settings["device"], settings["dtype"]) == ("torch", "cpu",
                                                                            "float64")
    assert json.loads(ref.attrs["settings"])["backend"] == "numpy"
    single = phase_diagram(**kw, backend="torch", dtype="float32")
    # float32 moves an inner product by <~ 1e-5 (FLOAT32), far below delta = 1e-3: at most a
    # start or two (of 64) that sit that close to the threshold at an output time may flip
    assert np.abs(single["probability"].values - ref["probability"].values).max() <= 2 / 64
    assert json.loads(single.attrs["settings"])["dtype"] == "float32"


def test_resume_refuses_a_store_made_with_another_backend(tmp_path):
    kw = dict(n=4, d=2, betas=[1.0, 2.0], t_max=1.0, times=3, realizations=4, progress=False,
              store=tmp_path / "cells")
    phase_diagram(**kw)
    with pytest.raises(ValueError,
                       match="differs from this one in backend \\('numpy' stored, 'torch' now\\)"):
        phase_diagram(**kw, resume=True, backend="torch")
    phase_diagram(**kw, resume=True)  # the same backend resumes


def test_metastability_on_torch():
    kw = dict(betas=(4.0,), n=8, t_max=3.0, times=7)
    ref, out = trajectories(**kw), trajectories(**kw, backend="torch")
    np.testing.assert_allclose(out["theta"].values, ref["theta"].values, atol=FLOAT64)
    assert json.loads(out.attrs["settings"])["backend"] == "torch cpu float64"
    counts = cluster_counts(**kw, seeds=16, progress=False, backend="torch", dtype="float32")
    np.testing.assert_array_equal(counts["clusters"].values,
                                  cluster_counts(**kw, seeds=16, progress=False)["clusters"].values)
    assert json.loads(counts.attrs["settings"])["dtype"] == "float32"


@pytest.mark.parametrize(("kw", "match"), [
    ({"backend": "jax"}, "backend must be one of"),
    ({"dtype": "float16"}, "dtype must be one of"),
    ({"backend": "torch", "device": "gpu"}, "device must be a torch device"),
    ({"device": "cuda"}, "device='cuda' needs backend='torch'"),
])
def test_bad_backend_options_are_named(kw, match):
    x0 = sample_tokens(np.random.default_rng(4), 2, 4, 2)
    with pytest.raises(ValueError, match=match):
        simulate_ensemble(x0, 1.0, [0.0, 1.0], lambda *a: None, **kw)
    with pytest.raises(ValueError, match=match):
        phase_diagram(n=4, d=2, betas=[1.0], t_max=1.0, times=3, realizations=2,
                      progress=False, **kw)
    with pytest.raises(ValueError, match=match):
        cluster_counts(betas=(1.0,), n=4, seeds=2, t_max=1.0, times=3, progress=False, **kw)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_refused():
    with pytest.raises(ValueError, match="torch sees no CUDA device"):
        phase_diagram(n=4, d=2, betas=[1.0], t_max=1.0, times=3, realizations=2,
                      progress=False, backend="torch", device="cuda")


def test_cli_backend_flags(tmp_path, capsys):
    out = tmp_path / "pd.nc"
    base = ["phase-diagram", "--n", "4", "--d", "2", "--betas", "2", "--t-max", "1", "--times",
            "3", "--realizations", "4", "--no-progress", "--out", str(out)]
    assert main([*base, "--backend", "torch", "--device", "cpu", "--dtype", "float32"]) == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        settings = json.loads(ds.attrs["settings"])
    assert (settings["backend"], settings["device"], settings["dtype"]) == ("torch", "cpu",
                                                                            "float32")
    assert main([*base, "--overwrite", "--backend", "torch", "--device", "gpu"]) == 2
    assert "device must be a torch device" in capsys.readouterr().err
    assert main([*base, "--overwrite", "--backend", "jax"]) == 2
    assert "--backend must be one of" in capsys.readouterr().err
    out = tmp_path / "ms.nc"
    assert main(["metastability", "--beta", "4", "--seeds", "4", "--t-max", "2", "--times",
                 "5", "--out", str(out), "--no-progress", "--backend", "torch", "--dtype",
                 "float32"]) == 0
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert json.loads(ds.attrs["settings"])["backend"] == "torch"
    assert main(["metastability", "--out", str(out), "--overwrite", "--dtype", "float16"]) == 2
    assert "--dtype must be one of" in capsys.readouterr().err
