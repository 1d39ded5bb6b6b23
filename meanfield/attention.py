"""The attention registry: every attention kind, its mathematics, its parameters, and which
solvers support it.

.. autosummary::
   AttentionKind
   Parameter
   Transform
   Energy
   GaussianField
   Parameters
   NORMALIZATIONS
   METRICS
   SOLVERS
   model_parameters
   Solver
   register_solver
   unregister_solver
   resolve
   names
   kinds
   require
   register
   unregister

One table says which attention kinds exist (the weights ``A_ij`` of docs/equations.md
section 2), what each is, which parameters belong to each, and which solvers implement it.
:class:`meanfield.Model` validates its ``attention`` and the kind's parameters here; every
solver calls :func:`require` before it starts, so that an unsupported kind is refused with a
``ValueError`` that names the solvers that do support it.

Names are case-insensitive and have aliases: ``resolve("SOFTMAX")``, ``resolve("SA")`` and
``resolve("sa")`` all give the ``softmax`` entry, and a :class:`~meanfield.Model` stores the
canonical lower-case name (``Model(1.0, attention="SA").attention == "softmax"``).
Surrounding whitespace is not stripped.

Each entry carries its kind's mathematics, which the solvers ask instead of comparing names:
the normalisation of the rows (:data:`NORMALIZATIONS`), the transform of the logits and its
derivative (:class:`Transform`; none for the exponential kinds), a column bias of the logits,
the interaction energy and the metric of the flow where there is one (:class:`Energy`), the
Gaussian field where there is one (:class:`GaussianField`), and the kind's own parameters with
their defaults, which the kind validates (:class:`Parameter`).

Adding a variant (docs/extending.md): one :class:`AttentionKind` entry in :data:`_BUILTIN`
(or a :func:`register` call), plus, where a solver needs one, its implementation, e.g. one
``meanfield.kernels.Kernel`` subclass with the same ``name`` for ``"particles"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from meanfield import backend as bk


@dataclass(frozen=True)
class Solver:
    """A solver that attention kinds may declare, registered by the package that provides it.

    Args:
        name: what a kind's ``solvers`` and :func:`require` call it (lower case).
        entry: its entry points, in words (quoted in the errors of :func:`require`).
        section: the section of docs/equations.md whose equations it integrates; listings
            (:data:`SOLVERS`, the errors of :func:`require`) follow it, the finite-n system
            (section 2) first, then registration order.
    """

    name: str
    entry: str
    section: int


_SOLVERS: dict[str, Solver] = {}
_ENTRIES: dict[str, str] = {}

SOLVERS: Mapping[str, str] = MappingProxyType(_ENTRIES)
"""The registered solvers, ``name -> entry points`` (a read-only view of the registry that
:func:`register_solver` fills): the core registers ``spectral`` (the mean-field PDE,
section 3), ``lagrangian`` (its characteristics on weighted nodes, docs/lagrangian.md) and
``gaussian`` (the Gaussian reduction in ``R^d``, section 4); the ``particles`` package
registers ``particles``, ``angles`` and ``ensemble`` (section 2), ``validation`` registers
``phase_diagram`` (section 5)."""


def register_solver(name: str, entry: str, *, section: int) -> Solver:
    """Register the solver ``name`` (see :class:`Solver`) and return its record.

    A kind may declare a solver before the package that provides it registers it; asking
    about it (:func:`require`, :func:`kinds`, :meth:`AttentionKind.supports`) needs it
    registered. ``ValueError`` for a malformed name or entry, or a name already registered
    with another record (registering the same record again does nothing).
    """
    _check_solvers("register_solver name", [name])
    if not isinstance(entry, str) or not entry.strip():
        msg = f"register_solver entry must be a non-empty string, got {entry!r}"
        raise ValueError(msg)
    if not isinstance(section, int) or isinstance(section, bool) or section < 1:
        msg = f"register_solver section must be an int >= 1, got {section!r}"
        raise ValueError(msg)
    record = Solver(name, entry, section)
    if _SOLVERS.get(name, record) != record:
        msg = f"solver {name!r} is already registered ({_SOLVERS[name].entry})"
        raise ValueError(msg)
    _SOLVERS[name] = record
    _sort_solvers()
    return record


def unregister_solver(name: str) -> Solver:
    """Remove the solver ``name`` and return its record (``ValueError`` if not registered)."""
    _registered("solver", name)
    record = _SOLVERS.pop(name)
    _sort_solvers()
    return record


def _sort_solvers() -> None:
    order = sorted(_SOLVERS.values(), key=lambda s: s.section)  # stable: registration order
    _SOLVERS.clear()
    _SOLVERS.update((s.name, s) for s in order)
    _ENTRIES.clear()
    _ENTRIES.update((s.name, s.entry) for s in order)


NORMALIZATIONS: Mapping[str, str] = MappingProxyType({
    "rows": "each row sums to 1: A_ij = phi(S_ij) / sum_k phi(S_ik)",
    "count": "divided by the number of attended tokens: A_ij = phi(S_ij) / n (i + 1 if causal)",
    "doubly": "rows and columns sum to 1 (a Sinkhorn scaling of phi(S_ij))",
})
"""How an attention kind normalises its weights ``phi(S_ij)`` (docs/equations.md section 2)."""


@dataclass(frozen=True)
class Parameter:
    """One parameter of an attention kind (a :class:`meanfield.Model` keyword).

    Args:
        name: the keyword (lower case).
        default: its value when not given.
        convert: turns a given value into the stored one (``float``, ``int``).
        check: whether a converted value is allowed.
        requirement: what ``check`` asks, as in ``"<name> must be <requirement>"``.
    """

    name: str
    default: Any
    convert: Callable[[Any], Any] = float
    check: Callable[[Any], bool] = field(default=lambda value: True)
    requirement: str = "a number"

    def validate(self, value: Any) -> Any:
        """The converted ``value``; ``ValueError`` naming the parameter and the value."""
        try:
            converted = self.convert(value)
            ok = bool(self.check(converted))
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            msg = f"{self.name} must be {self.requirement}, got {value!r}"
            raise ValueError(msg)
        return converted


class Parameters(Mapping[str, Any]):
    """The validated parameters of one attention kind, read-only (picklable)."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values = dict(values or {})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(self._values)

    def __eq__(self, other: object) -> bool:
        return dict(self) == dict(other) if isinstance(other, Mapping) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))


