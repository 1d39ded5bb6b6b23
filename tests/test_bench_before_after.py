"""benchmarks/bench_before_after.py: the docs' ratios are found where the full run reports
them, and (benchmark-marked) a ``--quick`` run measures every row in both trees, each with
its own ``meanfield`` (no timings asserted)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_before_after.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_before_after", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doc_ratios_cover_the_full_run() -> None:
    """Every row of a full run has the ratio docs/ states, except the Lagrangian field as the
    script runs it (``method="auto"``), for which docs/ states none."""
    b = _script()
    docs = b.doc_ratios(ROOT)
    full = b.FULL
    expected = (
        [f"circle {a} N={n}" for n in full["circle"]["N"] for a in ("SA", "USA")]
        + [f"sphere {a} lmax={m}" for m in full["sphere"]["lmax"] for a in ("SA", "USA")]
        + [f"lagrangian {g} n={full['lagrangian']['n']} (direct)" for g in ("sphere", "R^d")]
        + [f"phase d={d} ours/Euler" for d in full["phase"]["d"]]
    )
    missing = [k for k in expected if k not in docs]
    assert not missing, f"not found in docs/: {missing}"
    assert docs["circle SA N=256"] == 5.22 and docs["sphere USA lmax=255"] == 4.12
    assert all(v > 0 for v in docs.values())


@pytest.mark.benchmark
def test_quick_run(tmp_path: Path) -> None:
    before = "7b3e256"
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{before}^{{commit}}"]).returncode:
        pytest.skip(f"revision {before} not in this clone")
    out = tmp_path / "out.json"
    printed = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--repeats", "1",
                              "--before", before, "--out", str(out)],
                             check=True, capture_output=True, text=True, timeout=900).stdout
    result = json.loads(out.read_text())
    assert "| ratio | doc |" in printed
    q = _script().QUICK
    n = q["lagrangian"]["n"]
    expected = (
        [f"circle {a} N={N}" for N in q["circle"]["N"] for a in ("SA", "USA")]
        + [f"sphere {a} lmax={m}" for m in q["sphere"]["lmax"] for a in ("SA", "USA")]
        + [f"lagrangian {g} n={n} ({m})" for m in ("auto", "direct") for g in ("sphere", "R^d")]
        + [f"phase d={d} ours/Euler" for d in q["phase"]["d"]]
    )
    assert [r["row"] for r in result["rows"]] == expected
    for r in result["rows"]:
        for side in ("before", "after"):
            (ratio,) = r[side]["ratios"]
            assert math.isfinite(ratio) and ratio > 0, (r["row"], side)
    # each side imported its own tree: the after tree is this checkout, the before tree not
    for run in result["runs"]["after"]:
        assert Path(run["meanfield"]).is_relative_to(ROOT)
    for run in result["runs"]["before"]:
        assert not Path(run["meanfield"]).is_relative_to(ROOT)
