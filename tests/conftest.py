"""Shared fixtures: a seeded generator, domains to iterate over."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)
