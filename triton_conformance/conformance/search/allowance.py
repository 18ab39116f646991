"""Safety limits of the searched cells: the per-example memory cap, and what makes two findings one bug.

See :mod:`.search` for how they are used: an example over the cap is
discarded unrun; after a cell's first failure, a second search excludes the
first finding's class.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

from triton_conformance.conformance.search.compiles import BudgetExhausted
from triton_conformance.model.outcomes import Finding
from triton_conformance.model.spec import GUARD_ELEMENTS, Spec, strides_for

__all__ = ["MEMORY_FRACTION", "example_bytes", "memory_cap", "finding_class", "gib", "OutOfMemory",
           "out_of_memory", "raise_if_out_of_memory", "discarding_out_of_memory"]


class OutOfMemory(BudgetExhausted):
    """An example ran the device (or the host) out of memory: the machine's limit, not the kernel's fault.

    Raised in place of ``torch.OutOfMemoryError`` / ``MemoryError`` from building the inputs, the
    launcher or the oracle, so the search discards the example (``device-memory``) instead of judging
    it: with several workers sharing a GPU, or a cap sized by the host's memory on a smaller GPU, a
    draw can fit the cap and still not fit the device.
    """

    discard = "device-memory"
    spent = "this cell's example does not fit the machine's memory"

    def __init__(self, where: str, exc: BaseException):
        BaseException.__init__(self, f"out of memory {where}: {type(exc).__name__}: {str(exc)[:300]}")
        self.subject, self.budget, self.kernel = "", 0, where


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the device or the host ran out of memory (not Triton's out-of-resources)."""
    import torch

    return isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError)))


@contextlib.contextmanager
def discarding_out_of_memory(where: str) -> Iterator[None]:
    """Run the block; if it runs out of memory, raise :class:`OutOfMemory` instead (any other error as is)."""
    try:
        yield
    except Exception as exc:
        raise_if_out_of_memory(exc, where)
        raise


def raise_if_out_of_memory(exc: BaseException | None, where: str) -> None:
    """Raise :class:`OutOfMemory` for ``exc`` if it is one, after giving the cached blocks back."""
    if exc is None or not out_of_memory(exc):
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    raise OutOfMemory(where, exc) from exc

# The default cap: this fraction of the machine's physical memory, per example.
MEMORY_FRACTION = 0.25
# Bytes per element, beyond the input storages: the second call's copy, the snapshot
# and the drawn values (about 3 more storages, counted below), and per element of
# the largest input, outputs in two calls with their guard copies and the float64
# oracle's inputs and output.
_OUTPUT_BYTES_PER_ELEMENT = 40

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "bool": 1,
             "int16": 2, "int32": 4, "int64": 8}


def example_bytes(contract: Any, spec: Spec) -> int:
    """Roughly the most bytes running ``spec`` holds at once.

    Each input's storage as laid out (its span, with the guard band) counts
    four times (two sentinel builds, a snapshot, the drawn values), and each
    element of the largest input ``_OUTPUT_BYTES_PER_ELEMENT`` more: the
    outputs of both calls and the oracle's float64 copies.
    """
    storage, largest = 0, 0
    for name, decl in contract.inputs.items():
        shape = tuple(spec.dims.get(s, 0) for s in decl.shape)
        _, _, span = strides_for(shape, spec.layout(name))
        storage += (span + GUARD_ELEMENTS) * _ITEMSIZE.get(spec.dtypes.get(name, "float32"), 8)
        largest = max(largest, math.prod(shape))
    return 4 * storage + _OUTPUT_BYTES_PER_ELEMENT * largest


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 16 << 30


def memory_cap(config: Any) -> float:
    """The per-example byte cap under ``config``: ``RunConfig.memory_cap`` (a fraction of the
    machine's memory if at most 1, bytes if more, None for no cap), default a quarter of it."""
    cap = getattr(config, "memory_cap", MEMORY_FRACTION)
    if cap is None:
        return math.inf
    return cap * _physical_memory() if cap <= 1 else float(cap)


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def finding_class(finding: Finding, spec: Spec) -> tuple[str, str, str]:
    """What makes two findings of a cell the same bug: (outcome, kind, "empty" if some dim is 0 else "sized")."""
    return finding.outcome, finding.kind, "empty" if any(n == 0 for n in spec.dims.values()) else "sized"