@dataclass(frozen=True)
class Transform:
    """The weight ``phi(S)`` of a logit ``S`` for a kind that is not exponential
    (``A_ij = phi(S_ij) / normaliser``; the exponential kinds have ``phi = exp`` and no entry).

    Args:
        apply: ``apply(S, parameters)`` overwrites the logits ``S`` (NumPy or torch) with
            ``phi(S)``; ``phi(-inf) = 0`` (the causal mask carries over).
        derivative: ``derivative(W, out)`` writes ``phi'(S)`` into ``out`` from the weights
            ``W = phi(S)`` (the divergence of the field in the Lagrangian solver needs it;
            a kind that declares ``"lagrangian"`` without it is refused).
        log: ``log(S, parameters)``: ``log phi(S)`` on NumPy arrays, accurate where
            ``phi(S)`` underflows; ``None``: the log of :attr:`apply`'s result.
        bound: ``sup phi`` (``phi <= 1`` with ``count`` normalisation bounds the row sums).
        profile: the name of its zonal profile in :data:`meanfield.kernels.fastsum.PROFILES`
            (the fast field's expansion of ``phi(beta t + b)`` in harmonics on ``S^1``,
            ``S^2``); ``None``: no fast path.
        bias: the kind's parameter that is ``b`` in ``phi(beta t + b)`` (the profile's shift;
            ``None``: ``b = 0``).
    """

    apply: Callable[[Any, Mapping[str, Any]], None]
    derivative: Callable[[Any, Any], None] | None = None
    log: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray] | None = None
    bound: float = math.inf
    profile: str | None = None
    bias: str | None = None

    def log_weight(self, S: np.ndarray, parameters: Mapping[str, Any]) -> np.ndarray:
        """``log phi(S)`` (NumPy)."""
        if self.log is not None:
            return self.log(S, parameters)
        W = np.array(S, dtype=float)
        self.apply(W, parameters)
        with np.errstate(divide="ignore"):
            return np.log(W)


METRICS = ("attention", "wasserstein")
"""The metrics of :class:`Energy` (docs/equations.md section 3, gradient-flow forms)."""


