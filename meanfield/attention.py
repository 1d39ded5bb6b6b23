"""The attention registry: every attention kind, its parameters, and which solvers support it.

.. autosummary::
   AttentionKind
   SOLVERS
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
section 2), which :class:`meanfield.Model` fields belong to each, and which solvers implement
it. :class:`meanfield.Model` validates its ``attention`` here; every solver calls
:func:`require` before it starts, so that an unsupported kind is refused with a
``ValueError`` that names the solvers that do support it.

Names are case-insensitive and have aliases: ``resolve("SOFTMAX")``, ``resolve("SA")`` and
``resolve("sa")`` all give the ``softmax`` entry, and a :class:`~meanfield.Model` stores the
canonical lower-case name (``Model(1.0, attention="SA").attention == "softmax"``).
Surrounding whitespace is not stripped.

Adding a variant (docs/extending.md): one :class:`AttentionKind` entry in :data:`_BUILTIN`
(or a :func:`register` call), plus the implementation in each solver it declares, e.g. one
``meanfield.kernels.Kernel`` subclass with the same ``name`` for ``"particles"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


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


@dataclass(frozen=True)
class AttentionKind:
    """One attention kind: its name, its parameters, and the solvers that implement it.

    Args:
        name: canonical name, lower case (the value :attr:`meanfield.Model.attention` holds).
        formula: the weights ``A_ij`` in one line.
        reference: where docs/equations.md states it.
        solvers: names from :data:`SOLVERS` that implement this kind.
        aliases: other accepted names (lower case; matching ignores case).
        parameters: the :class:`meanfield.Model` fields that only this kind reads (the
            common ones, ``beta, value, noise, Q, K, V, heads, causal``, apply to every kind).
        reasons: ``(solver, why)`` pairs: why a solver cannot support this kind, where that
            is a fact of the mathematics rather than missing code (quoted in the error).
    """

    name: str
    formula: str
    reference: str
    solvers: frozenset[str]
    aliases: tuple[str, ...] = ()
    parameters: tuple[str, ...] = ()
    reasons: tuple[tuple[str, str], ...] = field(default=())

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
    ),
    AttentionKind(
        name="l2",
        formula="A_ij proportional to e^{-beta |Q x_i - K x_j|^2 / 2}, rows summing to 1",
        reference="docs/equations.md sections 2 and 4",
        solvers=frozenset({"particles", "gaussian", "lagrangian"}),
    ),
    AttentionKind(
        name="sigmoid",
        formula="A_ij = sigmoid(beta <Q x_i, K x_j> + b) / n, b = sigmoid_bias",
        reference="docs/equations.md section 2",
        solvers=frozenset({"particles", "lagrangian"}),
        parameters=("sigmoid_bias",),
        reasons=(("gaussian", "no Gaussian reduction: its field is not affine in x"),),
    ),
    AttentionKind(
        name="sinkhorn",
        formula="A = diag(a) E diag(b), E_ij = e^{beta <Q x_i, K x_j>}, doubly stochastic",
        reference="docs/equations.md section 2 and docs/gaussian.md",
        solvers=frozenset({"particles", "gaussian", "lagrangian"}),
        parameters=("sinkhorn_iterations", "sinkhorn_tol"),
    ),
)

for _kind in _BUILTIN:
    register(_kind)
del _kind

__all__ = [
    "SOLVERS", "AttentionKind", "Solver", "kinds", "names", "register", "register_solver",
    "require", "resolve", "unregister", "unregister_solver",
]
