"""What a cell kind is, the context a cell runs in, and the one registry of kinds.

A :class:`CellKind` owns some classes of one dimension of the matrix (the
``layout`` kind owns ``layout:contiguous`` ... ``layout:mixed``; the
large-index kind owns ``shape:large-index`` beside the searched shape
classes).  It says which of its cells a contract gets, whether one applies
here (and why not), and how it runs.  The registry's order is the matrix's
order; :func:`catalogue` describes it for the reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.observe import NO_OBSERVER, Observer
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.cells import Catalogue, Dimension, split_cell
from triton_conformance.model.config import RunConfig
from triton_conformance.model.contract import Contract
from triton_conformance.model.outcomes import CellResult
from triton_conformance.model.subject import Subject

__all__ = ["CellKind", "CellContext", "register_kind", "unregister_kind", "registered_kinds", "kind_of",
           "cells_for", "catalogue", "judge_for", "stochastic_plan", "unsearched_cells"]


class CellKind:
    """One kind of cell.  Subclass it, set ``dimension``, and override what differs.

    - ``dimension``: the column group and the classes this kind owns, each with
      its one-line explanation (the report's legend);
    - ``searched``: whether its cells are searched and shrunk (and so share the
      subject's compile budget), or run at sizes of their own;
    - ``steers``: whether its search moves draws into compiled classes on CUDA;
    - ``kernels``: what its classes compile, ``"forward"`` or ``"backward"`` (a backward
      class is compiled by backward cells only, and costs more);
    - ``interpreter_cost``: whether the interpreter's cost allowance bounds its
      examples (:mod:`..interpreter_cost`); False for cells at designed sizes,
      which an over-cost discard would skip;
    - ``exclusive_gpu``: whether its cells time the GPU, so that no other
      worker sharing the GPU may run a cell meanwhile (workers.gpus.GpuTurns);
    - :meth:`values`: the classes a contract gets (default: all of them);
    - :meth:`skip_reason`: why a cell does not apply here, or None;
    - :meth:`run`: the cell's result.
    """

    dimension: Dimension
    searched: bool = False
    steers: bool = False  # whether its search moves draws into compiled classes (so it can run on a spent budget)
    kernels: str = "forward"  # what its classes compile: "forward", or "backward" (the backward's with the forward's)
    interpreter_cost: bool = True
    exclusive_gpu: bool = False  # its cells time the GPU, so no other worker's cell may run on it meanwhile

    def values(self, contract: Contract) -> tuple[str, ...]:
        return tuple(c.value for c in self.dimension.classes)

    def skip_reason(self, contract: Contract, value: str, backend: Any) -> str | None:
        return None

    def run(self, context: "CellContext", value: str) -> CellResult:
        raise NotImplementedError(f"{type(self).__name__}.run")

    def cell(self, value: str) -> str:
        return f"{self.dimension.name}:{value}" if value else self.dimension.name


@dataclass(frozen=True)
class CellContext:
    """Everything one cell's run needs: the subject, where it runs, how hard, and who listens."""

    subject: Subject
    cell: str
    backend: Any
    config: RunConfig
    judge: Judge
    seed: int | None = None
    observer: Observer = NO_OBSERVER
    compile_budget: int | None = None  # what this cell may compile on CUDA (None: no limit, or no compiler)
    compiles: Any = None  # the cell's compiles.CellCompiles on CUDA (its fair share of the budget), else None


_KINDS: list[CellKind] = []


def register_kind(kind: Any) -> Any:
    """Add ``kind`` (a CellKind, or a CellKind class: a decorator) to the registry, after every kind
    registered so far; returns what it was given.  Raises InvalidArgument if one of its cells is owned already.
    """
    if isinstance(kind, type):
        register_kind(kind())
        return kind
    if not isinstance(kind, CellKind) or not isinstance(getattr(kind, "dimension", None), Dimension):
        raise InvalidArgument(f"register_kind: kind={kind!r}, expected a CellKind with a Dimension")
    owned = {k.cell(c.value) for k in _KINDS for c in k.dimension.classes}
    clash = sorted(owned & {kind.cell(c.value) for c in kind.dimension.classes})
    if clash:
        raise InvalidArgument(f"register_kind: {type(kind).__name__} claims cells {clash}, already registered")
    _KINDS.append(kind)
    return kind


def unregister_kind(kind: Any) -> None:
    """Remove ``kind`` (a test's own kind, or every instance of a kind class, after the test)."""
    _KINDS[:] = [k for k in _KINDS if k is not kind and type(k) is not kind]


def registered_kinds() -> tuple[CellKind, ...]:
    return tuple(_KINDS)


def kind_of(cell: str) -> tuple[CellKind, str]:
    """The kind that owns ``cell``, and the class it names; InvalidArgument for an unknown cell."""
    dimension, value = split_cell(cell)
    for kind in _KINDS:
        if kind.dimension.name == dimension and any(c.value == value for c in kind.dimension.classes):
            return kind, value
    known = [kind.cell(c.value) for kind in _KINDS for c in kind.dimension.classes]
    raise InvalidArgument(f"cell={cell!r}, expected one of {known}")


def catalogue() -> Catalogue:
    """Every registered dimension and class, in matrix order, with its explanation."""
    return Catalogue.of(kind.dimension for kind in _KINDS)


def cells_for(contract: Contract) -> list[str]:
    """Every cell id of ``contract``: dimensions in matrix order, then each kind's classes as it lists
    them for the contract (claimed dtypes first).  Stable across processes: it depends on the contract only."""
    return [kind.cell(value) for dimension in catalogue().dimensions for kind in _KINDS
            if kind.dimension.name == dimension.name for value in kind.values(contract)]


def unsearched_cells(contract: Contract, backend: Any) -> list[str]:
    """The cells of ``contract`` that are not searched and apply on ``backend``: each needs kernels of its own."""
    return [kind.cell(value) for kind in _KINDS if not kind.searched for value in kind.values(contract)
            if kind.skip_reason(contract, value, backend) is None]


def stochastic_plan(contract: Contract):  # noqa: ANN201 - a stochastic.plan.Plan
    """The statistical plan of a stochastic subject, its checks counted over every cell it has."""
    from triton_conformance.conformance.kinds.stochastic.plan import plan_for

    ordinary = sum(1 for c in cells_for(contract) if not c.startswith("stochastic:"))
    return plan_for(contract, ordinary)


def judge_for(subject: Subject, backend: Any) -> Judge:
    """How ``subject``'s outputs are judged on ``backend`` (with its per-example rate test, if stochastic)."""
    alpha = stochastic_plan(subject.contract).alpha_check if subject.contract.model is not None else None
    return Judge(subject, on_cuda=backend.compiles, example_alpha=alpha)
