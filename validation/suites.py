"""The validation suites: ordered lists of checks.

.. autosummary::
   SuiteEntry
   SUITES
   get_suite
   select

A :class:`SuiteEntry` names a check and where to import it from (``"module:function"``);
the import happens when the check runs, so a suite still runs (reporting the check as
skipped, with the reason) while a module it needs is missing.
"""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass
from typing import Callable

from .records import CheckResult


@dataclass(frozen=True)
class SuiteEntry:
    """One check of a suite.

    Attributes:
        name: the record's name (``"circle.meanfield_iid"``), used by ``--only`` and the
            output folder.
        target: ``"package.module:function"`` with the signature
            ``check(*, seed, out_dir, suite) -> CheckResult``.
    """

    name: str
    target: str

    def load(self) -> Callable[..., CheckResult]:
        """Import the check function (``ImportError`` if its module is missing)."""
        module, _, func = self.target.partition(":")
        if not func:
            msg = f"target must be 'module:function', got {self.target!r}"
            raise ValueError(msg)
        mod = importlib.import_module(module)
        try:
            return getattr(mod, func)
        except AttributeError:
            msg = f"module {module!r} has no check {func!r}"
            raise ImportError(msg) from None


_C = "validation.checks.convergence"
_E = "validation.checks.energy"
_T = "validation.checks.theory"

QUICK: list[SuiteEntry] = [
    SuiteEntry("theory.growth_rates", f"{_T}:check_growth_rates"),
    SuiteEntry("theory.orthogonal_start", f"{_T}:check_orthogonal_start"),
    SuiteEntry("theory.wendel", f"{_T}:check_wendel"),
    SuiteEntry("theory.cone_collapse", f"{_T}:check_cone_collapse"),
    SuiteEntry("theory.noise_threshold", f"{_T}:check_noise_threshold"),
    SuiteEntry("theory.wrapped_cauchy", f"{_T}:check_wrapped_cauchy"),
    SuiteEntry("gaussian.particles", "validation.checks.gaussian:check_gaussian_particles"),
    SuiteEntry("energy.pde", f"{_E}:check_energy_pde"),
    SuiteEntry("energy.particles", f"{_E}:check_energy_particles"),
    SuiteEntry("energy.pde_vs_particles", f"{_E}:check_energy_pde_vs_particles"),
    SuiteEntry("pde.self_convergence", f"{_C}:check_pde_self_convergence"),
    SuiteEntry("circle.meanfield_iid", f"{_C}:check_circle_iid"),
    SuiteEntry("circle.meanfield_quantile", f"{_C}:check_circle_quantile"),
    SuiteEntry("circle.meanfield_time", f"{_C}:check_circle_time"),
    SuiteEntry("sphere.meanfield_iid", f"{_C}:check_sphere_iid"),
]
"""The quick suite: ``meanfield validate`` with no arguments (minutes on 2 cores)."""

FULL: list[SuiteEntry] = QUICK + [
    SuiteEntry("zonal.meanfield_iid", f"{_C}:check_zonal_iid"),
    SuiteEntry("pde.self_convergence_sphere", f"{_C}:check_pde_self_convergence_sphere"),
    SuiteEntry("phase.transition_curve", "validation.checks.phase:check_phase_transition"),
]
"""The full suite: every check at larger sizes (``suite="full"``)."""

SUITES: dict[str, list[SuiteEntry]] = {"quick": QUICK, "full": FULL}


def get_suite(name: str) -> list[SuiteEntry]:
    """The entries of suite ``name`` (``"quick"`` or ``"full"``)."""
    try:
        return list(SUITES[name])
    except KeyError:
        msg = f"suite must be one of {tuple(SUITES)}, got {name!r}"
        raise ValueError(msg) from None


def select(entries: list[SuiteEntry], pattern: str | None) -> list[SuiteEntry]:
    """Entries whose name matches ``pattern``: comma-separated shell patterns
    (``"theory.*,energy.pde"``); a pattern without ``*?[`` matches as a substring."""
    if not pattern:
        return list(entries)
    parts = [p.strip() for p in pattern.split(",") if p.strip()]

    def hit(name: str) -> bool:
        for p in parts:
            if any(ch in p for ch in "*?["):
                if fnmatch.fnmatchcase(name, p):
                    return True
            elif p in name:
                return True
        return False

    out = [e for e in entries if hit(e.name)]
    if not out:
        names = ", ".join(e.name for e in entries)
        msg = f"--only {pattern!r} matches no check; the checks are: {names}"
        raise ValueError(msg)
    return out


__all__ = ["FULL", "QUICK", "SUITES", "SuiteEntry", "get_suite", "select"]
