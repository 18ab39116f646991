"""GPU timing and the device's measured peaks, for performance contracts.

- :class:`CudaEventTimer` times a callable the way ``triton.testing.do_bench``
  does, but in a loop of our own: a warm-up call (which compiles), an estimate
  from five calls, then ``n`` timed calls, each preceded by a 256 MiB
  ``zero_()`` of a scratch buffer so that the call starts with a cold L2, and
  bracketed by a pair of CUDA events recorded on the current stream.  The flush
  is outside the events.  ``n`` is chosen so the timed calls take about
  ``rep_ms`` in all (at least ``min_reps``, at most ``max_reps``).  The result
  is every call's time in milliseconds; callers take the median.
- :class:`MeasuredPeaks` measures the device's copy bandwidth (a large
  ``dst.copy_(src)``, counted as read + write) and torch's matmul rate per
  dtype (``torch.matmul`` at 8192^3, TF32 as the process has it), once per
  process per device, with the same timer.
- :class:`FixedPeaks` is a set of known figures, for tests and for reuse.

torch is imported inside the functions, never at import.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from triton_conformance.conformance import gpu_turns
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.config import on_cuda

__all__ = [
    "COPY_BYTES",
    "FLUSH_BYTES",
    "MATMUL_SIZE",
    "CudaEventTimer",
    "FixedPeaks",
    "MeasuredPeaks",
    "Peaks",
    "Timer",
    "measured_peaks",
    "median_ms",
]

FLUSH_BYTES = 256 << 20  # larger than any current L2 (H200: 60 MiB), as in do_bench
COPY_BYTES = 1 << 30  # each of source and destination: far past L2, long enough to time
MATMUL_SIZE = 8192  # square matmul for the compute peak: large enough to saturate tensor cores


class Timer(Protocol):
    """Something that runs ``fn`` repeatedly and returns each run's time in milliseconds."""

    description: str

    def __call__(self, fn: Callable[[], Any]) -> list[float]: ...


class Peaks(Protocol):
    """The device's peaks: copy bandwidth in GB/s, matmul rate per dtype in TFLOP/s."""

    def bandwidth_gbs(self) -> float: ...

    def tflops(self, dtype: str) -> float: ...

    def describe(self) -> dict[str, Any]: ...


def median_ms(times: list[float]) -> float:
    """The median of per-run times; raises InvalidArgument on an empty or non-positive list."""
    if not times or any(not (t > 0) for t in times):
        raise InvalidArgument(f"median_ms: times={times[:8]!r}, expected a non-empty list of positive ms")
    return float(statistics.median(times))


