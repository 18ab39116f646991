"""Examples a cell could not pay for: one typed exception, and the table of reasons.

An example is **discarded**, never judged, when what it needs is beyond the
cell's allowance (:mod:`.allowance`): a kernel past the compile budget, more
memory than the cap or the machine holds, more interpreted work than its
share, a config the kernel's own pruning drops.  Whoever finds that out raises
:class:`ExampleDiscarded` with its reason; the search counts it and draws
again, and an unsearched cell whose one example is discarded is skipped,
saying why (:attr:`DiscardReason.skips`).

A BaseException, so neither the launcher's nor the battery's ``except
Exception`` can take it for the kernel's own error.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ExampleDiscarded", "DiscardReason", "REASONS", "reason", "COMPILE_BUDGET", "NO_COMPILED_CLASS",
           "OVER_MEMORY", "DEVICE_MEMORY", "OVER_COST", "PRUNED"]


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
PRUNED = "pruned"

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
    DiscardReason(PRUNED, "pruned_discarded", "where the kernel's own pruning drops the pinned config",
                  "the kernel's own pruning drops the pinned config"),
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
