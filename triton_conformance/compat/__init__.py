"""An interpreter compatibility layer: what real kernels need before they run on the CPU.

Under ``TRITON_INTERPRET=1`` kernels from real libraries trip over the
interpreter (libdevice functions return None, ``@triton.autotune`` wants a
driver, launchers ask the GPU for its SM count or allocate on ``cuda``,
library runtimes over ``@triton.jit`` expect a ``JITFunction``...), bf16
arithmetic is computed on raw bit patterns, fp8 casts round wrongly, and tensor descriptors are
not held to the hardware's alignment rules.  Each of those is one
named shim here; :func:`install` applies them (all by default), only under
the interpreter, idempotently, and :func:`uninstall` takes them off again.

This module is torch-free until :func:`install` runs: the names, their
descriptions (:data:`SHIMS`) and :class:`TargetDevice` can be imported by the
configuration without loading torch or triton.
"""

from __future__ import annotations

import importlib
import os
from typing import Iterable

from triton_conformance.compat._patch import Patch
from triton_conformance.compat.target import DEFAULT_TARGET, TargetDevice
from triton_conformance.errors import ConformanceUsageError

__all__ = ["SHIMS", "TargetDevice", "DEFAULT_TARGET", "install", "uninstall", "installed", "current_target",
           "interpreter_active", "held_language_patch", "surviving_configs", "pin_config"]

# name -> one line for the report header.  The order is the order shims are applied in.
SHIMS: dict[str, str] = {
    "nested_calls": "a @triton.jit function called inside a kernel does not patch triton.language again: the "
                    "launch did; inside held_language_patch() (a cell) the launches keep one patch",
    "fast_paths": "the interpreter's dtype, constexpr, block-shape and broadcast bookkeeping answered from what it "
                  "computed before or with plain ints (the same answers, without rebuilding them per operation)",
    "libdevice": "triton.language.extra.libdevice functions (None under the interpreter) computed with numpy",
    "autotune": "@triton.autotune: the autotuner's own pruning, then the first surviving config, untimed",
    "device_context": "torch.cuda.device(...) / torch.cpu.device(...) contexts are no-ops for CPU tensors",
    "device_properties": "torch.cuda capability/property/name queries and triton's driver.active answered "
                         "from the declared target device",
    "cuda_allocations": "device='cuda' in torch factories, .to('cuda') and .cuda() allocate on the CPU "
                        "(only where torch has no CUDA)",
    "torch_hip": "torch.hip (absent from CPU wheels) says there is no HIP device",
    "vendor_blas": "triton's cuBLAS / hipBLAS handles (CublasLt, HipblasLt) are built without the library, and "
                   "raise if called",
    "nvidia_smi": "an nvidia-smi on PATH (where none is) describing the declared target device, for libraries "
                  "that find their vendor with it",
    "jit_function": "interpreted kernels pass isinstance(fn, JITFunction) and have its params, signature and "
                    "cache_key (library runtimes walk .fn to reach one)",
    "compiled_kernel": "kernel.run(...) / .warmup(...) return a launchable kernel handle (kernel[grid](*args), "
                       "n_regs, metadata), not None",
    "tensor_wrappers": "tensor-like arguments with data_ptr() and dtype (StridedBuffer) reach the kernel "
                       "without the interpreter's host copy",
    "lang_globals": "a @triton.jit function whose module never imports triton.language runs",
    "float_scalars": "Python float kernel arguments become fp32 scalars, as the compiler specializes them",
    "loop_vars": "`for i in range(...)` / tl.range loop variables are int32 tensors, as when compiled",
    "overflow_checks": "the integer-overflow checks a kernel only asserts with debug=True are not computed "
                       "(compiled code drops them too)",
    "fp8": "casts to and from fp8 (e4m3fn, e5m2) rounded to nearest even and saturated, as cvt.rn.satfinite on "
           "the GPU",
    "bf16": "bf16 arithmetic, casts, dot, reductions and scans decoded to fp32 and rounded to nearest even",
    "descriptors": "tensor descriptors (host TensorDescriptor, tl.make_tensor_descriptor) checked against the "
                   "hardware's 16-byte alignment and block rules, each breach recorded for the battery",
}

