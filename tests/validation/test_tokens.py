"""The real-model study's plumbing (validation.tokens, ``meanfield tokens``).

Most tests run on :func:`particles.trained.random_encoder` (a small random BERT, no extra
needed); one runs the CLI on the real model and skips, naming the extra, when it is missing.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from meanfield import Model
from meanfield.integrate import RESULT_ATTRS, check_result_attrs, settings_of
from meanfield.io import read_netcdf, write_netcdf
from particles import energy, sample_sphere
from particles.trained import MODELS_EXTRA, random_encoder
from validation import tokens

PASSAGES = ["one two three four five six seven", "alpha beta gamma delta epsilon"]


@pytest.fixture
def tiny(rng):
    return random_encoder(rng)


def test_split_passages_and_builtin_corpus():
    text = "# a comment\nfirst  para\ncontinues\n\n\nsecond\n"
    assert tokens.split_passages(text) == ["first para continues", "second"]
    with pytest.raises(ValueError, match="empty"):
        tokens.split_passages("# only a comment\n\n  \n")
    corpus = tokens.builtin_corpus()
    assert len(corpus) >= 3 and all(len(p.split()) > 20 for p in corpus)


def test_cloud_statistics_exact_configurations(rng):
    d = 6
    eye = np.eye(d)  # pairwise orthogonal: every <y_i, y_j> = 0
    st = tokens.cloud_statistics(eye, bins=4, betas=(1.0, 4.0), delta=0.1)
    assert st["mean_inner_product"] == 0.0 and st["fraction_above"] == 0.0
    assert st["clusters"] == d
    assert st["effective_rank"] == pytest.approx(d, rel=1e-12)
    np.testing.assert_allclose(st["histogram"], [0, 0, 2, 0])  # all mass in the bin [0, 0.5)
    same = np.tile(eye[:1], (5, 1))  # one point: every <y_i, y_j> = 1
    st = tokens.cloud_statistics(same, bins=4, betas=(2.0,))
    assert st["mean_inner_product"] == 1.0 and st["fraction_above"] == 1.0
    assert st["clusters"] == 1 and st["effective_rank"] == pytest.approx(1.0, abs=1e-12)
    # E_beta of one point: (e^beta - 1) / (2 beta), docs/equations.md section 2
    assert st["energy"][0] == pytest.approx(np.expm1(2.0) / 4.0, rel=1e-14)
    y = sample_sphere(20, 3, rng)
    st = tokens.cloud_statistics(y, bins=10)
    assert np.sum(st["histogram"]) * 0.2 == pytest.approx(1.0, rel=1e-12)
    assert st["energy"][1] == pytest.approx(energy(Model(4.0), y), rel=1e-14)


def test_cloud_statistics_bad_options():
    with pytest.raises(ValueError, match="bins"):
        tokens.token_study(None, PASSAGES, bins=0)
    with pytest.raises(ValueError, match="delta"):
        tokens.token_study(None, PASSAGES, delta=0.0)
    with pytest.raises(ValueError, match="betas"):
        tokens.token_study(None, PASSAGES, betas=(-1.0,))
    with pytest.raises(ValueError, match="passages"):
        tokens.token_study(None, [])


def test_token_study_dataset(tiny, tmp_path):
    ds = tokens.token_study(tiny, PASSAGES, bins=8, betas=(1.0, 9.0))
    L1 = tiny.num_layers + 1
    assert ds.hidden_states.dims == ("passage", "layer", "token", "dim")
    assert ds.hidden_states.shape == (2, L1, 9, tiny.dim)
    assert list(ds.n_tokens.values) == [9, 7]
    assert np.all(np.isnan(ds.hidden_states.isel(passage=1, token=slice(7, None))))
    np.testing.assert_allclose(ds.hidden_states.isel(passage=0).values,
                               tiny.hidden_states(PASSAGES[0]), rtol=1e-6)  # float32 storage
    assert ds.tokens.values[1, 0] == "[CLS]" and ds.tokens.values[1, 6] == "[SEP]"
    widths = np.diff(np.linspace(-1, 1, 9))
    np.testing.assert_allclose((ds.histogram * widths[0]).sum("bin"), 1.0, rtol=1e-12)
    assert ds.energy.dims == ("passage", "layer", "beta")
    path = write_netcdf(ds, tmp_path / "tokens.nc")
    back = read_netcdf(path)
    check_result_attrs(ds.attrs)  # the schema's keys alone: meanfield_version, never version
    assert set(back.attrs) == set(RESULT_ATTRS)  # also as read back
    assert ds.attrs["solver"] == "validation.tokens.token_study" and ds.attrs["successful"] == 1
    assert json.loads(ds.attrs["model"]) == {"encoder": "random"}
    assert ds.attrs["t_reached"] == tiny.num_layers and ds.attrs["scheme"] == ""
    settings = settings_of(ds)
    assert settings.pop("normalisation").startswith("y_i = x_i / |x_i|")
    assert settings == {"bins": 8, "betas": [1.0, 9.0], "delta": 0.1}
    assert back.tokens.values[0, 1] == "one"
    np.testing.assert_array_equal(back.clusters.values, ds.clusters.values)


def test_token_study_energy_beyond_float64(tiny):
    """Issue 21: E_beta of unit clouds overflows beyond beta ~ 710; log_energy keeps it (at
    1e300 too), equal to log(energy) to round-off where both are finite, and the padding NaNs
    of hidden_states carry their note."""
    from meanfield.finite import unexplained_nonfinite

    ds = tokens.token_study(tiny, PASSAGES, bins=8, betas=(1.0, 1e3, 1e300))
    assert unexplained_nonfinite(ds) == []
    assert np.all(np.isinf(ds.energy.sel(beta=1e3))) and ds.energy.attrs["note"]
    assert np.all(np.isfinite(ds.log_energy))
    np.testing.assert_allclose(ds.log_energy.sel(beta=1.0), np.log(ds.energy.sel(beta=1.0)),
                               rtol=1e-13)  # the same tiles: a few ulps
    # log E <= beta max <y_i, y_j> = beta (unit tokens), and >= beta - log(2 beta n^2 / n):
    # the diagonal alone gives n e^beta / n^2
    n = ds.n_tokens.values[:, None]
    big = ds.log_energy.sel(beta=1e3).values
    assert np.all(big <= 1e3) and np.all(big >= 1e3 - np.log(2e3 * n))
    assert "note" in ds.hidden_states.attrs


def test_fit_toy_beta_recovers_a_known_beta(rng):
    y0 = sample_sphere(16, 3, rng)
    y1 = tokens._toy_cloud(y0, 3.0, 0.25)
    beta, w1 = tokens.fit_toy_beta(y0, y1, dt=0.25, bounds=(0.0, 10.0))
    # the objective is zero at beta = 3; Brent's bracket stops within xatol = 0.1 of it
    assert beta == pytest.approx(3.0, abs=0.2)
    assert w1 < 0.01


def test_dynamics_study_dataset(tiny):
    ds = tokens.dynamics_study(tiny, PASSAGES, bins=8, dt=0.125,  # h L = 1.0 < 2.785 (L = 8.03)
                          variants=("attention", "attention+ff", "post_ln", "post_ln+ff"))
    assert list(ds.variant.values) == ["real", "attention", "attention+ff", "post_ln",
                                       "post_ln+ff"]
    assert ds.w1.dims == ("variant", "passage", "layer")
    real = ds.sel(variant="real")
    np.testing.assert_array_equal(real.w1, 0.0)
    np.testing.assert_allclose(real.kernel_distance, 0.0, atol=1e-6)  # sqrt of round-off
    np.testing.assert_allclose(real.explained.isel(layer=slice(1, None)), 1.0, rtol=1e-12)
    for v in tokens.VARIANTS:  # every variant starts from the real layer-0 cloud
        assert float(ds.w1.sel(variant=v).isel(layer=0).max()) == 0.0
    assert np.all(np.isnan(ds.toy_beta.isel(layer=0)))
    lo, hi = tokens.DEFAULTS["beta_bounds"]
    assert np.all((ds.toy_beta.isel(layer=slice(1, None)) >= lo)
                  & (ds.toy_beta.isel(layer=slice(1, None)) <= hi))
    check_result_attrs(ds.attrs)
    model = json.loads(ds.attrs["model"])
    assert model["encoder"] == "random" and set(model["dynamics"]) == {
        "layer model", "attention", "attention+ff", "post_ln", "post_ln+ff"}
    assert ds.attrs["solver"] == "validation.tokens.dynamics_study"
    assert ds.attrs["scheme"] == "rk4" and ds.attrs["dt"] == 0.125
    assert settings_of(ds)["dt"] == 0.125 and ds.attrs["t_reached"] == tiny.num_layers
    with pytest.raises(ValueError, match="dt"):
        tokens.dynamics_study(tiny, PASSAGES, dt=0.0)
    with pytest.raises(ValueError, match="variants"):
        tokens.dynamics_study(tiny, PASSAGES, variants=("nope",))


def test_post_ln_variant_is_the_discrete_step(tiny):
    """One post_ln layer is normalize(y + attn(y)) with the layer's sphere Model."""
    from particles import attention

    states = tiny.hidden_states(PASSAGES[0])
    y0 = tokens._unit(states[0])
    r = np.linalg.norm(states[:-1], axis=-1).mean(axis=-1)
    out = tokens._run_dynamics(tiny, y0, r, "post_ln", 0.5)
    model = tiny.layer_model(0, radius=float(r[0]))
    want = y0 + attention(model, y0)
    np.testing.assert_allclose(out[1], tokens._unit(want), atol=1e-12)


