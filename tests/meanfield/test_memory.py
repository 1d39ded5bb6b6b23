"""Memory estimates (meanfield.memory; issue 15): a run that cannot fit is refused before any
work, with the estimate, the available memory and the option to change; a refinement that
cannot fit stops the solve with its results kept."""

from __future__ import annotations

import numpy as np
import pytest

import meanfield
import meanfield.memory as memory
import meanfield.spectral.resolution as resolution
from meanfield.cli import main
from meanfield.spectral.solve import ResolutionError


def test_solve_bytes_grows_with_grid_and_outputs() -> None:
    # the estimate counts arrays of the grid's size: exact ratios of the formula
    small, big = meanfield.Sphere(100), meanfield.Sphere(200)
    assert memory.solve_bytes(big, 11) / memory.solve_bytes(small, 11) == pytest.approx(
        (201 * big.nphi) / (101 * small.nphi))
    assert memory.solve_bytes(small, 21) > memory.solve_bytes(small, 11)
    # n = 10^6 tokens in d = 512 at 1000 outputs: the stored states alone are 3.7 TiB
    assert memory.particles_bytes(10**6, 512, 1000, 0) >= 8.0 * 10**6 * 512 * 1000


def test_available_memory_is_positive() -> None:
    have = memory.available_memory()
    assert have is None or have > 0


def test_cli_solve_refuses_a_huge_sphere_with_the_figure(capsys: pytest.CaptureFixture) -> None:
    # Sphere(20000) with 51 output times needs about 0.8 TiB: refused before any work, exit 2
    assert main(["solve", "sphere", "--resolution", "20000", "--out", "never.nc"]) == 2
    err = capsys.readouterr().err
    assert "--resolution" in err and "GiB of memory" in err and "available" in err


def test_cli_particles_refuses_huge_n_before_sampling(capsys: pytest.CaptureFixture,
                                                      tmp_path: object) -> None:
    # n = 10^6, d = 512, 1000 times: 3.8 TiB of states; sampling x0 alone would take 4 GiB
    code = main(["particles", "--n", "1000000", "--d", "512", "--times", "1000",
                 "--out", str(tmp_path) + "/never.nc"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--n" in err and "--times" in err and "GiB of memory" in err


def test_library_calls_refuse_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_memory", lambda: 2**10)  # 1 KiB: less than any run needs
    with pytest.raises(ValueError, match=r"--resolution.*GiB of memory.*available"):
        meanfield.solve(meanfield.Model(beta=1.0), meanfield.Circle(256), 1.0, [0.0, 1.0])
    from particles import simulate

    x0 = np.random.default_rng(0).standard_normal((64, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    with pytest.raises(ValueError, match=r"n = 64 tokens.*GiB of memory"):
        simulate(meanfield.Model(beta=1.0), x0, np.linspace(0, 1, 5), memory_limit=2**20)


def test_a_refinement_that_cannot_fit_stops_with_results_kept(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    # memory for the start (N = 64) but not for the first refinement (N = 128)
    times = np.linspace(0.0, 1.5, 4)
    have = 1.5 * memory.solve_bytes(meanfield.Circle(64), times.size)
    assert memory.solve_bytes(meanfield.Circle(128), times.size) > have
    monkeypatch.setattr(memory, "available_memory", lambda: int(have))
    monkeypatch.setattr(resolution, "available_memory", lambda: int(have))
    with pytest.raises(ResolutionError, match=r"refining to 128 needs about .* GiB") as info:
        meanfield.solve(meanfield.Model(beta=4.0), meanfield.Circle(64),
                        lambda th: np.exp(2 * np.cos(th)) * (1 + 0.3 * np.sin(3 * th)), times)
    ds = info.value.dataset
    assert ds.attrs["t_reached"] > 0 and int(ds["resolution"].values[-1]) == 64


def test_convergence_checks_its_finest_level_first(capsys: pytest.CaptureFixture) -> None:
    # levels 4 from the sphere at 2000: the finest, 16000, needs ~0.4 TiB; refused before the
    # coarse levels run (they would be lost to the refusal at the end)
    assert main(["convergence", "--domain", "sphere", "--resolution", "2000"]) == 2
    err = capsys.readouterr().err
    assert "resolution 16000" in err and "GiB of memory" in err
