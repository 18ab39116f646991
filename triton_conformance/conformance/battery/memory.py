"""Guarded, poisoned output allocations.

While a launcher runs, ``torch.empty``-style allocations are served from a
larger buffer: the tensor sits between two guard bands, and everything starts
as a poison pattern (a NaN with a payload no arithmetic produces).  Afterwards,
changed guard bytes are an out-of-bounds write, and poison left in a returned
output is an element the kernel never wrote.  ``torch.zeros``-style
allocations keep their zeros but get the same guard bands.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from triton_conformance.conformance.battery.allocations import Request, intercept_allocations

__all__ = ["GuardedAllocation", "guarded_allocations", "poison_bytes", "flat_bytes", "unwritten_elements",
           "GUARD_BYTES"]

GUARD_BYTES = 1024

# Two poisons per dtype, one per call of an example, differing in every byte (the
# second is negative).  For floats they are signalling-NaN payloads that no
# arithmetic produces; a one-byte value can be a real result, so an element counts
# as unwritten only if it kept the poison in both calls.
_POISON = {
    torch.float16: (0x7D5A, 0xFD3C),
    torch.bfloat16: (0x7FA5, 0xFF93),
    torch.float32: (0x7FA5A5A5, 0xFF93C3C3),
    torch.float64: (0x7FF5A5A5A5A5A5A5, 0xFFF3C3C3C3C3C3C3),
}
_BYTE_POISON = (0xA5, 0x3C)
_UINT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def poison_bytes(dtype: torch.dtype, variant: int = 0) -> bytes:
    """One element of poison number ``variant`` (0 or 1) for ``dtype``."""
    size = dtype.itemsize
    if dtype in _POISON:
        return _POISON[dtype][variant].to_bytes(size, "little")
    return bytes([_BYTE_POISON[variant]]) * size


@dataclass
class GuardedAllocation:
    buffer: torch.Tensor  # uint8 storage: guard | tensor span | guard
    tensor: torch.Tensor
    span_bytes: int
    initial: bytes  # a guard band's expected bytes (poison)
    variant: int = 0

    def guard_damage(self) -> list[tuple[str, int]]:
        """(side, first changed byte index relative to the tensor) for each damaged guard band."""
        # Both bands as one (2, GUARD_BYTES) view, compared on the device with their pristine bytes at once;
        # only a damaged allocation's bands come back to the host (never the span between them).
        bands = self.buffer.as_strided((2, GUARD_BYTES), (GUARD_BYTES + self.span_bytes, 1))
        if torch.equal(bands, _pristine_bands(self.initial, str(self.buffer.device))):
            return []
        before = self.buffer[:GUARD_BYTES].cpu().numpy().tobytes()
        after = self.buffer[GUARD_BYTES + self.span_bytes:].cpu().numpy().tobytes()
        damage = []
        if before != self.initial:
            first = next(i for i, (a, b) in enumerate(zip(before, self.initial)) if a != b)
            damage.append(("before", first - GUARD_BYTES))
        if after != self.initial[:len(after)]:
            first = next(i for i, (a, b) in enumerate(zip(after, self.initial)) if a != b)
            damage.append(("after", self.span_bytes + first))
        return damage

    def owns(self, t: torch.Tensor) -> bool:
        return t.untyped_storage().data_ptr() == self.buffer.untyped_storage().data_ptr()


@functools.lru_cache(maxsize=64)
def _pristine_bands(initial: bytes, device: str) -> torch.Tensor:
    """Two guard bands of ``initial`` bytes, as one uint8 (2, GUARD_BYTES) tensor on ``device``."""
    band = torch.frombuffer(bytearray(initial), dtype=torch.uint8)
    return torch.stack([band, band]).to(device)


def _allocate(meta: torch.Tensor, device: Any, fill_zero: bool, variant: int = 0) -> GuardedAllocation:
    elem = meta.element_size()
    if meta.numel() == 0:
        span = 0
    else:
        span = (sum((s - 1) * st for s, st in zip(meta.shape, meta.stride())) + 1) * elem
    poison = poison_bytes(meta.dtype, variant)
    total = GUARD_BYTES + span + GUARD_BYTES  # a whole number of elements: GUARD_BYTES is one of 8 bytes
    buffer = torch.empty(total, dtype=torch.uint8, device=device)  # torch's own: the interceptor is idle here
    # Filled on the device, one element at a time: a tuner's 256 MB cache-flush buffer comes here too.
    buffer.view(_UINT.get(elem, torch.uint8)).fill_(int.from_bytes(poison, "little", signed=elem > 1))
    pattern = poison * (GUARD_BYTES // elem)  # what each guard band holds
    if span:
        tensor = buffer.view(meta.dtype).as_strided(meta.shape, meta.stride(), GUARD_BYTES // elem)
    else:
        tensor = buffer.view(meta.dtype)[:0].reshape(meta.shape)
    if fill_zero and span:
        tensor.zero_()
    return GuardedAllocation(buffer=buffer, tensor=tensor, span_bytes=span, initial=pattern, variant=variant)


@contextlib.contextmanager
def guarded_allocations(device_override: str | None = None, variant: int = 0) -> Iterator[list[GuardedAllocation]]:
    """Serve torch's empty/zeros factories from guarded, poisoned buffers while active.

    ``variant`` picks which of the two poisons fills them.
    ``device_override`` remaps the device a launcher asks for (a launcher that
    hard-codes ``device="cuda"`` still runs under the interpreter on the CPU).
    """
    log: list[GuardedAllocation] = []

    def serve(request: Request) -> torch.Tensor:
        log.append(_allocate(request.meta, request.device, request.zero, variant))
        return log[-1].tensor

    with intercept_allocations(serve, device_override=device_override):
        yield log


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A 1-D, stride-1 copy of ``t``'s elements, on its device (size-1 dims may carry any stride)."""
    if t.dtype == torch.bool:  # copying bools normalises their bytes to 0/1: copy the bytes
        t = t.view(torch.uint8)
    return t.detach().reshape(-1).clone(memory_format=torch.contiguous_format)


def flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as a uint8 tensor, in row-major order."""
    return _flat(t).view(torch.uint8)


def unwritten_elements(t: torch.Tensor, variant: int = 0) -> torch.Tensor:
    """Boolean tensor: True where ``t`` still holds poison number ``variant``."""
    if t.numel() == 0:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    t = t.detach()  # read in place, whatever its strides: a view as integers of its element size
    size = t.element_size()
    if size == 1:
        return t.view(torch.uint8) == _BYTE_POISON[variant]
    pattern = int.from_bytes(poison_bytes(t.dtype, variant), "little", signed=True)
    return t.view(_UINT[size]) == pattern
