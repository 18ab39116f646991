"""The device the compatibility layer pretends to be (torch-free data).

Under the interpreter there is no GPU to ask, yet launchers and libraries ask
anyway (SM count for a persistent grid, capability for a code path, shared
memory for a block size).  They are answered from one declared
:class:`TargetDevice`, so a CPU run takes the code path of that GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Mapping

from triton_conformance.errors import InvalidArgument

__all__ = ["TargetDevice", "DEFAULT_TARGET"]

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class TargetDevice:
    """A CUDA device as its property queries describe it (default: an sm_90 H100/H200-like part).

    - ``capability``: (major, minor), what ``torch.cuda.get_device_capability`` returns;
      triton's target arch is ``10 * major + minor``;
    - ``multiprocessor_count``: SMs;
    - ``max_shared_mem``: shared memory one block may opt in to, in bytes (what triton's
      ``driver.active.utils.get_device_properties()["max_shared_mem"]`` and torch's
      ``shared_memory_per_block_optin`` report: 227 KiB on H100/H200, of the 228 KiB an SM has);
    - ``shared_memory_per_multiprocessor``: 228 KiB on H100/H200;
    - ``warp_size``, ``l2_cache_size``, ``total_memory`` and the clock and bus figures as the
      CUDA driver reports them (clocks in kHz, bus width in bits).
    """

    name: str = "NVIDIA H100 80GB HBM3"
    capability: tuple[int, int] = (9, 0)
    multiprocessor_count: int = 132
    max_shared_mem: int = 227 * KiB
    shared_memory_per_multiprocessor: int = 228 * KiB
    shared_memory_per_block: int = 48 * KiB
    warp_size: int = 32
    l2_cache_size: int = 50 * MiB
    total_memory: int = 80 * GiB
    max_threads_per_multiprocessor: int = 2048
    regs_per_multiprocessor: int = 65536
    max_num_regs: int = 65536
    clock_rate: int = 1_980_000
    memory_clock_rate: int = 2_619_000
    memory_bus_width: int = 5120

    def __post_init__(self) -> None:
        cap = self.capability
        if (not isinstance(cap, tuple) or len(cap) != 2
                or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cap)):
            raise InvalidArgument(f"TargetDevice: capability={cap!r}, expected (major, minor) non-negative ints")
        for field in ("multiprocessor_count", "max_shared_mem", "shared_memory_per_multiprocessor",
                      "shared_memory_per_block", "warp_size", "l2_cache_size", "total_memory",
                      "max_threads_per_multiprocessor", "regs_per_multiprocessor", "max_num_regs",
                      "clock_rate", "memory_clock_rate", "memory_bus_width"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidArgument(f"TargetDevice: {field}={value!r}, expected a positive int")
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgument(f"TargetDevice: name={self.name!r}, expected a non-empty string")

    @property
    def arch(self) -> int:
        """Triton's ``GPUTarget.arch`` for this device (90 for sm_90)."""
        return 10 * self.capability[0] + self.capability[1]

    def triton_properties(self) -> dict[str, int]:
        """What triton's NVIDIA driver ``utils.get_device_properties(i)`` returns (a fresh dict)."""
        return {
            "max_shared_mem": self.max_shared_mem,
            "max_num_regs": self.max_num_regs,
            "multiprocessor_count": self.multiprocessor_count,
            "warpSize": self.warp_size,
            "sm_clock_rate": self.clock_rate,
            "mem_clock_rate": self.memory_clock_rate,
            "mem_bus_width": self.memory_bus_width,
        }

    def torch_properties(self) -> Any:
        """An object with the fields of torch's ``_CudaDeviceProperties`` (read-only)."""
        return _Properties({
            "name": self.name,
            "major": self.capability[0],
            "minor": self.capability[1],
            "multi_processor_count": self.multiprocessor_count,
            "total_memory": self.total_memory,
            "warp_size": self.warp_size,
            "L2_cache_size": self.l2_cache_size,
            "shared_memory_per_block": self.shared_memory_per_block,
            "shared_memory_per_block_optin": self.max_shared_mem,
            "shared_memory_per_multiprocessor": self.shared_memory_per_multiprocessor,
            "max_threads_per_multi_processor": self.max_threads_per_multiprocessor,
            "regs_per_multiprocessor": self.regs_per_multiprocessor,
            "clock_rate": self.clock_rate,
            "memory_clock_rate": self.memory_clock_rate,
            "memory_bus_width": self.memory_bus_width,
            "is_integrated": False,
            "is_multi_gpu_board": False,
            "gcnArchName": "NVIDIA",
            "uuid": "00000000-0000-0000-0000-000000000000",
        })


class _Properties(SimpleNamespace):
    """Device properties: attributes only, frozen after construction."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        super().__init__(**fields)
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(f"device properties are read-only (tried to set {name!r})")
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        fields = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"_CudaDeviceProperties(name={fields['name']!r}, major={fields['major']}, " \
               f"minor={fields['minor']}, multi_processor_count={fields['multi_processor_count']})"


DEFAULT_TARGET = TargetDevice()
