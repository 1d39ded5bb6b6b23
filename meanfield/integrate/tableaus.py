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
class ContinuousExtension:
    """A scheme's own dense output in Hairer's form (DOP853's ``CONTD8``).

    ``e`` extra stages ``k_{s+i} = F(y + h sum_j a_ij k_j)`` (``j`` over the ``s`` stages of
    the step and the extra stages before), then with ``dy = y_1 - y_0``: ``r_0 = dy``,
    ``r_1 = h k_1 - dy``, ``r_2 = 2 dy - h (k_1 + F(y_1))``, ``r_{3+i} = h sum_j d_ij k_j``,
    and ``y(t + theta h) = y_0 + theta (r_0 + (1 - theta) (r_1 + theta (r_2 + (1 - theta)
    (r_3 + ...))))``.

    Attributes:
        c: the extra stages' nodes, shape ``(e,)``.
        a: their coefficients, shape ``(e, s + e)`` (row ``i`` uses the first ``s + i``).
        d: the coefficients of ``r_3, r_4, ...``, shape ``(m, s + e)``.
        citation: where the coefficients come from.
    """

    c: np.ndarray
    a: np.ndarray
    d: np.ndarray
    citation: str

    def __post_init__(self) -> None:
        e = len(self.c)
        if self.a.ndim != 2 or self.a.shape[0] != e or self.d.ndim != 2 or (
                self.d.shape[1] != self.a.shape[1]):
            msg = (f"a continuous extension needs a of shape (e, s + e) with e = {e} and d of "
                   f"the same width, got a {self.a.shape}, d {self.d.shape}")
            raise ValueError(msg)
        if not np.allclose(self.a.sum(axis=1), self.c, atol=1e-14):
            msg = "the rows of the extension's a must sum to its c"
            raise ValueError(msg)
        for arr in (self.c, self.a, self.d):
            arr.setflags(write=False)


@dataclass(frozen=True)
class ButcherTableau:
    """``c``, ``a`` (lower triangular), ``b``; ``b_error = b - b_hat`` for embedded pairs.

    Attributes:
        name: scheme name.
        order: order of ``b``.
        error_order: order of the embedded solution (0 if none).
        citation: where the coefficients come from.
        b_error_low: a second error estimate ``b - b_low`` from a lower-order embedded
            solution, for schemes whose step-size control combines two (Hairer's DOP853:
            :meth:`meanfield.integrate.PIController.error_norm`); ``None`` for one.
        error_order_low: the order of ``b - b_error_low`` (0 if none).
        dense: the scheme's own continuous extension (``None``: the engine interpolates by
            cubic Hermite); an FSAL scheme's, whose last stage is ``F(y_1)``.
    """

    name: str
    c: np.ndarray
    a: np.ndarray
    b: np.ndarray
    b_error: np.ndarray | None
    order: int
    error_order: int
    citation: str
    b_error_low: np.ndarray | None = None
    error_order_low: int = 0
    dense: ContinuousExtension | None = None
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
        self._check_low()
        for arr in (self.c, self.a, self.b, self.b_error, self.b_error_low):
            if arr is not None:
                arr.setflags(write=False)
        fsal = bool(self.c[-1] == 1 and np.array_equal(self.a[-1], self.b))
        object.__setattr__(self, "fsal", fsal)
        if self.dense is not None and not (fsal and self.dense.a.shape[1] == s + len(self.dense.c)):
            msg = (f"{self.name}: a continuous extension needs an FSAL scheme (F(y_1) is its "
                   f"last stage) and rows over its {s} stages and the extra ones")
            raise ValueError(msg)

    def _check_low(self) -> None:
        """The second error estimate: only beside a first, of lower order, summing to 0."""
        low = self.b_error_low
        if (low is not None) != (self.error_order_low > 0):
            msg = (f"{self.name}: error_order_low > 0 exactly when b_error_low is given, got "
                   f"error_order_low = {self.error_order_low}")
            raise ValueError(msg)
        if low is None:
            return
        if self.b_error is None or not 0 < self.error_order_low < self.error_order:
            msg = (f"{self.name}: b_error_low needs b_error, and error_order_low = "
                   f"{self.error_order_low} must be below error_order = {self.error_order}")
            raise ValueError(msg)
        if low.shape != (len(self.b),) or abs(low.sum()) > 1e-14:
            msg = f"{self.name}: b_error_low must have {len(self.b)} entries summing to 0"
            raise ValueError(msg)

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def adaptive(self) -> bool:
        return self.b_error is not None

    @property
    def estimate_order(self) -> int:
        """The order ``q`` of the error estimate the step-size control sees (local error
        ``~ h^(q+1)``): ``error_order``, or with two estimates of orders ``p > p_low``
        combined as ``|e|^2 / sqrt(|e|^2 + 0.01 |e_low|^2)`` (``~ h^(2(p+1) - (p_low+1))``
        for small ``h``), ``2 p - p_low`` (7 for DOP853's 5 and 3, the ``error_estimator_order``
        of Hairer's code and of scipy's ``DOP853``)."""
        if self.b_error_low is None:
            return self.error_order
        return 2 * self.error_order - self.error_order_low