@dataclass(frozen=True)
class Energy:
    """The flow of a kind is a gradient flow of ``E_beta`` (docs/equations.md (3.5),
    section 3) when ``Q = K = I``, ``V = +-I``, without mask, noise or feed-forward term.

    Args:
        metric: ``"attention"`` (the metric weighted by ``Z_mu = K_beta * mu``: SA,
            ``dE/dt = int |X|^2 Z_mu dmu``) or ``"wasserstein"`` (USA, ``dE/dt = int |X|^2
            dmu``).
        statement: the gradient-flow form in one line.
    """

    metric: str
    statement: str

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            msg = f"Energy metric must be one of {METRICS}, got {self.metric!r}"
            raise ValueError(msg)


@dataclass(frozen=True)
class GaussianField:
    """The field of a kind at a Gaussian measure ``N(m, Sigma)`` in ``R^d``, affine in ``x``
    (docs/equations.md section 4, docs/gaussian.md section 1).

    Args:
        head: ``head(beta, Q, K, V, m, Sigma) -> (b_h, B_h)``, one head's field
            ``b_h + B_h x`` (``meanfield.gaussian.affine_field`` sums the heads).
        plain: the field is ``V (m + Sigma A x)``, ``A = beta K^T Q`` (the untilted law:
            ``meanfield.gaussian.interaction_matrix`` applies).
    """

    head: Callable[..., tuple[np.ndarray, np.ndarray]]
    plain: bool = False


