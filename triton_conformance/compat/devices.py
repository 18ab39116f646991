"""What launchers ask of the GPU, answered on the CPU.

- ``device_context``: ``with torch.cuda.device(x.device):`` (and ``torch.cuda.device_of``,
  ``torch.cpu.device``, which torch 2.13 lacks) become no-ops for CPU tensors and indices
  when torch has no CUDA; a real CUDA device still gets the real context.
- ``device_properties``: ``torch.cuda.get_device_capability / get_device_properties /
  get_device_name`` and triton's ``driver.active`` (``get_current_target()``,
  ``utils.get_device_properties()``, the current device) answer from the declared
  :class:`TargetDevice`; where torch has no CUDA, ``current_device()`` is 0 and
  ``device_count()`` 1 (runtimes size per-device caches by it and index them by
  the current device).  ``torch.cuda.is_available()`` is left alone: code that
  branches on it still takes its CPU path.
- ``cuda_allocations``: where torch has no CUDA, ``device="cuda"`` (``"cuda:0"``, an index,
  ``torch.device("cuda")``) given to a torch factory, ``Tensor.to``, ``Tensor.new_*`` or
  ``Tensor.cuda()`` allocates on the CPU instead of raising "Torch not compiled with CUDA
  enabled" -- also at import time, which the engine's per-launch remapping of
  ``empty``/``zeros`` does not cover.
- ``torch_hip``: ``torch.hip`` (which CPU wheels lack; older liger-kernel asks
  ``torch.hip.is_available()`` at import) says there is no HIP device.
- ``vendor_blas``: ``triton._C.libtriton.nvidia.cublas.CublasLt`` (and hipBLAS's
  ``HipblasLt``) is built without loading the library (Triton's tutorials 09 and 10 build
  one at import where the backend says "cuda"); calling it raises.
"""

from __future__ import annotations

import functools
from typing import Any

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice

__all__ = ["apply_device_context", "apply_device_properties", "apply_cuda_allocations", "apply_torch_hip",
           "apply_vendor_blas", "FakeDriver"]


def _is_cuda(device: Any) -> bool:
    import torch

    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


# ---------------------------------------------------------------------------- device contexts
class _NoDevice:
    """A device context that does nothing (what ``torch.cuda.device`` is for a CPU tensor here)."""

    def __init__(self, device: Any = None) -> None:
        self.idx = -1
        self.prev_idx = -1
        self.device = device

    def __enter__(self) -> "_NoDevice":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


def apply_device_context(patch: Patch, target: TargetDevice) -> None:
    import torch

    real_device = torch.cuda.device

    class device(_NoDevice):  # noqa: N801 - torch's name
        """torch.cuda.device, a no-op unless torch has CUDA and ``device`` is a CUDA device."""

        def __init__(self, device: Any) -> None:
            super().__init__(device)
            self._inner = real_device(device) if torch.cuda.is_available() and _is_cuda(device) else None

        def __enter__(self) -> Any:
            return self._inner.__enter__() if self._inner is not None else self

        def __exit__(self, *exc: Any) -> Any:
            return self._inner.__exit__(*exc) if self._inner is not None else False

    class device_of(device):  # noqa: N801
        def __init__(self, obj: Any) -> None:
            super().__init__(obj.get_device() if getattr(obj, "is_cuda", False) else torch.device("cpu"))

    patch.set(torch.cuda, "device", device)
    patch.set(torch.cuda, "device_of", device_of)
    if not hasattr(torch.cpu, "device"):
        patch.set(torch.cpu, "device", _NoDevice)


# ---------------------------------------------------------------------------- device properties
class FakeDriver:
    """triton's ``driver.active`` for a declared target: device queries only (nothing launches through it)."""

    def __init__(self, target: TargetDevice) -> None:
        import types

        self.target = target
        self.utils = types.SimpleNamespace(get_device_properties=lambda device=0: target.triton_properties())

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.target.arch, self.target.warp_size)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")  # where the interpreter's tensors live

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def get_benchmarker(self) -> Any:
        raise RuntimeError("triton-conformance compat: no GPU to benchmark on under the interpreter "
                           "(the 'autotune' shim runs a config without timing)")

    def __repr__(self) -> str:
        return f"FakeDriver({self.target.name!r}, sm_{self.target.arch})"