def _tableau(name, c, a, b, b_hat, order, error_order, citation, error=None, error_low=None,
             error_order_low=0, dense=None) -> ButcherTableau:
    """A tableau from rows of ``a``; the error weights as ``b - b_hat`` or given as ``error``
    (and a second estimate ``error_low``)."""
    s = len(b)
    A = np.zeros((s, s))
    for i, row in enumerate(a):
        A[i, : len(row)] = row
    b = np.array(b, dtype=float)
    err = None if b_hat is None else b - np.array(b_hat, dtype=float)
    if error is not None:
        err = np.array(error, dtype=float)
    low = None if error_low is None else np.array(error_low, dtype=float)
    return ButcherTableau(name, np.array(c, float), A, b, err, order, error_order, citation,
                          low, error_order_low, dense)


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

def _extension(c, a, d, citation) -> ContinuousExtension:
    """A :class:`ContinuousExtension` from rows (row ``i`` of ``a`` padded to the width of
    ``d``)."""
    width = len(d[0])
    A = np.zeros((len(c), width))
    for i, row in enumerate(a):
        A[i, : len(row)] = row
    return ContinuousExtension(np.array(c, float), A, np.array(d, float), citation)


DOP853 = _tableau(
    "dop853",
    [0.0, 0.05260015195876773, 0.0789002279381516, 0.1183503419072274, 0.2816496580927726,
     0.3333333333333333, 0.25, 0.3076923076923077, 0.6512820512820513, 0.6, 0.8571428571428571,
     1.0, 1.0],
    [
        [],
        [0.05260015195876773],
        [0.0197250569845379, 0.0591751709536137],
        [0.02958758547680685, 0.0, 0.08876275643042054],
        [0.2413651341592667, 0.0, -0.8845494793282861, 0.924834003261792],
        [0.037037037037037035, 0.0, 0.0, 0.17082860872947386, 0.12546768756682242],
        [0.037109375, 0.0, 0.0, 0.17025221101954405, 0.06021653898045596, -0.017578125],
        [0.03709200011850479, 0.0, 0.0, 0.17038392571223998, 0.10726203044637328,
         -0.015319437748624402, 0.008273789163814023],
        [0.6241109587160757, 0.0, 0.0, -3.3608926294469414, -0.868219346841726,
         27.59209969944671, 20.154067550477894, -43.48988418106996],
        [0.47766253643826434, 0.0, 0.0, -2.4881146199716677, -0.590290826836843,
         21.230051448181193, 15.279233632882423, -33.28821096898486, -0.020331201708508627],
        [-0.9371424300859873, 0.0, 0.0, 5.186372428844064, 1.0914373489967295,
         -8.149787010746927, -18.52006565999696, 22.739487099350505, 2.4936055526796523,
         -3.0467644718982196],
        [2.273310147516538, 0.0, 0.0, -10.53449546673725, -2.0008720582248625, -17.9589318631188,
         27.94888452941996, -2.8589982771350235, -8.87285693353063, 12.360567175794303,
         0.6433927460157636],
        [0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003,
         -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034,
         0.04471061572777259],
    ],
    [0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003,
     -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034,
     0.04471061572777259, 0.0],
    None,
    8,
    5,
    "Dormand & Prince (1981), J. Comput. Appl. Math. 7(1):67-75, with the 5th- and 3rd-order "
    "error estimates of Hairer, Norsett & Wanner, Solving ODEs I (2nd ed., 1993), II.10, code "
    "DOP853; coefficients to 17 digits from scipy.integrate._ivp.dop853_coefficients (BSD), the "
    "13th stage f(y_new) as the FSAL row",
    error=[0.01312004499419488, 0.0, 0.0, 0.0, 0.0, -1.2251564463762044, -0.4957589496572502,
     1.6643771824549864, -0.35032884874997366, 0.3341791187130175, 0.08192320648511571,
     -0.022355307863886294, 0.0],
    error_low=[-0.18980075407240762, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003,
     -5.801203960010585, -0.4226823213237919, -0.1521609496625161, 0.20136540080403034,
     0.02265179219836082, 0.0],
    error_order_low=3,
    dense=_extension(
        [0.1, 0.2, 0.7777777777777778],
        [
            [0.056167502283047954, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25350021021662483,
             -0.2462390374708025, -0.12419142326381637, 0.15329179827876568, 0.00820105229563469,
             0.007567897660545699, -0.008298],
            [0.03183464816350214, 0.0, 0.0, 0.0, 0.0, 0.028300909672366776, 0.053541988307438566,
             -0.05492374857139099, 0.0, 0.0, -0.00010834732869724932, 0.0003825710908356584,
             -0.00034046500868740456, 0.1413124436746325],
            [-0.42889630158379194, 0.0, 0.0, 0.0, 0.0, -4.697621415361164, 7.683421196062599,
             4.06898981839711, 0.3567271874552811, 0.0, 0.0, 0.0, -0.0013990241651590145,
             2.9475147891527724, -9.15095847217987],
        ],
        [
            [-8.428938276109013, 0.0, 0.0, 0.0, 0.0, 0.5667149535193777, -3.0689499459498917,
             2.38466765651207, 2.117034582445028, -0.871391583777973, 2.2404374302607883,
             0.6315787787694688, -0.08899033645133331, 18.148505520854727, -9.194632392478356,
             -4.436036387594894],
            [10.427508642579134, 0.0, 0.0, 0.0, 0.0, 242.28349177525817, 165.20045171727028,
             -374.5467547226902, -22.113666853125306, 7.733432668472264, -30.674084731089398,
             -9.332130526430229, 15.697238121770845, -31.139403219565178, -9.35292435884448,
             35.81684148639408],
            [19.985053242002433, 0.0, 0.0, 0.0, 0.0, -387.0373087493518, -189.17813819516758,
             527.8081592054236, -11.57390253995963, 6.8812326946963, -1.0006050966910838,
             0.7777137798053443, -2.778205752353508, -60.19669523126412, 84.32040550667716,
             11.99229113618279],
            [-25.69393346270375, 0.0, 0.0, 0.0, 0.0, -154.18974869023643, -231.5293791760455,
             357.6391179106141, 93.40532418362432, -37.45832313645163, 104.0996495089623,
             29.8402934266605, -43.53345659001114, 96.32455395918828, -39.17726167561544,
             -149.72683625798564],
        ],
        "Hairer, Norsett & Wanner, Solving ODEs I, II.6 and code DOP853 (CONTD8); coefficients "
        "from scipy.integrate._ivp.dop853_coefficients",
    ),
)
"""Dormand-Prince 8(5,3): order 8 with 12 new stages a step; the step-size control combines
its two error estimates (5th and 3rd order) as Hairer's DOP853 and scipy's ``DOP853`` do
(:attr:`ButcherTableau.estimate_order` 7); a continuous extension of order 7 (3 more stages
in a step that holds output times) for the engine's ``dense=True``."""

SCHEMES: dict[str, ButcherTableau] = {t.name: t for t in (DOPRI5, DOP853, BOSH3, RK4, EULER)}
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


__all__ = ["BOSH3", "DOP853", "DOPRI5", "EULER", "RK4", "SCHEMES", "ButcherTableau",
           "ContinuousExtension", "get_scheme", "register_scheme"]