def test_figures_and_table(tiny):
    import matplotlib.pyplot as plt

    tok = tokens.token_study(tiny, PASSAGES, bins=8)
    dyn = tokens.dynamics_study(tiny, PASSAGES, bins=8, dt=0.125, fit_beta=False)  # RK4 stable: see above
    for fig in (tokens.plot_figure1(tok), tokens.plot_summary(tok), tokens.plot_dynamics(dyn)):
        assert len(fig.axes) >= tiny.num_layers + 1 or fig.axes
        plt.close(fig)
    for table in (tokens.summary_table(tok), tokens.dynamics_table(dyn)):
        assert table.count("\n") == tiny.num_layers + 2  # header, rule, one row per layer


def test_cli_errors(tmp_path, capsys):
    from meanfield.cli import main

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(["tokens", "--text", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["tokens", "--text", str(tmp_path / "nope.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_follows_the_conventions_of_the_other_commands(tmp_path, capsys, monkeypatch):
    # defaults from the study's own table, shown in --help; --progress/--no-progress;
    # --overwrite; outputs checked before the model is even loaded
    from meanfield.cli import build_parser, main
    from particles import trained

    args = build_parser().parse_args(["tokens"])
    assert (args.bins, args.delta, args.dt) == (tokens.DEFAULTS["bins"], tokens.DEFAULTS["delta"],
                                                tokens.DEFAULTS["dt"])
    assert args.progress is True and args.overwrite is False
    assert build_parser().parse_args(["tokens", "--no-progress"]).progress is False
    with pytest.raises(SystemExit):
        main(["tokens", "--help"])
    text = capsys.readouterr().out
    for shown in ("(default: 40)", "(default: 0.1)", "(default: 0.25)", "(default: all)",
                  "(default: meanfield-tokens)", "--no-progress", "--overwrite"):
        assert shown in text, shown
    monkeypatch.setattr(trained, "load_minilm", lambda: pytest.fail("loaded the model"))
    out = tmp_path / "study"
    out.mkdir()
    (out / "summary.png").write_bytes(b"old")
    assert main(["tokens", "--dynamics-passages", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out: {out / 'summary.png'} exists; pass --overwrite to replace it" in err
    assert (out / "summary.png").read_bytes() == b"old"
    assert main(["tokens", "--out", str(out / "summary.png")]) == 2  # a file, not a folder
    assert "is a file, not a folder" in capsys.readouterr().err
    for argv, said in ((["--delta", "3"], "--delta must lie in (0, 2], got 3.0"),
                       (["--dt", "0"], "--dt must lie in (0, 1], got 0.0"),
                       (["--bins", "0"], "--bins must be >= 1, got 0"),
                       (["--text", "t.txt", "--corpus", "builtin"], "exclude each other")):
        assert main(["tokens", *argv, "--out", str(tmp_path / "new")]) == 2
        assert said in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "all_minilm_l6_v2")),
    reason=f"the trained model is not installed ({MODELS_EXTRA})")
@pytest.mark.filterwarnings("ignore:.*near the stability bound:UserWarning")  # MiniLM at the default
# dt = 1: h L = 1.4-2.0, within RK4's bound 2.785 but past half of it, said once (meanfield.schedule)
def test_cli_on_the_real_model(tmp_path):
    from meanfield.cli import main

    text = tmp_path / "two.txt"
    text.write_text("Tokens move on the sphere.\n\nThey cluster as depth grows.\n")
    out = tmp_path / "out"
    assert main(["tokens", "--text", str(text), "--out", str(out), "--dynamics-passages", "1",
                 "--no-fit", "--dt", "1.0"]) == 0
    for name in ("tokens.nc", "dynamics.nc", "figure1.png", "summary.png", "dynamics.png"):
        assert (out / name).is_file()
    ds = read_netcdf(out / "tokens.nc")
    assert ds.sizes["passage"] == 2 and ds.sizes["layer"] == 7 and ds.sizes["dim"] == 384
    assert json.loads(ds.attrs["model"]) == {"encoder": "all-MiniLM-L6-v2"}
