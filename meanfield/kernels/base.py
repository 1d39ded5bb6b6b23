"""The attention kernel contract and its registry: one kernel class per attention kind.

.. autosummary::
   Kernel
   registered_kernels
   get_kernel
   prefix_mass
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from meanfield import attention as attention_registry
from meanfield.kernels.tiling import Tiling


class Kernel(ABC):
    """An attention kind (abstract). Subclasses set ``name`` and register themselves.

    The kind's mathematics (normalisation, transform of the logits, column bias) and its
    parameters come from its entry in :mod:`meanfield.attention` (:attr:`kind`).

    Args:
        beta: inverse temperature.
        causal: apply the causal mask.
        parameters: the kind's own parameters (``sigmoid_bias``, ``sinkhorn_iterations``,
            ``sinkhorn_tol``, ...), validated by its entry; defaults for those not given.
    """

    name: ClassVar[str]
    """The attention kind: a canonical name of :mod:`meanfield.attention` whose entry
    declares ``"particles"``."""
    registry: ClassVar[dict[str, type[Kernel]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            kind = attention_registry.require(cls.name, "particles")
            if kind.name != cls.name:
                msg = (f"Kernel {cls.__name__}.name must be the canonical name {kind.name!r} "
                       f"of its attention kind, got the alias {cls.name!r}")
                raise ValueError(msg)
            Kernel.registry[cls.name] = cls

    def __init__(self, beta: float, causal: bool = False, **parameters: Any) -> None:
        self.beta = float(beta)
        self.causal = bool(causal)
        self.kind = attention_registry.resolve(self.name)
        self.parameters = self.kind.parameter_values(parameters)
        self.normalized = self.kind.normalized
        """Whether the rows of ``A`` sum to 1 (then ``beta = 0`` gives the plain mean)."""
        self.exponential = self.kind.exponential
        """Whether the weight of a logit is ``e^S`` (else the entry's transform)."""

    @classmethod
    def from_model(cls, model: Any) -> Kernel:
        """The kernel of a :class:`meanfield.Model` (its attention kind and parameters)."""
        return get_kernel(model.attention)(beta=model.beta, causal=model.causal,
                                           **model.parameters)

    @abstractmethod
    def apply(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, tiling: Tiling
    ) -> np.ndarray:
        """``out_i = sum_j A_ij v_j`` for ``q, k, v`` of shape ``(B, n, d)``."""



GENERIC: dict[str, type[Kernel]] = {}
"""The kernel class of the kinds, by normalisation, that need no class of their own: the
tiled row kernel (:class:`meanfield.kernels.rows.RowKernel`, which registers itself here for
``rows`` and ``count``) computes any kind whose row ``i`` depends on the logits of row ``i``
only, from the kind's entry (its normalisation, transform and key bias)."""


def registered_kernels() -> tuple[str, ...]:
    """Names of the attention kinds the particle system has a kernel for: a class of their own
    (:attr:`Kernel.registry`) or the generic one of their normalisation (:data:`GENERIC`)."""
    return tuple(sorted(k.name for k in attention_registry.kinds("particles")
                        if k.name in Kernel.registry or k.normalization in GENERIC))


def get_kernel(name: str) -> type[Kernel]:
    """The kernel class of the attention kind ``name`` (an alias or any case will do): its
    own, else the generic one of its normalisation (:data:`GENERIC`).

    ``ValueError`` for an unknown kind (listing the known ones), for a kind the particle
    system does not support (naming the solvers that do), and for a supported kind with
    neither.
    """
    return kernel_class(attention_registry.require(name, "particles"))


def kernel_class(kind: Any) -> type[Kernel]:
    """The kernel class of the resolved attention kind ``kind`` (:func:`get_kernel` without
    the solver check): its own, else the generic one of its normalisation."""
    cls = Kernel.registry.get(kind.name)
    if cls is not None:
        return cls
    generic = GENERIC.get(kind.normalization)
    if generic is None:
        msg = (f"attention={kind.name!r} declares the 'particles' solver but no kernel is "
               f"registered for it and its normalization={kind.normalization!r} has no generic "
               f"one (registered: {registered_kernels()}); define a meanfield.kernels.Kernel "
               f"subclass with name = {kind.name!r}")
        raise ValueError(msg)
    # the generic class under the kind's name (it registers itself: made once)
    return type(f"{generic.__name__}_{kind.name}", (generic,),
                {"name": kind.name, "__doc__": f"``{kind.name}``: {kind.formula}",
                 "__module__": generic.__module__})



def prefix_mass(weights: np.ndarray, qlab: np.ndarray, klab: np.ndarray) -> np.ndarray:
    """``sum_{j: label_j <= label_i} w_j`` for every query ``i``: ``(B, n)`` (the mass a
    causal mask lets query ``i`` see; docs/equations.md section 2, causal attention)."""
    out = np.empty(qlab.shape)
    for b in range(qlab.shape[0]):
        order = np.argsort(klab[b], kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(weights[b][order])])
        out[b] = cum[np.searchsorted(klab[b][order], qlab[b], side="right")]
    return out
