"""The back end kernels run on, and what it can be trusted with.

The interpreter must be switched on before any ``@triton.jit`` kernel is
defined, so :func:`select_device` runs before subjects are imported; it is
the one place ``auto`` is resolved.  :class:`Backend` answers every question
the engine asks of where it runs, so no other module compares device names:
a name from elsewhere (a reproducer's ``device="cuda:0"``, a results file) goes
through :func:`triton_conformance.model.config.parse_device`, which the layers
below the engine share.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from triton_conformance.errors import ConformanceUsageError
from triton_conformance.model.config import AUTO, CUDA, DEVICE_CHOICES, DEVICES, INTERPRETER, on_cuda, parse_device

__all__ = ["DEVICE_CHOICES", "Backend", "select_device", "current_backend", "probe_interpreter_bf16"]

BF16_UNTESTABLE = (
    "not testable here: this Triton interpreter computes bf16 on raw bit patterns "
    "(1 + 0.5 gave {got!r}; upstream triton #4972, #11584, #11604)"
)
INTERPRETER_PRELUDE = 'import os\nos.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported\n'


def select_device(device: str, *, where: str = "--conformance-device") -> str:
    """Resolve ``auto`` and set the environment for it; returns 'interpreter' or 'cuda'."""
    if device not in DEVICE_CHOICES:
        raise ConformanceUsageError(f"{where}={device!r}, expected one of {DEVICE_CHOICES}")
    if device == AUTO:
        device = INTERPRETER if os.environ.get("TRITON_INTERPRET") == "1" or not _has_gpu() else CUDA
    if device == INTERPRETER:
        os.environ["TRITON_INTERPRET"] = "1"
    elif os.environ.get("TRITON_INTERPRET") == "1":
        raise ConformanceUsageError(f"{where}='cuda' but TRITON_INTERPRET=1 is set; unset it to run on the GPU")
    return device


def _has_gpu() -> bool:
    # Without importing torch: a visible NVIDIA device node is enough to try CUDA.
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


@dataclass(frozen=True)
class Backend:
    """Where kernels run: ``interpreter`` (the CPU) or ``cuda``.

    - ``device``: the torch device tensors live on (default: ``cuda`` or ``cpu``
      after the name; tests run the CUDA code path on CPU tensors with ``device="cpu"``);
    - ``untestable_dtypes``: (dtype, reason) pairs this back end cannot be trusted
      with, found by probing it (:func:`current_backend`).
    """

    name: str = "interpreter"
    device: str = ""
    untestable_dtypes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.name not in DEVICES:
            raise ConformanceUsageError(f"Backend: name={self.name!r}, expected one of {DEVICES}")
        if not self.device:
            object.__setattr__(self, "device", "cuda" if self.name == CUDA else "cpu")

    @classmethod
    def named(cls, device: str) -> "Backend":
        """The back end for any spelling of a device (``cpu``, ``cuda:1``, ``interpreter``), unprobed."""
        return cls(name=parse_device(device, where="Backend: device"))

    @property
    def compiles(self) -> bool:
        """Whether kernels are compiled here (so specializations cost time and count against a budget)."""
        return self.name == CUDA

    @property
    def untestable(self) -> dict[str, str]:
        return dict(self.untestable_dtypes)

    @property
    def allocation_device(self) -> str | None:
        """The device every allocation of a launcher is moved to: the CPU under the interpreter
        (a launcher that hard-codes ``device="cuda"`` still runs there), else None."""
        return None if self.compiles else self.device

    @property
    def on_device(self) -> bool:
        """Whether tensors live in GPU memory (not the host's)."""
        return on_cuda(self.device)

    def synchronize(self) -> None:
        """Wait for queued kernels, so their faults and results belong to this call."""
        if self.on_device:
            import torch

            torch.cuda.synchronize()

    def context_lost(self) -> str | None:
        """The error text if this process's CUDA context is unusable, else None (always None off CUDA)."""
        if not self.on_device:
            return None
        import torch

        try:
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - torch.AcceleratorError, RuntimeError: any failure here is fatal
            return f"{type(exc).__name__}: {exc}"
        return None

    def prelude(self) -> str:
        """The first lines of a reproducer, before anything imports triton."""
        return "" if self.compiles else INTERPRETER_PRELUDE


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


def current_backend(device: str) -> Backend:
    """The :class:`Backend` for a resolved device, however spelt (``cuda:0`` and ``cpu`` too, as reproducers
    and results name them), with untestable dtypes probed."""
    if Backend.named(device).compiles:
        import torch

        if not torch.cuda.is_available():
            raise ConformanceUsageError("--conformance-device='cuda' but torch sees no CUDA device")
        return Backend(name="cuda")
    reason = probe_interpreter_bf16()
    return Backend(name="interpreter", untestable_dtypes=(("bfloat16", reason),) if reason else ())
