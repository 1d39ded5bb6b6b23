"""Smoke test of benchmarks/bench_fastsum.py at its ``--quick`` sizes: the table and the
crossover are printed, the JSON written, and every row has its times (no timings asserted)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path


def test_quick_run(tmp_path: Path, load_benchmark) -> None:
    bench_fastsum = load_benchmark("bench_fastsum")
    out = tmp_path / "out.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = bench_fastsum.main(["--quick", "--repeat", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    rows = result["rows"]
    assert [(r["sphere"], r["n"]) for r in rows] == [
        (s, n) for s in ("S^1", "S^2") for n in bench_fastsum.QUICK["sizes"]]
    for r in rows:
        for key in ("fast v", "floor v", "direct v", "fast v+div", "floor v+div", "direct v+div"):
            assert r[key] > 0, key
    assert set(result["crossover"]) == {"S^1", "S^2"}
    assert "| sphere | n |" in printed.getvalue() and "Crossover" in printed.getvalue()
    general = result["general"]
    assert [(r["sphere"], r["n"]) for r in general["rows"]] == [
        (s, n) for s in ("S^1", "S^2") for n in bench_fastsum.GENERAL_QUICK["sizes"]]
    for r in general["rows"]:
        for key in ("fast v", "direct v", "fast v+div", "direct v+div"):
            assert r[key] > 0, key
        assert 0 <= r["corrected"] <= r["n"] and r["chebyshev"] > 1
    assert set(general["crossover"]) == {"S^1", "S^2"}
    assert "General-weights crossover" in printed.getvalue()
