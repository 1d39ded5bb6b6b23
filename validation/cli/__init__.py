"""The ``validation`` package's commands of ``meanfield``: ``validate``, ``phase-diagram``
and ``metastability``, one module each with ``add_parser(subparsers)``, registered through
the entry-point group ``meanfield.commands`` (see :mod:`meanfield.cli`). The module
:mod:`validation.cli.plotters` draws this package's files for ``meanfield plot``.

Each command module declares its options (``OPTIONS``: its own, ``TABLE``: all it takes) and
registers them with :func:`meanfield.cli.options.register_command`; what two of them share
and the core does not is here.
"""

from meanfield.cli.options import Use


def at_least_2(v: int) -> bool:
    """The check of ``--n`` and ``--d`` of the studies of pairs of tokens on ``S^{d-1}``."""
    return v >= 2


PAIRS = Use(default=32, check=at_least_2, need="must be >= 2 (clusters are pairs of tokens)")
"""``--n`` of the studies that count pairs of tokens (``phase-diagram``, ``metastability``)."""
