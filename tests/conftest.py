"""Shared fixtures: a seeded generator, the benchmark scripts as modules."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (a minute or more) go first, so that with parallel workers
    (``pytest -n``, pytest-xdist) they start at once instead of finishing alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


def _load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded from its file as the module ``name``. The benchmarks are
    scripts (``python benchmarks/bench_x.py``: their folder is then the first entry of
    ``sys.path``), not a package; the sibling scripts a benchmark imports at its top level
    (``authors_scheme``) are loaded first, the same way, so that its imports resolve as when it
    runs, without an edit of ``sys.path``."""
    if name in sys.modules:
        return sys.modules[name]
    path = BENCHMARKS / f"{name}.py"
    for node in ast.parse(path.read_text()).body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        for sibling in names:
            if (BENCHMARKS / f"{sibling}.py").is_file():
                _load_benchmark(sibling)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would (dataclasses, pickling look it up)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """``load_benchmark("bench_x")``: the module of ``benchmarks/bench_x.py``
    (:func:`_load_benchmark`)."""
    return _load_benchmark