@dataclass(frozen=True)
class AttentionKind:
    """One attention kind: its name, its mathematics, its parameters, and the solvers that
    implement it.

    Args:
        name: canonical name, lower case (the value :attr:`meanfield.Model.attention` holds).
        formula: the weights ``A_ij`` in one line.
        reference: where docs/equations.md states it.
        solvers: names from :data:`SOLVERS` that implement this kind.
        aliases: other accepted names (lower case; matching ignores case).
        parameters: the kind's own :class:`Parameter` s (the common ones, ``beta, value,
            noise, Q, K, V, heads, causal``, apply to every kind): :class:`meanfield.Model`
            keywords, with their defaults, validated by :meth:`parameter_values`.
        reasons: ``(solver, why)`` pairs: why a solver cannot support this kind, where that
            is a fact of the mathematics rather than missing code (quoted in the error).
        normalization: a key of :data:`NORMALIZATIONS`: ``"rows"``, ``"count"`` or
            ``"doubly"``.
        transform: the weight ``phi`` of a logit where it is not ``exp`` (:class:`Transform`).
        key_bias: ``key_bias(beta, k)``: a term ``c_j`` added to the logits ``beta <q_i,
            k_j>`` (``k`` of shape ``(..., m, d)``, NumPy or torch), or ``None``.
        energy: the gradient-flow structure (:class:`Energy`), or ``None``: no energy.
        gaussian: the field at a Gaussian measure (:class:`GaussianField`), or ``None``.
    """

    name: str
    formula: str
    reference: str
    solvers: frozenset[str]
    aliases: tuple[str, ...] = ()
    parameters: tuple[Parameter, ...] = ()
    reasons: tuple[tuple[str, str], ...] = field(default=())
    normalization: str = "rows"
    transform: Transform | None = None
    key_bias: Callable[[float, Any], Any] | None = None
    energy: Energy | None = None
    gaussian: GaussianField | None = None

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for label, value in [("name", self.name), *(("aliases", a) for a in self.aliases)]:
            if not isinstance(value, str) or not value or value != value.strip().lower():
                msg = f"AttentionKind {label} must be a non-empty lower-case string, got {value!r}"
                raise ValueError(msg)
        set_("aliases", tuple(self.aliases))
        set_("parameters", tuple(self.parameters))
        _check_solvers(f"AttentionKind {self.name!r} solvers", self.solvers)
        set_("solvers", frozenset(self.solvers))
        reasons = tuple((str(s), str(why)) for s, why in self.reasons)
        _check_solvers(f"AttentionKind {self.name!r} reasons", [s for s, _ in reasons])
        both = sorted({s for s, _ in reasons} & self.solvers)
        if both:
            msg = f"AttentionKind {self.name!r} gives reasons against solvers it supports: {both}"
            raise ValueError(msg)
        set_("reasons", reasons)
        self._check_mathematics()

    def _check_mathematics(self) -> None:
        label = f"AttentionKind {self.name!r}"
        if self.normalization not in NORMALIZATIONS:
            msg = (f"{label} normalization must be one of {tuple(NORMALIZATIONS)}, "
                   f"got {self.normalization!r}")
            raise ValueError(msg)
        names = [p.name for p in self.parameters if isinstance(p, Parameter)]
        if len(names) != len(self.parameters) or len(set(names)) != len(names):
            msg = f"{label} parameters must be Parameter entries with distinct names, got {names}"
            raise ValueError(msg)
        if ("lagrangian" in self.solvers and self.transform is not None
                and self.transform.derivative is None):
            msg = (f"{label} declares 'lagrangian' but its transform has no derivative: the "
                   "divergence of the field needs phi' (Transform.derivative)")
            raise ValueError(msg)

    # -- the mathematics, as the solvers ask for it ------------------------------------------

    @property
    def normalized(self) -> bool:
        """Whether the rows of ``A`` sum to 1 (``rows`` or ``doubly``; ``beta = 0`` then gives
        the plain mean)."""
        return self.normalization != "count"

    @property
    def exponential(self) -> bool:
        """Whether the weight of a logit is ``e^S`` (no :attr:`transform`)."""
        return self.transform is None

    @property
    def fast_profile(self) -> str | None:
        """The zonal profile the fast field expands (a key of
        :data:`meanfield.kernels.fastsum.PROFILES`): ``"exponential"`` for the exponential
        kinds, the transform's :attr:`Transform.profile` otherwise; ``None``: no fast path."""
        return "exponential" if self.transform is None else self.transform.profile

    @property
    def unshifted(self) -> bool:
        """Whether the weights are ``e^S`` divided by a count: their size is that of
        ``e^{beta <q, k>}`` itself, which overflows where that does (USA)."""
        return self.exponential and self.normalization == "count"

    @property
    def row_bounded(self) -> bool:
        """Whether every row sum ``sum_j A_ij`` is at most 1 (normalised rows, or weights
        ``phi <= 1`` divided by the count)."""
        return self.normalized or (self.transform is not None and self.transform.bound <= 1.0)

    @property
    def causal_degenerate(self) -> str | None:
        """Why a causal mask makes this kind degenerate, or ``None``: a lower-triangular
        doubly stochastic matrix is the identity."""
        if self.normalization == "doubly":
            return "the only lower-triangular doubly stochastic matrix is the identity"
        return None

    def has_energy(self, model: Any) -> bool:
        """Whether ``E_beta`` is monotone along the exact flow of ``model`` (docs/equations.md
        sections 2-3): a kind with an :class:`Energy`, ``Q = K = I``, ``V = +-I``, no mask,
        no noise, no feed-forward term."""
        return (self.energy is not None and model.is_identity and not model.causal
                and model.noise == 0 and getattr(model, "feedforward", None) is None)

    def gaussian_field(self) -> GaussianField:
        """The :class:`GaussianField`; ``ValueError`` if the entry has none."""
        if self.gaussian is None:
            msg = (f"attention={self.name!r} declares the 'gaussian' solver but its entry has no "
                   "Gaussian field (AttentionKind.gaussian)")
            raise ValueError(msg)
        return self.gaussian

    def flow_energy(self) -> Energy:
        """The :class:`Energy` (the spectral flow is written in its metric); ``ValueError``
        if the entry has none."""
        if self.energy is None:
            msg = (f"attention={self.name!r} has no interaction energy (AttentionKind.energy): the "
                   "spectral flow is the gradient flow of E_beta in the kind's metric")
            raise ValueError(msg)
        return self.energy

    # -- parameters ---------------------------------------------------------------------------

    def parameter(self, name: str) -> Parameter | None:
        """The :class:`Parameter` called ``name``, or ``None``."""
        return next((p for p in self.parameters if p.name == name), None)

    def parameter_values(self, given: Mapping[str, Any] | None = None) -> Parameters:
        """The kind's parameters: ``given`` validated, defaults for the others.

        ``ValueError`` for a value a parameter refuses (naming it and the value) and for a
        name that is not a parameter of this kind.
        """
        given = dict(given or {})
        out = {}
        for p in self.parameters:
            out[p.name] = p.validate(given.pop(p.name)) if p.name in given else p.default
        if given:
            msg = (f"attention={self.name!r} has no parameter(s) {sorted(given)}; its parameters: "
                   f"{tuple(p.name for p in self.parameters)}")
            raise ValueError(msg)
        return Parameters(out)

    def supports(self, solver: str) -> bool:
        """Whether ``solver`` implements this kind: ``True`` if the kind declares it, else
        ``False`` for a registered solver (:data:`SOLVERS`) and ``ValueError`` for any other."""
        return solver in self.solvers or not _registered("solver", solver)

    def reason(self, solver: str) -> str | None:
        """Why ``solver`` cannot support this kind, if the entry says."""
        return dict(self.reasons).get(solver)


