"""The code style gates of the project, run with the tests (so by CI): ruff (lint rules in
pyproject.toml, line length included) and mypy (types of every module of the three packages,
none exempt). The import structure is gated by tests/test_imports.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    pytest.importorskip("ruff", reason="ruff is in the [test] extra")
    proc = _run(sys.executable, "-m", "ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean():
    pytest.importorskip("mypy", reason="mypy is in the [test] extra")
    proc = _run(sys.executable, "-m", "mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
