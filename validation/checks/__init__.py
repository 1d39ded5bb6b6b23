"""The validation checks. Each is a function ``check(*, seed, out_dir, suite) -> CheckResult``.

``seed`` (int) seeds every random draw, ``out_dir`` (pathlib.Path) is where the check may
write its PNG figure and NetCDF data, ``suite`` is ``"quick"`` or ``"full"`` (sizes).
"""
