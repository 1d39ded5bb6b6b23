"""The record every check returns.

.. autosummary::
   CheckResult
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one validation check.

    Attributes:
        name: short identifier (``"circle.growth_rates"``).
        quantity: what is compared, in words.
        expected: the expected value or law, in words or a number.
        measured: the measured value.
        tolerance: the tolerance, with the argument for it in the check's docstring.
        passed: whether ``measured`` agrees with ``expected`` within ``tolerance``.
        details: extra numbers (JSON-able) for the report.
        data: an optional ``xarray.Dataset`` with the raw numbers behind the figure.
        figure: optional path of a PNG figure.
        error: a traceback when the check raised instead of finishing.
    """

    name: str
    quantity: str
    expected: Any
    measured: Any
    tolerance: Any
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)
    data: Any = field(default=None, compare=False, repr=False)
    figure: str | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "ERROR"
        return "pass" if self.passed else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("data")
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)


__all__ = ["CheckResult"]
