"""The record every check returns: numeric comparisons, from which ``passed`` is computed.

.. autosummary::
   KINDS
   Comparison
   CheckResult

A check does not say whether it passed: it returns the numbers it compared (``measured``,
``expected``, a numeric ``tolerance`` and the kind of comparison), and the record decides.
A ``NaN`` anywhere in a comparison fails it; a record with no comparison is refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

KINDS: dict[str, str] = {
    "abs": "|measured - expected| <= tolerance",
    "rel": "|measured - expected| <= tolerance * |expected|",
    "max": "measured <= expected + tolerance",
    "min": "measured >= expected - tolerance",
    "ci": "low <= expected <= high (the interval measured around `measured`)",
}
"""The comparison kinds and the rule each applies."""


def _as_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        msg = f"{name} must be a number, got {value!r}"
        raise ValueError(msg) from None


@dataclass(frozen=True)
class Comparison:
    """One numeric comparison of a check (rules in :data:`KINDS`).

    Attributes:
        what: what is compared, in words (``"PDE circle softmax k=1: growth rate"``).
        measured: the measured value (for ``"ci"``: the point estimate).
        expected: the expected value (for ``"max"``/``"min"``: the bound).
        tolerance: the allowed deviation, ``>= 0`` (absolute; relative for ``"rel"``;
            unused for ``"ci"``, whose interval is ``[low, high]``).
        kind: one of :data:`KINDS`.
        low, high: the interval of a ``"ci"`` comparison (a confidence interval of
            ``measured`` that must contain ``expected``).
    """

    what: str
    measured: float
    expected: float
    tolerance: float = 0.0
    kind: str = "abs"
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"kind must be one of {tuple(KINDS)}, got {self.kind!r}"
            raise ValueError(msg)
        for name in ("measured", "expected", "tolerance"):
            object.__setattr__(self, name, _as_float(name, getattr(self, name)))
        if self.kind == "ci":
            if self.low is None or self.high is None:
                msg = f"a 'ci' comparison needs low and high, got low={self.low!r}, high={self.high!r}"
                raise ValueError(msg)
            object.__setattr__(self, "low", _as_float("low", self.low))
            object.__setattr__(self, "high", _as_float("high", self.high))
        elif not self.tolerance >= 0.0:  # also refuses NaN
            msg = f"tolerance must be >= 0, got {self.tolerance!r} ({self.what})"
            raise ValueError(msg)

    @property
    def passed(self) -> bool:
        """The rule of :data:`KINDS` for ``kind``; ``False`` whenever a number is ``NaN``."""
        m, e, tol = self.measured, self.expected, self.tolerance
        if self.kind == "abs":
            return abs(m - e) <= tol
        if self.kind == "rel":
            return abs(m - e) <= tol * abs(e)
        if self.kind == "max":
            return m <= e + tol
        if self.kind == "min":
            return m >= e - tol
        return bool(self.low <= e <= self.high)  # type: ignore[operator]

    @property
    def ratio(self) -> float:
        """Deviation over allowed deviation (``<= 1`` passes) for ``abs``, ``rel`` and
        ``ci``; ``NaN`` for the one-sided kinds."""
        m, e = self.measured, self.expected
        if self.kind in ("abs", "rel"):
            allowed = self.tolerance * (abs(e) if self.kind == "rel" else 1.0)
            dev = abs(m - e)
            return dev / allowed if allowed > 0 else (0.0 if dev == 0 else math.inf)
        if self.kind == "ci":
            side = (self.high - m) if e >= m else (m - self.low)  # type: ignore[operator]
            return abs(e - m) / side if side > 0 else (0.0 if e == m else math.inf)
        return math.nan

    def describe(self) -> str:
        """``what: measured vs expected (rule)``, for tables."""
        m, e = f"{self.measured:.6g}", f"{self.expected:.6g}"
        if self.kind == "ci":
            rule = f"{e} in [{self.low:.6g}, {self.high:.6g}]"
        elif self.kind == "max":
            rule = f"<= {e}" + (f" + {self.tolerance:.3g}" if self.tolerance else "")
        elif self.kind == "min":
            rule = f">= {e}" + (f" - {self.tolerance:.3g}" if self.tolerance else "")
        else:
            rule = f"{e} ± {self.tolerance:.3g}" + (" relative" if self.kind == "rel" else "")
            rule += f"; off by {abs(self.measured - self.expected):.2g}"
        return f"{self.what}: {m} (expected {rule})"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one validation check.

    Attributes:
        name: short identifier (``"circle.growth_rates"``).
        quantity: what is compared, in words.
        comparisons: the numeric comparisons; the check passes when all of them do.
        description: the expected law and the tolerance, in words, for display (the
            argument for the tolerance is in the check's docstring).
        details: extra numbers (JSON-able) for the report.
        data: an optional ``xarray.Dataset`` with the raw numbers behind the figure.
        figure: optional path of a PNG figure.
        error: a traceback when the check raised instead of finishing.

    Raises:
        ValueError: no comparison and no error (a check that compares nothing cannot pass).
    """

    name: str
    quantity: str
    comparisons: tuple[Comparison, ...] = ()
    description: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    data: Any = field(default=None, compare=False, repr=False)
    figure: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        comps = tuple(c if isinstance(c, Comparison) else Comparison(**c) for c in self.comparisons)
        object.__setattr__(self, "comparisons", comps)
        if not comps and self.error is None:
            msg = (f"check {self.name!r}: comparisons must not be empty (a check that compares nothing "
                   "cannot pass)")
            raise ValueError(msg)

    @property
    def passed(self) -> bool:
        """Every comparison passed and the check did not raise."""
        return self.error is None and bool(self.comparisons) and all(c.passed for c in self.comparisons)

    @property
    def status(self) -> str:
        """``"pass"``, ``"FAIL"`` or ``"ERROR"``."""
        if self.error is not None:
            return "ERROR"
        return "pass" if self.passed else "FAIL"

    @property
    def worst(self) -> Comparison | None:
        """The first failed comparison, else the one closest to its bound (largest
        :attr:`Comparison.ratio`), else the first."""
        return worst(self.comparisons)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("data")
        out["passed"] = self.passed
        return out

    def to_json(self) -> str:
        """Standard JSON (see :func:`json_safe`)."""
        return json.dumps(json_safe(self.to_dict()))

    @classmethod
    def from_dict(cls, rec: dict[str, Any]) -> CheckResult:
        """Inverse of :meth:`to_dict` (``data`` is not stored there; non-finite numbers may come
        back as strings such as ``"inf"``)."""
        return cls(name=rec["name"], quantity=rec.get("quantity", ""),
                   comparisons=tuple(Comparison(**c) for c in rec.get("comparisons") or ()),
                   description=rec.get("description", ""), details=rec.get("details") or {},
                   figure=rec.get("figure"), error=rec.get("error"))


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists, non-finite floats
    as strings (``"inf"``, ``"nan"``: standard JSON) and anything else unknown as ``str``."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def worst(comparisons: Iterable[Comparison]) -> Comparison | None:
    """See :attr:`CheckResult.worst`."""
    comps = list(comparisons)
    if not comps:
        return None
    failed = [c for c in comps if not c.passed]
    if failed:
        return failed[0]
    scored = [c for c in comps if math.isfinite(c.ratio)]
    return max(scored, key=lambda c: c.ratio) if scored else comps[0]


__all__ = ["KINDS", "CheckResult", "Comparison", "json_safe", "worst"]
