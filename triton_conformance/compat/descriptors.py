"""Tensor descriptors checked against the hardware's rules under the interpreter.

The GPU's copy engine (TMA) faults on a descriptor whose base or strides are not 16-byte aligned or whose
last dim is strided (:mod:`triton_conformance.model.descriptors`); the interpreter reads any address.  triton's
own checks are ``assert`` statements (the host ``TensorDescriptor.__post_init__``, the interpreter's
``TensorDescHandle.validate``): gone under ``python -O``, and their AssertionError reads like a refusal.  So
this shim checks every descriptor built while :func:`recording` is active, on the host and in a kernel
(``tl.make_tensor_descriptor``, and a host descriptor as it reaches the kernel), and records each one that
breaks a rule, before triton's own check runs; what triton does next is unchanged.  A host descriptor's
block is checked at the launch, not when it is built: launchers build one on a placeholder block and an
autotuner's ``pre_hook`` sets the config's (Triton's tutorials 06 and 09: ``dummy_block = [1, 1]``).  Host descriptors are
checked on a GPU too (:func:`recording` hooks them for its duration), so a verdict is the same on both.  The battery turns a
record into an ``unsafe`` finding that names the rule.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import TargetDevice
from triton_conformance.model.descriptors import DescriptorUse, descriptor_breaches

__all__ = ["apply", "recording", "record"]

_recorders: list[list[DescriptorUse]] = []
# triton.language's names of the dtypes a descriptor may hold -> torch's, so both hooks say one name.
_TL_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8e4nv": "float8_e4m3fn",
             "fp8e5": "float8_e5m2", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
             "uint8": "uint8"}


@contextlib.contextmanager
def recording() -> Iterator[list[DescriptorUse]]:
    """Context manager: the list of every rule-breaking descriptor built inside it (once each).

    Host descriptors are checked on every back end: where the shim is not installed (on a GPU, whose
    kernels no shim reaches), the host hook is put in place for the context's duration."""
    uses: list[DescriptorUse] = []
    _recorders.append(uses)
    host = Patch("descriptors: host check")
    hooked = _hook_host(host)
    try:
        yield uses
    finally:
        _recorders.remove(uses)
        if hooked:
            host.restore()


def record(where: str, address: int, itemsize: int, dtype: str, shape: Any, strides: Any, block_shape: Any,
           check_block: bool = True) -> None:
    """Check one descriptor and record it with every active recorder if it breaks a rule (its block's rule only
    with ``check_block``: a host descriptor's block may still change before the launch)."""
    if not _recorders:
        return
    shape, strides, block = (tuple(int(v) for v in xs) for xs in (shape, strides, block_shape))
    breaches = descriptor_breaches(int(address), itemsize, strides, block if check_block else None)
    if not breaches:
        return
    use = DescriptorUse(where, int(address), dtype, shape, strides, block, breaches)
    for uses in _recorders:
        # A host descriptor is checked when built and again as it reaches the kernel: one record.
        if not any((u.address, u.shape, u.strides, u.block_shape) == (use.address, shape, strides, block)
                   for u in uses):
            uses.append(use)


def _value(handle: Any) -> int:
    """An interpreter scalar handle's value (a Python int passes through)."""
    data = getattr(handle, "data", handle)
    return int(data.item() if hasattr(data, "item") else data)


def _record_host(desc: Any, check_block: bool) -> None:
    base = desc.base
    if hasattr(base, "data_ptr") and hasattr(base, "element_size"):
        record("host TensorDescriptor", base.data_ptr(), base.element_size(), str(base.dtype).replace("torch.", ""),
               desc.shape, desc.strides, desc.block_shape, check_block)


def _hook_host(patch: Patch) -> bool:
    """Check every host ``TensorDescriptor`` as it is built (before triton's asserts), and its block as a
    kernel is launched with it, unless already hooked; whether this call hooked it."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:  # a triton without tensor descriptors: nothing builds one
        return False
    host_check = TensorDescriptor.__post_init__
    if getattr(host_check, "checks_descriptors", False):
        return False

    def __post_init__(self: Any) -> None:
        _record_host(self, check_block=False)
        host_check(self)

    __post_init__.checks_descriptors = True
    patch.set(TensorDescriptor, "__post_init__", __post_init__)
    from triton.runtime import interpreter, jit

    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        _hook_launch(patch, cls, TensorDescriptor)
    return True


def _hook_launch(patch: Patch, cls: type, descriptor_type: type) -> None:
    """``cls.run`` checks the host descriptors among its arguments (their blocks final) before it launches."""
    launch = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, descriptor_type):
                _record_host(arg, check_block=True)
        return launch(self, *args, **kwargs)

    patch.set(cls, "run", run)


def apply(patch: Patch, target: TargetDevice) -> None:
    _hook_host(patch)
    try:
        from triton.runtime import interpreter as interp
    except ImportError:
        return
    builder = interp.InterpreterBuilder
    device_make = getattr(builder, "create_make_tensor_descriptor", None)
    if device_make is None:
        return

    def create_make_tensor_descriptor(self: Any, base: Any, shape: Any, strides: Any, block_shape: Any,
                                      *args: Any, **kwargs: Any) -> Any:
        scalar = base.dtype.element_ty
        record("tl.make_tensor_descriptor", _value(base), scalar.primitive_bitwidth // 8,
               _TL_NAMES.get(str(scalar), str(scalar)), [_value(s) for s in shape], [_value(s) for s in strides],
               [int(b) for b in block_shape])
        return device_make(self, base, shape, strides, block_shape, *args, **kwargs)

    patch.set(builder, "create_make_tensor_descriptor", create_make_tensor_descriptor)
