"""Array backends: NumPy (the default) and PyTorch (CPU or GPU), one namespace for both.

.. autosummary::
   Backend
   get_backend
   namespace
   to_numpy

The numerics (the attention kernels of :mod:`meanfield.kernels`, the field of
:mod:`meanfield.kernels.interaction`, the integrators' stage arithmetic of
:mod:`meanfield.integrate`) are written once against an array namespace ``xp``: the Python
array API standard, which ``array-api-compat`` gives NumPy and PyTorch alike
(:func:`namespace`). What the standard leaves out and the tiled kernels need, in-place
updates into preallocated tiles (``out=``), ``einsum``, ``logsumexp`` and the logistic
function, is the handful of functions below, each one line per library.

A run picks its backend from its input (a ``torch.Tensor`` runs on torch, on the tensor's
device) or from ``backend="torch", device="cuda"``; results are moved to host NumPy at
output times only. ``dtype`` is ``float64`` (the default) or ``float32`` (docs/backends.md
says where ``float32`` changes a result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_numpy_array, is_torch_array

BACKENDS = ("numpy", "torch")
"""The array libraries a run can use."""

DTYPES = ("float64", "float32")
"""The floating-point precisions a run can use."""

INSTALL_TORCH = ("PyTorch is not installed: install the optional extra with "
                 "pip install 'meanfield[torch]' (or any torch build for your CPU or GPU)")


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - the test command installs torch
        raise ValueError(INSTALL_TORCH) from None
    return torch


@dataclass(frozen=True)
class Backend:
    """Where a run's arrays live: ``name`` (``"numpy"`` or ``"torch"``), ``device`` (a torch
    device string such as ``"cpu"`` or ``"cuda:0"``; ``None`` for NumPy) and ``dtype``
    (``"float64"`` or ``"float32"``)."""

    name: str = "numpy"
    device: str | None = None
    dtype: str = "float64"

    @property
    def is_numpy(self) -> bool:
        return self.name == "numpy"

    def asarray(self, a: Any) -> Any:
        """``a`` as an array of this backend (copied only when it must be)."""
        if self.is_numpy:
            return np.asarray(to_numpy(a), dtype=self.dtype)
        torch = _torch()
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a = a.copy()  # torch wants writable memory (a broadcast view, a read-only input)
        return torch.as_tensor(a, dtype=getattr(torch, self.dtype), device=self.device)

    def check_rtol(self, rtol: float) -> None:
        """Warn when an adaptive run asks for a relative tolerance its precision cannot give
        (below ``8 eps``: ``1e-6`` in float32); the step-size controller would then chase
        round-off, taking many more steps for no accuracy."""
        eps = float(np.finfo(self.dtype).eps)
        if rtol < 8 * eps:
            import warnings

            msg = (f"rtol={rtol:g} is below what {self.dtype} resolves (8 eps = {8 * eps:.2g}): "
                   f"the step-size controller will chase round-off; use rtol >= {8 * eps:.0e} "
                   "or dtype='float64'")
            warnings.warn(msg, UserWarning, stacklevel=3)

    def label(self) -> str:
        """``"numpy float64"``, ``"torch cuda:0 float32"``: for the ``settings`` attribute."""
        return " ".join(p for p in (self.name, self.device, self.dtype) if p)


def get_backend(backend: str | Backend | None = "numpy", device: Any = None,
                dtype: Any = "float64", *, like: Any = None) -> Backend:
    """A :class:`Backend` from the run's options, checked (``ValueError`` naming the field).

    ``like``: an input array; a ``torch.Tensor`` selects torch on its device (and its dtype
    when it is ``float32``) unless ``backend`` says otherwise."""
    if isinstance(backend, Backend):
        return backend
    if like is not None and is_torch_array(like) and backend in (None, "numpy"):
        backend = "torch"
        device = str(like.device) if device is None else device
        if dtype is None:
            dtype = str(like.dtype).removeprefix("torch.")
    backend = "numpy" if backend is None else backend
    dtype = "float64" if dtype is None else np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    dtype = str(dtype).removeprefix("torch.")
    if backend not in BACKENDS:
        msg = f"backend must be one of {BACKENDS}, got {backend!r}"
        raise ValueError(msg)
    if dtype not in DTYPES:
        msg = f"dtype must be one of {DTYPES}, got {dtype!r}"
        raise ValueError(msg)
    if backend == "numpy":
        if device not in (None, "cpu"):
            msg = f"device={device!r} needs backend='torch' (numpy runs on the CPU)"
            raise ValueError(msg)
        return Backend("numpy", None, dtype)
    torch = _torch()
    try:
        dev = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError):
        msg = f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}"
        raise ValueError(msg) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        msg = f"device={device!r}: torch sees no CUDA device on this machine (use device='cpu')"
        raise ValueError(msg)
    return Backend("torch", str(dev), dtype)


def namespace(*arrays: Any) -> Any:
    """The array namespace (``array_api_compat``) of ``arrays``; ``None`` entries ignored."""
    return array_namespace(*(a for a in arrays if a is not None))


def to_numpy(a: Any) -> Any:
    """A host NumPy array of ``a`` (a torch tensor is detached and copied off its device)."""
    if is_torch_array(a):
        return a.detach().cpu().numpy()
    return a


def device_of(a: Any) -> Any:
    """The device of ``a`` (``"cpu"`` for NumPy), for ``xp.zeros(..., device=...)``."""
    return a.device if is_torch_array(a) else "cpu"


def like(a: Any, value: Any) -> Any:
    """``value`` (a NumPy array or number) as an array of ``a``'s backend, dtype and device."""
    if is_numpy_array(a):
        return np.asarray(value, dtype=a.dtype)
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = value.copy()  # torch wants writable memory (small matrices here)
    return _torch().as_tensor(value, dtype=a.dtype, device=a.device)