def _check_solvers(label: str, solvers: Iterable[str]) -> None:
    """Solver names are non-empty lower-case strings; whether a package registers them is
    asked later (:func:`_registered`), so that a kind may name a solver of a package that is
    imported after it."""
    if isinstance(solvers, str):
        msg = f"{label} must be a collection of solver names, got the string {solvers!r}"
        raise ValueError(msg)
    bad = sorted(repr(s) for s in solvers
                 if not isinstance(s, str) or not s or s != s.strip().lower())
    if bad:
        msg = f"{label}: solver names must be non-empty lower-case strings, got {', '.join(bad)}"
        raise ValueError(msg)


def _registered(label: str, solver: str) -> str:
    """``solver`` if a package has registered it, else ``ValueError`` naming those that have."""
    if solver not in _SOLVERS:
        msg = (f"{label}: unknown solver {solver!r} (no package has registered it); "
               f"registered: {tuple(_SOLVERS)}")
        raise ValueError(msg)
    return solver


_REGISTRY: dict[str, AttentionKind] = {}
_LOOKUP: dict[str, str] = {}


def register(kind: AttentionKind) -> AttentionKind:
    """Add ``kind`` to the registry; ``ValueError`` if its name or an alias is taken."""
    if not isinstance(kind, AttentionKind):
        msg = f"kind must be an AttentionKind, got {type(kind).__name__}"
        raise ValueError(msg)
    for key in (kind.name, *kind.aliases):
        if key in _LOOKUP:
            msg = f"attention name {key!r} is already registered (for {_LOOKUP[key]!r})"
            raise ValueError(msg)
    _REGISTRY[kind.name] = kind
    for key in (kind.name, *kind.aliases):
        _LOOKUP[key] = kind.name
    return kind


def unregister(name: str) -> AttentionKind:
    """Remove the kind called ``name`` (or an alias of it) and return its entry."""
    kind = resolve(name)
    del _REGISTRY[kind.name]
    for key in (kind.name, *kind.aliases):
        del _LOOKUP[key]
    return kind


def resolve(name: str | AttentionKind) -> AttentionKind:
    """The registry entry for ``name``: a canonical name or an alias, in any case.

    ``ValueError`` naming the known kinds and aliases if there is none.
    """
    if isinstance(name, AttentionKind):
        name = name.name
    key = name.lower() if isinstance(name, str) else None
    if key not in _LOOKUP:
        aliases = ", ".join(f"{a!r} = {k.name!r}" for k in _REGISTRY.values() for a in k.aliases)
        msg = (f"attention must be one of {names()} (aliases: {aliases}; case is ignored), "
               f"got {name!r}")
        raise ValueError(msg)
    return _REGISTRY[_LOOKUP[key]]


def kinds(solver: str | None = None) -> tuple[AttentionKind, ...]:
    """The registered entries, in registration order; only those ``solver`` supports if given."""
    if solver is not None:
        _registered("solver", solver)
    return tuple(k for k in _REGISTRY.values() if solver is None or solver in k.solvers)


def names(solver: str | None = None) -> tuple[str, ...]:
    """Canonical names of the registered kinds; only those ``solver`` supports if given."""
    return tuple(k.name for k in kinds(solver))


def require(kind: str | AttentionKind, solver: str) -> AttentionKind:
    """The entry for ``kind`` if ``solver`` supports it.

    Raises ``ValueError`` for an unknown kind (listing the known ones), for a solver that
    the kind does not declare and no package has registered (listing those registered), and
    for a kind the solver does not support (naming the solvers that do, why not where the
    entry says, and the kinds the solver does support).
    """
    entry = resolve(kind)
    if solver in entry.solvers:  # the entry declares it: the solver's package is the caller
        return entry
    _registered("solver", solver)
    why = entry.reason(solver)
    others = [*(s for s in SOLVERS if s in entry.solvers), *sorted(entry.solvers - set(SOLVERS))]
    where = ("; solvers that support it: " + "; ".join(
        f"{s!r} ({SOLVERS.get(s, 'not registered: no imported package provides it')})"
        for s in others) if others else "; no solver supports it yet")
    msg = (f"attention={entry.name!r} is not supported by {solver!r} ({SOLVERS[solver]})"
           f"{': ' + why if why else ''}{where}; {solver!r} supports {names(solver)}")
    raise ValueError(msg)


