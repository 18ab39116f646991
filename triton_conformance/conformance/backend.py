"""Choosing the back end, and probing what it can be trusted with.

The interpreter must be switched on before any ``@triton.jit`` kernel is
defined, so :func:`select_device` runs before subjects are imported.
"""

from __future__ import annotations

import functools
import os

from triton_conformance.errors import ConformanceUsageError

__all__ = ["DEVICES", "select_device", "current_backend", "probe_interpreter_bf16"]

DEVICES = ("interpreter", "cuda", "auto")

BF16_UNTESTABLE = (
    "not testable here: this Triton interpreter computes bf16 on raw bit patterns "
    "(1 + 0.5 gave {got!r}; upstream triton #4972, #11584, #11604)"
)


def select_device(device: str, *, where: str = "--conformance-device") -> str:
    """Resolve ``auto`` and set the environment for it; returns 'interpreter' or 'cuda'."""
    if device not in DEVICES:
        raise ConformanceUsageError(f"{where}={device!r}, expected one of {DEVICES}")
    if device == "auto":
        device = "interpreter" if os.environ.get("TRITON_INTERPRET") == "1" or not _has_gpu() else "cuda"
    if device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise ConformanceUsageError(f"{where}='cuda' but TRITON_INTERPRET=1 is set; unset it to run on the GPU")
    return device


def _has_gpu() -> bool:
    # Without importing torch: a visible NVIDIA device node is enough to try CUDA.
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


@functools.lru_cache(maxsize=1)
def probe_interpreter_bf16() -> str | None:
    """None if the interpreter adds bf16 correctly; else the reason bf16 is untestable."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_half(x_ptr, out_ptr):
        tl.store(out_ptr, tl.load(x_ptr) + 0.5)

    x = torch.ones(1, dtype=torch.bfloat16)
    out = torch.zeros(1, dtype=torch.bfloat16)
    try:
        add_half[(1,)](x, out)
    except Exception as exc:  # noqa: BLE001
        return BF16_UNTESTABLE.format(got=f"an exception: {exc}")
    got = float(out.item())
    return None if got == 1.5 else BF16_UNTESTABLE.format(got=got)


def current_backend(device: str):
    """The :class:`Backend` for a resolved device name, with untestable dtypes probed."""
    from triton_conformance.conformance.checks import Backend

    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConformanceUsageError("--conformance-device='cuda' but torch sees no CUDA device")
        return Backend(name="cuda", device="cuda")
    reason = probe_interpreter_bf16()
    return Backend(name="interpreter", device="cpu",
                   untestable_dtypes=(("bfloat16", reason),) if reason else ())
