"""``python -m meanfield.cli ARGS``: the ``meanfield`` command (:func:`meanfield.cli.main`)."""

import sys

from meanfield.cli import main

sys.exit(main())
