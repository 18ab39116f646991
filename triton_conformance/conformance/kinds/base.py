"""What a cell kind is, the context a cell runs in, and the one registry of kinds.

A :class:`CellKind` owns some classes of one dimension of the matrix (the
``layout`` kind owns ``layout:contiguous`` ... ``layout:mixed``; the
large-index kind owns ``shape:large-index`` beside the searched shape
classes).  Given the :class:`~triton_conformance.model.subject.Subject`, it
says which of its cells the subject gets, whether one applies here (and why
not), how it runs, and how one of its examples is replayed.  It also declares
what it needs of every cell of a subject it applies to (a factor of the
compile budget, a scope the cells run in, options of the judge), so the
runner names no kind.  The registry's order is the matrix's order;
:func:`catalogue` describes it for the reports.
"""

from __future__ import annotations

import contextlib
from typing import Any

from triton_conformance.conformance.judge import Judge
from triton_conformance.conformance.search.context import CellContext
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.cells import Catalogue, Dimension, split_cell
from triton_conformance.model.outcomes import CellResult, Finding, SkipReason
from triton_conformance.model.subject import Subject

__all__ = ["CellKind", "CellContext", "register_kind", "unregister_kind", "registered_kinds", "kind_of",
           "cells_for", "catalogue", "judge_for", "subject_scopes", "untestable"]


def untestable(backend: Any, dtype: str) -> SkipReason | None:
    """Why ``backend`` cannot be trusted in ``dtype`` (bf16 on a broken interpreter), or None."""
    reason = backend.untestable.get(dtype) if backend is not None else None
    return None if reason is None else SkipReason(reason, code="backend:untestable-dtype")


class CellKind:
    """One kind of cell.  Subclass it, set ``dimension``, and override what differs.

    - ``dimension``: the column group and the classes this kind owns, each with
      its one-line explanation (the report's legend);
    - ``steers``: whether its search moves draws into compiled classes on CUDA (so it can run
      on a spent compile budget);
    - ``kernels``: what its classes compile, ``"forward"`` or ``"backward"`` (a backward
      class is compiled by backward cells only, and costs more);
    - ``interpreter_cost``: whether the interpreter's cost allowance bounds its
      examples; False for cells at designed sizes, which an over-cost discard would skip;
    - ``spec_examples``: whether its examples are specs whose tensors ``build_inputs`` builds
      (``replay.example_tensors``); False for a design's seed or a fixed plan;
    - :meth:`values`: the classes a subject gets (default: all of them);
    - :meth:`skip_reason`: why a cell does not apply here, or None;
    - :meth:`run`: the cell's result; :meth:`examples`: the runner of one of its examples (what a
      searched cell searches with, and what :meth:`replay` calls);
    - what every cell of a subject it applies to needs: :meth:`budget_factor`,
      :meth:`subject_scope`, :meth:`judge_options`.
    """

    dimension: Dimension
    steers: bool = False
    kernels: str = "forward"
    interpreter_cost: bool = True
    spec_examples: bool = True

    def values(self, subject: Subject) -> tuple[str, ...]:
        return tuple(c.value for c in self.dimension.classes)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        return None

    def run(self, context: CellContext, value: str) -> CellResult:
        raise NotImplementedError(f"{type(self).__name__}.run")

    def examples(self, context: CellContext, value: str) -> Any:
        """The :class:`~..search.engine.ExampleRunner` of this cell's examples."""
        raise NotImplementedError(f"{type(self).__name__} runs no examples of its own")

    def replay(self, context: CellContext, value: str, example: Any) -> Finding | str:
        """Run ``example`` again as this cell did (a spec, for a searched cell): its verdict."""
        return self.examples(context, value)(example)

    # -- what every cell of a subject needs ------------------------------------------------------
    def budget_factor(self, subject: Subject) -> int:
        """How many times the profile's compile budget the subject needs for this kind's kernels
        (the budget is the profile's times every kind's factor)."""
        return 1

    def subject_scope(self, context: CellContext) -> contextlib.AbstractContextManager:
        """A context every cell of the subject runs in (any kind's), for what this kind's kernels need."""
        return contextlib.nullcontext()

    def judge_options(self, subject: Subject) -> dict[str, Any]:
        """Keyword options of the subject's :class:`~..judge.Judge` this kind asks for."""
        return {}

    def cell(self, value: str) -> str:
        return f"{self.dimension.name}:{value}" if value else self.dimension.name


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


def cells_for(subject: Subject) -> list[str]:
    """Every cell id of ``subject``: dimensions in matrix order, then each kind's classes as it lists
    them for the subject (claimed dtypes first).  Stable across processes: it depends on the declaration only."""
    return [kind.cell(value) for dimension in catalogue().dimensions for kind in _KINDS
            if kind.dimension.name == dimension.name for value in kind.values(subject)]


@contextlib.contextmanager
def subject_scopes(context: CellContext):  # noqa: ANN201 - a context manager
    """Every kind's :meth:`CellKind.subject_scope` for ``context``'s subject, for one of its cells."""
    with contextlib.ExitStack() as scopes:
        for kind in _KINDS:
            scopes.enter_context(kind.subject_scope(context))
        yield


def judge_for(subject: Subject, backend: Any) -> Judge:
    """How ``subject``'s outputs are judged on ``backend``, with what every kind asks of the judge."""
    options: dict[str, Any] = {}
    for kind in _KINDS:
        options.update(kind.judge_options(subject))
    return Judge(subject, on_cuda=backend.compiles, options=options)
