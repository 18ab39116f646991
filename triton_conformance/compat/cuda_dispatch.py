"""Libraries whose public API calls Triton only for CUDA tensors, run through their Triton path on the CPU.

Many modules dispatch on the device: ``if x.is_cuda: triton_path(x) else:
torch_fallback(x)``.  On the interpreter every tensor is a CPU tensor, so
such an API always takes its torch fallback, and the CPU's verdicts are about
code the GPU never runs.  A subject declared ``pretend_cuda=True`` is called
through :func:`pretending_cuda`: inside the launcher call only, its CPU
tensor arguments (also inside a tuple, list or dict) are views of the same
storage that say ``is_cuda == True`` and ``device.type == "cuda"``
(:class:`CudaLooking`), and so do the tensors torch makes from them; what the
launcher returns is handed back as plain tensors.  The data never moves: the
interpreter reads and writes the same memory, and autograd follows the views.

What a launcher then allocates with ``device=x.device`` is ``cuda``: the
``cuda_allocations`` shim serves it on the CPU (on by default).  Gradients are
plain CPU tensors again, so a backward that dispatches on ``grad.is_cuda``
still takes its fallback.  A real CUDA tensor is passed as it is.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

__all__ = ["CudaLooking", "pretending_cuda", "plain"]

_CUDA = torch.device("cuda", 0)


class CudaLooking(torch.Tensor):
    """A CPU tensor that says it is on CUDA (``is_cuda``, ``device``); every other answer is the tensor's own."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return _CUDA

    def __repr__(self, *args: Any, **kwargs: Any) -> str:
        return f"CudaLooking({plain(self)!r})"


def _map(value: Any, tensor: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return tensor(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map(v, tensor) for v in value)
    if isinstance(value, list):
        return [_map(v, tensor) for v in value]
    if isinstance(value, dict):
        return {k: _map(v, tensor) for k, v in value.items()}
    return value


def _looking(t: torch.Tensor) -> torch.Tensor:
    if isinstance(t, CudaLooking) or t.device.type != "cpu":  # a real CUDA tensor as it is
        return t
    return t.as_subclass(CudaLooking)


def plain(value: Any) -> Any:
    """``value`` with each :class:`CudaLooking` tensor in it (tuples, lists, dicts too) a plain tensor again."""
    return _map(value, lambda t: t.as_subclass(torch.Tensor) if isinstance(t, CudaLooking) else t)


def pretending_cuda(launcher: Callable[..., Any]) -> Callable[..., Any]:
    """``launcher``, called with its CPU tensor arguments looking like CUDA tensors, its results plain again."""

    @functools.wraps(launcher)
    def call(*args: Any, **kwargs: Any) -> Any:
        return plain(launcher(*_map(args, _looking), **_map(kwargs, _looking)))

    return call
