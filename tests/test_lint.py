"""The code style gates of the project, run with the tests (so by CI): ruff (lint rules in
pyproject.toml, line length included), mypy (types of every module of the three packages,
none exempt), and no module that edits ``sys.path`` (tests share helpers through fixtures of a
``conftest.py``; the benchmark scripts are loaded by the ``load_benchmark`` fixture; a test
that must import a module it wrote by name uses pytest's ``monkeypatch.syspath_prepend``,
undone when the test ends). The import structure is gated by tests/test_imports.py."""

from __future__ import annotations

import ast
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


SOURCES = ("meanfield", "particles", "validation", "tests", "benchmarks", "scripts")
"""The folders of the project's Python files."""

_PATH_METHODS = frozenset({"insert", "append", "extend", "remove", "pop", "clear", "reverse",
                           "sort", "__setitem__", "__delitem__", "__iadd__"})
"""The methods of a list that change it."""


def _is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def _path_edits(source: str) -> list[int]:
    """The lines of ``source`` that edit ``sys.path`` for good: a call of a method that changes
    it (``sys.path.insert(0, ...)``, ``append``, ...), an assignment to it or to an item or
    slice of it (``=``, ``+=``, ``del``), ``site.addsitedir``. (pytest's
    ``monkeypatch.syspath_prepend`` is undone at the end of its test: not counted.)"""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if ((f.attr in _PATH_METHODS and _is_sys_path(f.value))
                    or f.attr == "addsitedir"):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(_is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("edit", [
    "sys.path.insert(0, 'benchmarks')", "sys.path.append(str(ROOT))", "sys.path.extend(['a'])",
    "sys.path[0] = 'a'", "sys.path[:0] = ['a']", "sys.path += ['a']", "sys.path = ['a']",
    "del sys.path[0]", "site.addsitedir('a')",
])
def test_path_edits_are_found(edit: str) -> None:
    source = f"import sys\n\n\ndef f():\n    {edit}\n    return sys.path[0]\n"
    assert _path_edits(source) == [5]


def test_reading_sys_path_is_no_edit() -> None:
    assert _path_edits("import sys\nfirst = sys.path[0]\nn = len(sys.path)\n"
                       "paths = list(sys.path)\nother.path.insert(0, 'a')\n"
                       "monkeypatch.syspath_prepend('a')\n") == []


def test_no_module_edits_sys_path() -> None:
    files = sorted(f for folder in SOURCES for f in (ROOT / folder).rglob("*.py"))
    assert len(files) > 100  # the walk found the project
    edits = {str(f.relative_to(ROOT)): lines for f in files
             if (lines := _path_edits(f.read_text(encoding="utf-8")))}
    assert edits == {}, f"sys.path edited (file: lines): {edits}"
