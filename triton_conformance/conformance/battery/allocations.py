"""The one allocation interceptor: serve torch's factories from buffers of the suite's choosing.

While :func:`intercept_allocations` is active, ``torch.empty``, ``empty_like``,
``empty_strided``, ``zeros``, ``zeros_like`` and ``Tensor.new_empty`` /
``new_zeros`` first ask a *server* for the tensor.  The server sees the
request as a meta tensor (shape, strides, dtype) with the device asked for
and whether it must be zeros, and returns a tensor, or None to let torch
allocate as usual.  The guarded, poisoned outputs of the searched cells
(:mod:`.memory`) and the huge outputs of the large-index cell
(:mod:`.large_index`) are two servers of this one mechanism.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

__all__ = ["Request", "intercept_allocations"]

_FACTORIES = {  # name -> fills with zeros
    "empty": False, "empty_like": False, "empty_strided": False,
    "zeros": True, "zeros_like": True,
}
_METHODS = {"new_empty": False, "new_zeros": True}


@dataclass(frozen=True)
class Request:
    """One allocation a launcher asked for."""

    factory: str  # "empty", "zeros_like", "new_empty", ...
    meta: torch.Tensor  # the tensor it would get, on the meta device
    device: Any  # the device it asked for (after any remapping)
    zero: bool  # it must start as zeros

    def allocate(self) -> torch.Tensor:
        """A plain tensor as torch would have made it (a server's fallback)."""
        out = torch.empty_strided(tuple(self.meta.shape), self.meta.stride(), dtype=self.meta.dtype,
                                  device=self.device)  # torch's own: servers run with the interceptor idle
        return out.zero_() if self.zero else out


Server = Callable[[Request], "torch.Tensor | None"]


@contextlib.contextmanager
def intercept_allocations(serve: Server, *, device_override: str | None = None) -> Iterator[None]:
    """While active, torch's empty/zeros factories are served by ``serve`` (None: torch allocates).

    ``device_override`` remaps the device a launcher asks for (a launcher that
    hard-codes ``device="cuda"`` still runs under the interpreter on the CPU).
    Allocations that need autograd or pinned memory, and torch's own nested
    calls while a server allocates, go straight to torch.
    """
    busy: list[str] = []
    saved = {name: getattr(torch, name) for name in _FACTORIES}
    saved_methods = {name: getattr(torch.Tensor, name) for name in _METHODS}

    def make(name: str, original: Callable[..., torch.Tensor], zero: bool):
        def factory(*args: Any, **kwargs: Any) -> torch.Tensor:
            if busy or kwargs.get("requires_grad") or kwargs.get("pin_memory"):
                return original(*args, **kwargs)
            like = args[0] if name.endswith("_like") or name.startswith("new_") else None
            device = kwargs.pop("device", None)
            if device is None:
                device = like.device if isinstance(like, torch.Tensor) else "cpu"
            if device_override is not None:
                device = device_override
            busy.append(name)  # torch may call these factories itself while we allocate
            try:
                meta = original(*args, device="meta", **kwargs)
                served = serve(Request(name, meta, device, zero))
                return served if served is not None else original(*args, device=device, **kwargs)
            finally:
                busy.pop()

        factory.__name__ = name
        return factory

    try:
        for name, zero in _FACTORIES.items():
            setattr(torch, name, make(name, saved[name], zero))
        for name, zero in _METHODS.items():
            setattr(torch.Tensor, name, make(name, saved_methods[name], zero))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        for name, fn in saved_methods.items():
            setattr(torch.Tensor, name, fn)