_APPLY = {name: f"triton_conformance.compat.{module}:{fn}" for name, (module, fn) in {
    "nested_calls": ("language_patch", "apply_nested_calls"),  # first: the shims that wrap _patch_lang wrap it
    "fast_paths": ("fast_paths", "apply"),
    "libdevice": ("libdevice", "apply"),
    "autotune": ("autotune", "apply"),
    "device_context": ("devices", "apply_device_context"),
    "device_properties": ("devices", "apply_device_properties"),
    "cuda_allocations": ("devices", "apply_cuda_allocations"),
    "torch_hip": ("devices", "apply_torch_hip"),
    "vendor_blas": ("devices", "apply_vendor_blas"),
    "nvidia_smi": ("smi", "apply"),
    "jit_function": ("runtime", "apply_jit_function"),
    "compiled_kernel": ("runtime", "apply_compiled_kernel"),
    "tensor_wrappers": ("runtime", "apply_tensor_wrappers"),
    "lang_globals": ("runtime", "apply_lang_globals"),
    "float_scalars": ("quirks", "apply_float_scalars"),
    "loop_vars": ("quirks", "apply_loop_vars"),
    "overflow_checks": ("quirks", "apply_overflow_checks"),
    "fp8": ("fp8", "apply"),  # before bf16: the bf16 shim's bf16 -> fp8 cast goes through fp32 to this one
    "bf16": ("bf16", "apply"),
    "descriptors": ("descriptors", "apply"),
}.items()}

# The shims that answer for the target device: applied again when it changes.
_TARGETED = ("device_properties", "nvidia_smi", "compiled_kernel")

_installed: dict[str, Patch] = {}
_target: TargetDevice | None = None


def interpreter_active() -> bool:
    """Whether this process runs kernels through the Triton interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _names(names: Iterable[str] | None, where: str) -> tuple[str, ...]:
    if names is None:
        return tuple(SHIMS)
    if isinstance(names, str):
        names = (names,)
    wanted = tuple(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in SHIMS]
    if unknown:
        raise ConformanceUsageError(f"{where}: unknown compat shim(s) {unknown}, expected some of {tuple(SHIMS)}")
    return tuple(n for n in SHIMS if n in wanted)


def install(names: Iterable[str] | None = None, *, target: TargetDevice = DEFAULT_TARGET) -> tuple[str, ...]:
    """Apply the named shims (all when None) and return the names of those now applied, in :data:`SHIMS` order.

    Nothing happens off the interpreter (returns ``()``).  A shim already applied
    is left as it is, unless ``target`` changed (the device ones are then
    re-applied for the new target).  Call it before subject modules are imported:
    kernels that bind ``from triton.language.extra.libdevice import exp`` earlier
    are still served at launch, but device queries a module makes at import time
    are answered only if the layer is in place by then.
    """
    global _target
    if not isinstance(target, TargetDevice):
        raise ConformanceUsageError(f"compat.install: target={target!r}, expected a TargetDevice")
    wanted = _names(names, "compat.install")
    if not interpreter_active():
        return ()
    if _target is not None and target != _target:
        uninstall([n for n in _TARGETED if n in _installed])
    _target = target
    for name in wanted:
        if name in _installed:
            continue
        module, fn = _APPLY[name].split(":")
        patch = Patch(name)
        try:
            getattr(importlib.import_module(module), fn)(patch, target)
        except BaseException:
            patch.restore()
            raise
        _installed[name] = patch
    return tuple(n for n in SHIMS if n in _installed and n in wanted)


def uninstall(names: Iterable[str] | None = None) -> tuple[str, ...]:
    """Take the named shims (all when None) off again; returns the names removed."""
    global _target
    wanted = _names(names, "compat.uninstall")
    removed = []
    for name in reversed(tuple(SHIMS)):
        if name in wanted and name in _installed:
            _installed.pop(name).restore()
            removed.append(name)
    if not _installed:
        _target = None
    return tuple(n for n in SHIMS if n in removed)


def installed() -> tuple[str, ...]:
    """The names of the shims applied now, in :data:`SHIMS` order."""
    return tuple(n for n in SHIMS if n in _installed)


def current_target() -> TargetDevice | None:
    """The target device the applied shims answer for (None when none is applied)."""
    return _target


def held_language_patch():  # noqa: ANN201 - a context manager
    """Context manager: launches inside it keep ``triton.language`` patched from one to the next, instead of
    patching and restoring it around each (see compat.language_patch); a no-op without ``nested_calls``."""
    from triton_conformance.compat.language_patch import held_language_patch as held

    return held()


def surviving_configs(kernel):  # noqa: ANN001, ANN201 - triton types stay out of this module's imports
    """The configs an ``@triton.autotune`` kernel kept after its own pruning at its last launch (see compat.autotune)."""
    from triton_conformance.compat.autotune import surviving_configs as survivors

    return survivors(kernel)


def pin_config(kernel, index: int):  # noqa: ANN001, ANN201
    """Context manager: launches of ``kernel`` run its ``index``-th surviving config (see compat.autotune)."""
    from triton_conformance.compat.autotune import pin_config as pin

    return pin(kernel, index)
