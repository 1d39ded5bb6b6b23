"""The numpy BERT encoder against the reference implementation, and its layers as Models.

The reference values (``particles/data/minilm_reference.npz``) come from torch +
transformers on the same weights (``scripts/make_minilm_reference.py``), run in float64 and
stored as float32: storage rounding is ``<= 2^-24 |x| < 3e-7`` for hidden states below 4 in
size, so the 1e-5 asked of the encoder leaves a wide margin (the encoder computes in float64
on the float32 weights, as the reference did). Tests that need the model package skip with a
message naming the extra when it is missing.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from importlib import resources

import numpy as np
import pytest

from meanfield import Model
from particles import attention, project_tangent, velocity
from particles.trained import MODELS_EXTRA, random_encoder

_HAVE_MODEL = all(importlib.util.find_spec(m) is not None
                  for m in ("safetensors", "tokenizers", "all_minilm_l6_v2"))
needs_model = pytest.mark.skipif(
    not _HAVE_MODEL, reason=f"the trained model is not installed ({MODELS_EXTRA})")

ROUNDOFF = 1e-10
"""Float64 identities between two orderings of the same sums (terms up to ~10 in size,
d = 384 terms): ~1e3 eps * 10 ~ 1e-12; 1e-10 leaves room and is far below the 1e-5 asked."""


@pytest.fixture(scope="module")
def minilm():
    if not _HAVE_MODEL:
        pytest.skip(f"the trained model is not installed ({MODELS_EXTRA})")
    from particles.trained import load_minilm

    return load_minilm()


@pytest.fixture(scope="module")
def reference():
    path = resources.files("particles").joinpath("data/minilm_reference.npz")
    with resources.as_file(path) as p, np.load(p) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture
def tiny(rng):
    return random_encoder(rng)


# -- the encoder against the reference ----------------------------------------------------------


@needs_model
def test_token_ids_match_reference(minilm, reference):
    ids, mask = minilm.tokenize([str(s) for s in reference["sentences"]])
    np.testing.assert_array_equal(ids, reference["input_ids"])
    np.testing.assert_array_equal(mask, reference["attention_mask"])


@needs_model
def test_hidden_states_match_reference(minilm, reference):
    ids = reference["input_ids"].astype(np.int64)
    mask = reference["attention_mask"].astype(np.int64)
    stride = int(reference["dim_stride"])
    states = minilm.forward(ids, mask)[..., ::stride]  # padded batch, padding included
    assert states.shape == reference["hidden_states"].shape
    assert np.abs(states - reference["hidden_states"]).max() <= 1e-5
    b = int(np.argmin(mask.sum(axis=1)))  # the shortest sentence alone: no padding
    for text in reference["sentences"][b: b + 1]:
        n = int(mask[b].sum())
        one = minilm.hidden_states(str(text))
        assert one.shape == (minilm.num_layers + 1, n, minilm.dim)
        assert np.abs(one[..., ::stride] - reference["hidden_states"][:, b, :n]).max() <= 1e-5


@needs_model
def test_sentence_embeddings_match_reference(minilm, reference):
    emb = minilm.sentence_embeddings([str(s) for s in reference["sentences"]])
    assert emb.shape == reference["sentence_embeddings"].shape
    assert np.abs(emb - reference["sentence_embeddings"]).max() <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-12)


# -- layers as Models ---------------------------------------------------------------------------


def _lift(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)


def _check_lifted(enc, states: np.ndarray, layers=None) -> None:
    for ell in range(enc.num_layers) if layers is None else layers:
        lw = enc.layers[ell]
        x = states[ell]
        model = enc.layer_model(ell, lifted=True, feedforward=True)
        assert model.beta == pytest.approx(1.0 / math.sqrt(lw.head_dim), rel=1e-15)
        assert len(model.heads) == lw.num_heads and model.activation == "gelu"
        att = attention(model, _lift(x))
        scale = max(1.0, np.abs(lw.attention(x)).max())
        assert np.abs(att[:, :-1] - lw.attention(x)).max() <= ROUNDOFF * scale
        assert np.abs(att[:, -1]).max() == 0.0  # the constant coordinate does not move
        ff = model.feedforward_term(_lift(x))
        assert np.abs(ff[:, :-1] - lw.feedforward(x)).max() <= ROUNDOFF * scale
        v = velocity(model, _lift(x), "euclidean")
        assert np.abs(v[:, :-1] - lw.attention(x) - lw.feedforward(x)).max() <= ROUNDOFF * scale


@needs_model
def test_lifted_layer_model_is_the_encoders_attention(minilm):
    states = minilm.hidden_states("Tokens cluster, or so it seems.")
    _check_lifted(minilm, states, layers=(0, minilm.num_layers - 1))  # first and last: time


def test_lifted_layer_model_random_encoder(tiny):
    _check_lifted(tiny, tiny.hidden_states("one two three four five six"))


def _check_sphere(enc, states: np.ndarray, layers=None) -> None:
    for ell in range(enc.num_layers) if layers is None else layers:
        lw = enc.layers[ell]
        y = states[ell] / np.linalg.norm(states[ell], axis=1, keepdims=True)
        r = float(np.linalg.norm(states[ell], axis=1).mean())
        model = enc.layer_model(ell, radius=r, feedforward=True)
        assert model.beta == pytest.approx(1.0 / math.sqrt(lw.head_dim), rel=1e-15)
        drift = lw.sphere_drift(y, r, enc.ff_radius(ell))
        want = attention(model, y) + model.feedforward_term(y)
        assert np.abs(drift - want).max() <= ROUNDOFF * max(1.0, np.abs(want).max())
        np.testing.assert_allclose(velocity(model, y), project_tangent(y, want), atol=1e-9)
        # without biases, Att(r y) / r is the model's attention
        np.testing.assert_allclose(lw.attention(r * y, biases=False) / r, attention(
            enc.layer_model(ell, radius=r), y), atol=ROUNDOFF * max(1.0, np.abs(want).max()))


@needs_model
def test_sphere_layer_model_matches_low_rank_drift(minilm):
    states = minilm.hidden_states("A short passage.")
    _check_sphere(minilm, states, layers=(0, minilm.num_layers - 1))


def test_sphere_layer_model_random_encoder(tiny):
    _check_sphere(tiny, tiny.hidden_states("one two three four five six"))


def test_default_radius_is_the_layernorm_radius(tiny):
    g, b = tiny.embedding_norm
    assert tiny.input_radius(0) == pytest.approx(math.sqrt(np.sum(g**2) + np.sum(b**2)))
    m = tiny.layer_model(0)
    Q = m.heads[0][0]
    lw = tiny.layers[0]
    np.testing.assert_allclose(Q[: lw.head_dim], tiny.input_radius(0) * lw.query[0], rtol=1e-14)
    assert np.all(Q[lw.head_dim:] == 0)


def test_gelu_activation():
    from scipy.special import ndtr

    z = np.linspace(-4, 4, 17)
    model = Model(1.0, feedforward=(np.eye(17), np.eye(17), np.zeros(17)), activation="gelu")
    np.testing.assert_allclose(model.feedforward_term(z[None])[0], z * ndtr(z), rtol=1e-14,
                               atol=1e-16)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_text_is_refused(tiny, text):
    with pytest.raises(ValueError, match="empty"):
        tiny.hidden_states(text)
    with pytest.raises(ValueError, match="empty"):
        tiny.sentence_embeddings([])


def test_long_text_is_truncated_with_a_warning(tiny):
    text = " ".join(f"w{i}" for i in range(100))
    with pytest.warns(UserWarning, match="truncated"):
        states = tiny.hidden_states(text)
    assert states.shape[1] == tiny.max_length
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tiny.hidden_states("short text").shape[1] == 4


@needs_model
def test_long_text_keeps_special_tokens(minilm):
    with pytest.warns(UserWarning, match="max_length=256"):
        toks = minilm.tokens("word " * 400)
    assert len(toks) == 256 and toks[0] == "[CLS]" and toks[-1] == "[SEP]"


def test_bad_layer_and_radius(tiny):
    with pytest.raises(ValueError, match="layer"):
        tiny.layer_model(5)
    with pytest.raises(ValueError, match="radius"):
        tiny.layer_model(0, radius=-1.0)


def test_missing_model_package_names_the_extra(monkeypatch):
    import particles.trained as trained

    monkeypatch.setattr(trained, "_MINILM_PACKAGE", "no_such_model_package_xyz")
    with pytest.raises(ImportError, match=r"meanfield\[models\]"):
        trained.load_minilm(cache=False)


def test_missing_reader_names_the_extra(monkeypatch):
    import sys

    import particles.trained as trained

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r"meanfield\[models\]"):
        trained._require("tokenizers")
