"""Shared fixtures: a seeded generator, domains to iterate over."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (a minute or more) go first, so that with parallel workers
    (``pytest -n``, pytest-xdist) they start at once instead of finishing alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)
