"""The cell kinds, registered in matrix order.

A new kind is one module: subclass :class:`CellKind`, give it a
:class:`~triton_conformance.model.cells.Dimension`, and decorate it with
:func:`register_kind`.  Its cells then appear in collection, the matrix,
the results JSON's catalogue and the report.
"""

from triton_conformance.conformance.kinds import (
    large_index,  # noqa: F401
    performance,  # noqa: F401
    searched,  # noqa: F401  - registers, in this order
    stochastic,  # noqa: F401
)
from triton_conformance.conformance.kinds.base import (
    CellContext,
    CellKind,
    catalogue,
    cells_for,
    judge_for,
    kind_of,
    register_kind,
    registered_kinds,
    stochastic_plan,
    unregister_kind,
    unsearched_cells,
)
from triton_conformance.conformance.kinds.searched import SearchedKind

__all__ = ["CellContext", "CellKind", "SearchedKind", "catalogue", "cells_for", "judge_for", "kind_of",
           "register_kind", "registered_kinds", "stochastic_plan", "unregister_kind", "unsearched_cells"]
