"""validation: checks and studies that set the particle system against the PDE and theory.

* checks (registered with :func:`check`), suites built from the registry, the runner and
  the report (``meanfield validate``);
* phase diagrams (Figures 3 and 5 of the paper) and metastability (Figure 4);
* parameter sweeps on Dask (:func:`sweep`).
"""

from validation.metastability import cluster_counts, pde_cluster_counts, trajectories
from validation.phase_diagram import phase_diagram  # noqa: E402  (the function shadows the module name)
from validation.records import CheckResult, Comparison
from validation.report import write_report
from validation.runner import exit_code, run_check, run_suite, status_of
from validation.suites import REGISTRY, BrokenModule, Check, Registry, SuiteEntry, check, get_suite, select
from validation.sweep import sweep

__all__ = [
    "REGISTRY",
    "BrokenModule",
    "Check",
    "CheckResult",
    "Comparison",
    "Registry",
    "SuiteEntry",
    "check",
    "cluster_counts",
    "exit_code",
    "get_suite",
    "pde_cluster_counts",
    "phase_diagram",
    "run_check",
    "run_suite",
    "select",
    "status_of",
    "sweep",
    "trajectories",
    "write_report",
]
