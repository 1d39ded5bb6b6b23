"""The validation checks. Each is a function ``check(*, seed, out_dir, suite) -> CheckResult``
registered by the :func:`validation.suites.check` decorator with its name and suites.

``seed`` (int) seeds every random draw, ``out_dir`` (pathlib.Path) is where the check may
write its PNG figure and NetCDF data, ``suite`` is ``"quick"`` or ``"full"`` (sizes). The
record carries numeric :class:`validation.records.Comparison` s, from which ``passed`` is
computed; the modules are imported by :data:`validation.suites.REGISTRY` when a suite is built.
"""
