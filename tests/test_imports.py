"""The import structure of the three packages (issue 24: no circles, no import that runs back
up), on the graph of every ``import`` statement, those inside functions included (grimp):

* the contracts of ``[tool.importlinter]`` in pyproject.toml, run as ``lint-imports`` runs
  them: ``meanfield`` is the core that ``particles`` and ``validation`` import, never the
  reverse, and ``validation`` may import ``particles``, not the reverse; the engine
  ``meanfield.integrate`` imports no solver and not the package root; no circle between the
  subpackages of one package (one reported exception, in pyproject.toml);
* no circle between modules, checked here with no exception.

Each check is shown to fail on a violation planted in a copy of the graph.
"""

from __future__ import annotations

import subprocess
import sys
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest

grimp = pytest.importorskip("grimp", reason="import-linter (and grimp) is in the [test] extra")
api = pytest.importorskip("importlinter.api", reason="import-linter is in the [test] extra")
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract  # noqa: E402
from importlinter.contracts.forbidden import ForbiddenContract  # noqa: E402
from importlinter.contracts.layers import LayersContract  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
CONTRACT_TYPES = {"layers": LayersContract, "forbidden": ForbiddenContract,
                  "acyclic_siblings": AcyclicSiblingsContract}


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return api.read_configuration(str(PYPROJECT))


@pytest.fixture(scope="module")
def graph(config: dict[str, Any]) -> Any:
    return grimp.build_graph(*config["session_options"]["root_packages"], cache_dir=None)


def _check(config: dict[str, Any], graph: Any, contract_id: str) -> Any:
    """The :class:`ContractCheck` of the contract ``contract_id`` on (a copy of) ``graph``."""
    (options,) = [c for c in config["contracts_options"] if c.get("id") == contract_id]
    contract = CONTRACT_TYPES[options["type"]](
        name=options["name"], session_options=config["session_options"], contract_options=options)
    return contract.check(deepcopy(graph), verbose=False)


def module_cycles(graph: Any, packages: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every circle through a direct import ``a -> b`` between modules of ``packages``: the
    import ``a -> b`` followed by the shortest chain from ``b`` back to ``a``."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in packages)
    found = []
    for a in modules:
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            if b.split(".")[0] in packages and graph.chain_exists(importer=b, imported=a):
                found.append((a, *graph.find_shortest_chain(importer=b, imported=a)))
    return found


def test_import_contracts_are_kept() -> None:
    # the command line of import-linter on this pyproject.toml: the report on failure
    code = ("import sys; from importlinter.cli import lint_imports_command; "
            "lint_imports_command(sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-c", code, str(PYPROJECT), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_no_module_imports_itself_back(config: dict[str, Any], graph: Any) -> None:
    roots = tuple(config["session_options"]["root_packages"])
    assert roots == ("meanfield", "particles", "validation")
    assert module_cycles(graph, roots) == []


@pytest.mark.parametrize(
    ("contract_id", "importer", "imported"),
    [
        ("layers", "meanfield.model", "particles.simulate"),  # the core imports a user
        ("layers", "particles.simulate", "validation.suites"),  # particles import validation
        ("engine-no-solver", "meanfield.integrate.driver", "meanfield.lagrangian.field"),
        # indirect: the engine's finish imports files, which would import the solver
        ("engine-no-solver", "meanfield.files", "meanfield.spectral.solve"),
        ("rooms", "meanfield.files", "meanfield.io"),  # the writers stand below the readers
        ("rooms", "meanfield.integrate.finish", "meanfield.io"),  # the engine writes through files
        ("engine-no-root", "meanfield.integrate.schema", "meanfield"),
        ("siblings", "meanfield.model", "meanfield.spectral.solve"),  # solve imports model
        ("siblings", "meanfield.domains.base", "meanfield.domains.sphere"),
        # the rooms: a lower room imports a higher one
        ("rooms", "meanfield.kernels", "meanfield.lagrangian.field"),  # kernels below the solvers
        ("rooms", "meanfield.lagrangian.field", "meanfield.spectral.flow"),  # the hand-over is one way
        ("rooms", "meanfield.domains.base", "meanfield.io"),  # io reads domains
        ("rooms", "meanfield.spectral.solve", "meanfield.plots.density"),  # solvers draw nothing
    ],
)
def test_a_planted_import_breaks_its_contract(config: dict[str, Any], graph: Any, contract_id: str,
                                              importer: str, imported: str) -> None:
    assert {importer, imported} <= set(graph.modules)
    assert not graph.direct_import_exists(importer=importer, imported=imported)
    assert _check(config, graph, contract_id).kept
    planted = deepcopy(graph)
    planted.add_import(importer=importer, imported=imported)
    assert not _check(config, planted, contract_id).kept


def test_a_planted_circle_is_found(graph: Any) -> None:
    planted = deepcopy(graph)
    planted.add_import(importer="meanfield.model", imported="meanfield.spectral.solve")  # solve imports model
    cycles = module_cycles(planted, ("meanfield",))
    assert ("meanfield.model", "meanfield.spectral.solve", "meanfield.model") in cycles
    assert all("meanfield.model" in c and "meanfield.spectral.solve" in c for c in cycles)
