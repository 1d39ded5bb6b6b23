"""The ``validation`` package's commands of ``meanfield``: ``validate``, ``phase-diagram``
and ``metastability``, one module each with ``add_parser(subparsers)``, registered through
the entry-point group ``meanfield.commands`` (see :mod:`meanfield.cli`). The module
:mod:`validation.cli.plotters` draws this package's files for ``meanfield plot``.
"""
