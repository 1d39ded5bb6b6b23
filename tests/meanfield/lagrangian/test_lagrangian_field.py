"""The field of a weighted measure and its divergence (meanfield.lagrangian.field).

The divergence is a closed form (docs/lagrangian.md section 2); here it is checked against
central finite differences of the velocity, for every attention kind and both geometries.

FD tolerance. For a smooth field the central difference ``D_h = (X(x + h e) - X(x - h e)) /
(2h)`` has error ``c h^2 + O(h^4)`` plus round-off ``~ eps |X| / h``. Then ``D_{2h} - D_h =
3 c h^2 + O(h^4)``, so the true error of ``D_h`` is about a third of ``|D_{2h} - D_h|``: the
test asserts ``|D_h - div| <= |D_{2h} - D_h| + 1e-9 (1 + |div|)`` (the second term is the
round-off ``eps |X| / h ~ 1e-13 |X|`` at ``h = 1e-3``, with room). A wrong closed form is
off by ``O(1)`` while ``|D_{2h} - D_h| ~ 1e-6``: the check cannot pass by accident.

On the sphere the FD is of the tangent field ``X`` along an orthonormal basis ``e_a`` of
``T_x S^{d-1}``, extended off the sphere by ``Y(y) = X(y / |y|)``: ``Y`` agrees with ``X`` on
the sphere, and ``d/dh (x + h e_a)/|x + h e_a| = e_a`` at ``h = 0``, so ``D Y(x) e_a = D_{e_a}
X(x)`` and ``div_S X = sum_a <e_a, D_{e_a} X>`` (the surface divergence needs the derivative
along tangent directions only).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import particles
from meanfield import Model
from meanfield.lagrangian import FieldState, field_at, weighted_field

D = 3
N = 24
RNG = np.random.default_rng(7)
QKV = tuple(RNG.normal(size=(D, D)) / np.sqrt(D) for _ in range(3))
FF = (RNG.normal(size=(D, 5)), RNG.normal(size=(5, D)), RNG.normal(size=5))

CONFIGS: dict[str, dict[str, Any]] = {
    "identity": {},
    "repulsive": {"value": -1},
    "qkv": {"Q": QKV[0], "K": QKV[1], "V": QKV[2]},
    "v_is_qtk": {"Q": QKV[0], "K": QKV[1], "V": QKV[0].T @ QKV[1]},  # the t = u path
    "heads": {"heads": [QKV, (QKV[1], QKV[0], -np.eye(D))]},
    "causal": {"causal": True},
    "feedforward_tanh": {"feedforward": FF, "activation": "tanh"},
    "feedforward_gelu": {"feedforward": FF, "activation": "gelu"},
    "feedforward_sigmoid": {"feedforward": FF, "activation": "sigmoid"},
}
KINDS = ("softmax", "unnormalized", "l2", "sigmoid", "sinkhorn")
CASES = [(kind, config) for kind in KINDS for config in CONFIGS
         if not (kind == "sinkhorn" and config == "causal")]  # refused: test_bad_model...


def nodes(n: int = N, d: int = D, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1)[:, None]
    w = rng.random(n) + 0.1
    return x, w / w.sum(), rng.random(n)


def fd_divergence(model: Model, x: np.ndarray, w: np.ndarray, labels: Any, p: np.ndarray,
                  plabel: Any, geometry: str, h: float) -> float:
    """Central-difference divergence of the velocity at the point ``p`` (module docstring)."""
    plab = None if plabel is None else np.array([plabel])

    def X(y: np.ndarray) -> np.ndarray:
        if geometry == "sphere":
            y = y / np.linalg.norm(y)
        return field_at(model, y[None], x, w, geometry=geometry, labels=labels,
                        point_labels=plab, divergence=False).velocity[0]

    d = len(p)
    if geometry == "sphere":
        u, _, _ = np.linalg.svd(np.eye(d) - np.outer(p, p))
        basis = u[:, : d - 1].T  # orthonormal basis of the tangent space at p
    else:
        basis = np.eye(d)
    return float(sum(e @ (X(p + h * e) - X(p - h * e)) for e in basis) / (2 * h))


@pytest.mark.parametrize("geometry", ["sphere", "euclidean"])
@pytest.mark.parametrize(("kind", "config"), CASES)
def test_divergence_matches_finite_differences(kind: str, config: str, geometry: str) -> None:
    model = Model(beta=1.7, attention=kind, sigmoid_bias=0.4, **CONFIGS[config])
    x, w, lab = nodes()
    labels = lab if model.causal else None
    res = weighted_field(model, x, w, geometry=geometry, labels=labels)
    assert res.divergence is not None and res.divergence.shape == (N,)
    h = 1e-3
    for i in range(0, N, 5):
        li = None if labels is None else labels[i]
        d1 = fd_divergence(model, x, w, labels, x[i], li, geometry, h)
        d2 = fd_divergence(model, x, w, labels, x[i], li, geometry, 2 * h)
        div = res.divergence[i]
        assert abs(d1 - div) <= abs(d2 - d1) + 1e-9 * (1 + abs(div)), (i, d1, d2, div)
        assert abs(d2 - d1) < 1e-4 * (1 + abs(div))  # h is in the asymptotic range


@pytest.mark.parametrize("geometry", ["sphere", "euclidean"])
@pytest.mark.parametrize(("kind", "config"), CASES)
def test_equal_weights_are_the_particle_velocity(kind: str, config: str, geometry: str) -> None:
    """Weights ``1/n`` (and labels ``i/(n-1)``, the index order) give ``particles.velocity``
    up to round-off: the same kernels, a column bias ``log(1/n)`` that cancels (softmax, l2)
    or a factor ``1/n`` moved (unnormalized, sigmoid): ``<= 1e-13`` relative."""
    model = Model(beta=2.5, attention=kind, sigmoid_bias=-0.3, **CONFIGS[config])
    n = 300  # long rows: the kernels' non-BLAS path
    x, _, _ = nodes(n)
    labels = np.arange(n) / (n - 1) if model.causal else None
    ref = particles.velocity(model, x, geometry)
    for divergence in (False, True):
        v = weighted_field(model, x, np.full(n, 1 / n), geometry=geometry, labels=labels,
                           divergence=divergence).velocity
        assert np.max(np.abs(v - ref)) <= 1e-13 * np.max(np.abs(ref))


@pytest.mark.parametrize(("kind", "config"), [c for c in CASES if c[1] in ("identity", "qkv",
                                                                            "causal")])
def test_split_node_is_the_same_measure(kind: str, config: str) -> None:
    """A node split into two copies carrying half its weight each, and a node of weight 0,
    leave the measure, hence the field and its divergence, unchanged (round-off)."""
    model = Model(beta=2.0, attention=kind, **CONFIGS[config])
    x, w, lab = nodes()
    labels = lab if model.causal else None
    ref = weighted_field(model, x, w, labels=labels)
    k = 5
    x2 = np.concatenate([x, x[:k], x[k:k + 1]])
    w2 = np.concatenate([w, np.zeros(1)])
    w2[:k] /= 2
    w2 = np.concatenate([w2[:N], w2[:k], w2[N:]])
    lab2 = None if labels is None else np.concatenate([labels, labels[:k], labels[k:k + 1]])
    res = weighted_field(model, x2, w2, labels=lab2)
    scale = np.max(np.abs(ref.velocity))
    assert np.max(np.abs(res.velocity[:N] - ref.velocity)) <= 1e-13 * scale
    assert res.divergence is not None and ref.divergence is not None
    assert np.max(np.abs(res.divergence[:N] - ref.divergence)) <= 1e-12 * np.max(
        np.abs(ref.divergence))


def test_weighted_softmax_against_the_definition() -> None:
    """``A_ij = w_j e^{beta <Qx_i, Kx_j>} / sum_k w_k e^{...}`` written out densely."""
    Q, K, V = QKV
    model = Model(beta=1.3, Q=Q, K=K, V=V)
    x, w, _ = nodes()
    E = w[None, :] * np.exp(1.3 * (x @ Q.T) @ (x @ K.T).T)
    F = (E / E.sum(axis=1, keepdims=True)) @ (x @ V.T)
    res = weighted_field(model, x, w, geometry="euclidean", divergence=False)
    assert np.max(np.abs(res.velocity - F)) <= 1e-13 * np.max(np.abs(F))
    assert res.divergence is None


def test_batched_nodes() -> None:
    model = Model(beta=1.0, attention="unnormalized")
    x, w, _ = nodes()
    xb = np.stack([x, x[::-1]])
    res = weighted_field(model, xb, np.stack([w, w[::-1]]))
    one = weighted_field(model, x, w)
    assert res.velocity.shape == xb.shape and res.divergence is not None
    assert res.divergence.shape == (2, N)
    np.testing.assert_allclose(res.velocity[1], one.velocity[::-1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(res.divergence[1], one.divergence[::-1], rtol=0, atol=1e-13)
    assert isinstance(res.state, FieldState)


# -- bad input ----------------------------------------------------------------------------

def test_off_sphere_nodes_refused() -> None:
    x, w, _ = nodes()
    x[3] *= 1 + 1e-8
    with pytest.raises(ValueError, match=r"x must lie on the unit sphere.*x\[3\]"):
        weighted_field(Model(1.0), x, w)
    weighted_field(Model(1.0), x, w, geometry="euclidean")  # fine in R^d


@pytest.mark.parametrize(("bad", "match"), [
    (lambda w: -w, "weights must be >= 0"),
    (lambda w: np.where(np.arange(len(w)) == 2, np.nan, w), "weights contains 1 non-finite"),
    (lambda w: w * (1 + 1e-9), "weights must sum to 1"),
    (lambda w: w[:-1], "weights must have shape"),
])
def test_bad_weights_refused(bad: Any, match: str) -> None:
    x, w, _ = nodes()
    with pytest.raises(ValueError, match=match):
        weighted_field(Model(1.0), x, bad(w))


def test_bad_labels_refused() -> None:
    x, w, lab = nodes()
    with pytest.raises(ValueError, match="labels given for a model with causal=False"):
        weighted_field(Model(1.0), x, w, labels=lab)
    causal = Model(1.0, causal=True)
    with pytest.raises(ValueError, match="labels missing"):
        weighted_field(causal, x, w)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 1\]"):
        weighted_field(causal, x, w, labels=lab + 0.5)
    with pytest.raises(ValueError, match="labels must have shape"):
        weighted_field(causal, x, w, labels=lab[:-1])


def test_bad_model_and_arguments_refused() -> None:
    x, w, _ = nodes()
    with pytest.raises(ValueError, match="meanfield.solve"):
        weighted_field(Model(1.0, noise=0.1), x, w)
    with pytest.raises(ValueError, match="'sinkhorn' with causal=True"):
        weighted_field(Model(1.0, attention="sinkhorn", causal=True), x, w, labels=w)
    with pytest.raises(ValueError, match="geometry must be one of"):
        weighted_field(Model(1.0), x, w, geometry="torus")
    with pytest.raises(ValueError, match="x must have shape"):
        weighted_field(Model(1.0), x[0], w)
    with pytest.raises(ValueError, match="x must be finite"):
        weighted_field(Model(1.0), np.where(x == x[0, 0], np.inf, x), w, geometry="euclidean")
    with pytest.raises(ValueError, match="Q, K, V are 3 x 3"):
        weighted_field(Model(1.0, Q=np.eye(3)), np.eye(2), np.full(2, 0.5))
    with pytest.raises(ValueError, match="state must be a FieldState"):
        weighted_field(Model(1.0), x, w, state={"potentials": None})


# -- Sinkhorn -----------------------------------------------------------------------------

def test_weighted_sinkhorn_has_both_marginals() -> None:
    """Nodes the basis vectors e_j of R^6 (on the sphere), V = I: the field at node i is row
    i of A. The coupling ``pi_ij = w_i A_ij`` has row sums ``w_i`` (exact: softmax rows) and
    column sums ``w_j`` to the Sinkhorn tolerance (the stopping rule bounds the row-sum error
    of the scaling, here mapped to the columns: ``<= tol`` relative, times 10 for round-off)."""
    d = 6
    rng = np.random.default_rng(3)
    Q, K = rng.normal(size=(2, d, d))
    tol = 1e-12
    model = Model(beta=2.0, attention="sinkhorn", Q=Q, K=K, sinkhorn_tol=tol,
                  sinkhorn_iterations=5000)
    w = rng.random(d) + 0.2
    w /= w.sum()
    A = weighted_field(model, np.eye(d), w, geometry="euclidean", divergence=False).velocity
    np.testing.assert_allclose(A.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(w @ A, w, rtol=10 * tol, atol=0)
    assert not np.allclose(A, A[0])  # not the trivial coupling


def test_sinkhorn_warm_start() -> None:
    """The state of a converged call is a warm start: with one iteration allowed, a cold
    start warns (not converged), a warm start from the same nodes does not, and gives the
    converged field."""
    x, w, _ = nodes()
    model = Model(beta=3.0, attention="sinkhorn", sinkhorn_tol=1e-11, sinkhorn_iterations=5000)
    ref = weighted_field(model, x, w)
    assert ref.state.potentials is not None and ref.state.potentials[0].shape == (1, N)
    one = model.replace(sinkhorn_iterations=1)
    with pytest.warns(RuntimeWarning, match="sinkhorn_iterations"):
        weighted_field(one, x, w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warm = weighted_field(one, x, w, state=ref.state)
    assert np.max(np.abs(warm.velocity - ref.velocity)) <= 1e-10
    # a state of another node set (other n) is ignored: a cold start
    res = weighted_field(model, x[:-1], np.full(N - 1, 1 / (N - 1)), state=ref.state)
    assert res.state.potentials is not None and res.state.potentials[0].shape == (1, N - 1)


@pytest.mark.parametrize("kind", ["softmax", "unnormalized", "sigmoid"])
def test_causal_nodes_sorted_by_label(kind: str) -> None:
    """Nodes sorted by label take the prefix path of the kernels (each query tile reads the
    columns up to its largest label only); the result is the unsorted one permuted, to
    round-off. Small tiles (a memory limit of a few rows) so that the prefix varies."""
    model = Model(beta=2.0, attention=kind, causal=True)
    x, w, lab = nodes(300)
    lab = np.round(lab * 20) / 20  # ties: equal labels attend to each other
    order = np.argsort(lab, kind="stable")
    ref = weighted_field(model, x, w, labels=lab)
    res = weighted_field(model, x[order], w[order], labels=lab[order], memory_limit=8 * 300 * 40)
    assert ref.divergence is not None and res.divergence is not None
    np.testing.assert_allclose(res.velocity, ref.velocity[order], rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.divergence, ref.divergence[order], rtol=0,
                               atol=1e-12 * np.max(np.abs(ref.divergence)))


@pytest.mark.parametrize("config", ["identity", "qkv"])
def test_beta_zero_is_the_weighted_mean(config: str) -> None:
    """``beta = 0``: softmax is the weighted mean ``F = V xbar``, constant in x, so ``tr DF =
    x^T DF x = 0`` and ``div_S = -(d - 1) <x, F>`` on the sphere, ``0`` in ``R^d`` (exact up
    to round-off)."""
    model = Model(beta=0.0, **CONFIGS[config])
    x, w, _ = nodes()
    V = model.matrices(D)[0][2]
    F = (w @ x) @ V.T
    sph = weighted_field(model, x, w)
    euc = weighted_field(model, x, w, geometry="euclidean")
    assert sph.divergence is not None and euc.divergence is not None
    np.testing.assert_allclose(euc.velocity, np.broadcast_to(F, x.shape), rtol=0, atol=1e-15)
    np.testing.assert_allclose(euc.divergence, 0.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(sph.divergence, -(D - 1) * (x @ F), rtol=0, atol=1e-14)
