"""Where the large-index example's huge tensors live: one buffer, a gap before each tensor, and whether it fits.

``pid * BLOCK`` wrapped in int32 addresses 2^32 elements before where it
meant to, so the huge tensors (inputs, and outputs the launcher allocates) are
carved from one :class:`Arena` with a gap before each: an offset that wrapped
lands in a gap, never in another tensor.  :func:`refuse_what_cannot_fit`
discards the example before anything is built when its predicted peak
(:func:`predicted_peak`) passes the memory free now.

The sizes are read from :mod:`.plan` when used (``sizes.LARGE``), so a test
that shrinks "2^31" there shrinks the arena too.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import torch

from triton_conformance.conformance.discards import DEVICE_MEMORY, ExampleDiscarded
import triton_conformance.conformance.kinds.large_index.plan as sizes
from triton_conformance.conformance.memory_bound import available_host_memory, reserved_mapping
from triton_conformance.conformance.kinds.large_index.plan import LargeIndexPlan
from triton_conformance.conformance.search.allowance import gib
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.config import on_cuda
from triton_conformance.model.contract import Contract

__all__ = ["Arena", "available_memory", "predicted_peak", "refuse_what_cannot_fit", "GAP_BYTE", "GAP_CHUNK", "NAN_BYTE"]

MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value; Python 3.11 does not export it


GAP_BYTE = 0xA5  # finite in every float dtype: a read of it shows only in the values
NAN_BYTE = 0xFF  # NaN in every float dtype (fp16 and bf16 0xFFFF, fp32 and fp64 all ones)
GAP_CHUNK = 1 << 28  # bytes of a gap checked at once


class Arena:
    """Huge tensors carved from one buffer, each after a gap, so that a wrapped offset lands in a gap.

    ``pid * BLOCK`` wrapped in int32 addresses 2^32 elements before where it
    meant to, that is between 2^31 elements before a tensor and its start.

    - CPU: the buffer is an unbacked MAP_NORESERVE mapping (untouched pages
      cost neither memory nor commit) and the gaps are 2^32 elements; the
      emulation's address check reports an access there, whatever the
      allocator would have put there.
    - CUDA: the buffer is real device memory (28 GiB for ``add``), the gaps
      are 2^31 elements filled with a byte pattern, so a wrapped access reads
      and writes memory the process owns instead of faulting (which would
      leave the CUDA context unusable), and :meth:`gap_damage` finds the writes.
    """

    def __init__(self, tensors: int, largest_bytes: int, itemsize: int, device: str = "cpu", *,
                 reserve: bool | None = None, gap: int | None = None):
        self.device = device
        self.reserve = not on_cuda(device) if reserve is None else reserve  # unbacked, or real memory with a pattern
        # A wrapped offset is 2^32 elements off, at most 2^31 elements before the tensor's start.
        self.gap = gap or (2 * sizes.LARGE if self.reserve else sizes.LARGE) * itemsize + (1 << 20)
        self.size = tensors * (self.gap + largest_bytes + 4096) + self.gap
        if self.reserve:
            self.map = reserved_mapping(self.size, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
            self.buffer = torch.frombuffer(self.map, dtype=torch.uint8, count=self.size)
        else:
            self.buffer = torch.full((self.size,), GAP_BYTE, dtype=torch.uint8, device=device)
        self.byte = GAP_BYTE  # what the gaps of real memory hold now
        self.used = 0
        self.regions: list[tuple[int, int, str]] = []  # (start, end, name) of each tensor, in order

    def tensor(self, shape: tuple[int, ...], dtype: Any, name: str = "an output of the launcher"):
        """A contiguous tensor after the next gap, or None when the buffer is full."""
        nbytes = math.prod(shape) * dtype.itemsize
        start = self.used + self.gap
        if start + nbytes + self.gap > self.size:
            return None
        self.used = start + nbytes + (-nbytes) % 4096
        self.regions.append((start, start + nbytes, name))
        return self.buffer[start:start + nbytes].view(dtype).view(shape)

    def _gaps(self):
        """``(lo, hi, name)`` of each gap: the bytes before each tensor (named by it), and after the last."""
        ends = [0] + [end for _, end, _ in self.regions]
        starts = [start for start, _, _ in self.regions] + [self.used + self.gap]
        names = [name for _, _, name in self.regions] + ["(after the last tensor)"]
        return zip(ends, starts, names)

    def rewind(self, keep: int) -> None:
        """Forget every tensor after the first ``keep``: their memory is carved again (and is a gap until then)."""
        self.regions = self.regions[:keep]
        start, end, _ = self.regions[-1] if self.regions else (0, 0, "")
        self.used = end + (-(end - start)) % 4096

    def fill_gaps(self, byte: int) -> None:
        """Set every gap byte, up to the buffer's end, to ``byte`` (real memory only): a second run over the same
        tensors then tells a read of the gaps by its result."""
        if self.reserve:
            raise InvalidArgument("Arena.fill_gaps: an unbacked arena (reserve=True) has no gap bytes to fill")
        bounds = list(self._gaps())
        for lo, hi, _ in bounds[:-1]:
            self.buffer[lo:hi].fill_(byte)
        self.buffer[bounds[-1][0]:].fill_(byte)
        self.byte = byte

    def gap_damage(self) -> str | None:
        """Where a write into a gap landed (CUDA only; the emulation checks addresses itself), or None."""
        if self.reserve or not self.regions:
            return None
        pattern = int.from_bytes(bytes([self.byte]) * 8, "little", signed=True)
        for lo, hi, name in self._gaps():
            lo = -(-lo // 8) * 8  # whole words only
            changed, first = 0, None
            for at in range(lo, hi, GAP_CHUNK):  # a chunk at a time: no mask or index list of a whole gap
                words = self.buffer[at:min(hi, at + GAP_CHUNK)].view(torch.int64) != pattern
                count = int(words.sum())
                if count and first is None:
                    first = at + 8 * int(words.to(torch.int32).argmax())
                changed += count
            if first is not None:
                first += next(i for i, v in enumerate(self.buffer[first:first + 8].tolist()) if v != self.byte)
                return (f"{changed} words changed in the gap before {name}, the first "
                        f"{hi - first} bytes before its start (an int32 offset that wrapped around?)")
        return None


def available_memory(device: str) -> int:
    """Bytes free now where ``device``'s tensors live: the GPU's free memory, or the host's MemAvailable."""
    if on_cuda(device):
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    return available_host_memory()


def predicted_peak(plan: LargeIndexPlan, contract: Contract, tensors: int, largest: int, itemsize: int) -> int:
    """The most bytes the whole-grid example holds at once: the arena (its tensors and the real gaps between
    them), and where an output is judged whole (a reduction over the rows) the oracle's float64 copy of each
    row input."""
    gap = sizes.LARGE * itemsize + (1 << 20)
    arena = tensors * (gap + largest + 4096) + gap
    oracle = sum(plan.elements(contract, n) * 8 for n in plan.row_inputs(contract)) if plan.reduced else 0
    return arena + oracle


def refuse_what_cannot_fit(plan: LargeIndexPlan, contract: Contract, tensors: int, largest: int, itemsize: int,
                            device: str) -> None:
    """Discard the example (the cell is skipped, saying so) when its predicted peak exceeds the free memory."""
    need, free = predicted_peak(plan, contract, tensors, largest, itemsize), available_memory(device)
    if need > free:
        raise ExampleDiscarded(DEVICE_MEMORY, f"the large-index example {plan.dims} {plan.dtype} would hold about "
                               f"{gib(need)} at its peak (inputs, outputs, the gaps between them and the oracle's "
                               f"copies), and {gib(free)} is free on {device}: not run")
