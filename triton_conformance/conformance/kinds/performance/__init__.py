"""The ``performance`` kind: the subject checked once at its measured size, then timed (CUDA only)."""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.battery.runners import ForwardExamples
from triton_conformance.conformance.kinds.base import CellContext, CellKind
from triton_conformance.conformance.kinds.performance.cell import NO_CONTRACT, NOT_CUDA, run_performance_cell
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["PerformanceCell"]


class PerformanceCell(CellKind):
    interpreter_cost = False  # designed sizes: not held to the interpreter's cost allowance
    dimension = Dimension("performance", "", (CellClass(
        "", "achieved GB/s or TFLOP/s at the declared size, against the measured peak and torch"),))

    def values(self, subject: Subject) -> tuple[str, ...]:
        return ("",) if subject.contract.performance is not None else ()

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        if subject.contract.performance is None:
            return NO_CONTRACT
        return None if backend.compiles else NOT_CUDA

    def examples(self, context: CellContext, value: str) -> ForwardExamples:
        return ForwardExamples(context)  # its one example, at the measured size, is checked before it is timed

    def run(self, context: CellContext, value: str) -> CellResult:
        return run_performance_cell(context.subject, backend=context.backend, judge=context.judge)
