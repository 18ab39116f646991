"""What one cell may spend: one :class:`Allowance` per cell, and the memory an example needs.

The allowance owns every limit a cell's examples run under, and counts what
it refused:

- the **compile share** on CUDA (:class:`~.compiles.CellCompiles`: the cell's
  fair share of the subject's compile budget);
- the **interpreter's cost** (:class:`~.interpreter_cost.CostMeter`: counted
  interpreted work, on the interpreter);
- the **memory cap**: an example whose estimated bytes (:func:`example_bytes`)
  pass it is discarded before anything is built;
- the **shrink calls**: kernel runs the shrinker may spend after the first failure;
- the **discards**, by reason (:mod:`.discards`), and the examples run: a
  search ends once the budgets keep refusing what it draws (:meth:`Allowance.spent`).

An example that runs the machine out of memory anyway is discarded too
(:class:`OutOfMemory`): with several workers sharing a GPU, or a cap sized by
the host's memory on a smaller GPU, a draw can fit the cap and not the device.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from triton_conformance.conformance import memory_bound
from triton_conformance.conformance.search.discards import (
    DEVICE_MEMORY,
    OVER_MEMORY,
    REASONS,
    ExampleDiscarded,
)
from triton_conformance.model.spec import GUARD_ELEMENTS, Spec, strides_for

__all__ = ["Allowance", "MAX_DISCARDS", "MEMORY_FRACTION", "OutOfMemory", "example_bytes", "memory_cap", "gib",
           "out_of_memory", "raise_if_out_of_memory", "discarding_out_of_memory"]

# Once a cell has discarded this many examples (plus three per example it ran) for budgets
# that keep refusing what it draws, its search ends: each such discard builds inputs and
# starts a launch (about 2 ms on an H200), and a cell whose kernels the budget never paid
# for would otherwise spend Hypothesis's whole allowance of invalid examples.
MAX_DISCARDS = 100


class OutOfMemory(ExampleDiscarded):
    """An example ran the device (or the host) out of memory: the machine's limit, not the kernel's fault.

    Raised in place of ``torch.OutOfMemoryError`` / ``MemoryError`` from building the inputs, the
    launcher or the oracle, so the search discards the example instead of judging it.
    """

    def __init__(self, where: str, exc: BaseException):
        bound = memory_bound.current()
        inside = f" (inside the worker's memory bound: {bound.describe()})" if bound is not None else ""
        super().__init__(DEVICE_MEMORY, f"out of memory {where}{inside}: {type(exc).__name__}: {str(exc)[:300]}")
        self.where = where


# What torch's CPU allocator raises (a plain RuntimeError) when the host, or the worker's bound, refuses.
_CPU_ALLOCATOR_REFUSED = "DefaultCPUAllocator: can't allocate memory"


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the device or the host ran out of memory (not Triton's out-of-resources)."""
    if isinstance(exc, RuntimeError) and _CPU_ALLOCATOR_REFUSED in str(exc):
        return True
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


def memory_cap(fraction_or_bytes: float | None) -> float:
    """The per-example byte cap: a fraction of the machine's memory if at most 1, bytes if more, no cap for None."""
    if fraction_or_bytes is None:
        return math.inf
    return fraction_or_bytes * _physical_memory() if fraction_or_bytes <= 1 else float(fraction_or_bytes)


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


@dataclass
class Allowance:
    """Everything one cell may spend, and what it refused.

    - ``memory_cap``: bytes an example may need (:func:`example_bytes`);
    - ``shrink_calls``: kernel runs the shrinker may spend after the cell's first failure;
    - ``compiles``: the cell's share of the compile budget on CUDA (None where nothing compiles);
    - ``meter``: the interpreter's cost meter (None where the cell is not metered);
    - ``discards``: examples discarded, by reason; ``ran``: examples run to a verdict.
    """

    memory_cap: float = math.inf
    shrink_calls: int = 40
    compiles: Any = None
    meter: Any = None
    discards: Counter = field(default_factory=Counter)
    ran: int = 0

    @property
    def steering(self) -> bool:
        """Whether the search moves draws into compiled classes (CUDA, with a compile budget)."""
        return self.compiles is not None and self.compiles.budget is not None

    @property
    def compile_budget(self) -> int | None:
        return None if self.compiles is None else self.compiles.budget

    def fits(self, contract: Any, spec: Spec) -> bool:
        """Whether ``spec`` fits the memory cap (if not, it is discarded unrun)."""
        return example_bytes(contract, spec) <= self.memory_cap

    def admit(self, contract: Any, spec: Spec) -> None:
        """Raise :class:`ExampleDiscarded` (over-memory) if ``spec`` does not fit the memory cap."""
        if not self.fits(contract, spec):
            raise ExampleDiscarded(OVER_MEMORY, f"about {gib(example_bytes(contract, spec))} needed, over the "
                                   f"per-example cap of {gib(self.memory_cap)}")

    def discard(self, reason: str) -> None:
        """One example discarded for ``reason`` (:mod:`.discards`): the one count of every discard."""
        self.discards[reason] += 1

    def discarded(self, exc: ExampleDiscarded) -> None:
        self.discard(exc.reason)

    def spent(self) -> bool:
        """Whether the budgets that keep refusing this cell's draws have refused enough to end its search."""
        refused = sum(n for r, n in self.discards.items() if REASONS[r].limits)
        return refused >= MAX_DISCARDS + 3 * self.ran

    # -- the interpreter's cost, told by the battery --------------------------------------------------------
    def example_started(self, calls: int = 1, *, before_inputs: bool = False) -> None:
        """A new example that will call the launcher ``calls`` times: its share of the interpreted work
        (:class:`~.interpreter_cost.OverCost` at once, ``before_inputs``, when the cell's pool is spent)."""
        if self.meter is not None:
            self.meter.start_example(calls, before_inputs=before_inputs)

    def call_started(self) -> None:
        """One of the example's launcher calls starts: its part of the example's share."""
        if self.meter is not None:
            self.meter.start_call()

    def details(self) -> dict[str, int]:
        """The discard counts as a result's details keys (``compile_budget_discarded``, ...)."""
        return {REASONS[r].detail: n for r, n in self.discards.items() if n}

