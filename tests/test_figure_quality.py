"""Every figure the package writes is readable in print (issue 21, item 6).

Each plotting entry point is rendered from tiny data (files of the commands at toy sizes, or
synthetic Datasets shaped like the validation checks' results) and checked by
:func:`testkit.figure_defects`: no overlapping tick labels on an axis, no tick label
below 7 pt, an x and a y label on every axes with data (exemptions argued there), a label on
every colorbar, no legend over data points. The validation checks' figures that are drawn
inside the checks are checked where they are drawn, by the quick suite's test
(``tests/validation/test_quick_suite.py``, through :func:`checked_figures`); the figure
functions of the checks named by issue 21 are also drawn here from synthetic data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from testkit import assert_figure_readable, figure_defects

from meanfield.cli import main
from meanfield.io import read_netcdf

QUIET = ["--no-progress"]
FILES = {
    "circle": ["solve", "circle", "--resolution", "16", "--t-max", "0.2", "--times", "3", *QUIET],
    "sphere": ["solve", "sphere", "--resolution", "8", "--t-max", "0.1", "--times", "3", *QUIET],
    "zonal": ["solve", "zonal", "--resolution", "16", "--d", "4", "--t-max", "0.2", "--times", "3",
              *QUIET],
    "lagrangian_circle": ["solve", "lagrangian", "--d", "2", "--resolution", "32", "--t-max", "0.2",
                          "--times", "3", *QUIET],
    "lagrangian_sphere": ["solve", "lagrangian", "--d", "3", "--resolution", "8", "--t-max", "0.2",
                          "--times", "3", *QUIET],
    "particles2": ["particles", "--n", "6", "--d", "2", "--t-max", "0.5", "--times", "3", *QUIET],
    "particles3": ["particles", "--n", "6", "--d", "3", "--t-max", "0.5", "--times", "3", *QUIET],
    "particles5": ["particles", "--n", "6", "--d", "5", "--t-max", "0.5", "--times", "3", *QUIET],
    "gaussian": ["gaussian", "--mean", "[0,0]", "--cov", "[[1,0.2],[0.2,1]]", "--t-max", "0.2",
                 "--times", "3"],
    "gaussian3": ["gaussian", "--mean", "[0,0,0]", "--cov", "[[1,0,0],[0,1,0],[0,0,2]]",
                  "--t-max", "0.2", "--times", "3"],
    "phase": ["phase-diagram", "--n", "4", "--d", "3", "--betas", "3", "--t-max", "1",
              "--times", "3", "--realizations", "4", *QUIET],
    "metastability": ["metastability", "--beta", "4", "9", "--n", "8", "--realizations", "2",
                      "--t-max", "1", "--times", "3", *QUIET],
    "convergence": ["convergence", "--beta", "1", "--kappa", "1", "--t-max", "0.3", "--times",
                    "3", "--resolution", "16", "--levels", "3", "--tolerances", "1e-6,1e-7,1e-8",
                    "--tail-tol", "1e-3"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, xr.Dataset]:
    """One small file of each kind, written by its command (a few seconds in all)."""
    folder = tmp_path_factory.mktemp("files")
    out = {}
    for kind, argv in FILES.items():
        path = folder / f"{kind}.nc"
        assert main([*argv, "--out", str(path)]) == 0, kind
        out[kind] = read_netcdf(path)
    return out


def _token_datasets() -> tuple[xr.Dataset, xr.Dataset]:
    from particles.trained import random_encoder
    from validation import tokens as study

    encoder = random_encoder(np.random.default_rng(0))
    passages = ["one two three four five six seven", "alpha beta gamma delta epsilon"]
    return (study.token_study(encoder, passages, bins=8),
            # h L <= 0.73: RK4 far from its bound
            study.dynamics_study(encoder, passages, bins=8, dt=0.0625, fit_beta=False))


def _metastability_vs_particles() -> xr.Dataset:
    from validation.lagrangian_metastability import cluster_counts_vs_particles

    return cluster_counts_vs_particles(beta=4.0, N=16, n=16, seeds=2, t_max=1.0, times=3)


def _trajectories() -> xr.Dataset:
    from validation.metastability import trajectories

    return trajectories(betas=(4.0, 9.0), n=8, t_max=3.0, times=7)


def _check_data() -> xr.Dataset:
    """The shape of a validation check's ``data.nc``: a few variables on a shared dim."""
    n = np.array([32, 64, 128, 256])
    return xr.Dataset({"error": ("n", 1.0 / np.sqrt(n)), "steps": ("n", n // 4),
                       "curve": (("t", "k"), np.random.default_rng(0).random((5, 3)))},
                      coords={"n": n, "t": np.linspace(0, 1, 5)}, attrs={"check": "demo"})


def _figures(files: dict[str, xr.Dataset]) -> dict[str, Any]:
    """Every plotting entry point of the package, drawn (no file written)."""
    from meanfield.plots.convergence import plot_convergence
    from meanfield.plots.dataset import plot_dataset
    from meanfield.plots.density import plot_circle
    from meanfield.plots.gaussian import plot_eigenvalues, plot_ellipses
    from meanfield.plots.lagrangian import plot_lagrangian
    from meanfield.plots.sphere import plot_sphere, plot_zonal
    from particles import plots as pp
    from validation import tokens as study
    from validation.lagrangian_metastability import plot_cluster_counts_vs_particles
    from validation.plots_phase import plot_cluster_counts, plot_phase_diagram, plot_trajectories

    tokens, dynamics = _token_datasets()
    return {
        "plot_circle": plot_circle(files["circle"]),
        "plot_sphere": plot_sphere(files["sphere"]),
        "plot_zonal": plot_zonal(files["zonal"]),
        "plot_lagrangian circle": plot_lagrangian(files["lagrangian_circle"]),
        "plot_lagrangian sphere": plot_lagrangian(files["lagrangian_sphere"]),
        "plot_convergence": plot_convergence(files["convergence"]),
        "plot_dataset": plot_dataset(_check_data()),
        "plot_ellipses": plot_ellipses(files["gaussian"]),
        "plot_eigenvalues": plot_eigenvalues(files["gaussian3"]),
        "plot_circle_trajectories": pp.plot_circle_trajectories(files["particles2"]),
        "plot_sphere_trajectories": pp.plot_sphere_trajectories(files["particles3"]),
        "plot_inner_product_histograms": pp.plot_inner_product_histograms(files["particles5"]),
        "plot_phase_diagram": plot_phase_diagram(files["phase"]),
        "plot_cluster_counts": plot_cluster_counts(files["metastability"]),
        "plot_trajectories": plot_trajectories(_trajectories(), snapshots=(1.0, 3.0)),
        "plot_cluster_counts_vs_particles":
            plot_cluster_counts_vs_particles(_metastability_vs_particles()),
        "plot_figure1": study.plot_figure1(tokens),
        "plot_summary": study.plot_summary(tokens),
        "plot_dynamics": study.plot_dynamics(dynamics),
    }


def test_every_plot_function_draws_a_readable_figure(files: dict[str, xr.Dataset]) -> None:
    figures = _figures(files)
    defects = {name: figure_defects(fig) for name, fig in figures.items()}
    bad = {name: d for name, d in defects.items() if d}
    assert not bad, "\n".join(f"{name}: {'; '.join(d)}" for name, d in bad.items())
    # issue 21: the sphere run of FILES starts at lmax = 8 and is refined to 32 by the monitor
    settings = json.loads(files["sphere"].attrs["settings"])
    start, end = settings["initial_domain"]["lmax"], settings["domain"]["lmax"]
    assert start < end
    assert f"lmax={start}, refined to {end}" in figures["plot_sphere"]._suptitle.get_text()
    # issue 21: angles in multiples of pi, on every angle axis
    for name in ("plot_circle", "plot_circle_trajectories", "plot_trajectories",
                 "plot_cluster_counts_vs_particles", "plot_lagrangian circle"):
        ticks = [t.get_text() for t in figures[name].axes[0].get_yticklabels()]
        assert r"$\pi$" in ticks and r"$2\pi$" in ticks, (name, ticks)


# -- the figures of the validation checks named by issue 21 (and gaussian.particles, too long
# for the quick suite's test), from synthetic results -----------------------------------------


def test_check_figures_from_synthetic_results_are_readable(tmp_path: Path) -> None:
    from testkit import checked_figures

    from validation.checks.convergence import _self_convergence_figure
    from validation.checks.energy import _pde_vs_particles_figure
    from validation.checks.gaussian import _figure as gaussian_figure
    from validation.checks.lagrangian import _rate_figure
    from validation.checks.theory import REFERENCE_RATES, _growth_rates_figure

    rng = np.random.default_rng(0)
    # lagrangian.particles_*: the quick suite's n = 32 .. 512 (the "3x10^1 4x10^1" case)
    n = np.repeat([32, 64, 128, 256, 512], 4)
    distance = 0.3 / np.sqrt(n) * np.exp(0.1 * rng.standard_normal(n.size))
    fit = {"intercept": np.log(0.3), "slope": -0.5, "lo": -0.7, "hi": -0.3}
    # theory.growth_rates: as many rows as the check has (references, circle PDE, sphere PDE)
    count = sum(len(r) for r in REFERENCE_RATES.values()) + 6 + 3
    rows = [{"what": f"formula circle softmax beta=4 l={k}", "error": 10.0 ** -k, "tol": 1e-6}
            for k in range(count)]
    # energy.pde_vs_particles: points along the whole curve, where a legend inside would sit
    times = np.linspace(0, 1, 11)
    E = 0.5 + 0.1 * times
    Ep = [E[:, None] + 0.01 * rng.standard_normal((times.size, 8)) for _ in range(3)]
    corr = [np.full(times.size, 0.01 / k) for k in (1, 2, 3)]
    # pde.self_convergence: a study Dataset of 4 resolutions and 5 tolerances
    conv = xr.Dataset(
        {"error_tolerance": (("tolerance", "time"), np.outer([1e-6, 1e-7, 1e-8, 1e-9, 0], [0, 1]))},
        coords={"resolution": [32, 64, 128, 256], "tolerance": [1e-6, 1e-7, 1e-8, 1e-9, 1e-10]},
        attrs={"rtol": 1e-10, "tolerance_resolution": 32})
    # gaussian.particles (a minute in the quick suite: its figure is drawn here only)
    gn = np.array([10, 30, 100, 300, 1000])
    gfit = {"intercept": 0.0, "slope": -0.5, "lo": -0.6, "hi": -0.4}
    gerrs = {case: np.column_stack([gn ** -0.5, 2 * gn ** -0.5]) for case in ("softmax", "l2")}
    with checked_figures() as written:
        _rate_figure({"n": n.tolist(), "distance": distance.tolist(), "fit": fit}, "softmax", tmp_path)
        _growth_rates_figure(rows, tmp_path)
        _pde_vs_particles_figure(times, E, (10, 20, 40), Ep, corr, 2.6, tmp_path)
        _self_convergence_figure(conv, np.array([1e-3, 1e-7, 1e-12]),
                                 np.array([1e-4, 1e-9, 1e-14]), 1.2, tmp_path)
        gaussian_figure(gn, gerrs, {c: {"mean": gfit, "cov": gfit} for c in gerrs},
                        tmp_path / "gaussian.png")
    assert len(written) == 5 and all(Path(p).exists() for p in written)


# -- the checker finds what it is meant to find -------------------------------------------------


def _axes(**kw: Any) -> tuple[Any, Any]:
    from meanfield.plots.figures import subplots

    return subplots(**kw)


def test_checker_finds_overlapping_tick_labels() -> None:
    fig, ax = _axes(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    ax.set_xticks(np.linspace(0, 1, 11), [f"label {k}" for k in range(11)])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    assert any("overlap" in d for d in figure_defects(fig))
    ax.set_xticks([0, 1], ["0", "1"])
    assert figure_defects(fig) == []


def test_checker_finds_the_log_axis_minor_labels_of_the_issue() -> None:
    """matplotlib's default log axis over 32..512 (a decade and a bit) labels its minor ticks
    ``3x10^1``, ``4x10^1``, ...: they collide on a 4.5-inch figure (the particles_* checks)."""
    from meanfield.plots.figures import plain_log_ticks

    n = [32, 64, 128, 256, 512]
    fig, ax = _axes(figsize=(4.5, 3.5))
    ax.loglog(n, [1e-2, 9e-3, 8e-3, 7e-3, 6e-3], "-")
    ax.set_xlabel("n")
    ax.set_ylabel("distance")
    before = figure_defects(fig)
    plain_log_ticks(ax.xaxis, n)
    assert any("overlap" in d for d in before), before
    assert figure_defects(fig) == []


def test_checker_finds_missing_labels_small_ticks_and_a_covering_legend() -> None:
    fig, axes = _axes(ncols=2, figsize=(6, 3))
    axes[0].plot(np.arange(20), np.ones(20), "o", label="points")
    axes[0].legend(loc="center")
    axes[0].set_xlabel("x")
    axes[0].tick_params(labelsize=6)
    defects = figure_defects(fig)
    assert any("axes 0" in d and "no y label" in d for d in defects)
    assert not any("axes 0" in d and "no x label" in d for d in defects)
    assert any("6 pt" in d for d in defects)
    assert any("legend covers" in d for d in defects)
    assert not any("axes 1" in d for d in defects)  # no data: nothing to name


def test_shared_axis_is_named_once() -> None:
    fig, axes = _axes(ncols=2, sharey=True, figsize=(6, 3))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")
    assert figure_defects(fig) == []
    with pytest.raises(AssertionError, match="no x label"):
        axes[1].set_xlabel("")
        assert_figure_readable(fig)


# -- meanfield plot --out: the format of its extension, or refused -------------------------------

MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff", ".jpeg": b"\xff\xd8\xff",
         ".pdf": b"%PDF", ".svg": b"<?xml"}


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_plot_out_writes_the_format_of_its_extension(suffix: str, files: dict[str, xr.Dataset],
                                                     tmp_path: Path) -> None:
    from meanfield.io import write_netcdf

    nc = write_netcdf(files["particles2"], tmp_path / "particles.nc")
    out = tmp_path / f"figure{suffix}"
    assert main(["plot", str(nc), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(MAGIC[suffix])


@pytest.mark.parametrize("name", ["figure.xyz", "figure"])
def test_plot_out_refuses_a_format_it_cannot_write(name: str, files: dict[str, xr.Dataset], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from meanfield.io import write_netcdf

    nc = write_netcdf(files["particles2"], tmp_path / "particles.nc")
    out = tmp_path / name
    assert main(["plot", str(nc), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and ("extension .xyz" in err if "." in name else "no extension" in err)
    assert ".jpg" in err  # the formats it can write are listed
    assert not out.exists()


def test_checker_finds_overlapping_titles() -> None:
    fig, ax = _axes(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title("a title", loc="left")
    ax.set_title("another title, long enough to reach the left one", loc="right")
    assert any("titles" in d and "overlap" in d for d in figure_defects(fig))


def test_checker_finds_a_legend_over_scatter_points() -> None:
    fig, ax = _axes(figsize=(3, 2))
    ax.scatter(np.linspace(0, 1, 41), np.full(41, 0.5), label="points")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="center")
    assert any("legend covers" in d for d in figure_defects(fig))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    assert figure_defects(fig) == []


@pytest.mark.parametrize("argv", [
    ["solve", "circle", "--resolution", "16", "--t-max", "0.1", "--times", "2"],
    ["particles", "--n", "4", "--d", "2", "--t-max", "0.1", "--times", "2"],
])
def test_plot_of_a_command_is_refused_before_any_work(argv: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--plot figure.xyz`` is refused with exit 2 naming ``--plot`` before the run: no
    result file is written (the run would otherwise be computed, then lost to the plot)."""
    out = tmp_path / "run.nc"
    assert main([*argv, "--out", str(out), "--plot", str(tmp_path / "figure.xyz"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "extension .xyz" in err
    assert not out.exists()
