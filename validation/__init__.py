"""validation: checks and studies that set the particle system against the PDE and theory."""

from .records import CheckResult

__all__ = ["CheckResult"]
