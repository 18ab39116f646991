"""The searched kinds: layout, dtype, shape, values, mask, memory and determinism.

Each draws specs that pin its own dimension and leave the others at their
defaults, and shares the search-and-shrink engine (:mod:`..search`).  The
layout, dtype, shape, values and mask kinds name and explain their cells after
the rows of the vocabulary tables (``model/vocabulary.py``), read afresh, so a
new row is a new cell.
"""

from __future__ import annotations

from typing import Any

from triton_conformance.conformance.battery.runners import ForwardExamples
from triton_conformance.conformance.kinds.base import CellContext, CellKind, untestable
from triton_conformance.conformance.search.cell import search_cell
from triton_conformance.conformance.search.engine import Draw
import triton_conformance.model.vocabulary as vocabulary
from triton_conformance.model.cells import CellClass, Dimension
from triton_conformance.model.outcomes import CellResult, SkipReason
from triton_conformance.model.spec import Spec, layout_applies
from triton_conformance.model.subject import Subject
from triton_conformance.strategies._internal.specs import in_shape_class, is_bounded, specs

__all__ = ["SearchedKind"]


class SearchedKind(CellKind):
    """A kind whose cells are searched with Hypothesis and shrunk to the smallest failure, each example a
    forward battery.

    Subclasses say how a class pins the spec (:meth:`spec_options`), and
    optionally which shrunk candidates stay in the class (:meth:`keeps_class`)
    and whether the per-dim search runs (:meth:`minimizes`).
    """

    steers = True
    determinism = False  # each example also compares two calls bit for bit

    def spec_options(self, value: str) -> dict[str, Any]:
        """Keyword arguments of :func:`~triton_conformance.strategies.specs` for class ``value``."""
        return {}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        return True

    def minimizes(self, value: str) -> bool:
        return True

    def draws(self, context: CellContext, value: str) -> list[Draw]:
        policy, backend = context.policy, context.backend
        testable = tuple(d for d in vocabulary.DTYPES.names(draw="float") if d not in backend.untestable)
        strategy = specs(context.subject.contract, dtypes=testable, max_elements=policy.max_elements,
                         max_outer=policy.max_outer,
                         palette=backend.compiles and context.allowance.compile_budget is not None,
                         **self.spec_options(value))
        return [Draw(strategy, lambda c, o: self.keeps_class(value, c, o))]

    def examples(self, context: CellContext, value: str) -> ForwardExamples:
        return ForwardExamples(context, determinism=self.determinism)

    def run(self, context: CellContext, value: str) -> CellResult:
        return search_cell(context, self.examples(context, value), self.draws(context, value),
                           minimize=self.minimizes(value))


def _classes(*pairs: tuple[str, str]) -> tuple[CellClass, ...]:
    return tuple(CellClass(v, s) for v, s in pairs)


def _shape_dimension(shapes: vocabulary.Vocabulary) -> Dimension:
    return shapes.dimension(shapes.select(draw="specs", cell=True))


def _value_dimension(values: vocabulary.Vocabulary) -> Dimension:
    return values.dimension(values.select(claim=("claimed", "ranged")))


def _memory_dimension(layouts: vocabulary.Vocabulary) -> Dimension:
    text = f"{layouts['memory'].text}, with every memory check: guard bands, poison, sentinels, mutation"
    return Dimension("memory", "", _classes(("", text)))


class LayoutCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(vocabulary.Vocabulary.dimension, vocabulary.LAYOUTS)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        ranks = [len(s.shape) for s in contract.inputs.values()]
        if vocabulary.LAYOUTS[value].scope == "spec":  # a class for each input: one must claim any layout
            if not any(s.layouts == "any" for s in contract.inputs.values()):
                return SkipReason("no input claims arbitrary layouts", code="layout:no-any-layout")
        elif not any(layout_applies(value, r) for r in ranks):
            return SkipReason(f"layout {value!r} needs an input of rank >= 2", code="layout:rank")
        if value == "size1" and not any(d.min <= 1 <= d.max for d in contract.dims.values()):
            return SkipReason("no dim admits size 1", code="layout:no-size-1")
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"layout": value}


class DtypeCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(vocabulary.Vocabulary.dimension, vocabulary.DTYPES)

    def values(self, subject: Subject) -> tuple[str, ...]:
        contract, table = subject.contract, vocabulary.DTYPES
        fp8s = table.names(draw="fp8")
        fp8 = tuple(d for n in contract.tensor_names for d in contract.inputs[n].dtypes if d in fp8s)
        floats = fp8 + contract.float_dtypes()
        if floats:  # every float subject is probed with the probed dtypes; unclaimed ones must be refused
            return tuple(dict.fromkeys(floats + table.names(probed=True)))
        return tuple(contract.inputs[contract.tensor_names[0]].dtypes)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        return untestable(backend, value)

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"dtype": value}


class ShapeCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(_shape_dimension, vocabulary.SHAPES)

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if value == "beyond-block" and max(d.max for d in contract.dims.values()) < 64:
            return SkipReason("no dim can exceed a block", code="shape:within-a-block")
        if value == "beyond-range" and not any(is_bounded(d) for d in contract.dims.values()):
            return SkipReason("every dim range is unbounded in practice", code="shape:unbounded")
        return None

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"shape": value}

    def keeps_class(self, value: str, candidate: Spec, original: Spec) -> bool:
        return in_shape_class(value, candidate, original)

    def minimizes(self, value: str) -> bool:
        return vocabulary.SHAPES[value].minimizes  # not where the one pinned dim is the point


class ValueCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(_value_dimension, vocabulary.VALUES)

    def values(self, subject: Subject) -> tuple[str, ...]:
        # A ranged class is never claimed: it is a cell of every subject with a declared value_range.  The fp8
        # classes are cells only of the subjects that claim them (quantizers), not skipped rows of every matrix.
        contract = subject.contract
        return tuple(r.name for r in vocabulary.VALUES.select(claim=("claimed", "ranged"))
                     if (r.claim != "ranged" or contract.ranged) and (not r.quantizer or r.name in contract.values))

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if vocabulary.VALUES[value].claim == "ranged":
            return None if contract.ranged else SkipReason("no input declares a value_range", code="values:no-range")
        return None if value in contract.values else SkipReason(f"value class {value!r} not claimed",
                                                                 code="values:not-claimed")

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"values": value}


class MaskCells(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(vocabulary.Vocabulary.dimension, vocabulary.MASKS)

    def values(self, subject: Subject) -> tuple[str, ...]:
        return super().values(subject) if subject.contract.mask_name else ()

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"mask": value}


class MemoryCell(SearchedKind):
    @property
    def dimension(self) -> Dimension:
        return vocabulary.derived(_memory_dimension, vocabulary.LAYOUTS)

    def spec_options(self, value: str) -> dict[str, Any]:
        return {"layout": "memory"}


class DeterminismCell(SearchedKind):
    dimension = Dimension("determinism", "", _classes(("", "two calls on identical inputs agree bit for bit"),))
    determinism = True

    def values(self, subject: Subject) -> tuple[str, ...]:
        contract = subject.contract
        return ("",) if contract.deterministic and contract.model is None else ()

    def skip_reason(self, subject: Subject, value: str, backend: Any) -> str | None:
        contract = subject.contract
        if contract.model is not None:
            return SkipReason("stochastic subject: its stochastic:reproducibility cell checks the seed",
                              code="determinism:stochastic")
        return None if contract.deterministic else SkipReason("subject does not claim determinism",
                                                                   code="determinism:not-claimed")
