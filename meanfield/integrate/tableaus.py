"""Explicit Runge–Kutta schemes as data: the one tableau registry of the project.

.. autosummary::
   ButcherTableau
   SCHEMES
   register_scheme
   get_scheme

A frozen :class:`ButcherTableau` checks its own consistency on construction (explicit, rows of
``a`` summing to ``c``, weights summing to 1, error weights to 0) and derives ``fsal``. Its
arrays are read-only. :class:`meanfield.integrate.RungeKutta` applies every scheme, in Lawson
(integrating-factor) form when the problem has a diagonal linear part, so that ``sigma
Laplacian`` is exact; the PDE solver and the particle system share these tableaus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ButcherTableau:
    """``c``, ``a`` (lower triangular), ``b``; ``b_error = b - b_hat`` for embedded pairs.

    Attributes:
        name: scheme name.
        order: order of ``b``.
        error_order: order of the embedded solution (0 if none).
        citation: where the coefficients come from.
    """

    name: str
    c: np.ndarray
    a: np.ndarray
    b: np.ndarray
    b_error: np.ndarray | None
    order: int
    error_order: int
    citation: str
    fsal: bool = field(init=False)

    def __post_init__(self) -> None:
        s = len(self.b)
        if self.a.shape != (s, s) or self.c.shape != (s,):
            msg = f"{self.name}: a must be {s}x{s} and c of length {s}"
            raise ValueError(msg)
        if np.any(np.triu(self.a) != 0):
            msg = f"{self.name}: a must be strictly lower triangular (explicit scheme)"
            raise ValueError(msg)
        if not np.allclose(self.a.sum(axis=1), self.c, atol=1e-14):
            msg = f"{self.name}: the rows of a must sum to c"
            raise ValueError(msg)
        if abs(self.b.sum() - 1) > 1e-14:
            msg = f"{self.name}: the weights b must sum to 1"
            raise ValueError(msg)
        if self.b_error is not None and abs(self.b_error.sum()) > 1e-14:
            msg = f"{self.name}: the error weights must sum to 0"
            raise ValueError(msg)
        if self.b_error is not None and self.b_error.shape != (s,):
            msg = f"{self.name}: b_error must have {s} entries"
            raise ValueError(msg)
        if self.order < 1 or (self.b_error is not None) != (self.error_order > 0):
            msg = (f"{self.name}: order must be >= 1, and error_order > 0 exactly when "
                   "b_error is given")
            raise ValueError(msg)
        for arr in (self.c, self.a, self.b, self.b_error):
            if arr is not None:
                arr.setflags(write=False)
        fsal = bool(self.c[-1] == 1 and np.array_equal(self.a[-1], self.b))
        object.__setattr__(self, "fsal", fsal)

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def adaptive(self) -> bool:
        return self.b_error is not None


def _tableau(name, c, a, b, b_hat, order, error_order, citation) -> ButcherTableau:
    s = len(b)
    A = np.zeros((s, s))
    for i, row in enumerate(a):
        A[i, : len(row)] = row
    b = np.array(b, dtype=float)
    err = None if b_hat is None else b - np.array(b_hat, dtype=float)
    return ButcherTableau(name, np.array(c, float), A, b, err, order, error_order, citation)


DOPRI5 = _tableau(
    "dopri5",
    [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1],
    [
        [],
        [1 / 5],
        [3 / 40, 9 / 40],
        [44 / 45, -56 / 15, 32 / 9],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
        [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
    ],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0],
    [5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40],
    5,
    4,
    "Dormand & Prince (1980), J. Comput. Appl. Math. 6(1):19-26",
)

BOSH3 = _tableau(
    "bosh3",
    [0, 1 / 2, 3 / 4, 1],
    [[], [1 / 2], [0, 3 / 4], [2 / 9, 1 / 3, 4 / 9]],
    [2 / 9, 1 / 3, 4 / 9, 0],
    [7 / 24, 1 / 4, 1 / 3, 1 / 8],
    3,
    2,
    "Bogacki & Shampine (1989), Appl. Math. Lett. 2(4):321-325",
)

EULER = _tableau(
    "euler",
    [0],
    [[]],
    [1],
    None,
    1,
    0,
    "Euler (1768), Institutionum calculi integralis; one residual layer x + h f(x)",
)

RK4 = _tableau(
    "rk4",
    [0, 1 / 2, 1 / 2, 1],
    [[], [1 / 2], [0, 1 / 2], [0, 0, 1]],
    [1 / 6, 1 / 3, 1 / 3, 1 / 6],
    None,
    4,
    0,
    "Kutta (1901), the classical fourth-order method",
)

SCHEMES: dict[str, ButcherTableau] = {t.name: t for t in (DOPRI5, BOSH3, RK4, EULER)}
"""Registered schemes by name."""


def register_scheme(tableau: ButcherTableau) -> ButcherTableau:
    """Add a (checked) tableau to :data:`SCHEMES` under its name; returns it."""
    if not isinstance(tableau, ButcherTableau):
        msg = f"register_scheme needs a ButcherTableau, got {type(tableau).__name__}"
        raise ValueError(msg)
    if tableau.name in SCHEMES and SCHEMES[tableau.name] is not tableau:
        msg = f"a scheme named {tableau.name!r} is already registered"
        raise ValueError(msg)
    SCHEMES[tableau.name] = tableau
    return tableau


def get_scheme(name: str | ButcherTableau) -> ButcherTableau:
    """The registered tableau ``name`` (or ``name`` itself when it is a tableau)."""
    if isinstance(name, ButcherTableau):
        return name
    try:
        return SCHEMES[name]
    except KeyError:
        msg = f"scheme must be one of {sorted(SCHEMES)}, got {name!r}"
        raise ValueError(msg) from None


__all__ = ["BOSH3", "DOPRI5", "EULER", "RK4", "SCHEMES", "ButcherTableau", "get_scheme", "register_scheme"]
