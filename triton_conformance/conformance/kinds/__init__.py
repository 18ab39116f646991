"""The cell kinds, registered here in matrix order.

A new kind is one module: subclass :class:`CellKind`, give it a
:class:`~triton_conformance.model.cells.Dimension`, and register it once
with :func:`register_kind` (as a class decorator, or a call).  It is added
after the built-in kinds; its cells then appear in collection, the matrix,
the results JSON's catalogue and the report.
"""

from triton_conformance.conformance.kinds.autotune import AutotuneCells
from triton_conformance.conformance.kinds.base import (
    CellContext,
    CellKind,
    catalogue,
    cells_for,
    judge_for,
    kind_of,
    register_kind,
    registered_kinds,
    subject_scopes,
    unregister_kind,
)
from triton_conformance.conformance.kinds.descriptors import DescriptorCells
from triton_conformance.conformance.kinds.gradients import GradientCells
from triton_conformance.conformance.kinds.large_index import LargeIndexCell
from triton_conformance.conformance.kinds.performance import PerformanceCell
from triton_conformance.conformance.kinds.searched import (
    DeterminismCell,
    DtypeCells,
    LayoutCells,
    MaskCells,
    MemoryCell,
    SearchedKind,
    ShapeCells,
    ValueCells,
)
from triton_conformance.conformance.kinds.stochastic import StochasticCells, stochastic_plan

__all__ = ["CellContext", "CellKind", "SearchedKind", "catalogue", "cells_for", "judge_for", "kind_of",
           "register_kind", "registered_kinds", "stochastic_plan", "subject_scopes", "unregister_kind"]

# The built-in kinds, in the matrix's order (a kind sharing a dimension follows its classes).
for _kind in (LayoutCells, DescriptorCells, DtypeCells, ShapeCells, LargeIndexCell, ValueCells, MaskCells, MemoryCell,
              DeterminismCell, StochasticCells, PerformanceCell, GradientCells,
              AutotuneCells):
    register_kind(_kind)
del _kind