def model_parameters(kind: str | AttentionKind, given: Mapping[str, Any]) -> Parameters:
    """The parameters of ``kind`` among the :class:`meanfield.Model` keywords ``given``.

    A parameter of another registered kind is validated by that kind and then dropped (it does
    not act on this kind; accepted so that one set of keywords serves several kinds, as
    before the parameters moved onto the entries); a name that no registered kind has is
    refused with ``ValueError``.
    """
    entry = resolve(kind)
    own = {}
    for name, value in given.items():
        if entry.parameter(name) is not None:
            own[name] = value
            continue
        other = next((p for k in _REGISTRY.values() if (p := k.parameter(name)) is not None), None)
        if other is None:
            known = sorted({p.name for k in _REGISTRY.values() for p in k.parameters})
            msg = (f"unknown attention parameter {name!r} (attention={entry.name!r} takes "
                   f"{tuple(p.name for p in entry.parameters)}; the registered kinds' parameters "
                   f"are {known})")
            raise ValueError(msg)
        other.validate(value)
    return entry.parameter_values(own)


# -- the built-in kinds' mathematics ----------------------------------------------------------


def _sigmoid(S: Any, parameters: Mapping[str, Any]) -> None:
    """``S <- sigmoid(S + b)`` in place, ``b = sigmoid_bias`` (``sigmoid(-inf) = 0``)."""
    bias = parameters["sigmoid_bias"]
    if bias:
        S += bias
    bk.sigmoid_(S)


def _sigmoid_derivative(W: Any, out: Any) -> None:
    """``sigmoid' = sigmoid (1 - sigmoid)`` from the weights ``W``, into ``out``."""
    bk.multiply(W, -1.0, out=out)
    out += 1.0
    out *= W


def _log_sigmoid(S: np.ndarray, parameters: Mapping[str, Any]) -> np.ndarray:
    """``log sigmoid(S + b) = -log(1 + e^{-(S + b)})`` without underflow."""
    return -np.logaddexp(0.0, -(S + parameters["sigmoid_bias"]))


def _l2_key_bias(beta: float, k: Any) -> Any:
    """``-beta |k_j|^2 / 2``: ``-beta |q_i - k_j|^2 / 2 = beta <q_i, k_j> - beta |k_j|^2 / 2``
    minus a term constant along the row, which cancels in the normalisation."""
    return -0.5 * beta * bk.rows_dot(k, k)


