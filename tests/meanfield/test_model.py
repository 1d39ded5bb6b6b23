"""The Model validates itself and round-trips through its state."""

import numpy as np
import pytest

from meanfield import ATTENTION_KINDS, Model, attention


def test_defaults_and_aliases():
    m = Model(2.0, attention="SA")
    assert m.attention == "softmax" and m.value == 1 and m.noise == 0.0
    assert Model(1.0, attention="usa").attention == "unnormalized"
    assert Model(1.0, attention="SOFTMAX").attention == "softmax"  # case is ignored
    assert m.is_identity


def test_attention_kinds_come_from_the_registry():
    assert ATTENTION_KINDS == attention.names()
    for kind in attention.kinds():
        assert Model(1.0, attention=kind.name).attention == kind.name
        for alias in kind.aliases:
            assert Model(1.0, attention=alias).attention == kind.name


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"beta": -1.0}, "beta"),
        ({"beta": float("nan")}, "beta"),
        ({"beta": float("inf")}, "beta"),
        ({"beta": 1.0, "attention": "cosine"}, "attention"),
        ({"beta": 1.0, "value": 2}, "value"),
        ({"beta": 1.0, "noise": -0.1}, "noise"),
        ({"beta": 1.0, "Q": np.ones((2, 3))}, "Q"),
        ({"beta": 1.0, "Q": np.eye(2), "K": np.eye(3)}, "dimension"),
        ({"beta": 1.0, "V": [[np.nan, 0], [0, 1]]}, "V"),
        ({"beta": 1.0, "heads": []}, "heads"),
        ({"beta": 1.0, "heads": [(np.eye(2), np.eye(2))]}, "heads[0]"),
        ({"beta": 1.0, "heads": [(np.eye(2), None, np.eye(2))]}, "heads[0].K"),
        ({"beta": 1.0, "heads": [(np.eye(2),) * 3], "Q": np.eye(2)}, "exclusive"),
        ({"beta": 1.0, "sinkhorn_iterations": 0}, "sinkhorn_iterations"),
    ],
)
def test_bad_fields_name_themselves(kwargs, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        Model(**kwargs)


def test_frozen_and_matrices_read_only():
    m = Model(1.0, Q=np.eye(3))
    with pytest.raises(AttributeError):
        m.beta = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        m.Q[0, 0] = 5.0


def test_matrices_fold_sign_into_V():
    (q, k, v), = Model(1.0, value=-1).matrices(3)
    np.testing.assert_array_equal(v, -np.eye(3))
    heads = [(np.eye(2), 2 * np.eye(2), 3 * np.eye(2))] * 2
    triples = Model(1.0, heads=heads).matrices(2)
    assert len(triples) == 2 and np.all(triples[1][2] == 3 * np.eye(2))
    with pytest.raises(ValueError, match="R\\^3"):
        Model(1.0, Q=np.eye(2)).matrices(3)


def test_state_round_trip():
    rng = np.random.default_rng(0)
    m = Model(3.0, attention="sinkhorn", value=-1, noise=0.1, Q=rng.normal(size=(2, 2)), causal=True)
    again = Model.from_state(m.to_json())
    assert again == m and hash(again) == hash(m)
    assert m.replace(beta=1.0).beta == 1.0 and m.replace(beta=1.0) != m


@pytest.mark.parametrize("beta", ["4", b"4", True, None, [4.0]])
def test_beta_must_be_a_number_not_text(beta):
    """Decided and documented: ``beta="4"`` is refused (text that happens to parse)."""
    with pytest.raises(ValueError, match="beta must be a real number"):
        Model(beta=beta)
    assert Model(beta=np.float32(4.0)).beta == 4.0 and Model(beta=4).beta == 4.0
