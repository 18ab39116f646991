"""The ``shape:large-index`` kind: one example past 2^31 elements, where int32 offsets wrap.

See :mod:`triton_conformance.conformance.kinds.large_index.example` for the example itself.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.kinds.base import CellContext, CellKind, untestable
from triton_conformance.conformance.kinds.large_index.example import (
    LARGE,
    ExampleReport,
    input_dtype,
    large_index_plan,
    run_large_index_example,
)
from triton_conformance.conformance.results import cell_result, failed, reproducer, skipped
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.cells import Dimension
from triton_conformance.model.outcomes import CellResult, Counterexample, Finding
from triton_conformance.model.subject import Subject

__all__ = ["LargeIndexCell"]


def _dimension(shapes: vocabulary.Vocabulary) -> Dimension:
    return Dimension("shape", "", shapes.classes(shapes.select(draw="large-index")))


class LargeIndexCell(CellKind):
    interpreter_cost = False  # designed sizes: not held to the interpreter's cost allowance
    spec_examples = False  # its example is no spec: nothing for example_tensors to build
    @property
    def dimension(self) -> Dimension:  # the shape table's large-index row
        return vocabulary.derived(_dimension, vocabulary.SHAPES)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        plan = large_index_plan(subject.contract)
        if isinstance(plan, str):
            return plan
        return untestable(backend, plan.dtype)

    def replay(self, context: CellContext, value: str, example: Any, *, report: ExampleReport | None = None
               ) -> Finding | str:
        """The one large-index example (it has no other: ``example`` is None)."""
        return run_large_index_example(context.subject, context.backend, context.judge, report=report)

    def run(self, context: CellContext, value: str) -> CellResult:
        subject, backend = context.subject, context.backend
        plan = large_index_plan(subject.contract)
        report = ExampleReport()  # what the emulation could not check, or how it bounded the work
        try:
            verdict = self.replay(context, value, None, report=report)
        except NotImplementedError as exc:  # an interpreter without the hooks the emulation needs
            return skipped(subject, context.cell, str(exc), code="large-index:no-emulation-hooks")
        where = "real tensors" if backend.on_device else "emulated: lazy tensors, last programs of the grid"
        where = "; ".join([where] + report.notes)
        offsets = plan.offsets(subject.contract)
        if report.reached is not None and verdict == "honoured":
            # Emulated, a pass is worth what the programs that ran touched, not what the tensors span (a finding
            # is its own proof: the offsets the example asked for are what it says).
            offsets = _reached_offsets(offsets, report.reached)
        reached = _describe_offsets(offsets)
        if offsets.get("past_2^31") is False:
            # Honoured would say the kernel's offsets past 2^31 were checked; none was reached.
            return skipped(subject, context.cell, f"{plan.dims} {plan.dtype}: the programs the emulation ran "
                           f"within its allowance reached no element past 2^31 of any huge input ({where}; "
                           f"{reached}), so nothing past 2^31 was checked: on CUDA the cell runs every program "
                           "on real tensors", code="large-index:not-reached", details={"offsets": offsets})
        if isinstance(verdict, Finding):
            example = {"dims": plan.dims, "dtypes": {n: input_dtype(subject.contract, plan, n)
                                                     for n in subject.contract.inputs},
                       "scalars": plan.scalars, "compared_rows": plan.fill_rows}
            return failed(subject, context.cell, verdict, message=f"{verdict.message} [{where}; {reached}]",
                          details={**verdict.details, "offsets": offsets},
                          counterexample=Counterexample(example), examples=1,
                          reproducer=reproducer(subject, context.cell, backend, None, verdict))
        elements = max(plan.elements(subject.contract, n) for n in subject.contract.inputs)
        checked = "the last rows match the oracle" if report.value_compared else "no address outside the tensors"
        params = f", parameters {list(plan.params)} whole" if plan.params else ""
        details = {"offsets": offsets}
        if report.notes:
            details.update(value_compared=report.value_compared, notes=report.notes)
        return cell_result(subject, context.cell, "honoured", f"{plan.dims} {plan.dtype} ({elements} elements"
                           f"{params}, {where}; {reached}): {checked}", examples=1, details=details)


def _reached_offsets(planned: dict, reached: dict[str, int | None]) -> dict:
    """The plan's offsets replaced by what the emulation touched: in the plan's input, the highest element and
    the start of its row; ``past_2^31`` whether any huge input was touched at or past 2^31."""
    row = planned["row_elements"]
    last = reached.get(planned["input"])
    offsets = {"input": planned["input"], "row_elements": row, "planned_last_element": planned["last_element"],
               "past_2^31": any(v is not None and v >= LARGE for v in reached.values())}
    if last is not None:
        offsets.update(last_element=last, last_row_start=last - last % row if row else last)
    return offsets


def _describe_offsets(offsets: dict) -> str:
    if "last_element" not in offsets:
        return f"offsets reached in {offsets['input']!r}: none (no program that ran loaded or stored it)"
    return (f"offsets reached in {offsets['input']!r}: element {_past(offsets['last_element'])}, "
            f"last row start {_past(offsets['last_row_start'])}")


def _past(offset: int) -> str:
    """``2147487746 (2^31 + 4098)``: an offset and where it lies against 2^31."""
    delta = offset - LARGE
    return f"{offset} (2^31 {'+' if delta >= 0 else '-'} {abs(delta)})"