@dataclass
class CudaEventTimer:
    """Per-call CUDA-event times with a cold L2, as ``triton.testing.do_bench`` measures."""

    rep_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 1000
    flush_bytes: int = FLUSH_BYTES
    device: str = "cuda"
    _cache: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not (self.rep_ms > 0):
            raise InvalidArgument(f"CudaEventTimer: rep_ms={self.rep_ms!r}, expected a positive number")
        if not (isinstance(self.min_reps, int) and 1 <= self.min_reps <= self.max_reps):
            raise InvalidArgument(f"CudaEventTimer: min_reps={self.min_reps!r}, expected 1 <= min_reps <= "
                                  f"max_reps={self.max_reps!r}")

    @property
    def description(self) -> str:
        return (f"CUDA events around each call, {self.flush_bytes >> 20} MiB L2 flush before each, "
                f"median of {self.min_reps}..{self.max_reps} calls (~{self.rep_ms:g} ms)")

    def _flush(self) -> None:
        if self._cache is None:
            self._cache = torch.empty(self.flush_bytes, dtype=torch.int8, device=self.device)
        self._cache.zero_()

    def _timed(self, fn: Callable[[], Any], n: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for start, end in zip(starts, ends):
            self._flush()  # enqueued before the start event: cold L2, and not timed
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def __call__(self, fn: Callable[[], Any]) -> list[float]:
        fn()  # compiles and autotunes outside the timing, beside the other processes' examples
        torch.cuda.synchronize()
        with gpu_turns.exclusive():  # the GPU alone while timed: other processes wait at their next example
            estimate = median_ms(self._timed(fn, 5))
            n = int(min(self.max_reps, max(self.min_reps, self.rep_ms / estimate)))
            return self._timed(fn, n)


@dataclass(frozen=True)
class FixedPeaks:
    """Peaks given as numbers: ``FixedPeaks(bandwidth=4265.0, matmul={"float16": 681.0})``."""

    bandwidth: float
    matmul: Mapping[str, float] = field(default_factory=dict)
    source: str = "given"

    def __post_init__(self) -> None:
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0):
            raise InvalidArgument(f"FixedPeaks: bandwidth={self.bandwidth!r}, expected a positive GB/s figure")
        for dtype, rate in self.matmul.items():
            if not (isinstance(rate, (int, float)) and rate > 0):
                raise InvalidArgument(f"FixedPeaks: matmul[{dtype!r}]={rate!r}, expected a positive TFLOP/s figure")

    def bandwidth_gbs(self) -> float:
        return float(self.bandwidth)

    def tflops(self, dtype: str) -> float:
        if dtype not in self.matmul:
            raise InvalidArgument(f"FixedPeaks: no matmul rate for dtype={dtype!r}; known: {sorted(self.matmul)}")
        return float(self.matmul[dtype])

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "bandwidth_gbs": self.bandwidth, "matmul_tflops": dict(self.matmul)}


class MeasuredPeaks:
    """Peaks measured on this device through torch, each once, on first use."""

    def __init__(self, timer: Timer | None = None, *, device: str = "cuda", copy_bytes: int = COPY_BYTES,
                 matmul_size: int = MATMUL_SIZE):
        self.timer = timer or CudaEventTimer(device=device)
        self.device = device
        self.copy_bytes = copy_bytes
        self.matmul_size = matmul_size
        self._bandwidth: float | None = None
        self._tflops: dict[str, float] = {}

    def bandwidth_gbs(self) -> float:
        if self._bandwidth is None:
            src = torch.ones(self.copy_bytes // 4, dtype=torch.float32, device=self.device)
            dst = torch.empty_like(src)
            ms = median_ms(self.timer(lambda: dst.copy_(src)))
            self._bandwidth = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9  # read + write
            del src, dst
        return self._bandwidth

    def tflops(self, dtype: str) -> float:
        if dtype not in self._tflops:
            dt = getattr(torch, dtype, None)
            if not isinstance(dt, torch.dtype) or not dt.is_floating_point:
                raise InvalidArgument(f"MeasuredPeaks.tflops: dtype={dtype!r}, expected a float dtype name")
            n = self.matmul_size
            a = torch.randn(n, n, device=self.device).to(dt)
            b = torch.randn(n, n, device=self.device).to(dt)
            ms = median_ms(self.timer(lambda: torch.matmul(a, b)))
            self._tflops[dtype] = 2 * n ** 3 / (ms * 1e-3) / 1e12
            del a, b
        return self._tflops[dtype]

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": "measured", "timer": getattr(self.timer, "description", repr(self.timer)),
                               "copy_bytes": self.copy_bytes, "matmul_size": self.matmul_size,
                               "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
        if self._bandwidth is not None:
            out["bandwidth_gbs"] = self._bandwidth
        if self._tflops:
            out["matmul_tflops"] = dict(self._tflops)
        if on_cuda(self.device) and torch.cuda.is_available():
            out["device_name"] = torch.cuda.get_device_name(self.device)
        return out


_PER_PROCESS: dict[str, MeasuredPeaks] = {}


def measured_peaks(device: str = "cuda") -> MeasuredPeaks:
    """This process's :class:`MeasuredPeaks` for ``device``: each figure is measured once and cached."""
    if device not in _PER_PROCESS:
        _PER_PROCESS[device] = MeasuredPeaks(device=device)
    return _PER_PROCESS[device]