def apply_device_properties(patch: Patch, target: TargetDevice) -> None:
    import torch
    from triton.runtime import driver

    props = target.torch_properties()
    patch.set(torch.cuda, "get_device_capability", lambda device=None: tuple(target.capability))
    patch.set(torch.cuda, "get_device_properties", lambda device=None: props)
    patch.set(torch.cuda, "get_device_name", lambda device=None: target.name)
    if not torch.cuda.is_available():  # the target is device 0, the one device there is
        patch.set(torch.cuda, "current_device", lambda: 0)
        patch.set(torch.cuda, "device_count", lambda: 1)
    patch.set(driver, "_active", FakeDriver(target))


# ---------------------------------------------------------------------------- allocations
_FACTORIES = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
              "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "arange",
              "linspace", "logspace", "eye", "tensor", "as_tensor", "empty_strided", "zeros_strided")
_METHODS = ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor")


def _on_cpu(fn: Any, patch: Patch) -> Any:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = "cpu"
        return fn(*args, **kwargs)

    call._compat_original = fn  # type: ignore[attr-defined]
    _scripted_as(call, fn, patch)
    return call


def _scripted_as(wrapper: Any, builtin: Any, patch: Patch) -> None:
    """``torch.jit.script`` compiles a call of ``torch.zeros_like`` as its aten op, found by the function's
    identity; a wrapper it does not know it compiles as Python instead, and ``inspect`` then fails on the
    builtin behind ``__wrapped__`` (torch's jvp decompositions script such calls at import).  So the wrapper
    is registered as the op it wraps, for as long as the shim is in."""
    from torch.jit import _builtins

    op = _builtins._find_builtin(builtin)
    if op is None:
        return
    table = _builtins._get_builtin_table()
    table[id(wrapper)] = op
    patch.on_restore(lambda: table.pop(id(wrapper), None))


def apply_cuda_allocations(patch: Patch, target: TargetDevice) -> None:
    import torch

    if torch.cuda.is_available():
        return  # allocations on cuda work here: nothing to remap
    for name in _FACTORIES:
        if hasattr(torch, name):
            patch.set(torch, name, _on_cpu(getattr(torch, name), patch))
    for name in _METHODS:
        patch.set(torch.Tensor, name, _on_cpu(getattr(torch.Tensor, name), patch))

    real_to = torch.Tensor.to

    @functools.wraps(real_to)
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and not isinstance(args[0], (torch.dtype, torch.Tensor)) and _is_cuda(args[0]):
            args = ("cpu",) + args[1:]
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = "cpu"
        return real_to(self, *args, **kwargs)

    def cuda(self: Any, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        return real_to(self, "cpu", non_blocking=non_blocking, **kwargs)

    patch.set(torch.Tensor, "to", to)
    patch.set(torch.Tensor, "cuda", cuda)


# ---------------------------------------------------------------------------- torch.hip
def apply_torch_hip(patch: Patch, target: TargetDevice) -> None:
    import types

    import torch

    if hasattr(torch, "hip"):
        return  # a build that has it answers for itself
    hip = types.ModuleType("torch.hip", "No HIP device (triton-conformance compat: this torch has no torch.hip)")
    hip.is_available = lambda: False  # type: ignore[attr-defined]
    hip.device_count = lambda: 0  # type: ignore[attr-defined]
    patch.set(torch, "hip", hip)


# ---------------------------------------------------------------------------- cuBLAS / hipBLAS handles
class _NoVendorBlas:
    """A cuBLAS / hipBLAS handle where the library cannot load (a CPU machine): built, never run."""

    def __init__(self, workspace: Any = None, *args: Any) -> None:
        self.workspace = workspace

    def __getattr__(self, name: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{type(self).__name__}.{name}: no vendor BLAS under the Triton interpreter "
                               "(triton-conformance compat: the handle is a stand-in)")
        return unavailable


def apply_vendor_blas(patch: Patch, target: TargetDevice) -> None:
    # Triton's tutorials build a CublasLt handle at import when the backend says "cuda" (which the
    # device_properties shim answers); the real class dlopens libcublas there and fails on a CPU machine.
    from triton._C import libtriton

    for vendor, module, handle in (("nvidia", "cublas", "CublasLt"), ("amd", "hipblas", "HipblasLt")):
        blas = getattr(getattr(libtriton, vendor, None), module, None)
        if blas is not None and hasattr(blas, handle):
            patch.set(blas, handle, type(handle, (_NoVendorBlas,), {}))
