"""The Lagrangian checks of ``meanfield validate`` (validation.checks.lagrangian) and the
density-level Figure 4 (validation.lagrangian_metastability): registration, that a check
passes on the solver and fails on a broken one, and the figure at small size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from validation import lagrangian_metastability as lm
from validation.checks import lagrangian as lc
from validation.checks import lagrangian_references as lr
from validation.suites import CHECK_MODULES, get_suite

QUICK = {e.name for e in get_suite("quick")}
FULL = {e.name for e in get_suite("full")}


def test_the_checks_are_registered_in_their_suites() -> None:
    assert "validation.checks.lagrangian" in CHECK_MODULES
    quick = {"lagrangian.circle_sa", "lagrangian.circle_usa", "lagrangian.sphere",
             "lagrangian.gaussian_2d", "lagrangian.energy", "lagrangian.bad_input",
             *(f"lagrangian.particles_{v}" for v, s in lc.PARTICLE_CHECKS.items() if "quick" in s)}
    slow = {"lagrangian.gaussian_3d", "lagrangian.gaussian_sinkhorn", "lagrangian.continuation",
            "lagrangian.particles_sinkhorn"}
    assert quick <= QUICK and quick <= FULL
    assert slow <= FULL and not slow & QUICK
    # every variant of issue 12 has its particle check
    assert set(lc.PARTICLE_CHECKS) == {"softmax_qkv", "unnormalized", "multihead", "l2", "sigmoid",
                                       "sinkhorn", "causal", "feedforward"}


def test_each_particle_check_is_a_module_function_registered_by_the_decorator() -> None:
    # one module-level function per variant (no names made through globals()), registered
    # under its name in the suites of PARTICLE_CHECKS
    entries = {e.name: e for e in get_suite("full")}
    for variant, suites in lc.PARTICLE_CHECKS.items():
        func = getattr(lc, f"check_particles_{variant}")
        entry = entries[f"lagrangian.particles_{variant}"]
        assert entry.func is func
        assert entry.suites == suites
        assert entry.target == f"validation.checks.lagrangian:check_particles_{variant}"


def test_every_check_argues_its_tolerance() -> None:
    for entry in get_suite("full"):
        if entry.name.startswith("lagrangian."):
            assert ("olerance" in entry.doc or "Exact" in entry.doc
                    or "As ``lagrangian." in entry.doc), entry.name


def test_bad_input_check_passes(tmp_path: Path) -> None:
    rec = lc.check_bad_input(seed=0, out_dir=tmp_path, suite="quick")
    assert rec.passed
    assert rec.comparisons[0].measured == len(lc.bad_inputs())


@pytest.fixture
def small_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The circle check at test size: USA beta = 2 to t = 1 on 16, 32, 64 nodes (errors 3e-4,
    4e-8, 1e-13)."""
    monkeypatch.setattr(lc, "CIRCLE_SIZES", (16, 32, 64))
    monkeypatch.setitem(lc.CIRCLE_CASES, "usa", {"attention": "unnormalized", "beta": 2.0, "t": 1.0})


@pytest.mark.usefixtures("small_circle")
def test_circle_check_passes_and_writes_its_figure(tmp_path: Path) -> None:
    rec = lc.check_circle_usa(seed=0, out_dir=tmp_path, suite="quick")
    assert rec.passed, [c.describe() for c in rec.comparisons]
    assert rec.figure is not None and Path(rec.figure).is_file()


@pytest.mark.usefixtures("small_circle")
def test_circle_check_fails_when_the_density_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a density wrong by 1e-6 relative (a sloppy divergence) must fail the 1e-8 gate
    solve = lr.solve_lagrangian

    def sloppy(*args: object, **kwargs: object) -> object:
        ds = solve(*args, **kwargs)
        ds["density"] = ds["density"] * (1 + 1e-6)
        return ds

    monkeypatch.setattr(lr, "solve_lagrangian", sloppy)
    rec = lc.check_circle_usa(seed=0, out_dir=tmp_path, suite="quick")
    assert not rec.passed
    assert "max relative error" in rec.worst.what


def test_smooth_start_has_unit_mass_and_refuses_a_negative_density() -> None:
    rho = lm.smooth_start(0.05, 8, seed=2)
    th = 2 * np.pi * np.arange(64) / 64
    assert np.mean(rho(th)) * 2 * np.pi == pytest.approx(1.0, rel=1e-14)  # trapezoid: exact
    with pytest.raises(ValueError, match="amplitude"):
        lm.smooth_start(0.1, 8)


# at this reduced size the quadrature monitor warns (docs/lagrangian.md section 10; its warning
# is tested in tests/meanfield/lagrangian/test_lagrangian_quadrature_sphere.py): what is tested here is the
# check's verdict, which compares against particles whatever the monitor says
@pytest.mark.filterwarnings("ignore:.*no longer resolve the measure:UserWarning")
def test_cluster_counts_vs_particles_small(tmp_path: Path) -> None:
    ds = lm.cluster_counts_vs_particles(9.0, N=96, n=48, seeds=2, t_max=12.0, times=5)
    lag = ds["lagrangian_clusters"].values
    assert ds["particle_clusters"].shape == (2, 5) and ds["particle_clusters_all"].shape == (2, 5)
    # at t = 0 no clump holds 2% of the mass (96 nodes of weight <= 1.4/96, spaced
    # 0.065 > sqrt(2e-3), the linking distance);
    # by t = 12 the smooth start has gathered into a few clusters holding nearly all the mass
    assert lag[0] == 0 and 1 <= lag[-1] <= 8
    assert np.all(ds["particle_clusters_all"].values >= ds["particle_clusters"].values)
    fig = lm.plot_cluster_counts_vs_particles(ds, tmp_path / "fig4.png")
    assert fig is not None and (tmp_path / "fig4.png").stat().st_size > 0
    with pytest.raises(ValueError, match="min_mass"):
        lm.cluster_counts_vs_particles(9.0, N=48, n=48, seeds=1, t_max=1.0, times=2, min_mass=0.0)
