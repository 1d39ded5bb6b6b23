"""Checks of user input shared by the particle functions.

.. autosummary::
   GEOMETRIES
   as_tokens
   as_rng
   check_geometry

Every problem is a ``ValueError`` whose message names the argument and the bad value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meanfield.arguments import count, finite

GEOMETRIES = ("sphere", "euclidean")
"""``sphere``: layer normalisation, tokens on ``S^{d-1}`` (docs/equations.md section 2);
``euclidean``: tokens in ``R^d``, no projection (pure self-attention, (9.1))."""

SPHERE_TOL = 1e-10
"""Largest ``| |x_i| - 1 |`` accepted as "on the sphere" without ``normalize=True``."""


def check_geometry(geometry: str) -> str:
    """Return ``geometry`` if it is one of :data:`GEOMETRIES`, else raise."""
    if geometry not in GEOMETRIES:
        msg = f"geometry must be one of {GEOMETRIES}, got {geometry!r}"
        raise ValueError(msg)
    return geometry


def as_tokens(
    x: Any,
    name: str = "x",
    *,
    geometry: str = "euclidean",
    normalize: bool = False,
    model: Any = None,
) -> np.ndarray:
    """Validate tokens: a float array of shape ``(n, d)`` or ``(batch, n, d)``.

    Args:
        x: the tokens.
        name: the argument's name, for messages.
        geometry: ``"sphere"`` also requires unit norms (to :data:`SPHERE_TOL`).
        normalize: with ``geometry="sphere"``, project onto the sphere instead of raising.
        model: if given, its matrices must act on ``R^d``.
    """
    check_geometry(geometry)
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        msg = f"{name} must be a numeric array, got {type(x).__name__}"
        raise ValueError(msg) from None
    if a.ndim not in (2, 3):
        msg = f"{name} must have shape (n, d) or (batch, n, d), got shape {a.shape}"
        raise ValueError(msg)
    if a.shape[-2] < 1:
        msg = f"{name} has n={a.shape[-2]} tokens (shape {a.shape}); need n >= 1"
        raise ValueError(msg)
    if a.shape[-1] < 1:
        msg = f"{name} has dimension d={a.shape[-1]} (shape {a.shape}); need d >= 1"
        raise ValueError(msg)
    if a.ndim == 3 and a.shape[0] < 1:
        msg = f"{name} has batch={a.shape[0]} systems (shape {a.shape}); need batch >= 1"
        raise ValueError(msg)
    finite(a, name)
    if model is not None:
        model.check_dim(a.shape[-1])
    if geometry == "sphere":
        norms = np.linalg.norm(a, axis=-1)
        if normalize:
            if np.any(norms == 0):
                msg = f"{name} has a zero token, which cannot be normalised onto the sphere"
                raise ValueError(msg)
            a = a / norms[..., None]
        else:
            dev = float(np.max(np.abs(norms - 1.0)))
            if dev > SPHERE_TOL:
                msg = (
                    f"{name}: tokens are not on the unit sphere (max | |x_i| - 1 | = {dev:.3g});"
                    " pass normalize=True to project them, or geometry='euclidean'"
                )
                raise ValueError(msg)
    return a


def as_angles(theta: Any, name: str = "theta") -> np.ndarray:
    """Validate angles on the circle: a finite float array of shape ``(n,)`` or
    ``(batch, n)``, ``n >= 1``."""
    th = np.asarray(theta, dtype=float)
    if th.ndim not in (1, 2) or th.shape[-1] < 1:
        msg = f"{name} must have shape (n,) or (batch, n) with n >= 1, got {th.shape}"
        raise ValueError(msg)
    return finite(th, name)


def as_rng(rng: Any) -> np.random.Generator:
    """A ``numpy.random.Generator`` from a seed (int), a Generator, or ``None`` (fresh)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng is not None and rng < 0:
            msg = f"rng seed must be >= 0, got {rng!r}"
            raise ValueError(msg)
        return np.random.default_rng(rng)
    msg = f"rng must be an int seed or a numpy.random.Generator, got {type(rng).__name__}"
    raise ValueError(msg)


def as_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (not a bool), else ``ValueError`` naming ``name``."""
    return count(value, name, minimum)


__all__ = ["GEOMETRIES", "SPHERE_TOL", "as_angles", "as_count", "as_rng", "as_tokens", "check_geometry"]
