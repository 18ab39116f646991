"""The ``stochastic:*`` kind: designed statistical experiments against a subject's model."""

from __future__ import annotations

from triton_conformance.conformance.kinds.base import CellContext, CellKind, stochastic_plan
from triton_conformance.conformance.kinds.stochastic import run_stochastic_cell, stochastic_cells
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.contract import Contract
from triton_conformance.model.outcomes import CellResult

__all__ = ["StochasticCells"]


class StochasticCells(CellKind):
    interpreter_cost = False  # designed sizes: not held to the interpreter's cost allowance
    dimension = Dimension("stochastic", "a designed experiment against the declared model", (
        CellClass("rate", "the event rate matches the model at every tested probability"),
        CellClass("values", "every element is a value the model allows"),
        CellClass("edges", "p = 0 gives f itself; p = 1 gives all events, or is refused when excluded"),
        CellClass("reproducibility", "the same seed and inputs give the same bits"),
        CellClass("seeds", "other seeds give other masks, agreeing as independent ones do"),
        CellClass("independence", "no repeats at any block or row lag, no rate keyed on position or value"),
    ))

    def values(self, contract: Contract) -> tuple[str, ...]:
        return tuple(cell.partition(":")[2] for cell in stochastic_cells(contract))

    def run(self, context: CellContext, value: str) -> CellResult:
        return run_stochastic_cell(context.subject, context.cell, backend=context.backend,
                                   plan=stochastic_plan(context.subject.contract), seed=context.seed)
