"""The registry of checks and the suites built from it.

.. autosummary::
   SUITE_NAMES
   CHECK_MODULES
   Check
   BrokenModule
   Registry
   REGISTRY
   check
   get_suite
   select

A check is registered where it is defined, by the :func:`check` decorator::

    @check("theory.wendel", suites=("quick", "full"))
    def check_wendel(*, seed, out_dir, suite) -> CheckResult: ...

A suite is the registered checks that name it, in the order of :data:`CHECK_MODULES`, then
of definition. The registry imports its modules when a suite
is first asked for; a module that raises on import cannot register its checks, so it enters
every suite as a :class:`BrokenModule`, which every selection keeps and which runs as an
``ERROR`` record: a broken check can never pass or be skipped.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, Union

from validation.records import CheckResult

SUITE_NAMES: tuple[str, ...] = ("quick", "full")
"""``quick``: ``meanfield validate`` with no arguments (minutes on 2 cores); ``full``:
every check at larger sizes."""

CHECK_MODULES: tuple[str, ...] = (
    "validation.checks.theory",
    "validation.checks.gaussian",
    "validation.checks.energy",
    "validation.checks.convergence",
    "validation.checks.phase",
    "validation.checks.lagrangian",
    "validation.checks.exact",
    "validation.checks.schedule",
    "validation.checks.subspace",
    "validation.checks.fastsum",
    "validation.checks.rings",
)
"""The modules whose ``@check`` functions make the suites, imported in this order."""

_GLOB = "*?["


class CheckImportError(ImportError):
    """A check module raised while it was imported (the traceback is in the message)."""


@dataclass(frozen=True)
class Check:
    """A registered check.

    Attributes:
        name: the record's name (``"circle.meanfield_iid"``), used by ``--only`` and the
            output folder.
        func: ``check(*, seed, out_dir, suite) -> CheckResult``.
        suites: the suites it belongs to.
    """

    name: str
    func: Callable[..., CheckResult] = field(compare=False)
    suites: tuple[str, ...] = SUITE_NAMES

    @property
    def target(self) -> str:
        """``"module:function"`` of :attr:`func`."""
        return f"{self.func.__module__}:{self.func.__qualname__}"

    @property
    def doc(self) -> str:
        """The check's docstring: what it tests and the argument for its tolerances."""
        return inspect.cleandoc(self.func.__doc__ or "")

    def __call__(self, *, seed: int, out_dir: object, suite: str) -> CheckResult:
        return self.func(seed=seed, out_dir=out_dir, suite=suite)


@dataclass(frozen=True)
class BrokenModule:
    """A check module that raised on import: it stands for its unknown checks in every suite
    and selection, and running it raises :class:`CheckImportError` (an ``ERROR`` record).

    Attributes:
        name: the module (``"validation.checks.theory"``), also the record's name.
        traceback: the formatted exception of the import.
    """

    name: str
    traceback: str

    @property
    def target(self) -> str:
        return self.name

    @property
    def doc(self) -> str:
        return f"The check module {self.name} failed to import; its checks did not run."

    def __call__(self, *, seed: int, out_dir: object, suite: str) -> CheckResult:
        msg = f"check module {self.name} failed to import:\n{self.traceback}"
        raise CheckImportError(msg)


SuiteEntry = Union[Check, BrokenModule]
"""One entry of a suite: a check, or a module that failed to import."""


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or any(c.isspace() or c in _GLOB + "," for c in name):
        msg = f"check name must be a non-empty string without spaces, commas or {_GLOB}, got {name!r}"
        raise ValueError(msg)
    return name


