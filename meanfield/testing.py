"""Helpers for tests of results (used by the project's tests; useful to users' own).

.. autosummary::
   assert_same_result
"""

from __future__ import annotations

import xarray as xr

RUN_SPECIFIC = ("wall_time_s", "created")
"""Result attrs that differ between two runs of the same computation."""


def assert_same_result(a: xr.Dataset, b: xr.Dataset) -> None:
    """``a`` and ``b`` are the same computation: identical data, coordinates and attrs, except
    the run-specific attrs (:data:`RUN_SPECIFIC`)."""
    a2, b2 = a.copy(), b.copy()
    a2.attrs, b2.attrs = ({k: v for k, v in ds.attrs.items() if k not in RUN_SPECIFIC}
                          for ds in (a, b))
    xr.testing.assert_identical(a2, b2)


__all__ = ["RUN_SPECIFIC", "assert_same_result"]