def empty(a: Any, shape: tuple[int, ...]) -> Any:
    """An uninitialised array of ``shape`` with ``a``'s backend, dtype and device."""
    if is_numpy_array(a):
        return np.empty(shape, dtype=a.dtype)
    return _torch().empty(shape, dtype=a.dtype, device=a.device)


def contiguous(a: Any) -> Any:
    """``a`` in C order (BLAS and ``out=`` want it)."""
    return np.ascontiguousarray(a) if is_numpy_array(a) else a.contiguous()


def swap_last(a: Any) -> Any:
    """The two last axes swapped, C-contiguous: ``k -> k^T`` per batch."""
    return contiguous(np.swapaxes(a, -1, -2) if is_numpy_array(a) else a.transpose(-1, -2))


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b``, written into ``out`` when given."""
    if is_numpy_array(a):
        return np.matmul(a, b, out=out)
    return _torch().matmul(a, b, out=out)


def multiply(a: Any, b: Any, out: Any) -> Any:
    """``out = a * b`` (broadcasting)."""
    if is_numpy_array(out):
        return np.multiply(a, b, out=out)
    return _torch().mul(a, b, out=out)


def exp_(a: Any) -> Any:
    """``e^a`` in place."""
    return np.exp(a, out=a) if is_numpy_array(a) else a.exp_()


def sigmoid_(a: Any) -> Any:
    """The logistic function ``1 / (1 + e^{-a})`` in place (``-inf -> 0``)."""
    if is_numpy_array(a):
        from scipy.special import expit

        return expit(a, out=a)
    return a.sigmoid_()


def einsum(spec: str, *operands: Any) -> Any:
    """``einsum`` of NumPy or torch (not in the array API standard)."""
    if is_numpy_array(operands[0]):
        return np.einsum(spec, *operands)
    return _torch().einsum(spec, *operands)


def logsumexp(a: Any, axis: int) -> Any:
    """``log sum_axis e^a`` without overflow."""
    if is_numpy_array(a):
        from scipy.special import logsumexp as lse

        return lse(a, axis=axis)
    return _torch().logsumexp(a, dim=axis)


def erf(a: Any) -> Any:
    """The error function."""
    if is_numpy_array(a):
        from scipy.special import erf as e

        return e(a)
    return _torch().special.erf(a)


def rows_dot(a: Any, b: Any) -> Any:
    """``<a_i, b_i>`` over the last axis."""
    return einsum("...d,...d->...", a, b)


__all__ = [
    "BACKENDS",
    "DTYPES",
    "Backend",
    "contiguous",
    "empty",
    "get_backend",
    "like",
    "namespace",
    "to_numpy",
]


def is_numpy(a: Any) -> bool:
    """Whether ``a`` is a NumPy array (else a torch tensor)."""
    return bool(is_numpy_array(a))


def is_torch(a: Any) -> bool:
    """Whether ``a`` is a torch tensor: an input a run keeps on torch, on its device (any
    other input, NumPy array or sequence, is read as NumPy)."""
    return bool(is_torch_array(a))


def itemsize(a: Any) -> int:
    """Bytes per element of ``a``."""
    return int(a.itemsize) if is_numpy_array(a) else int(a.element_size())


def masked_fill_(a: Any, mask: Any, value: float) -> Any:
    """``a[mask] = value`` in place, ``mask`` broadcast against ``a``."""
    if is_numpy_array(a):
        a[np.broadcast_to(mask, a.shape)] = value
        return a
    return a.masked_fill_(mask, value)