def _gaussian_softmax(beta: float, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                      mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Softmax at ``N(m, Sigma)``: ``V (m + Sigma A x)``, ``A = beta K^T Q`` (section 4)."""
    a = beta * (k.T @ q)
    return v @ mean, v @ (cov @ a)


def _gaussian_l2(beta: float, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                 mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L2 at ``N(m, Sigma)``: ``V (I + beta Sigma K^T K)^{-1} (m + Sigma A x)``, the mean of
    the tilted law, whose covariance is ``(Sigma^{-1} + beta K^T K)^{-1}`` (docs/gaussian.md)."""
    a = beta * (k.T @ q)
    d = mean.shape[0]
    vp = v @ np.linalg.solve(np.eye(d) + beta * cov @ (k.T @ k), np.eye(d))
    return vp @ mean, vp @ (cov @ a)


def _sinkhorn_cross(a: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``G`` with ``C = L G L^T`` the cross-covariance of the Sinkhorn coupling of
    ``N(m, L L^T)`` with itself: ``G (I - G^T G)^{-1} = L^T A^T L`` (docs/gaussian.md, 1)."""
    u, s, wt = np.linalg.svd(factor.T @ a.T @ factor)
    g = 2.0 * s / (1.0 + np.sqrt(1.0 + 4.0 * s * s))  # root in [0, 1) of g / (1 - g^2) = s
    return (u * g) @ wt


def _gaussian_sinkhorn(beta: float, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                       mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sinkhorn at ``N(m, Sigma)``: ``V E_pi[y | x] = V (m + L G^T L^{-1} (x - m))`` for the
    Gaussian coupling ``pi`` of ``mu`` with itself (``Sigma = L L^T`` must be positive
    definite; docs/gaussian.md section 1)."""
    factor = np.linalg.cholesky(cov)
    a = beta * (k.T @ q)
    g = _sinkhorn_cross(a, factor)
    slope = v @ factor @ np.linalg.solve(factor.T, g).T  # V L G^T L^{-1}
    return v @ mean - slope @ mean, slope



# the core's solvers (docs/equations.md sections 3 and 4; docs/lagrangian.md)
register_solver("spectral", "meanfield.solve, meanfield.make_flow", section=3)
register_solver("gaussian", "meanfield.solve_gaussian", section=4)
register_solver("lagrangian", "meanfield.solve_lagrangian, the characteristics of the weighted "
                "measure", section=3)


_ALL = frozenset({"particles", "angles", "spectral", "gaussian", "phase_diagram", "ensemble",
                  "lagrangian"})

_BUILTIN = (
    AttentionKind(
        name="softmax",
        aliases=("sa",),
        formula="A_ij = e^{beta <Q x_i, K x_j>} / sum_k e^{beta <Q x_i, K x_k>} (SA, (2.3))",
        reference="docs/equations.md sections 2-4",
        solvers=_ALL,
        normalization="rows",
        energy=Energy("attention", "d_t mu = -div(mu grad(dE/dmu) / Z_mu), Z_mu = K_beta * mu: "
                                   "the gradient flow of E_beta for the metric weighted by Z_mu"),
        gaussian=GaussianField(_gaussian_softmax, plain=True),
    ),
    AttentionKind(
        name="unnormalized",
        aliases=("usa",),
        formula="A_ij = e^{beta <Q x_i, K x_j>} / n (USA)",
        reference="docs/equations.md sections 2-4",
        solvers=frozenset({"particles", "angles", "spectral", "phase_diagram", "ensemble",
                           "lagrangian"}),
        reasons=(("gaussian", "no Gaussian reduction: its field carries the factor "
                              "exp(beta <Qx, K m> + ...) and is not affine in x"),),
        normalization="count",
        energy=Energy("wasserstein", "d_t mu = -div(mu grad(G_beta * mu)): the Wasserstein "
                                     "gradient flow of E_beta (Lemma 3.6)"),
    ),
    AttentionKind(
        name="l2",
        formula="A_ij proportional to e^{-beta |Q x_i - K x_j|^2 / 2}, rows summing to 1",
        reference="docs/equations.md sections 2 and 4",
        solvers=frozenset({"particles", "gaussian", "lagrangian"}),
        normalization="rows",
        key_bias=_l2_key_bias,
        gaussian=GaussianField(_gaussian_l2),
    ),
    AttentionKind(
        name="sigmoid",
        formula="A_ij = sigmoid(beta <Q x_i, K x_j> + b) / n, b = sigmoid_bias",
        reference="docs/equations.md section 2",
        solvers=frozenset({"particles", "lagrangian"}),
        parameters=(Parameter("sigmoid_bias", 0.0, float, math.isfinite, "finite"),),
        reasons=(("gaussian", "no Gaussian reduction: its field is not affine in x"),),
        normalization="count",
        transform=Transform(_sigmoid, _sigmoid_derivative, _log_sigmoid, bound=1.0,
                            profile="logistic", bias="sigmoid_bias"),
    ),
    AttentionKind(
        name="sinkhorn",
        formula="A = diag(a) E diag(b), E_ij = e^{beta <Q x_i, K x_j>}, doubly stochastic",
        reference="docs/equations.md section 2 and docs/gaussian.md",
        solvers=frozenset({"particles", "gaussian", "lagrangian"}),
        parameters=(Parameter("sinkhorn_iterations", 200, int, lambda n: n >= 1, ">= 1"),
                    Parameter("sinkhorn_tol", 1e-10, float, lambda t: t > 0, "> 0")),
        normalization="doubly",
        gaussian=GaussianField(_gaussian_sinkhorn),
    ),
)

for _kind in _BUILTIN:
    register(_kind)
del _kind

__all__ = [
    "METRICS", "NORMALIZATIONS", "SOLVERS", "AttentionKind", "Energy", "GaussianField", "Parameter",
    "Parameters", "Solver", "Transform", "kinds", "model_parameters", "names", "register",
    "register_solver", "require", "resolve", "unregister", "unregister_solver",
]
