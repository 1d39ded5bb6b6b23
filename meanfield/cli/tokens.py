"""``meanfield tokens`` (the command lives in :mod:`validation.tokens_cli`)."""

from validation.tokens_cli import add_parser, run

__all__ = ["add_parser", "run"]
