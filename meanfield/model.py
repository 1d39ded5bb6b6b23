"""The attention model shared by the PDE (`meanfield`) and the particles (`particles`).

.. autosummary::
   Model
   ATTENTION_KINDS

One frozen, validated object says which dynamics is meant (docs/equations.md sections 2 and 3):
inverse temperature ``beta``, attention kind, optional matrices ``Q, K, V`` or ``heads``,
a sign ``value`` (``+1``: attractive ``V = I``, ``-1``: repulsive ``V = -I``), and the noise
``sigma`` of the entropy term. It knows no discretisation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from meanfield import attention as attention_registry
from meanfield import backend as bk

ATTENTION_KINDS = attention_registry.names()
"""The built-in attention kinds (``softmax`` = SA (2.3), ``unnormalized`` = USA, and the
variants of the second paper ``l2``, ``sigmoid``, ``sinkhorn``), derived from
:mod:`meanfield.attention` when this module is imported; ``meanfield.attention.names()`` is
the live list (it includes kinds registered later)."""

ACTIVATIONS = {
    "relu": lambda z: z * (z > 0),
    "tanh": lambda z: bk.namespace(z).tanh(z),
    "sigmoid": lambda z: 0.5 * (1.0 + bk.namespace(z).tanh(0.5 * z)),
    "gelu": lambda z: 0.5 * z * (1.0 + bk.erf(z / math.sqrt(2.0))),  # exact (erf) GELU, as in BERT
}
"""Activations ``sigma`` of the feed-forward term (2.8), by name (NumPy or torch arrays)."""


def _as_matrix(name: str, value: Any) -> np.ndarray | None:
    if value is None:
        return None
    a = np.array(value, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        msg = f"{name} must be a square matrix, got shape {a.shape}"
        raise ValueError(msg)
    if not np.all(np.isfinite(a)):
        msg = f"{name} contains non-finite entries"
        raise ValueError(msg)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, init=False)
class Model:
    """Self-attention dynamics (docs/equations.md sections 2-3).

    Args:
        beta: inverse temperature, a number ``>= 0`` and finite; ``beta = 0`` is the limit.
            Text such as ``"4"`` is refused (a number read as text is usually a mistake);
            the attention name is case-insensitive (``"SOFTMAX"`` is ``"softmax"``).
        attention: a kind of :mod:`meanfield.attention`: ``"softmax"`` (SA),
            ``"unnormalized"`` (USA), ``"l2"``, ``"sigmoid"`` or ``"sinkhorn"``; aliases
            (``"sa"``, ``"usa"``) and any case are accepted and stored as the canonical
            lower-case name. Which solvers support a kind is declared there.
        value: ``+1`` (attractive, ``V = I``) or ``-1`` (repulsive, ``V = -I``); multiplies
            ``V`` when ``V`` is given.
        noise: ``sigma >= 0``, adds ``sigma * Laplacian(rho)`` (entropy term).
        Q, K, V: optional square ``d x d`` matrices (default: identity).
        heads: optional sequence of ``(Q, K, V)`` triples (multi-head attention, (2.7));
            exclusive with ``Q, K, V``.
        causal: token ``i`` attends to ``j <= i`` only (particles and the Lagrangian
            solver, whose nodes carry a label; not the spectral solvers).
        feedforward: optional ``(w, a, b)`` of the feed-forward term ``w sigma(a x + b)``
            added inside the projection ((2.8)): ``w`` is ``d x l``, ``a`` is ``l x d``,
            ``b`` has length ``l`` (particles and the Lagrangian solver; not the spectral
            solvers).
        activation: ``sigma`` of the feed-forward term: ``"relu"``, ``"tanh"``,
            ``"sigmoid"`` or ``"gelu"``.
        parameters: the attention kind's own parameters (its entry's
            :attr:`~meanfield.attention.AttentionKind.parameters`), as a mapping; they may
            also be given as keywords: ``sigmoid_bias`` (the bias ``b`` of sigmoid attention),
            ``sinkhorn_iterations`` (the maximum number of Sinkhorn iterations),
            ``sinkhorn_tol`` (stop Sinkhorn once row and column sums are within this of 1),
            or those of a registered kind. The kind validates them and fills in its defaults
            (:attr:`parameters`); they read as attributes (``model.sigmoid_bias``). A
            parameter of another kind is validated and dropped (it does not act on this one).
    """

    beta: float
    attention: str
    value: int
    noise: float
    Q: Any
    K: Any
    V: Any
    heads: Any
    causal: bool
    feedforward: Any
    activation: str
    parameters: attention_registry.Parameters
    _dim: int | None = field(default=None, init=False, repr=False)

    def __init__(
        self,
        beta: float,
        attention: str = "softmax",
        value: int = 1,
        noise: float = 0.0,
        Q: Any = None,
        K: Any = None,
        V: Any = None,
        heads: Any = None,
        causal: bool = False,
        feedforward: Any = None,
        activation: str = "relu",
        parameters: Mapping[str, Any] | None = None,
        **kind_parameters: Any,
    ) -> None:
        given = dict(parameters or {})
        both = sorted(set(given) & set(kind_parameters))
        if both:
            msg = f"parameters {both} are given both in parameters and as keywords; give them once"
            raise ValueError(msg)
        given.update(kind_parameters)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for name, v in (("beta", beta), ("attention", attention), ("value", value),
                        ("noise", noise), ("Q", Q), ("K", K), ("V", V), ("heads", heads),
                        ("causal", causal), ("feedforward", feedforward),
                        ("activation", activation), ("_dim", None)):
            set_(name, v)
        self._check_scalars()
        dims = self._check_matrices()
        dims |= self._check_heads()
        dims |= self._check_feedforward()
        if self.activation not in ACTIVATIONS:
            msg = f"activation must be one of {tuple(ACTIVATIONS)}, got {self.activation!r}"
            raise ValueError(msg)
        if len(dims) > 1:
            msg = f"Q, K, V (and heads) must share one dimension d, got sizes {sorted(dims)}"
            raise ValueError(msg)
        set_("_dim", dims.pop() if dims else None)
        set_("causal", bool(self.causal))
        set_("parameters", attention_registry.model_parameters(self.attention, given))

    def _check_scalars(self) -> None:
        """``beta``, ``attention``, ``value``, ``noise``."""
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        # a number, not text: beta="4" is refused (a string that happens to parse is more
        # often a mistake, e.g. a column of a table read as text, than an intention)
        if isinstance(self.beta, (str, bytes, bool)) or not isinstance(
                self.beta, (int, float, np.integer, np.floating)):
            msg = f"beta must be a real number, got {self.beta!r}"
            raise ValueError(msg)
        beta = float(self.beta)
        if not math.isfinite(beta) or beta < 0:
            msg = f"beta must be finite and >= 0, got {self.beta!r}"
            raise ValueError(msg)
        set_("beta", beta)
        set_("attention", attention_registry.resolve(self.attention).name)
        if self.value not in (1, -1):
            msg = f"value must be +1 (attractive) or -1 (repulsive), got {self.value!r}"
            raise ValueError(msg)
        set_("value", int(self.value))
        noise = float(self.noise)
        if not math.isfinite(noise) or noise < 0:
            msg = f"noise must be finite and >= 0, got {self.noise!r}"
            raise ValueError(msg)
        set_("noise", noise)

    def _check_matrices(self) -> set[int]:
        """``Q, K, V``: square, finite, read-only; their sizes."""
        dims = set()
        for name in ("Q", "K", "V"):
            m = _as_matrix(name, getattr(self, name))
            object.__setattr__(self, name, m)
            if m is not None:
                dims.add(m.shape[0])
        return dims

    def _check_heads(self) -> set[int]:
        """``heads``: ``(Q, K, V)`` triples, exclusive with ``Q, K, V``; their sizes."""
        if self.heads is None:
            return set()
        if any(getattr(self, n) is not None for n in ("Q", "K", "V")):
            msg = "heads and Q, K, V are exclusive: give the matrices inside heads"
            raise ValueError(msg)
        dims: set[int] = set()
        heads = []
        for h, triple in enumerate(self.heads):
            if len(triple) != 3:
                msg = f"heads[{h}] must be a (Q, K, V) triple, got {len(triple)} items"
                raise ValueError(msg)
            mats = []
            for n, m in zip("QKV", triple):
                a = _as_matrix(f"heads[{h}].{n}", m)
                if a is None:
                    msg = f"heads[{h}].{n} must be a square matrix, got None"
                    raise ValueError(msg)
                mats.append(a)
            dims.update(m.shape[0] for m in mats)
            heads.append(tuple(mats))
        if not heads:
            msg = "heads must contain at least one (Q, K, V) triple"
            raise ValueError(msg)
        object.__setattr__(self, "heads", tuple(heads))
        return dims

    def _check_feedforward(self) -> set[int]:
        """``feedforward``: a finite ``(w, a, b)`` of shapes ``(d, l), (l, d), (l,)``; ``{d}``."""
        if self.feedforward is None:
            return set()
        if len(self.feedforward) != 3:
            msg = f"feedforward must be a (w, a, b) triple, got {len(self.feedforward)} items"
            raise ValueError(msg)
        w, a, b = (np.array(m, dtype=float) for m in self.feedforward)
        if w.ndim != 2 or a.ndim != 2 or b.ndim != 1 or a.shape != (w.shape[1], w.shape[0]) \
                or b.shape != (w.shape[1],):
            msg = (
                "feedforward (w, a, b) must have shapes (d, l), (l, d), (l,); got "
                f"{w.shape}, {a.shape}, {b.shape}"
            )
            raise ValueError(msg)
        if not all(np.all(np.isfinite(m)) for m in (w, a, b)):
            msg = "feedforward contains non-finite entries"
            raise ValueError(msg)
        for m in (w, a, b):
            m.setflags(write=False)
        object.__setattr__(self, "feedforward", (w, a, b))
        return {w.shape[0]}

    def __getattr__(self, name: str) -> Any:
        """A parameter of the attention kind, by name (``model.sigmoid_bias``)."""
        parameters = self.__dict__.get("parameters")
        if parameters is not None and name in parameters:
            return parameters[name]
        msg = (f"{type(self).__name__!r} object has no attribute {name!r}"
               + (f" (attention={self.__dict__.get('attention')!r} has the parameters "
                  f"{tuple(parameters)})" if parameters is not None else ""))
        raise AttributeError(msg)

    # -- derived -------------------------------------------------------------------------

    @property
    def dim(self) -> int | None:
        """The dimension ``d`` fixed by the matrices, or ``None`` (identity, any ``d``)."""
        return self._dim

    @property
    def is_identity(self) -> bool:
        """True when ``Q = K = I`` and ``V = value * I`` (the setting of the PDE solvers)."""
        if self.heads is not None or self.feedforward is not None:
            return False
        return all(getattr(self, n) is None for n in ("Q", "K", "V"))

    @property
    def sign(self) -> float:
        """``+1.0`` for attraction, ``-1.0`` for repulsion (``V = value * I``)."""
        return float(self.value)

    def check_dim(self, d: int) -> None:
        """Raise ``ValueError`` if the model's matrices do not act on ``R^d``."""
        if self._dim is not None and self._dim != d:
            msg = f"the model's Q, K, V are {self._dim} x {self._dim} but tokens live in R^{d}"
            raise ValueError(msg)

    def matrices(self, d: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The ``(Q, K, V)`` triples for tokens in ``R^d``, sign included in ``V``.

        One triple without heads; identity where a matrix is not given.
        """
        self.check_dim(d)
        eye = np.eye(d)
        if self.heads is not None:
            return [(q, k, self.value * v) for q, k, v in self.heads]
        q = eye if self.Q is None else self.Q
        k = eye if self.K is None else self.K
        v = eye if self.V is None else self.V
        return [(q, k, self.value * v)]

    def feedforward_term(self, x: np.ndarray) -> np.ndarray:
        """``w sigma(a x_i + b)`` for each row ``x_i`` of ``x`` (shape ``(..., d)``); zero
        when the model has no feed-forward layer ((2.8))."""
        if self.feedforward is None:
            return bk.namespace(x).zeros_like(x)
        w, a, b = (bk.like(x, m) for m in self.feedforward)
        return ACTIVATIONS[self.activation](x @ a.T + b) @ w.T

    def replace(self, **changes: Any) -> Model:
        """A copy with some fields changed (validated again)."""
        kw = {n: getattr(self, n) for n in _FIELDS}
        kw.update(self.parameters)
        kw.update(changes)
        return Model(**kw)

    # -- serialisation -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON-able dict that :meth:`from_state` turns back into an equal model."""
        out: dict[str, Any] = {}
        for n in _FIELDS:
            v = getattr(self, n)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif n in ("heads", "feedforward") and v is not None:
                v = ([[m.tolist() for m in triple] for triple in v] if n == "heads"
                     else [m.tolist() for m in v])
            out[n] = v
        out.update(self.parameters)  # the kind's own, flat (as the fields were before)
        return out

    def to_json(self) -> str:
        return json.dumps(self.state())

    @classmethod
    def from_state(cls, state: dict[str, Any] | str) -> Model:
        """The model of a :meth:`state` (or its JSON), also as written before the kinds'
        parameters moved onto their entries (every kind's parameters, flat); keys that are
        neither fields nor a registered kind's parameters are ignored."""
        fields: dict[str, Any] = json.loads(state) if isinstance(state, str) else state
        known = set(_FIELDS) | {p.name for k in attention_registry.kinds() for p in k.parameters}
        return cls(**{k: v for k, v in fields.items() if k in known})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Model):
            return NotImplemented
        return self.state() == other.state()

    def __hash__(self) -> int:
        return hash(self.to_json())


_FIELDS: Sequence[str] = (
    "beta", "attention", "value", "noise", "Q", "K", "V", "heads", "causal",
    "feedforward", "activation",
)
"""The fields common to every kind (the kind's own parameters are in :attr:`Model.parameters`)."""

__all__ = ["ATTENTION_KINDS", "Model"]