class Registry:
    """Checks by name, and the modules that define them.

    Args:
        modules: modules imported (once, in order) before a suite is built; each registers
            its checks with this registry's :meth:`check` (the default registry's modules
            use the module-level :func:`check`).
    """

    def __init__(self, modules: Sequence[str] = ()) -> None:
        self.modules = tuple(modules)
        self._checks: dict[str, Check] = {}
        self._broken: dict[str, BrokenModule] = {}
        self._loaded = False

    def register(self, entry: Check) -> Check:
        """Add ``entry``; re-registering the same function (a module reloaded) replaces it.

        Raises:
            ValueError: the name is taken by another function, or a suite is unknown.
        """
        _check_name(entry.name)
        bad = [s for s in entry.suites if s not in SUITE_NAMES]
        if bad or not entry.suites:
            msg = (f"suites of check {entry.name!r} must be a non-empty subset of {SUITE_NAMES}, got "
                   f"{entry.suites!r}")
            raise ValueError(msg)
        old = self._checks.get(entry.name)
        if old is not None and old.target != entry.target:
            msg = f"check name {entry.name!r} is taken by {old.target}; cannot register {entry.target}"
            raise ValueError(msg)
        self._checks[entry.name] = entry
        return entry

    def check(self, name: str, *, suites: Iterable[str] = SUITE_NAMES
              ) -> Callable[[Callable[..., CheckResult]], Callable[..., CheckResult]]:
        """Decorator: register ``func`` as check ``name`` of ``suites``; returns ``func``
        unchanged (so that it pickles by reference, for Dask)."""
        suites = tuple(suites)

        def register(func: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
            self.register(Check(name, func, suites))
            return func

        return register

    def load(self) -> None:
        """Import :attr:`modules` once; a module that raises becomes a :class:`BrokenModule`.
        ``KeyboardInterrupt`` and ``SystemExit`` propagate."""
        if self._loaded:
            return
        self._loaded = True
        for module in self.modules:
            try:
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - any failure of a check module is reported
                tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                self._broken[module] = BrokenModule(module, tb)

    @property
    def broken(self) -> list[BrokenModule]:
        """The modules that failed to import (after :meth:`load`)."""
        self.load()
        return list(self._broken.values())

    def checks(self) -> list[Check]:
        """Every registered check: those of :attr:`modules` in the order of the modules, then
        of definition; then any other, in registration order."""
        self.load()

        def key(c: Check) -> tuple[int, int]:
            module = c.func.__module__
            if module not in self.modules:
                return (len(self.modules), 0)
            code = getattr(c.func, "__code__", None)
            return (self.modules.index(module), getattr(code, "co_firstlineno", 0))

        return sorted(self._checks.values(), key=key)

    def suite(self, name: str) -> list[SuiteEntry]:
        """The broken modules, then the checks of suite ``name`` (order of :meth:`checks`)."""
        if name not in SUITE_NAMES:
            msg = f"suite must be one of {SUITE_NAMES}, got {name!r}"
            raise ValueError(msg)
        return [*self.broken, *(c for c in self.checks() if name in c.suites)]


REGISTRY = Registry(CHECK_MODULES)
"""The project's checks."""

check = REGISTRY.check
"""Decorator registering a check of :data:`REGISTRY` (see :meth:`Registry.check`)."""


def get_suite(name: str, registry: Registry | None = None) -> list[SuiteEntry]:
    """The entries of suite ``name`` (``"quick"`` or ``"full"``) of ``registry`` (default
    :data:`REGISTRY`), broken modules first."""
    return (registry or REGISTRY).suite(name)


def select(entries: Sequence[SuiteEntry], pattern: str | None) -> list[SuiteEntry]:
    """Entries whose name matches ``pattern``: comma-separated whole names or shell globs
    (``"theory.*,energy.pde"``; ``energy.pde`` does not select ``energy.pde_vs_particles``).
    Broken modules are always kept (their checks' names are unknown).

    Raises:
        ValueError: a part of ``pattern`` matches no check (unless a module is broken, whose
            checks it may name).
    """
    if not pattern:
        return list(entries)
    parts = [p.strip() for p in pattern.split(",") if p.strip()]
    checks = [e for e in entries if isinstance(e, Check)]
    broken = [e for e in entries if isinstance(e, BrokenModule)]

    def hit(name: str, part: str) -> bool:
        return fnmatch.fnmatchcase(name, part) if any(ch in part for ch in _GLOB) else name == part

    unmatched = [p for p in parts if not any(hit(e.name, p) for e in checks)]
    if unmatched and not broken:
        names = ", ".join(e.name for e in checks)
        msg = (f"--only {pattern!r}: {', '.join(map(repr, unmatched))} matches no check; the checks are: "
               f"{names}")
        raise ValueError(msg)
    return [e for e in entries if isinstance(e, BrokenModule) or any(hit(e.name, p) for p in parts)]


__all__ = [
    "CHECK_MODULES",
    "REGISTRY",
    "SUITE_NAMES",
    "BrokenModule",
    "Check",
    "CheckImportError",
    "Registry",
    "SuiteEntry",
    "check",
    "get_suite",
    "select",
]
