"""The attention registry: every attention kind, its parameters, and which solvers support it.

.. autosummary::
   AttentionKind
   SOLVERS
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

SOLVERS: Mapping[str, str] = MappingProxyType({
    "particles": "particles.simulate, particles.velocity",
    "angles": "particles.angles, the circle in angles (7.1)",
    "spectral": "meanfield.solve, meanfield.make_flow",
    "gaussian": "meanfield.solve_gaussian",
    "phase_diagram": "validation.phase_diagram, with the gamma-ODE (6.9)/(6.10)",
    "ensemble": "particles.ensemble, many small systems with per-realisation matrices",
    "lagrangian": "meanfield.solve_lagrangian, the characteristics of the weighted measure",
})
"""The solvers an attention kind may declare, by name, with their entry points:
``particles`` the finite-n system (docs/equations.md section 2), ``angles`` its circle form
(7.1) (section 2), ``spectral`` the mean-field PDE (section 3), ``gaussian`` the Gaussian
reduction in ``R^d`` (section 4), ``phase_diagram`` the phase diagram study (sections 4-5),
``ensemble`` the batched ensembles of SA/USA systems behind it (section 2), ``lagrangian``
the method of characteristics for the mean-field PDE on weighted nodes (docs/lagrangian.md)."""


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
        set_("solvers", frozenset(self.solvers))
        _check_solvers(f"AttentionKind {self.name!r} solvers", self.solvers)
        reasons = tuple((str(s), str(why)) for s, why in self.reasons)
        _check_solvers(f"AttentionKind {self.name!r} reasons", [s for s, _ in reasons])
        both = sorted({s for s, _ in reasons} & self.solvers)
        if both:
            msg = f"AttentionKind {self.name!r} gives reasons against solvers it supports: {both}"
            raise ValueError(msg)
        set_("reasons", reasons)

    def supports(self, solver: str) -> bool:
        """Whether ``solver`` (a name in :data:`SOLVERS`) implements this kind."""
        _check_solvers("solver", [solver])
        return solver in self.solvers

    def reason(self, solver: str) -> str | None:
        """Why ``solver`` cannot support this kind, if the entry says."""
        return dict(self.reasons).get(solver)


def _check_solvers(label: str, solvers: Iterable[str]) -> None:
    unknown = sorted(set(solvers) - set(SOLVERS))
    if unknown:
        msg = f"{label}: unknown solver(s) {unknown}; known: {tuple(SOLVERS)}"
        raise ValueError(msg)


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
        _check_solvers("solver", [solver])
    return tuple(k for k in _REGISTRY.values() if solver is None or solver in k.solvers)


def names(solver: str | None = None) -> tuple[str, ...]:
    """Canonical names of the registered kinds; only those ``solver`` supports if given."""
    return tuple(k.name for k in kinds(solver))


def require(kind: str | AttentionKind, solver: str) -> AttentionKind:
    """The entry for ``kind`` if ``solver`` supports it.

    Raises ``ValueError`` for an unknown kind (listing the known ones) and for a kind the
    solver does not support (naming the solvers that do, why not where the entry says, and
    the kinds the solver does support).
    """
    _check_solvers("solver", [solver])
    entry = resolve(kind)
    if solver in entry.solvers:
        return entry
    why = entry.reason(solver)
    others = [s for s in SOLVERS if s in entry.solvers]
    where = ("; solvers that support it: " + "; ".join(f"{s!r} ({SOLVERS[s]})" for s in others)
             if others else "; no solver supports it yet")
    msg = (f"attention={entry.name!r} is not supported by {solver!r} ({SOLVERS[solver]})"
           f"{': ' + why if why else ''}{where}; {solver!r} supports {names(solver)}")
    raise ValueError(msg)


_ALL = frozenset(SOLVERS)

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
    "SOLVERS", "AttentionKind", "kinds", "names", "register", "require", "resolve", "unregister",
]
