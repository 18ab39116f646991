"""Examples a cell could not pay for: one typed exception, and the table of reasons.

An example is **discarded**, never judged, when what it needs is beyond the
cell's allowance (:mod:`.search.allowance`): a kernel past the compile budget, more
memory than the cap or the machine holds, more interpreted work than its
share, a config the kernel's own pruning drops, or one that does not fit the device
(Triton's autotuner skips it).  Whoever finds that out raises
:class:`ExampleDiscarded` with its reason; the search counts it and draws
again, and an unsearched cell whose one example is discarded is skipped,
saying why (:attr:`DiscardReason.skips`).

A BaseException, so neither the launcher's nor the battery's ``except
Exception`` can take it for the kernel's own error.

An example that runs the machine out of memory is discarded too
(:class:`OutOfMemory`): with several workers sharing a GPU, or a cap sized by
the host's memory on a smaller GPU, a draw can fit the cap and not the device.
Whoever builds, launches or judges raises it through
:func:`raise_if_out_of_memory`.  This module sits below the search, the
battery and the judge, so each raises a discard without importing the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from triton_conformance.conformance import memory_bound

__all__ = ["ExampleDiscarded", "DiscardReason", "REASONS", "reason", "COMPILE_BUDGET", "NO_COMPILED_CLASS",
           "OVER_MEMORY", "DEVICE_MEMORY", "OVER_COST", "CUT", "PRUNED", "UNFIT", "OutOfMemory", "out_of_memory",
           "raise_if_out_of_memory", "discarding_out_of_memory"]


@dataclass(frozen=True)
class DiscardReason:
    """Why examples were discarded, and how a result says so.

    - ``name``: the reason, as :class:`ExampleDiscarded` carries it;
    - ``detail``: the key of the count in a result's details;
    - ``says``: what follows "N discarded" in a cell's message;
    - ``skips``: why an unsearched cell whose one example was discarded is skipped;
    - ``limits``: whether the discards count towards ending the search early: a budget that
      keeps refusing what the cell draws (the memory cap refuses before anything is built,
      so it costs nothing to draw past it).
    """

    name: str
    detail: str
    says: str
    skips: str
    limits: bool = True


COMPILE_BUDGET = "compile-budget"
NO_COMPILED_CLASS = "no-compiled-class"
OVER_MEMORY = "over-memory"
DEVICE_MEMORY = "device-memory"
OVER_COST = "over-cost"
CUT = "cut"
PRUNED = "pruned"
UNFIT = "out-of-resources"

REASONS: dict[str, DiscardReason] = {r.name: r for r in (
    DiscardReason(COMPILE_BUDGET, "compile_budget_discarded", "for the subject's compile budget",
                  "the compile budget was used before this cell"),
    DiscardReason(NO_COMPILED_CLASS, "no-compiled-class_discarded",
                  "in no compiled specialization class, with the cell's share of the compile budget spent",
                  "no compiled specialization class holds this cell's example"),
    DiscardReason(OVER_MEMORY, "over_memory_discarded", "unrun, over the per-example memory cap",
                  "this cell's example is over the per-example memory cap", limits=False),
    DiscardReason(DEVICE_MEMORY, "device-memory_discarded", "for running the machine out of memory",
                  "this cell's example does not fit the machine's memory"),
    DiscardReason(OVER_COST, "over-cost_discarded", "over the interpreter's cost allowance",
                  "the interpreter's cost allowance was used before this cell"),
    DiscardReason(CUT, "cut_discarded", "cut halfway through one program, the cell's interpreted work spent",
                  "one program of this cell's example spent the interpreter's cost pool before it ended"),
    DiscardReason(PRUNED, "pruned_discarded", "where the kernel's own pruning drops the pinned config",
                  "the kernel's own pruning drops the pinned config"),
    DiscardReason(UNFIT, "out-of-resources_discarded", "where the pinned config does not fit the device "
                  "(OutOfResources) and another surviving config does: Triton's autotuner skips it there",
                  "the pinned config does not fit the device (OutOfResources), and Triton's autotuner skips it"),
)}


def reason(name: str) -> DiscardReason:
    """The :class:`DiscardReason` called ``name``; ValueError naming the known ones otherwise."""
    try:
        return REASONS[name]
    except KeyError:
        raise ValueError(f"reason={name!r}, expected one of {tuple(REASONS)}") from None


class ExampleDiscarded(BaseException):
    """An example the cell's allowance cannot pay for: not run (or stopped where it stood), never judged.

    ``reason``: a name in :data:`REASONS`; the message says what was refused.
    """

    def __init__(self, reason_name: str, message: str):
        super().__init__(message)
        self.reason = reason(reason_name).name

    @property
    def skips(self) -> str:
        """Why an unsearched cell whose one example this is gets skipped."""
        return REASONS[self.reason].skips


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
